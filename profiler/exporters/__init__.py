"""Exporters: a trace database written out for other tools.

- :func:`profiler.exporters.chrome.export_chrome`: Chrome Trace Event JSON for the Perfetto UI and chrome://tracing;
- :func:`profiler.exporters.parquet.export_parquet`: a Neuron-Explorer-shaped Parquet directory.

Both read through :class:`profiler.trace.Trace`, take an optional :class:`~profiler.exporters.common.TimeWindow`,
and write atomically (a temporary file or directory renamed over the target when complete).
"""

from __future__ import annotations

from profiler.exporters.chrome import export_chrome
from profiler.exporters.common import TimeWindow
from profiler.exporters.parquet import export_parquet

__all__ = ["TimeWindow", "export_chrome", "export_parquet"]
