"""Which timeline row (track) each trace row belongs to: the keys per table, the registry assigning track ids,
the per-track statistics gathered while rows stream in, and which per-event value a track's index sums.

Tracks are keyed by columns of the row, vectorised per record batch:

==============  =========================================  =============
table           key                                        kind
==============  =========================================  =============
Instruction     (pcore_idx, engine)                        ``engine``
DmaPacket       (pcore_idx, queue_name)                    ``dma_queue``
Span -> slice   (pcore_idx, track_group, track_name, depth) ``span``
Counter         (pcore_idx, track_group, name)             ``counter``
==============  =========================================  =============

A span row of a thread is split by depth: each nesting level is a track of its own (the same ``name``, its
``depth`` in ``track.span_depth``), so nested slices are drawn on rows of their own, Perfetto-style, at every zoom
level, and every level has its own index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import db_schema as dbs
from tracer import schema as ts


@dataclass(frozen=True)
class TrackKeySpec:
    """How the rows of one trace table map to tracks."""

    table: str          # trace table name
    db_table: str       # table the rows land in
    kind: str
    key_columns: tuple[str, ...]   # first is pcore_idx


TRACK_KEYS: dict[str, TrackKeySpec] = {
    ts.INSTRUCTION.name: TrackKeySpec(ts.INSTRUCTION.name, ts.INSTRUCTION.name, "engine", (ts.PCORE_IDX, ts.ENGINE)),
    ts.DMA_PACKET.name: TrackKeySpec(ts.DMA_PACKET.name, ts.DMA_PACKET.name, "dma_queue",
                                     (ts.PCORE_IDX, ts.QUEUE_NAME)),
    ts.SPAN.name: TrackKeySpec(ts.SPAN.name, dbs.SLICE_TABLE, "span",
                               (ts.PCORE_IDX, ts.TRACK_GROUP, ts.TRACK_NAME, ts.DEPTH)),
    ts.COUNTER.name: TrackKeySpec(ts.COUNTER.name, ts.COUNTER.name, "counter", (ts.PCORE_IDX, ts.TRACK_GROUP, ts.NAME)),
}

_KIND_RANK = {kind: i for i, kind in enumerate(dbs.TRACK_KINDS)}


def _column_values(batch: pa.RecordBatch, name: str) -> tuple[np.ndarray, list[object]]:
    """Per-row codes and the distinct values of column ``name`` (a missing column is all null)."""
    n = batch.num_rows
    if name not in batch.schema.names:
        return np.zeros(n, np.int64), [None]
    col = batch.column(name)
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    values = [*col.dictionary.to_pylist(), None]
    idx = col.indices
    if idx.null_count:
        idx = idx.fill_null(len(values) - 1)
    codes = np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)
    return codes, values


@dataclass
class TrackRegistry:
    """Assigns an id to every distinct track key, in the order the keys are first seen while streaming."""

    keys: dict[tuple[str, tuple[object, ...]], int] = field(default_factory=dict)
    #: Span tracks' display position from the importer (``Span.track_order``: Chrome's process and thread sort
    #: indexes), the smallest met; tracks without one are ordered by name after those with one.
    orders: dict[int, int] = field(default_factory=dict)

    def assign(self, spec: TrackKeySpec, batch: pa.RecordBatch) -> np.ndarray:
        """The track id of every row of ``batch`` (a batch of ``spec.table``)."""
        n = batch.num_rows
        combined = np.zeros(n, np.int64)
        value_lists = []
        for name in spec.key_columns:
            codes, values = _column_values(batch, name)
            combined = combined * len(values) + codes
            value_lists.append(values)
        uniq, inverse = _unique_inverse(combined)
        ids = np.empty(len(uniq), np.int64)
        for j, combined_code in enumerate(uniq.tolist()):
            parts = []
            rest = combined_code
            for values in reversed(value_lists):
                rest, r = divmod(rest, len(values))
                parts.append(values[r])
            values = list(reversed(parts))
            if spec.kind == "span" and values[3] is None:  # a span without a depth is at the top: one track
                values[3] = 0
            key = (spec.table, tuple(values))
            tid = self.keys.get(key)
            if tid is None:
                tid = len(self.keys)
                self.keys[key] = tid
            ids[j] = tid
        if spec.kind == "span" and ts.TRACK_ORDER in batch.schema.names:
            self._note_orders(batch.column(ts.TRACK_ORDER), ids, inverse.reshape(-1))
        return ids[inverse.reshape(-1)]

    def _note_orders(self, column: pa.Array, ids: np.ndarray, inverse: np.ndarray) -> None:
        known = column.is_valid().to_numpy(zero_copy_only=False)
        if not known.any():
            return
        values = np.asarray(column.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        least = np.full(len(ids), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(least, inverse[known], values[known])
        for tid, order in zip(ids.tolist(), least.tolist(), strict=True):
            if order != np.iinfo(np.int64).max and order < self.orders.get(tid, order + 1):
                self.orders[tid] = order

    def key_of(self) -> dict[int, tuple[str, tuple[object, ...]]]:
        """Track id -> (trace table, key values)."""
        return {tid: key for key, tid in self.keys.items()}

    def sort_orders(self) -> dict[int, int]:
        """Track id -> display position, ordering tracks by (core, kind, name); span tracks an importer placed
        (:attr:`orders`) in its order first, each thread's depths together."""
        def order(item: tuple[tuple[str, tuple[object, ...]], int]) -> tuple[object, ...]:
            (table, key), tid = item
            spec = TRACK_KEYS[table]
            core = key[0] if key[0] is not None else -1
            if spec.kind == "span":  # a thread's depths together, in numeric order
                placed = self.orders.get(tid)
                rest: tuple[object, ...] = ((0, placed) if placed is not None else (1, 0),
                                            str(key[1]), str(key[2]), int(key[3]))  # type: ignore[call-overload]
            else:
                rest = tuple(str(k) for k in key[1:])
            return (core, _KIND_RANK.get(spec.kind, 99), _name_rank(spec, key), rest)
        ranked = sorted(self.keys.items(), key=order)
        return {tid: position for position, (_, tid) in enumerate(ranked)}

    def track_rows(self) -> list[dict[str, object]]:
        """One row of :data:`profiler.db_schema.TRACK` per track (ids in first-seen order), with its sort order."""
        order = self.sort_orders()
        rows = []
        for (table, key), tid in self.keys.items():
            spec = TRACK_KEYS[table]
            core = key[0]
            depth = None
            if spec.kind == "span":
                group, name, depth = key[1], key[2], key[3]
                name = name if name is not None else (group if group is not None else "spans")
            elif spec.kind == "counter":
                group, name = key[1], key[2]
            else:
                group, name = None, key[1]
            if group is None and core is not None:
                group = f"NeuronCore {core}"
            rows.append({dbs.TRACK_ID: tid, dbs.CORE: core, dbs.KIND: spec.kind, ts.NAME: str(name),
                         dbs.GROUP_NAME: group, dbs.SORT_ORDER: order[tid], dbs.TABLE: spec.db_table,
                         dbs.SPAN_DEPTH: depth})
        rows.sort(key=lambda r: r[dbs.TRACK_ID])
        return rows


