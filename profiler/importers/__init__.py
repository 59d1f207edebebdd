"""Importers: readers of real profiles in other formats, each a :class:`profiler.sources.TraceSource`.

:data:`DETECTORS` lists, in the order they are tried, functions ``detect(path) -> TraceSource | None`` that
recognise an input by its content (not its file name alone) and return a source for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from profiler.sources import TraceSource

Detector = Callable[[Path], "TraceSource | None"]

DETECTORS: list[Detector] = []
