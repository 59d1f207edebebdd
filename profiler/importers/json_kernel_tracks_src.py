"""The source of the importers' compiled column passes (compiled by :mod:`profiler.importers.json_kernel`, like
:mod:`profiler.importers.json_kernel_src`): pair dictionary-encoding, the stack pass that nests one track's slices,
the counting sort by track, and flow-event binding.

Same rules as the parser's source: integer arithmetic on numpy scalars and arrays, loops, tuples; nothing
allocated (compiled without reference counting), every output array passed in.
"""

# ruff: noqa: PLR0917
# (the kernels take many positional arrays by design.)

from __future__ import annotations

import numpy as np

#: The functions numba compiles, callees before callers (json_kernel rebinds each name to its compiled version).
COMPILED = ("pair_codes", "nest_rows", "order_by_track", "_first_after", "bind_flows")


def pair_codes(a: np.ndarray, b: np.ndarray, codes: np.ndarray, slot_a: np.ndarray, slot_b: np.ndarray,
               slot_code: np.ndarray, first: np.ndarray) -> int:
    mask = len(slot_code) - 1
    n_unique = 0
    for r in range(len(a)):
        x, y = a[r], b[r]
        if r > 0 and x == a[r - 1] and y == b[r - 1]:
            codes[r] = codes[r - 1]   # runs of one pair (one thread's events) skip the hash table
            continue
        h = (x * 0x9E3779B97F4A7C15 + y * 0xC2B2AE3D27D4EB4F) & mask
        while True:
            c = slot_code[h]
            if c < 0:
                slot_code[h] = n_unique
                slot_a[h], slot_b[h] = x, y
                first[n_unique] = r
                codes[r] = n_unique
                n_unique += 1
                break
            if slot_a[h] == x and slot_b[h] == y:
                codes[r] = c
                break
            h = (h + 1) & mask
    return n_unique


def nest_rows(start: np.ndarray, end: np.ndarray, rows: np.ndarray, depth: np.ndarray, parent: np.ndarray,
              stack: np.ndarray) -> bool:
    """Depth and parent (global index or -1) of one track's slices ``rows`` (sorted by start, end descending),
    written into ``depth``/``parent`` at those rows, by a stack of the open ones; False as soon as a slice is not
    inside the innermost open one (they do not nest; what was written is then meaningless).

    A slice is closed at ``t`` when it ends at or before ``t`` (an instant at ``t`` too), as in
    :func:`profiler.importers.nesting._nest_sorted`, whose results this equals whenever it returns True.
    """
    top = 0
    for k in range(len(rows)):
        i = rows[k]
        si = start[i]
        while top > 0:
            t = stack[top - 1]
            if end[t] <= si:  # (a zero-length slice is closed for everything after it: it holds nothing)
                top -= 1
            else:
                break
        if top > 0:
            t = stack[top - 1]
            if end[i] > end[t]:
                return False
            parent[i] = t
        else:
            parent[i] = -1
        depth[i] = top
        stack[top] = i
        top += 1
    return True


def order_by_track(track: np.ndarray, start: np.ndarray, end: np.ndarray, counts: np.ndarray, last: np.ndarray,
                   order: np.ndarray) -> bool:
    """Stable counting sort of the rows by ``track`` (0 <= track < len(counts) - 1) into ``order``; True when every
    track's rows already come in (start, end descending) order, so that ``order`` sorts by (track, start, end
    descending, index).  ``counts`` must be zeros and ``last`` (one per track) -1s."""
    ok = True
    for r in range(len(track)):
        t = track[r]
        counts[t + 1] += 1
        p = last[t]
        if p >= 0 and (start[r] < start[p] or (start[r] == start[p] and end[r] > end[p])):
            ok = False
        last[t] = r
    for t in range(1, len(counts)):
        counts[t] += counts[t - 1]
    for r in range(len(track)):
        t = track[r]
        order[counts[t]] = r
        counts[t] += 1
    return ok


def _first_after(start: np.ndarray, rows: np.ndarray, tk: int, strict: bool, lo: int) -> int:
    """First position p >= ``lo`` of ``rows`` (sorted by start) with ``start[rows[p]] > tk`` (``>= tk`` when
    ``strict``), or ``len(rows)``; every position before ``lo`` must fail that test.

    Gallops forward from ``lo`` (probes at lo, lo+1, lo+3, lo+7, ...) before the binary search, so a query near
    the previous one touches only nearby memory.
    """
    n = len(rows)
    hi = lo
    step = 1
    while hi < n:
        v = start[rows[hi]]
        if (v >= tk) if strict else (v > tk):
            break
        lo = hi + 1
        hi = lo + step
        step *= 2
    hi = min(hi, n)
    while lo < hi:
        mid = (lo + hi) >> 1
        v = start[rows[mid]]
        if (v >= tk) if strict else (v > tk):
            hi = mid
        else:
            lo = mid + 1
    return lo


def bind_flows(start: np.ndarray, end: np.ndarray, rows: np.ndarray, parent: np.ndarray, t: np.ndarray,
               enclosing: np.ndarray, out: np.ndarray) -> None:
    """The slice (global index, -1: none) each flow event of one track binds to.

    ``rows``: the track's slices (global indices into ``start``/``end``/``parent``) sorted by (start, end
    descending).  An event with ``enclosing`` binds to the deepest slice containing ``t`` (the last one starting
    at or before it, or the nearest ancestor of that one that contains it), otherwise to the first slice starting
    at or after ``t`` — as :func:`profiler.importers.nesting.enclosing` and ``next_starting`` do.  Events usually
    come in time order, so each search starts from the previous answer when its time is not earlier.
    """
    n = len(rows)
    prev_enc_t = 0
    prev_enc = -1     # -1: no previous enclosing search
    prev_next_t = 0
    prev_next = -1
    for k in range(len(t)):
        tk = t[k]
        if enclosing[k]:
            lo = prev_enc if prev_enc >= 0 and tk >= prev_enc_t else 0
            at = _first_after(start, rows, tk, False, lo)
            prev_enc, prev_enc_t = at, tk
            c = rows[at - 1] if at > 0 else -1
            while c >= 0:
                if tk < end[c] or (start[c] == end[c] and tk == start[c]):
                    break
                c = parent[c]
            out[k] = c
        else:
            lo = prev_next if prev_next >= 0 and tk >= prev_next_t else 0
            at = _first_after(start, rows, tk, True, lo)
            prev_next, prev_next_t = at, tk
            out[k] = rows[at] if at < n else -1
