"""Analyses: pure functions over a :class:`~profiler.Trace` that turn a timeline into answers.

Each analysis is ``f(trace, start_ns=None, end_ns=None, ...) -> pyarrow.Table | dict`` over the public Trace API;
the same functions serve the ``trnprof`` commands, notebooks and the dashboard.  Result names live in
:mod:`profiler.analyses.schema`; definitions, formulas and caveats in ``docs/analyses.md``.
"""

from profiler.analyses.bounds import bounds_table, performance_bounds

__all__ = ["bounds_table", "performance_bounds"]