def _unique_inverse(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(codes, return_inverse=True), by a lookup table when the codes are small (no sort)."""
    if len(codes) and int(codes.min()) >= 0 and int(codes.max()) < (1 << 20):
        present = np.bincount(codes)
        uniq = np.flatnonzero(present)
        lookup = np.zeros(len(present), np.int64)
        lookup[uniq] = np.arange(len(uniq))
        return uniq, lookup[codes]
    return np.unique(codes, return_inverse=True)


def value_name(table: str, key: tuple[object, ...]) -> str | None:
    """The column whose per-event values the index sums for this track (DMA bytes, Tensor FLOPs), or None."""
    if table == ts.DMA_PACKET.name:
        return ts.TRANSFER_BYTES
    if table == ts.INSTRUCTION.name and key[1] == ts.ENGINES[0]:     # the Tensor engine
        return ts.ADJUSTED_FLOPS
    return None


@dataclass(frozen=True)
class RunSummary:
    """Runs of rows of one track each (per run: track, first and last (key, id), max end and duration, rows)."""

    tid: np.ndarray
    first_key: np.ndarray
    first_id: np.ndarray
    last_key: np.ndarray
    last_id: np.ndarray
    max_end: np.ndarray
    max_dur: np.ndarray
    count: np.ndarray


class TrackStats:
    """Running statistics of each track's rows, updated per ordered chunk (arrays indexed by track id).

    ``in_order`` stays true while every chunk's rows of a track come after the previous chunk's in (time, id)
    order, i.e. while the stored rows of the track, read in storage order, are sorted.
    """

    def __init__(self) -> None:
        self.size = 0
        self.count = np.zeros(0, np.int64)
        self.min_start = np.zeros(0, np.int64)
        self.max_start = np.zeros(0, np.int64)
        self.max_end = np.zeros(0, np.int64)
        self.max_dur = np.zeros(0, np.int64)
        self.last_key = np.zeros(0, np.int64)
        self.last_id = np.zeros(0, np.int64)
        self.in_order = np.zeros(0, bool)

    def _grow(self, size: int) -> None:
        if size <= self.size:
            return
        new = max(size, 2 * self.size, 64)
        lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
        for name, fill in (("count", 0), ("min_start", hi), ("max_start", lo), ("max_end", lo), ("max_dur", lo),
                           ("last_key", lo), ("last_id", lo), ("in_order", True)):
            old = getattr(self, name)
            arr = np.full(new, fill, dtype=old.dtype)
            arr[:len(old)] = old
            setattr(self, name, arr)
        self.size = new

    def update_runs(self, runs: RunSummary) -> None:
        """Runs of rows of one chunk, in stored order: runs of one track consecutive, each sorted by (key, id)."""
        tid, first_key, first_id, last_key, last_id = runs.tid, runs.first_key, runs.first_id, runs.last_key, \
            runs.last_id
        max_end, max_dur, count = runs.max_end, runs.max_dur, runs.count
        if len(tid) == 0:
            return
        g = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]])
        gl = np.r_[g[1:] - 1, len(tid) - 1]
        t = tid[g]
        self._grow(int(t.max()) + 1)
        fk, pk = first_key[g], self.last_key[t]
        self.in_order[t] &= (fk > pk) | ((fk == pk) & (first_id[g] >= self.last_id[t]))
        self.count[t] += np.add.reduceat(count, g)
        self.min_start[t] = np.minimum(self.min_start[t], np.minimum.reduceat(first_key, g))
        self.max_start[t] = np.maximum(self.max_start[t], np.maximum.reduceat(last_key, g))
        self.max_end[t] = np.maximum(self.max_end[t], np.maximum.reduceat(max_end, g))
        self.max_dur[t] = np.maximum(self.max_dur[t], np.maximum.reduceat(max_dur, g))
        self.last_key[t] = last_key[gl]
        self.last_id[t] = last_id[gl]

    def span(self, tid: int) -> tuple[int, int]:
        """[first start, end) of a track's rows, zero-length rows at the last instant included."""
        return int(self.min_start[tid]), max(int(self.max_end[tid]), int(self.max_start[tid]) + 1)


def _name_rank(spec: TrackKeySpec, key: tuple[object, ...]) -> int:
    if spec.kind == "engine" and key[1] in ts.ENGINES:
        return ts.ENGINES.index(key[1])
    if spec.kind == "dma_queue" and isinstance(key[1], str):
        digits = "".join(ch for ch in key[1] if ch.isdecimal())  # (isdigit takes "²", which int() rejects)
        return int(digits) if digits else 0
    return 0
