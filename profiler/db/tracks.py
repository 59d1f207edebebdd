"""Which timeline row (track) each trace row belongs to: the keys per table and the registry assigning track ids.

Tracks are keyed by columns of the row, vectorised per record batch:

==============  =========================================  =============
table           key                                        kind
==============  =========================================  =============
Instruction     (pcore_idx, engine)                        ``engine``
DmaPacket       (pcore_idx, queue_name)                    ``dma_queue``
Span -> slice   (pcore_idx, track_group, track_name)       ``span``
Counter         (pcore_idx, track_group, name)             ``counter``
==============  =========================================  =============
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
    ts.SPAN.name: TrackKeySpec(ts.SPAN.name, dbs.SLICE_TABLE, "span", (ts.PCORE_IDX, ts.TRACK_GROUP, ts.TRACK_NAME)),
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
    codes = np.asarray(idx.fill_null(len(values) - 1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return codes, values


@dataclass
class TrackRegistry:
    """Assigns an id to every distinct track key, in the order the keys are first seen while streaming."""

    keys: dict[tuple[str, tuple[object, ...]], int] = field(default_factory=dict)

    def assign(self, spec: TrackKeySpec, batch: pa.RecordBatch) -> np.ndarray:
        """The track id of every row of ``batch`` (a batch of ``spec.table``)."""
        n = batch.num_rows
        combined = np.zeros(n, np.int64)
        value_lists = []
        for name in spec.key_columns:
            codes, values = _column_values(batch, name)
            combined = combined * len(values) + codes
            value_lists.append(values)
        uniq, inverse = np.unique(combined, return_inverse=True)
        ids = np.empty(len(uniq), np.int64)
        for j, combined_code in enumerate(uniq.tolist()):
            parts = []
            rest = combined_code
            for values in reversed(value_lists):
                rest, r = divmod(rest, len(values))
                parts.append(values[r])
            key = (spec.table, tuple(reversed(parts)))
            tid = self.keys.get(key)
            if tid is None:
                tid = len(self.keys)
                self.keys[key] = tid
            ids[j] = tid
        return ids[inverse.reshape(-1)]

    def sort_orders(self) -> dict[int, int]:
        """Track id -> display position, ordering tracks by (core, kind, name)."""
        def order(item: tuple[tuple[str, tuple[object, ...]], int]) -> tuple[object, ...]:
            (table, key), _ = item
            spec = TRACK_KEYS[table]
            core = key[0] if key[0] is not None else -1
            return (core, _KIND_RANK.get(spec.kind, 99), _name_rank(spec, key), tuple(str(k) for k in key[1:]))
        ranked = sorted(self.keys.items(), key=order)
        return {tid: position for position, (_, tid) in enumerate(ranked)}

    def track_rows(self) -> list[dict[str, object]]:
        """One row of :data:`profiler.db_schema.TRACK` per track (ids in first-seen order), with its sort order."""
        order = self.sort_orders()
        rows = []
        for (table, key), tid in self.keys.items():
            spec = TRACK_KEYS[table]
            core = key[0]
            if spec.kind == "span":
                group, name = key[1], key[2]
                name = name if name is not None else (group if group is not None else "spans")
            elif spec.kind == "counter":
                group, name = key[1], key[2]
            else:
                group, name = None, key[1]
            if group is None and core is not None:
                group = f"NeuronCore {core}"
            rows.append({dbs.TRACK_ID: tid, dbs.CORE: core, dbs.KIND: spec.kind, ts.NAME: str(name),
                         dbs.GROUP_NAME: group, dbs.SORT_ORDER: order[tid], dbs.TABLE: spec.db_table})
        rows.sort(key=lambda r: r[dbs.TRACK_ID])
        return rows


def _name_rank(spec: TrackKeySpec, key: tuple[object, ...]) -> int:
    if spec.kind == "engine" and key[1] in ts.ENGINES:
        return ts.ENGINES.index(key[1])
    if spec.kind == "dma_queue" and isinstance(key[1], str):
        digits = "".join(ch for ch in key[1] if ch.isdigit())
        return int(digits) if digits else 0
    return 0
