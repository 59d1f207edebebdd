"""On-chip memory over time: which SBUF or PSUM bytes the instructions read and wrote, and which held live data.

trnprof's simulator writes every on-chip operand of an instruction as ``dtype[N]@MEM[p0:p1]+0xADDR`` (``N``
elements per partition, partitions ``p0:p1``, byte address ``ADDR`` in each partition; trace format 2.2): the
destination after ``dst=`` (and ``reduce_dst=``, an activation's row sums), the sources after ``src=`` separated by
commas; a matmul whose operands say ``acc_flags=accumulate`` also reads its destination.  This module turns those
operands into *accesses* -- a byte range of one memory, read or written over a time interval -- and the accesses
into a map of the memory over a window of time:

* **accessed**: a byte read or written by an instruction running at that time.  A DMA transfer reads or writes its
  on-chip side from its first packet's start to its last packet's end (its packets found through the trace's
  ``Flow`` edges from the trigger instruction; a trigger without them counts from its own start to its end);
  other instructions from their start to their end.
* **live**: a byte holding data some later instruction reads -- from the start of the write that put the data
  there to the end of the last read before the next write to it, or that write's start when it overlaps the read
  (an in-place update; a write nothing reads is live only while it is written).  Summed over the addresses this
  is the memory the kernel really needs at each moment, whatever it allocated; the peak is exact (a sweep over the
  live intervals' ends).

Live ranges need what happened before and after the window: they are computed over a *context* around it (the
whole trace when it has at most :data:`WHOLE_TRACE_INSTRUCTIONS` instructions, else the window and one window
length either side), so data untouched for longer than that before or after a view is not shown live there; the
result says which context it used.  Addresses are per partition: partition ranges are not drawn, so a byte is live
(or accessed) when it is in any partition.  Traces whose operands carry no such views (imports from hardware, or
simulator traces of format 2.1 and older) give a :class:`~profiler.errors.QueryError` that says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.inputs import INSTRUCTION, Scope, fetch, q, resolve_scope
from profiler.analyses.memory_access import (
    MEMORIES,
    Accesses,
    accesses,
    accesses_by_memory,
    bank_bytes,
    capacity,
    check_mem,
    require_views,
)
from profiler.errors import QueryError
from profiler.trace import Trace
from tracer import schema as ts

#: Traces with at most this many instructions get their live ranges from the whole trace.
WHOLE_TRACE_INSTRUCTIONS = 200_000
#: Accesses times the address segments they cover, above which live ranges are not computed (memory: ~40 B each).
MAX_EXPANDED = 20_000_000
#: Instructions in the context above which no map is drawn (its accesses would take gigabytes): zoom in.
MAX_INSTRUCTIONS = 3_000_000
#: Cell states of :attr:`MemoryMap.state`.
FREE, LIVE, READ, WRITTEN, READ_WRITTEN = range(5)
STATE_NAMES = ("free", "live (held for a later read)", "read", "written", "read and written")
#: Default raster: time columns and address rows.
DEFAULT_WIDTH = 800
DEFAULT_HEIGHT = 256


class TooManyAccesses(QueryError):
    """The window holds too much to map at once: a narrower one can be mapped."""


@dataclass(frozen=True)
class LiveIntervals:
    """Parallel arrays, one entry per live range of an elementary address segment: its bytes and time."""

    lo: np.ndarray
    hi: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.lo)


@dataclass(frozen=True)
class MemoryMap:
    """One memory over ``[start_ns, end_ns)``, as a raster and as exact figures (see the module docstring)."""

    mem: str
    capacity: int                  # bytes per partition
    top: int                       # the raster's rows cover addresses [0, top): see map_top
    start_ns: int
    end_ns: int
    state: np.ndarray              # uint8 [height, width]: FREE, LIVE, READ, WRITTEN or READ_WRITTEN per cell
    live_bytes: np.ndarray         # int64 [width]: the most bytes live at any moment of each column
    peak_live_bytes: int           # the most bytes live at any moment of the window (exact)
    peak_at_ns: int | None         # when that peak was first reached (None: nothing live)
    accessed_bytes: int            # distinct bytes accessed in the window
    accesses: int                  # operand accesses overlapping the window
    context_ns: tuple[int, int]    # the time the live ranges were computed over
    whole_trace: bool              # whether that context is the whole trace
    bank_bytes: int | None = None  # PSUM: bytes per partition of one bank (see bank_bytes)

    @property
    def width(self) -> int:
        """Time columns."""
        return int(self.state.shape[1])

    @property
    def height(self) -> int:
        """Address rows (row 0 holds the lowest addresses)."""
        return int(self.state.shape[0])

    @property
    def row_bytes(self) -> float:
        """Bytes per address row."""
        return self.top / self.height


def _check_size(value: object, what: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 1 <= int(value) <= most:
        raise QueryError(f"{what} must be an integer from 1 to {most}, not {value!r}")
    return int(value)


def live_intervals(acc: Accesses, context_start: int) -> LiveIntervals:
    """Live ranges of the bytes the accesses cover, one per elementary address segment and write (see the module
    docstring).

    The accesses' byte ranges cut the address space into elementary segments (between consecutive distinct
    bounds); every access is split into the segments it covers, and on each segment, in time order, a write starts
    a new live range that lasts until the end of the last access before the next write -- at most until that write
    starts: an in-place update reads the old data while it writes the new, and a byte holds one datum at a time.
    Reads before a segment's first write read data written before ``context_start``: live from then.
    """
    if not len(acc):
        e = np.zeros(0, np.int64)
        return LiveIntervals(e, e, e, e)
    bounds = np.unique(np.concatenate([acc.lo, acc.hi]))
    first = np.searchsorted(bounds, acc.lo)
    count = np.searchsorted(bounds, acc.hi) - first
    total = int(count.sum())
    if total > MAX_EXPANDED:
        raise TooManyAccesses(f"{len(acc):,} operand accesses over {len(bounds) - 1:,} address segments are too "
                              f"many for live ranges ({total:,} pieces, at most {MAX_EXPANDED:,}): zoom in")
    owner = np.repeat(np.arange(len(acc)), count)
    seg = first[owner] + (np.arange(total) - np.repeat(np.cumsum(count) - count, count))
    s, e, w = acc.start[owner], acc.end[owner], acc.write[owner]
    # per segment in time order; at the same start a read comes first (an in-place update reads the old data)
    order = np.lexsort((w, s, seg))
    seg, s, e, w = seg[order], s[order], e[order], w[order]
    new_seg = np.ones(total, bool)
    new_seg[1:] = seg[1:] != seg[:-1]
    group_start = new_seg | w                  # a segment's first access or a write opens a live range
    starts = np.flatnonzero(group_start)
    g_end = np.maximum.reduceat(e, starts)
    g_seg = seg[starts]
    g_start = np.where(w[starts], s[starts], np.minimum(context_start, s[starts]))
    # a byte holds one datum at a time: where an instruction reads the old data while it writes the new (an in-place
    # update, an accumulating matmul), the old range ends where the new one starts -- else its bytes count twice
    same = np.zeros(len(starts), bool)
    same[:-1] = g_seg[1:] == g_seg[:-1]
    g_end[same] = np.minimum(g_end[same], g_start[1:][same[:-1]])
    return LiveIntervals(bounds[g_seg], bounds[g_seg + 1], g_start, g_end)


def live_profile(live: LiveIntervals, t0: int, t1: int, width: int) -> tuple[np.ndarray, int, int | None]:
    """From live intervals (:func:`live_intervals`): the most bytes live at any moment of each of ``width`` equal
    columns of ``[t0, t1)``, the window's exact peak and the first moment it is reached (None: nothing live)."""
    cs, ce = np.maximum(live.start, t0), np.minimum(live.end, t1)
    keep = ce > cs
    nbytes = (live.hi - live.lo)[keep]
    cs, ce = cs[keep], ce[keep]
    per_col = np.zeros(width, np.int64)
    if not len(cs):
        return per_col, 0, None
    times = np.concatenate([cs, ce])
    delta = np.concatenate([nbytes, -nbytes])
    order = np.lexsort((delta, times))         # at the same time an end comes before a start
    times, level = times[order], np.cumsum(delta[order])
    peak_i = int(np.argmax(level))
    peak, peak_at = int(level[peak_i]), int(times[peak_i])
    # the level of each nanosecond is the one after all of its events (ends first, so what is between is no level)
    last = np.ones(len(times), bool)
    last[:-1] = times[1:] != times[:-1]
    times, level = times[last], level[last]
    # per column (a continuous stretch of time): the most over the nanoseconds [t, t + 1) it overlaps -- the one it
    # starts in, and each later one that starts inside it
    span = t1 - t0
    first_ns = t0 + (np.arange(width, dtype=np.int64) * span) // width
    before = np.searchsorted(times, first_ns, side="right") - 1
    per_col = np.where(before >= 0, level[np.maximum(before, 0)], 0)
    inside = (times >= t0) & (times < t1)
    col = ((times[inside] - t0) * width) // span
    np.maximum.at(per_col, col, level[inside])
    return per_col.astype(np.int64), max(peak, 0), peak_at if peak > 0 else None


