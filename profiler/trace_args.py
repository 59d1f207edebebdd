"""Argument checks of the ``Trace`` API and the guard every public call runs under.

Shared by :mod:`profiler.trace` and the mixins that make up :class:`profiler.Trace`
(:mod:`profiler.trace_files`): one wording of every bad-argument error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from profiler.db import lod
from profiler.errors import QueryError

F = TypeVar("F", bound=Callable[..., Any])


def guarded(method: F) -> F:
    """Run a public ``Trace`` method as one call of its cursor pool (see :meth:`Trace._call`)."""
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._call():
            return method(self, *args, **kwargs)

    return run  # type: ignore[return-value]


def as_int(value: object, what: str, unit: str = "an integer number of nanoseconds") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise QueryError(f"{what} must be {unit}, not {repr(value)[:60]}")
    return int(value)


def check_time(value: object, what: str) -> int:
    """``value`` as an int if it is an integer time within the +-2**62 ns a database can hold; QueryError naming
    ``what`` otherwise (the one check of a time argument: Trace methods, summaries, analyses, notebook views)."""
    t = as_int(value, what)
    if not -lod.TIME_LIMIT <= t <= lod.TIME_LIMIT:
        raise QueryError(f"{what} = {t} is beyond +-2**62 ns; give a time within the trace (see Trace.time_range)")
    return t


def as_range(start_ns: object, end_ns: object) -> tuple[int, int]:
    """(start, end) of a range that may be empty (start == end) but not reversed."""
    start, end = check_time(start_ns, "start_ns"), check_time(end_ns, "end_ns")
    if end < start:
        raise QueryError(f"reversed range: end_ns ({end}) is before start_ns ({start}); swap them")
    return start, end
