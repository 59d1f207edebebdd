"""Importers: readers of real profiles in other formats, each a :class:`profiler.sources.TraceSource`.

:data:`DETECTORS` lists, in the order they are tried, functions ``detect(path) -> TraceSource | None`` that
recognise an input by its content (not its file name alone) and return a source for it:

- :mod:`profiler.importers.neuron_parquet`: a Neuron Explorer Parquet output directory;
- :mod:`profiler.importers.neuron_json`: the legacy ``neuron-profile view --output-format json`` file;
- :mod:`profiler.importers.chrome_json`: Chrome Trace Event JSON (PyTorch/Kineto, JAX, VizTracer, ...).

JSON inputs may be gzip-compressed.  ``docs/importers.md`` describes each format's mapping and limits.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from profiler.importers import chrome_json, neuron_json, neuron_parquet
from profiler.sources import TraceSource

Detector = Callable[[Path], "TraceSource | None"]

DETECTORS: list[Detector] = [neuron_parquet.detect, neuron_json.detect, chrome_json.detect]
