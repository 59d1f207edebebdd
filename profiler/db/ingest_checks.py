"""Checks and repairs of a source's batches on their way into the database (:mod:`profiler.db.ingest`).

Whatever the source, time columns must be non-null nanoseconds within ±2^62 (:func:`check_times`, an error
otherwise), and an interval must not end before it starts: such rows are made zero-length (``end_ts =
start_ts``, ``duration_ns = 0``) and counted per table (:class:`IntervalRepairs`), with one warning per table once
the source is read — the policy and wording of the importers (``docs/importers.md``), which already repair their
rows, so in practice this catches trnprof trace directories written by other tools or damaged on disk.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from profiler.db import lod
from profiler.sources import TraceSource
from tracer import schema as ts
from tracer.errors import TraceFormatError


def check_times(source: TraceSource, table: str, batch: pa.RecordBatch, time_columns: tuple[str, ...]) -> None:
    """TraceFormatError naming the source unless ``batch`` has every time column, without nulls, within ±2^62."""
    for col in time_columns:
        if col not in batch.schema.names:
            raise TraceFormatError(f"{source.path}: table {table} has no {col} column")
        if batch.num_rows == 0:
            continue
        mm = pc.min_max(batch.column(col)).as_py()
        if mm["min"] is None:
            raise TraceFormatError(f"{source.path}: table {table} has null {col} values")
        if mm["min"] < -lod.TIME_LIMIT or mm["max"] >= lod.TIME_LIMIT:
            raise TraceFormatError(f"{source.path}: table {table} has {col} values beyond +-2**62 ns; timestamps "
                                   "must be nanoseconds (did the source write a different unit?)")


class IntervalRepairs:
    """Makes rows that end before they start zero-length, counting them per table; :meth:`warn` reports them."""

    def __init__(self, source: TraceSource) -> None:
        self.source = source
        self.counts: dict[str, int] = {}

    def repair(self, table: str, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with ``end_ts = start_ts`` and ``duration_ns = 0`` where ``end_ts < start_ts``."""
        names = batch.schema.names
        if batch.num_rows == 0 or ts.START_TS not in names or ts.END_TS not in names:
            return batch
        start, end = batch.column(ts.START_TS), batch.column(ts.END_TS)
        bad = pc.fill_null(pc.less(end, start), False)
        count = pc.sum(bad).as_py() or 0
        if not count:
            return batch
        self.counts[table] = self.counts.get(table, 0) + count
        cols = list(batch.columns)
        cols[names.index(ts.END_TS)] = pc.if_else(bad, start, end)
        if ts.DURATION_NS in names:
            i = names.index(ts.DURATION_NS)
            cols[i] = pc.if_else(bad, pa.scalar(0, cols[i].type), cols[i])
        return pa.RecordBatch.from_arrays(cols, schema=batch.schema)

    def warn(self) -> None:
        """One warning per table that had rows repaired, naming its file and counting the rows."""
        if not self.counts:
            return
        from profiler.importers.common import TraceImportWarning  # the importers' category for repaired rows

        for table, count in self.counts.items():
            warnings.warn(TraceImportWarning(f"{self._where(table)}: {count:,} rows end before they start; made "
                                             "them zero-length"), stacklevel=2)

    def _where(self, table: str) -> str:
        reader = getattr(self.source, "reader", None)
        file_path = getattr(reader, "file_path", None)
        if callable(file_path):
            try:
                return str(Path(file_path(table)))
            except (KeyError, ValueError, TypeError):
                pass
        return f"{self.source.path}: table {table}"


__all__ = ["IntervalRepairs", "check_times"]