def _raster(grid: np.ndarray, rects: tuple[np.ndarray, ...], window: tuple[int, int], cap: int) -> None:
    """Add 1 to every cell of ``grid`` ([height + 1, width + 1] difference array) each rectangle covers (``rects``:
    lo, hi, start, end arrays)."""
    height, width = grid.shape[0] - 1, grid.shape[1] - 1
    lo, hi, s, e = rects
    t0, t1 = window
    keep = (e > t0) & (s < t1) & (hi > lo) & (lo < cap)
    if not keep.any():
        return
    lo, hi, s, e = lo[keep], np.minimum(hi[keep], cap), np.maximum(s[keep], t0), np.minimum(e[keep], t1)
    c0 = ((s - t0) * width) // (t1 - t0)               # the columns the continuous time [s, e) overlaps
    c1 = -((-(e - t0) * width) // (t1 - t0))
    r0 = (lo * height) // cap
    r1 = ((hi - 1) * height) // cap + 1
    for r, c, sign in ((r0, c0, 1), (r0, c1, -1), (r1, c0, -1), (r1, c1, 1)):
        np.add.at(grid, (r, c), sign)


def map_top(acc: Accesses, cap: int) -> int:
    """The addresses the raster's rows cover, ``[0, top)``: the power of two at or above the highest address the
    accesses (of the whole context) reach, at most the capacity -- a kernel using 3 KiB of 224 would otherwise be a
    sliver at the bottom of the map."""
    used = int(acc.hi.max()) if len(acc) else cap
    return min(cap, 1 << max(used - 1, 1).bit_length())


def _cover(lo: np.ndarray, hi: np.ndarray) -> int:
    """Bytes in the union of ``[lo, hi)`` ranges."""
    if not len(lo):
        return 0
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    prev = np.concatenate([[lo[0]], reach[:-1]])
    return int(np.maximum(hi - np.maximum(lo, prev), 0).sum())


def memory_map(trace: Trace, mem: str = "SBUF", start_ns: int | None = None, end_ns: int | None = None, *,
               width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT, core: int | None = None) -> MemoryMap:
    """The map of ``mem`` (``SBUF`` or ``PSUM``) over ``[start_ns, end_ns)`` (default: the whole trace), as
    ``width`` time columns by ``height`` address rows (see the module docstring).

    Raises:
        QueryError: a bad memory, window or size; a trace without on-chip operands; a window with too many accesses
            for live ranges.
    """
    return memory_maps(trace, start_ns, end_ns, width=width, height=height, core=core, mems=(mem,))[0]


def context_of(trace: Trace, scope: Scope) -> tuple[int, int, bool]:
    """The time live ranges are computed over for the window of ``scope`` (see the module docstring), and whether
    that is the whole trace.

    Raises:
        QueryError: the trace has no memory map at all (said first: "zoom in" would not help).
        TooManyAccesses: more than :data:`MAX_INSTRUCTIONS` instructions in it.
    """
    require_views(trace)
    t0, t1 = scope.start_ns, scope.end_ns
    whole = trace.overview().get("events", {}).get(ts.INSTRUCTION.name, 0) <= WHOLE_TRACE_INSTRUCTIONS
    extent = trace.time_range
    if whole:
        c0, c1 = min(extent[0], t0), max(extent[1], t1)
    else:
        c0, c1 = max(extent[0], t0 - (t1 - t0)), min(extent[1], t1 + (t1 - t0))
        c0, c1 = min(c0, t0), max(c1, t1)
        whole = c0 <= extent[0] and c1 >= extent[1]
    n = fetch(trace, f"SELECT count(*) AS n FROM {INSTRUCTION} WHERE {q(ts.START_TS)} < {c1} "
                     f"AND {q(ts.END_TS)} > {c0} AND {scope.core_sql()}").column(0)[0].as_py()
    if n > MAX_INSTRUCTIONS:
        raise TooManyAccesses(f"{n:,} instructions in and around this window are too many to map at once (at most "
                              f"{MAX_INSTRUCTIONS:,}): zoom in")
    return c0, c1, whole


def map_of_accesses(acc: Accesses, mem: str, cap: int, window: tuple[int, int], context: tuple[int, int], *,
                    width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT, whole_trace: bool = True,
                    bank: int | None = None) -> MemoryMap:
    """The map of ``window`` (``[t0, t1)``) from accesses gathered over ``context`` (what :func:`memory_map`
    computes once it has read them; ``cap``: bytes per partition, raised to the highest address accessed;
    ``bank``: a PSUM bank's bytes)."""
    t0, t1 = window
    cap = max(cap, int(acc.hi.max()) if len(acc) else 0)
    top = map_top(acc, cap)
    live_iv = live_intervals(acc, context[0])
    live_cols, peak, peak_at = live_profile(live_iv, t0, t1, width)
    grids = [np.zeros((height + 1, width + 1), np.int64) for _ in range(3)]
    _raster(grids[0], (live_iv.lo, live_iv.hi, live_iv.start, live_iv.end), window, top)
    for grid, pick in ((grids[1], ~acc.write), (grids[2], acc.write)):
        _raster(grid, (acc.lo[pick], acc.hi[pick], acc.start[pick], acc.end[pick]), window, top)
    live, read, written = (g.cumsum(0).cumsum(1)[:height, :width] > 0 for g in grids)
    state = np.full((height, width), FREE, np.uint8)
    state[live] = LIVE
    state[read] = READ
    state[written] = WRITTEN
    state[read & written] = READ_WRITTEN
    in_window = (acc.end > t0) & (acc.start < t1)
    return MemoryMap(mem=mem, capacity=cap, top=top, start_ns=t0, end_ns=t1, state=state, live_bytes=live_cols,
                     peak_live_bytes=peak, peak_at_ns=peak_at,
                     accessed_bytes=_cover(acc.lo[in_window], acc.hi[in_window]), accesses=int(in_window.sum()),
                     context_ns=context, whole_trace=whole_trace, bank_bytes=bank)


def memory_summary(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, core: int | None = None,
                   mems: tuple[str, ...] = MEMORIES) -> pa.Table:
    """One row per memory (:data:`profiler.analyses.schema.MEMORY_SUMMARY_SCHEMA`): capacity, peak live bytes, its
    share of the capacity and when it was first reached, distinct bytes accessed and the accesses, over the
    window (default: the whole trace); the operands are read once for every memory."""
    return summary_table(memory_maps(trace, start_ns, end_ns, width=1, height=1, core=core, mems=mems))


def memory_maps(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, *,
                width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT, core: int | None = None,
                mems: tuple[str, ...] = MEMORIES) -> list[MemoryMap]:
    """:func:`memory_map` of each of ``mems`` (same window and raster), the operands read once."""
    if isinstance(mems, str):  # one memory, not its letters
        mems = (mems,)
    if not isinstance(mems, tuple | list):
        raise QueryError(f"mems must be a memory or a list of them ({', '.join(MEMORIES)}), not {str(mems)[:40]!r}")
    mems = tuple(check_mem(m) for m in mems)
    width = _check_size(width, "width", 10_000)
    height = _check_size(height, "height", 4096)
    scope = resolve_scope(trace, start_ns, end_ns, core)
    if scope.length_ns * (width + 1) >= 2**63:  # the columns' times are computed in int64
        raise QueryError(f"a window of {scope.length_ns:,} ns is too wide to map (at most "
                         f"{(2**63 - 1) // (width + 1):,} ns at {width:,} column{'s' if width != 1 else ''}): "
                         "narrow it")
    c0, c1, whole = context_of(trace, scope)
    by_mem = accesses_by_memory(trace, c0, c1, scope.core, mems)
    return [map_of_accesses(by_mem[mem], mem, capacity(trace, mem), (scope.start_ns, scope.end_ns), (c0, c1),
                            width=width, height=height, whole_trace=whole, bank=bank_bytes(trace, mem))
            for mem in mems]


def summary_table(maps: list[MemoryMap]) -> pa.Table:
    """:func:`memory_summary` of maps already computed, one row each."""
    rows = [{rs.MEM: mm.mem, rs.CAPACITY_BYTES: mm.capacity, rs.PEAK_LIVE_BYTES: mm.peak_live_bytes,
             rs.PEAK_FRACTION: mm.peak_live_bytes / mm.capacity, rs.PEAK_AT_NS: mm.peak_at_ns,
             rs.ACCESSED_BYTES: mm.accessed_bytes, rs.ACCESSES: mm.accesses} for mm in maps]
    return pa.Table.from_pylist(rows, schema=rs.MEMORY_SUMMARY_SCHEMA)


def live_series(mm: MemoryMap) -> pa.Table:
    """The most bytes live in each time column of ``mm`` (:data:`profiler.analyses.schema.LIVE_SERIES_SCHEMA`)."""
    span, w = mm.end_ns - mm.start_ns, mm.width
    edges = mm.start_ns + (np.arange(w + 1, dtype=np.int64) * span + w - 1) // w
    return pa.table({rs.START_NS: edges[:-1], rs.END_NS: edges[1:], rs.LIVE_BYTES: mm.live_bytes},
                    schema=rs.LIVE_SERIES_SCHEMA)


__all__ = [
    "MEMORIES",
    "STATE_NAMES",
    "Accesses",
    "LiveIntervals",
    "MemoryMap",
    "TooManyAccesses",
    "accesses",
    "accesses_by_memory",
    "bank_bytes",
    "capacity",
    "context_of",
    "live_intervals",
    "live_profile",
    "live_series",
    "map_of_accesses",
    "map_top",
    "memory_map",
    "memory_maps",
    "memory_summary",
    "summary_table",
]
