"""Bounded chunks of one track-keyed table's rows, ordered by (track_id, time, id) before DuckDB stores them.

The ingest appends each track-keyed table in chunks of about :data:`CHUNK_ROWS` rows as they stream in; every
chunk is first ordered by ``(track_id, start_ts, id)`` (``timestamp`` for counters; ties keep arrival order).
So each DuckDB row group (16,384 rows) holds one track's rows over a short time range — zone maps prune a
``track_id = ? AND start_ts BETWEEN ...`` scan to one or two row groups per track, as a global sort would — with
no staging copy, no re-read and no sort beyond one chunk.  Ordering is cheap in the common cases: a chunk whose
batches already hold runs of one track in time order is reordered by zero-copy slices; only rows interleaved
more finely (e.g. threads of an imported trace) are gathered with one vectorised ``take``.

Each track's rows are stored in whole DuckDB row groups where possible (the rest of a track waits for the next
chunk; see :meth:`ChunkOrderer.flush`), so that no row group's zone map spans two tracks' time ranges.

Memory is bounded by one and a half chunks (:data:`CHUNK_ROWS` rows or :data:`CHUNK_BYTES`, whichever comes
first, and at most half a chunk of rows held back).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db.tracks import RunSummary, TrackStats

#: Rows per ordered chunk.
CHUNK_ROWS = 1 << 20
#: Bytes per ordered chunk (wide rows, e.g. slices with large args, make smaller chunks).
CHUNK_BYTES = 256 << 20
#: A chunk is reordered by concatenating slices when they are on average at least this many rows long.
MIN_RUN_ROWS = 64
#: Rows per batch handed to DuckDB (a multiple of its row group size).
OUT_BATCH_ROWS = 1 << 17


def _column(batches: list[pa.RecordBatch], name: str) -> np.ndarray:
    parts = [np.asarray(b.column(name).to_numpy(zero_copy_only=False), dtype=np.int64) for b in batches]
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _track_order(tid: np.ndarray, key: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """For rows in runs of one track, each run sorted by (key, id): (run starts, run lengths) in (track, time)
    order — runs of a track kept in arrival order — or None when that is not an ordering of the rows (runs
    too short, or a run, or a track's consecutive runs, out of time order)."""
    n = len(tid)
    starts = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]])
    if len(starts) > max(1, n // MIN_RUN_ROWS):
        return None
    dk = np.diff(key)
    inside = np.ones(n - 1, bool) if n > 1 else np.zeros(0, bool)
    inside[starts[1:] - 1] = False
    if np.any(inside & ((dk < 0) | ((dk == 0) & (np.diff(ids) < 0)))):
        return None
    lengths = np.diff(np.r_[starts, n])
    run_order = np.argsort(tid[starts], kind="stable")
    rs, rl = starts[run_order], lengths[run_order]
    rt = tid[rs]
    first, last = rs[1:], (rs + rl - 1)[:-1]
    same = rt[1:] == rt[:-1]
    later = (key[first] > key[last]) | ((key[first] == key[last]) & (ids[first] >= ids[last]))
    if np.any(same & ~later):
        return None
    return rs, rl


class ChunkOrderer:
    """Collects one table's batches and returns them in chunks, ordered by track when the table has tracks.

    Args:
        key_column: the time column (``start_ts``, or ``timestamp`` for counters); None for a table without
            tracks (chunks keep arrival order).
        id_column: the tie-breaking id column, or None (ties keep arrival order).
        end_column: the interval end column, or None (point rows).
        stats: updated with every ordered chunk.
        chunk_rows: rows per chunk (default :data:`CHUNK_ROWS`).
        align_rows: DuckDB's row group size, to store each track's rows in whole row groups (see :meth:`flush`);
            None stores every chunk whole.
    """

    def __init__(self, key_column: str | None, id_column: str | None, end_column: str | None,
                 stats: TrackStats | None, *, chunk_rows: int | None = None, align_rows: int | None = None) -> None:
        self.chunk_rows = chunk_rows or CHUNK_ROWS
        self.align_rows = align_rows
        self.key_column, self.id_column, self.end_column = key_column, id_column, end_column
        self.stats = stats
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0
        self.bytes = 0

    def add(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """Buffer ``batch``; the ordered batches of the chunk it completes, if any."""
        if batch.num_rows == 0:
            return []
        self.batches.append(batch)
        self.rows += batch.num_rows
        self.bytes += batch.nbytes
        if self.rows >= self.chunk_rows or self.bytes >= CHUNK_BYTES:
            return self.flush(final=False)
        return []

    def flush(self, *, final: bool = True) -> list[pa.RecordBatch]:
        """The buffered rows as ordered batches (empty when nothing is buffered).

        With ``align_rows`` and not ``final``, each track stores only a whole number of row groups of its rows
        (its earliest); the rest waits for the next chunk, so no DuckDB row group holds the end of one track and
        the start of another — such a row group's time range spans the whole chunk and every window over that
        time would scan it.  The rows held back over all tracks stay under half a chunk (beyond that, the
        chunk is stored whole).
        """
        batches, self.batches, self.rows, self.bytes = self.batches, [], 0, 0
        if not batches or self.key_column is None or self.stats is None:
            return batches
        tid = _column(batches, dbs.TRACK_ID)
        key = _column(batches, self.key_column)
        n = len(tid)
        ids = _column(batches, self.id_column) if self.id_column else np.zeros(n, np.int64)
        end = np.maximum(_column(batches, self.end_column), key) if self.end_column else key
        runs = _track_order(tid, key, ids)
        if runs is not None:
            # The common case: runs of one track in time order, reordered by whole runs.
            rs, rl = runs
            offsets = np.repeat(rs - np.r_[0, np.cumsum(rl)[:-1]], rl)
            order = np.arange(n, dtype=np.int64) + offsets
        else:
            order = np.lexsort((ids, key, tid))
        t = tid[order]
        first = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
        sizes = np.diff(np.r_[first, n])
        held = None
        if not final and self.align_rows:
            keep = sizes // self.align_rows * self.align_rows
            if 0 < n - int(keep.sum()) <= self.chunk_rows // 2:
                position = np.arange(n) - np.repeat(first, sizes)
                stored = position < np.repeat(keep, sizes)
                held, order = order[~stored], order[stored]
                first, sizes = np.r_[0, np.cumsum(keep)[:-1]][keep > 0], keep[keep > 0]
        if len(order):
            last = first + sizes - 1
            t, k, i, e = tid[order], key[order], ids[order], end[order]
            self.stats.update_runs(RunSummary(t[first], k[first], i[first], k[last], i[last],
                                              np.maximum.reduceat(e, first), np.maximum.reduceat(e - k, first),
                                              sizes))
        if held is None and np.all(order[1:] > order[:-1]):
            return batches          # already in order
        table = pa.Table.from_batches(batches)
        if any(pa.types.is_dictionary(f.type) for f in table.schema):
            table = table.unify_dictionaries()
        if held is not None:
            rest = table.take(pa.array(held)).combine_chunks()
            self.batches, self.rows, self.bytes = rest.to_batches(), rest.num_rows, rest.nbytes
        out = table.take(pa.array(order))
        # Batches of whole row groups: DuckDB writes those straight to the file (smaller ones wait for the
        # checkpoint, which then compresses them a second time).
        return out.combine_chunks().to_batches(max_chunksize=OUT_BATCH_ROWS)


__all__ = ["CHUNK_BYTES", "CHUNK_ROWS", "ChunkOrderer"]
