"""trnprof's dashboard: the Dash web app served by ``trnprof serve``.

Imports point one way: the dashboard uses :mod:`profiler` (and through it :mod:`tracer`); it never imports
duckdb and never writes SQL of its own.
"""
