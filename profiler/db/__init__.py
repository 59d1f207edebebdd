"""The trace database: ingest into DuckDB, the level-of-detail interval index, window queries, the ingest cache
and the sandboxed connection for user SQL.  :mod:`profiler.trace` wraps it in the public :class:`Trace` API;
``docs/database.md`` describes the tables and the index design.
"""
