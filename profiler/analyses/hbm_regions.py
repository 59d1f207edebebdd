"""Which HBM region each DMA transfer moved, and how many distinct bytes of each tensor a window touched.

trnprof's simulator writes the HBM side of every DMA trigger into its operands as ``src=NAME[r0:r1,c0:c1]`` (a
load) or ``dst=NAME[r0:r1,c0:c1]`` (a store), optionally followed by ``*N`` for a broadcast read; the trigger's
``hbm_read_bytes``/``hbm_write_bytes`` give the bytes.  From those regions this module derives the *necessary*
bytes of the performance-bounds method (every input and output tensor counted once) and the reload factor of each
tensor (bytes loaded / distinct bytes loaded).  Traces whose operands carry no such regions (most imports) give
``None``: the analyses then say the quantity is unknown rather than guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler.analyses import dma_transfers as dt
from profiler.analyses import intervals
from profiler.analyses import schema as rs
from profiler.analyses.dma_transfers import Transfers, transfers
from profiler.analyses.inputs import INSTRUCTION, Scope, column, fetch, q
from profiler.trace import Trace
from tracer import schema as ts

#: One HBM region in an operand string: side, tensor, rows r0:r1, columns c0:c1, optional broadcast factor.
REGION_PATTERN = (r"(?P<side>src|dst)=(?P<name>[A-Za-z_][\w.]*)\[(?P<r0>\d+):(?P<r1>\d+),(?P<c0>\d+):(?P<c1>\d+)\]"
                  r"(?:\*(?P<bcast>\d+))?")
LOAD = "src"
STORE = "dst"


@dataclass(frozen=True)
class Regions:
    """Parallel arrays, one entry per DMA trigger that named an HBM region."""

    side: np.ndarray       # "src" (load from HBM) or "dst" (store to HBM)
    name: np.ndarray       # tensor name
    r0: np.ndarray
    r1: np.ndarray
    c0: np.ndarray
    c1: np.ndarray
    itemsize: np.ndarray   # bytes per element

    def __len__(self) -> int:
        return len(self.name)


_EMPTY = np.zeros(0, np.int64)
_NO_REGIONS = Regions(np.zeros(0, object), np.zeros(0, object), _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY)


def union_area(r0: np.ndarray, r1: np.ndarray, c0: np.ndarray, c1: np.ndarray) -> int:
    """Area of the union of axis-aligned rectangles ``[r0, r1) x [c0, c1)`` (row-band sweep)."""
    r0, r1, c0, c1 = (np.asarray(a, np.int64) for a in (r0, r1, c0, c1))
    keep = (r1 > r0) & (c1 > c0)
    if not keep.any():
        return 0
    rects = np.unique(np.stack([r0[keep], r1[keep], c0[keep], c1[keep]], axis=1), axis=0)
    r0, r1, c0, c1 = rects.T
    bounds = np.unique(np.concatenate([r0, r1]))
    area = 0
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        cover = (r0 <= lo) & (r1 >= hi)
        if cover.any():
            area += (hi - lo) * intervals.union_ns(c0[cover], c1[cover])
    return int(area)


def _placed_at(ids: np.ndarray, starts: np.ndarray, moved: Transfers) -> np.ndarray:
    """Where each instruction's region is placed: the first packet of the transfer it triggered (as ``moved``'s
    trigger), else its own start."""
    if moved.trigger_source == "none":
        return starts
    known = moved.trigger >= 0
    order = np.argsort(moved.trigger[known])
    trig = moved.trigger[known][order]
    if not len(trig):
        return starts
    first = moved.col(dt.FIRST_START)[known][order]
    pos = np.clip(np.searchsorted(trig, ids), 0, len(trig) - 1)
    return np.where(trig[pos] == ids, first[pos], starts)


def regions(trace: Trace, scope: Scope, moved: Transfers | None = None) -> Regions | None:
    """The HBM regions moved by DMA transfers starting in the window (none: empty); None when the trace names
    none at all.

    A transfer is placed by its first packet when its trigger is known (``moved``, default: looked up), else by
    its trigger instruction's start.
    """
    rows = fetch(trace, f"SELECT {q(ts.ID)}, {q(ts.START_TS)}, {q(ts.OPERANDS)}, "
                        f"coalesce({q(rs.T_HBM_READ_BYTES)}, 0) AS rb, "
                        f"coalesce({q(rs.T_HBM_WRITE_BYTES)}, 0) AS wb FROM {INSTRUCTION} WHERE {scope.core_sql()} "
                        f"AND regexp_matches({q(ts.OPERANDS)}, '(src|dst)=[A-Za-z_][^\\[ ]*\\[[0-9]+:')")
    if rows.num_rows == 0:
        return None
    # a window's own transfers place most of its instructions; those left that start in it may have triggered a
    # transfer starting outside it: theirs are looked up too (each transfer whole, its trigger from every packet)
    moved = transfers(trace, scope, window_only=True) if moved is None else moved
    ids, starts = column(rows, ts.ID), column(rows, ts.START_TS)
    placed_at = _placed_at(ids, starts, moved)
    inside = (placed_at >= scope.start_ns) & (placed_at < scope.end_ns)
    if not moved.whole and inside.any():
        extra = transfers(trace, scope, triggered_by=ids[inside & (placed_at == starts)])
        placed_at = _placed_at(ids, starts, dt.merged(moved, extra))
        inside = (placed_at >= scope.start_ns) & (placed_at < scope.end_ns)
    rows = rows.filter(pa.array(inside))
    if rows.num_rows == 0:  # the trace names regions, none of a transfer starting in the window
        return _NO_REGIONS
    parts = pc.extract_regex(rows.column(ts.OPERANDS), REGION_PATTERN)
    ok = pc.is_valid(parts)
    parts = parts.filter(ok)
    rows = rows.filter(ok)
    if len(parts) == 0:
        return _NO_REGIONS
    side = np.asarray(pc.struct_field(parts, "side").to_pylist(), dtype=object)
    name = np.asarray(pc.struct_field(parts, "name").to_pylist(), dtype=object)
    nums = {k: np.asarray(pc.cast(pc.struct_field(parts, k), pa.int64()).to_numpy(zero_copy_only=False))
            for k in ("r0", "r1", "c0", "c1")}
    bcast_text = pc.struct_field(parts, "bcast")
    bcast = np.asarray(pc.cast(pc.if_else(pc.equal(bcast_text, ""), "1", bcast_text), pa.int64()).to_numpy(
        zero_copy_only=False))
    bcast = np.maximum(bcast, 1)
    area = np.maximum(nums["r1"] - nums["r0"], 0) * np.maximum(nums["c1"] - nums["c0"], 0)
    hbm_bytes = np.where(side == LOAD, column(rows, "rb"), column(rows, "wb"))
    with np.errstate(divide="ignore", invalid="ignore"):
        itemsize = np.where(area > 0, np.rint(hbm_bytes / (area * bcast)), 0).astype(np.int64)
    return Regions(side, name, nums["r0"], nums["r1"], nums["c0"], nums["c1"], itemsize)


def distinct_bytes(found: Regions, *, side: str | None = None) -> dict[str, int]:
    """Distinct bytes of each tensor covered by the regions (of one side: loads or stores; default both)."""
    out: dict[str, int] = {}
    mask_side = np.ones(len(found), bool) if side is None else found.side == side
    for name in sorted(set(found.name[mask_side].tolist())):
        m = mask_side & (found.name == name)
        sizes = found.itemsize[m]
        itemsize = int(sizes[sizes > 0].max()) if (sizes > 0).any() else 0
        out[name] = itemsize * union_area(found.r0[m], found.r1[m], found.c0[m], found.c1[m])
    return out


def moved_bytes(found: Regions, *, side: str | None = None) -> dict[str, int]:
    """Bytes of each tensor the regions moved, counted each time (a broadcast row once): the numerator of a reload
    factor over :func:`distinct_bytes`, from the same transfers (so it is at least the distinct bytes)."""
    out: dict[str, int] = {}
    mask = np.ones(len(found), bool) if side is None else found.side == side
    area = (np.maximum(found.r1 - found.r0, 0) * np.maximum(found.c1 - found.c0, 0) * found.itemsize)[mask]
    for name, size in zip(found.name[mask].tolist(), area.tolist(), strict=True):
        out[name] = out.get(name, 0) + int(size)
    return out


def scratch_tensors(trace: Trace) -> set[str]:
    """The HBM tensors the kernel declared as scratch (``Metadata.hbm_tensors``, trnprof's recordings from trace
    format 2.4; none known otherwise)."""
    try:
        kinds = json.loads(trace.metadata.get(ts.HBM_TENSORS) or "{}")
    except (TypeError, ValueError):
        return set()
    return {str(n) for n, k in kinds.items() if k == "scratch"} if isinstance(kinds, dict) else set()


def necessary_bytes(trace: Trace, scope: Scope, moved: Transfers | None = None) -> int | None:
    """Bytes of every tensor moved to or from HBM in the window, each byte counted once; None when unknown.  A
    scratch tensor's round trip (stored, then loaded back) is not necessary: it is left out."""
    found = regions(trace, scope, moved)
    if found is None:
        return None
    scratch = scratch_tensors(trace)
    return sum(v for name, v in distinct_bytes(found).items() if name not in scratch)
