"""Per-track staging of the ingest: rows split by track while streaming, buffered, spilled to Arrow IPC files.

Storing a table sorted by ``(track_id, start_ts)`` would otherwise need a global sort of the whole trace (DuckDB
spills that to disk at several times the trace's size).  Instead each record batch is split by track as it
streams in; a track's rows are buffered and written out as ZSTD-compressed (level 1) Arrow IPC files beside the database
once they reach :data:`FLUSH_ROWS` (or when all buffers together exceed :data:`MAX_BUFFERED_ROWS`).  At the end
groups of consecutive tracks are appended to the database, each group by one INSERT that sorts only when a track
arrived out of time order (checked while staging), so any sort (and what it spills) is bounded by a group rather
than the whole trace.  Memory is bounded by the buffers; disk by
one compressed copy of the keyed tables, deleted track by track as they are loaded.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import ipc

#: Rows buffered per track before they are written to a staging file.
FLUSH_ROWS = 1 << 18
#: Rows buffered over all tracks before the largest buffers are written out.
MAX_BUFFERED_ROWS = 1 << 21
#: Batches with more runs of one track than rows / MIN_RUN_ROWS are regrouped by a stable sort first.
MIN_RUN_ROWS = 256
#: ZSTD at level 1: fast enough to stay off the critical path, and small (LZ4 staging of a 10^9-event trace takes
#: ~46 GB, about 3x more than this), which is what bounds the disk an ingest needs.
_OPTIONS = ipc.IpcWriteOptions(compression=pa.Codec("zstd", compression_level=1))


def plain_strings(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with dictionary and large-string columns as plain strings (one schema for every batch)."""
    if not any(pa.types.is_dictionary(f.type) or pa.types.is_large_string(f.type) for f in batch.schema):
        return batch
    columns = []
    for col, f in zip(batch.columns, batch.schema, strict=True):
        plain = pa.types.is_dictionary(f.type) or pa.types.is_large_string(f.type)
        columns.append(pc.cast(col, pa.string()) if plain else col)
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


@dataclass
class _Track:
    buffered: list[pa.RecordBatch] = field(default_factory=list)
    buffered_rows: int = 0
    files: list[Path] = field(default_factory=list)
    rows: int = 0
    last_key: int | None = None
    in_order: bool = True


@dataclass
class _Table:
    schema: pa.Schema
    sort_column: str
    tracks: dict[int, _Track] = field(default_factory=dict)


class TrackStage:
    """Staged rows of the track-keyed tables, per table and track."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.tables: dict[str, _Table] = {}
        self.buffered_rows = 0
        self._files = 0

    def schema(self, table: str) -> pa.Schema | None:
        """The schema of ``table``'s staged rows (that of its first batch), or None before any."""
        t = self.tables.get(table)
        return t.schema if t else None

    def add(self, table: str, batch: pa.RecordBatch, sort_column: str) -> None:
        """Stage ``batch`` (first column ``track_id``, plain strings, the table's schema) of ``table``."""
        if batch.num_rows == 0:
            return
        t = self.tables.get(table)
        if t is None:
            t = self.tables[table] = _Table(batch.schema, sort_column)
        tids = batch.column(0).to_numpy()
        cuts = np.flatnonzero(np.r_[True, tids[1:] != tids[:-1], True])
        if len(cuts) - 1 > max(16, batch.num_rows // MIN_RUN_ROWS):
            # Tracks interleaved row by row: group the rows by track (stable, so time order is kept).
            order = np.argsort(tids, kind="stable")
            batch = batch.take(pa.array(order))
            tids = tids[order]
            cuts = np.flatnonzero(np.r_[True, tids[1:] != tids[:-1], True])
        # Runs of one track are zero-copy slices, appended in arrival order.
        for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
            self._add_track(t, int(tids[a]), batch.slice(a, b - a))
        if self.buffered_rows > MAX_BUFFERED_ROWS:
            self._flush_largest()

    def _add_track(self, t: _Table, tid: int, part: pa.RecordBatch) -> None:
        track = t.tracks.get(tid)
        if track is None:
            track = t.tracks[tid] = _Track()
        keys = part.column(t.sort_column).to_numpy()
        if track.in_order and (np.any(keys[1:] < keys[:-1]) or
                               (track.last_key is not None and keys[0] < track.last_key)):
            track.in_order = False
        track.last_key = int(keys[-1]) if track.in_order else None
        track.buffered.append(part)
        track.buffered_rows += part.num_rows
        track.rows += part.num_rows
        self.buffered_rows += part.num_rows
        if track.buffered_rows >= FLUSH_ROWS:
            self._flush(t, track)

    def _flush(self, t: _Table, track: _Track) -> None:
        if not track.buffered:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self._files:08d}.arrows"
        self._files += 1
        with pa.OSFile(str(path), "wb") as f, ipc.new_stream(f, t.schema, options=_OPTIONS) as w:
            for part in track.buffered:
                w.write_batch(part)
        track.files.append(path)
        self.buffered_rows -= track.buffered_rows
        track.buffered.clear()
        track.buffered_rows = 0

    def _flush_largest(self) -> None:
        tracks = sorted(((tr.buffered_rows, id(tr), t, tr) for t in self.tables.values() for tr in t.tracks.values()),
                        key=lambda x: x[:2], reverse=True)
        for _, _, t, tr in tracks:
            if self.buffered_rows <= MAX_BUFFERED_ROWS // 2:
                return
            self._flush(t, tr)

    def track_ids(self, table: str) -> list[int]:
        """The staged tracks of ``table`` in ascending id order."""
        t = self.tables.get(table)
        return sorted(t.tracks) if t else []

    def rows(self, table: str, tid: int) -> int:
        """Rows staged for one track (in files and buffers)."""
        track = self.tables[table].tracks[tid]
        return track.rows

    def in_order(self, table: str, tids: list[int]) -> bool:
        """True when every one of these tracks was staged in sort-column order (so no sort is needed)."""
        tracks = self.tables[table].tracks
        return all(tracks[tid].in_order for tid in tids)

    def groups(self, table: str, min_rows: int) -> list[list[int]]:
        """Consecutive tracks of ``table`` in id order, grouped so each group holds at least ``min_rows`` rows."""
        groups: list[list[int]] = []
        rows = 0
        for tid in self.track_ids(table):
            if not groups or rows >= min_rows:
                groups.append([])
                rows = 0
            groups[-1].append(tid)
            rows += self.tables[table].tracks[tid].rows
        return groups

    def reader(self, table: str, tids: list[int]) -> pa.RecordBatchReader:
        """A stream of the tracks' staged rows, track after track in staging order; files are deleted once read."""
        t = self.tables[table]

        def batches() -> Iterator[pa.RecordBatch]:
            for tid in tids:
                track = t.tracks[tid]
                for path in track.files:
                    with pa.memory_map(str(path), "r") as source:
                        yield from ipc.open_stream(source)
                    path.unlink()
                track.files.clear()
                yield from track.buffered
                self.buffered_rows -= track.buffered_rows
                track.buffered.clear()
                track.buffered_rows = 0

        return pa.RecordBatchReader.from_batches(t.schema, batches())

    def cleanup(self) -> None:
        """Remove every staging file."""
        shutil.rmtree(self.directory, ignore_errors=True)


__all__ = ["FLUSH_ROWS", "MAX_BUFFERED_ROWS", "TrackStage", "plain_strings"]
