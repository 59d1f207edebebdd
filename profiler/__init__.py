"""trnprof's profiler: the trace database, analyses, figures and the ``trnprof`` command line.

Imports point one way: the profiler uses :mod:`tracer`; it never imports :mod:`dashboard`.
"""

from profiler.errors import CommandError, QueryError, TraceFormatError, TrnprofError
from tracer._version import __version__

__all__ = ["CommandError", "QueryError", "TraceFormatError", "TrnprofError", "__version__"]
