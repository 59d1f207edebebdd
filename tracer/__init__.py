"""trnprof's tracer: the trace format and a simulated, instrumented NeuronCore.

Public surface: the trace schema (:mod:`tracer.schema`), :class:`TraceWriter` and :class:`TraceReader`, and
the exception hierarchy.  The tracer imports only numpy and pyarrow; it never imports duckdb, dash or plotly.
"""

from typing import TYPE_CHECKING

from tracer._lazy import lazy_attributes
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

if TYPE_CHECKING:
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

#: Imported on first use (they load numpy and pyarrow): ``trnprof --help`` and the errors need neither.
_LAZY = {"TraceReader": "tracer.reader", "open_trace": "tracer.reader", "read_trace": "tracer.reader",
         "TraceWriter": "tracer.writer", "write_trace": "tracer.writer"}
__getattr__ = lazy_attributes(__name__, _LAZY)
