"""trnprof's profiler: the trace database, analyses, figures and the ``trnprof`` command line.

Imports point one way: the profiler uses :mod:`tracer`; it never imports :mod:`dashboard`.

``profiler.open(path) -> Trace`` is the entry point to a trace's data (see :mod:`profiler.trace`).
"""

from typing import TYPE_CHECKING

from profiler.errors import CommandError, QueryError, TraceFormatError, TrnprofError
from tracer._lazy import lazy_attributes
from tracer._version import __version__

if TYPE_CHECKING:
    from profiler.trace import Trace, open
    from profiler.window import Window

__all__ = ["CommandError", "QueryError", "Trace", "TraceFormatError", "TrnprofError", "Window", "__version__", "open"]

#: Imported on first use (they load duckdb, pyarrow and numpy): the ``trnprof`` command line imports this package
#: for its errors, and a command that needs none of them starts without them.
_LAZY = {"Trace": "profiler.trace", "open": "profiler.trace", "Window": "profiler.window"}
__getattr__ = lazy_attributes(__name__, _LAZY)
