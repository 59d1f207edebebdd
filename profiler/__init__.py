"""trnprof's profiler: the trace database, analyses, figures and the ``trnprof`` command line.

Imports point one way: the profiler uses :mod:`tracer`; it never imports :mod:`dashboard`.

``profiler.open(path) -> Trace`` is the entry point to a trace's data (see :mod:`profiler.trace`).
"""

from profiler.errors import CommandError, QueryError, TraceFormatError, TrnprofError
from profiler.trace import Trace, open
from profiler.window import Window
from tracer._version import __version__

__all__ = ["CommandError", "QueryError", "Trace", "TraceFormatError", "TrnprofError", "Window", "__version__", "open"]
