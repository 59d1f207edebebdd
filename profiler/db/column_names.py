"""Column names a source may not give a database table as they are, and what the ingest renames them to.

DuckDB compares identifiers ignoring case and has no column without a name, while Arrow batches may carry any
names: an imported profile's extra field ``Opcode`` beside trnprof's ``opcode``, a field ``track_id`` (a column the
database adds itself), two fields ``Extra`` and ``extra``, or a field named ``""``.  Stored as they are, each would
stop the ingest with DuckDB's own error.  :func:`distinct_names` keeps the source's columns (every one of them) under
names DuckDB can hold, renaming only an extra column whose name is empty or taken: ``extra_<name>`` (``_2``,
``_3``, ... while that is taken too).  The schema's own columns always keep their names.
"""

from __future__ import annotations

import pyarrow as pa

from profiler import db_schema as dbs
from tracer import schema as ts

#: Prefix of a renamed column.
PREFIX = "extra_"
#: Name given to a column without one (before the prefix).
UNNAMED = "unnamed"


def added_columns(table: str) -> frozenset[str]:
    """The columns the ingest adds to the rows of source table ``table`` (lower case)."""
    if table == ts.SPAN.name:
        return frozenset(f.name.lower() for f in dbs.SLICE)
    from profiler.db.tracks import TRACK_KEYS

    return frozenset({dbs.TRACK_ID.lower()}) if table in TRACK_KEYS else frozenset()


def distinct_names(table: str, names: list[str]) -> list[str]:
    """The names to store ``names`` (the columns of a batch of source table ``table``, in order) under: distinct
    ignoring case, none empty, none an added column's; the schema's columns (the first of a repeated one) keep
    theirs."""
    spec = ts.TABLES_BY_NAME.get(table)
    own = {c.name for c in spec.columns} if spec is not None else set()
    taken = set(added_columns(table) - {n.lower() for n in own})
    kept: set[int] = set()
    for i, name in enumerate(names):  # the schema's columns first, wherever they are
        if name in own and name.lower() not in taken:
            taken.add(name.lower())
            kept.add(i)
    out = []
    for i, name in enumerate(names):
        if i in kept:
            out.append(name)
            continue
        new = name or UNNAMED
        if new.lower() in taken or not name:
            base = PREFIX + new
            new, k = base, 2
            while new.lower() in taken:
                new, k = f"{base}_{k}", k + 1
        taken.add(new.lower())
        out.append(new)
    return out


def with_distinct_names(table: str, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, list[tuple[str, str]]]:
    """``batch`` with :func:`distinct_names`, and the (old, new) names of the columns renamed."""
    names = batch.schema.names
    new = distinct_names(table, names)
    if new == names:
        return batch, []
    renamed = [(a, b) for a, b in zip(names, new, strict=True) if a != b]
    return pa.RecordBatch.from_arrays(batch.columns, names=new), renamed
