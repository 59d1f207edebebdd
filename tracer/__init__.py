"""trnprof's tracer: the trace format and a simulated, instrumented NeuronCore.

Public surface: the trace schema (:mod:`tracer.schema`), :class:`TraceWriter` and :class:`TraceReader`, and
the exception hierarchy.  The tracer imports only numpy and pyarrow; it never imports duckdb, dash or plotly.
"""

from tracer._version import __version__
from tracer.errors import (
    ConfigError,
    IncompleteTraceWarning,
    KernelError,
    TraceExistsError,
    TraceFormatError,
    TrnprofError,
    TruncatedTraceWarning,
)
from tracer.reader import TraceReader, open_trace, read_trace
from tracer.writer import TraceWriter, write_trace

__all__ = [
    "ConfigError",
    "IncompleteTraceWarning",
    "KernelError",
    "TraceExistsError",
    "TraceFormatError",
    "TraceReader",
    "TraceWriter",
    "TrnprofError",
    "TruncatedTraceWarning",
    "__version__",
    "open_trace",
    "read_trace",
    "write_trace",
]
