"""The Flow edges of fast-path segments, rebuilt in bulk by the trace emitter.

A segment scheduled by the loop fast path records no per-edge columns: its variant knows every edge statically
(instruction position, where the dependency came from, its type), and the chunk holds, per segment, the first
instruction id, the first DMA transfer index and the producers its edges name from outside the segment.  The
emitter expands that into the same edge rows the general path writes (:func:`segment_edges`), vectorised per
variant across all of a chunk's segments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracer.sim.fastpath.trie import SRC_DMA, SRC_INSTR, SRC_LEAF, Variant
from tracer.sim.records import TABLE_INSTRUCTION, TABLE_PACKET, i64, leaf_values

EdgeArrays = tuple[np.ndarray, ...]


def emit_table(var: Variant) -> tuple[tuple[int, ...], ...]:
    """The variant's edges as plain tuples (position, source kind, source, dependency type, leaves used):
    the source of a DMA dependency is the transfer's ordinal in the segment, of a leaf its slot in the leaves
    the segment record carries."""
    dma_ord = {}
    k = 0
    for j, p in enumerate(var.positions):
        if p.dma:
            dma_ord[j] = k
            k += 1
    slots = {leaf: i for i, leaf in enumerate(var.edge_leaves)}
    rows = []
    for pos, kind, src, dep in var.edges:
        ref = dma_ord[src] if kind == SRC_DMA else (slots[src] if kind == SRC_LEAF else src)
        rows.append((pos, kind, ref, dep))
    return (tuple(r[0] for r in rows), tuple(r[1] for r in rows), tuple(r[2] for r in rows),
            tuple(r[3] for r in rows), (len(slots),))


class _Table:
    __slots__ = ("dep", "kind", "n_slots", "pos", "src")

    def __init__(self, table: tuple[tuple[int, ...], ...]) -> None:
        self.pos, self.kind, self.src, self.dep = (np.asarray(t, np.int64) for t in table[:4])
        self.n_slots = table[4][0]


class SegmentEdges:
    """Per-emitter cache of variant edge tables, and the expansion of a chunk's segments."""

    def __init__(self) -> None:
        self.tables: dict[int, _Table] = {}

    def add(self, uid: int, table: tuple[tuple[int, ...], ...]) -> None:
        """Register the edge table of variant ``uid``."""
        self.tables[uid] = _Table(table)

    def expand(self, ch: Any, start: np.ndarray, end: np.ndarray, stream: np.ndarray, seqs: np.ndarray,  # noqa: PLR0917
               xf: dict[str, np.ndarray] | None) -> EdgeArrays:
        """(in_id, out_id, out_table, dependency type, gap, stream, value) of every edge of the chunk ``ch``'s
        segments (its ``s_*`` columns), ordered by variant, then segment, then edge."""
        first_id, first_xfer = ch.first_id, ch.first_xfer
        var, seg_i0, seg_x0, leaf = i64(ch.s_var), i64(ch.s_i0), i64(ch.s_x0), leaf_values(ch.s_leaf)
        uids = np.unique(var)
        slots = np.zeros(int(uids.max()) + 1 if len(uids) else 0, np.int64)
        for vid in uids.tolist():
            slots[vid] = self.tables[vid].n_slots
        leaf_at = np.zeros(len(var), np.int64)
        np.cumsum(5 * slots[var][:-1], out=leaf_at[1:])
        parts = []
        for vid in uids.tolist():
            idx = np.flatnonzero(var == vid)
            tab = self.tables[vid]
            ne = len(tab.pos)
            if not ne:
                continue
            k = len(idx)
            i0 = seg_i0[idx]
            in_id = i0[:, None] + tab.pos[None, :]
            out_id = np.empty((k, ne), np.int64)
            table = np.empty((k, ne), np.int64)
            ready = np.empty((k, ne), np.int64)
            strm = np.empty((k, ne), np.int64)
            value = np.empty((k, ne), np.int64)
            m = tab.kind == SRC_INSTR
            if m.any():
                oi = i0[:, None] + tab.src[m][None, :] - first_id
                out_id[:, m] = oi + first_id
                table[:, m] = TABLE_INSTRUCTION
                ready[:, m] = end[oi]
                strm[:, m] = stream[oi]
                value[:, m] = seqs[oi]
            m = tab.kind == SRC_DMA
            if m.any():
                assert xf is not None
                x0 = seg_x0[idx]
                xi = x0[:, None] + tab.src[m][None, :] - first_xfer
                out_id[:, m] = xf["out"][xi]
                table[:, m] = TABLE_PACKET
                ready[:, m] = xf["retire"][xi]
                strm[:, m] = xf["group"][xi]
                value[:, m] = xf["seqs"][xi]
            m = tab.kind == SRC_LEAF
            if m.any():
                vals = leaf[leaf_at[idx][:, None] + np.arange(5 * tab.n_slots)[None, :]].reshape(k, tab.n_slots, 5)
                sel = vals[:, tab.src[m], :]
                strm[:, m] = sel[..., 0]
                value[:, m] = sel[..., 1]
                ready[:, m] = sel[..., 2]
                table[:, m] = sel[..., 3]
                out_id[:, m] = sel[..., 4]
            gap = start[in_id - first_id] - ready
            dep = np.broadcast_to(tab.dep[None, :], (k, ne))
            parts.append((in_id.ravel(), out_id.ravel(), table.ravel(), dep.ravel(), gap.ravel(), strm.ravel(),
                          value.ravel()))
        if not parts:
            return tuple(np.zeros(0, np.int64) for _ in range(7))
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(7))
