"""Compiled bucketing of raw events for windows finer than the stored index: one pass, no GIL (numba).

:func:`bucketize` returns exactly what :func:`profiler.db.lod.bucketize` returns for events without values — per
bucket of ``[b0, b1)`` at level ``k``: the union length of the intervals inside the bucket, the number of events
starting in it, the representative event (the longest starter, ties: smallest id; in a busy bucket without
starters the covering event, i.e. of the events started before the bucket the first to reach the largest end) and
the dominant name (largest total starter duration, ties: smallest code) — in one pass, O(events + buckets) with
small constants, where the vectorised version makes some forty passes over its arrays.

numba is imported and the kernel compiled (or loaded from numba's on-disk cache, ~0.7 s) on first use, and only for
at least :data:`MIN_EVENTS` events (fewer cost the vectorised path under a millisecond), so small traces never pay
for it.  ``TRNPROF_BUCKET_KERNEL=0`` disables the kernel, ``=1`` uses it whatever the size (the tests compare the
two paths); when numba is missing or broken the vectorised path is used.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db.lod_rows import NONE, names_of

if TYPE_CHECKING:
    from profiler.db.lod import TrackEvents

#: Environment switch: ``0`` disables the compiled kernel, ``1`` uses it for any number of events.
ENV_SWITCH = "TRNPROF_BUCKET_KERNEL"
#: Fewest events bucketed with the kernel (unless forced by the switch).
MIN_EVENTS = 4096

_lock = threading.Lock()
_state: dict[str, object] = {}


def _bucket_pass(ev: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], k: int, b0: int,
                 out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                 scratch: np.ndarray) -> None:  # pragma: no cover - compiled; its Python form is tested directly
    """Fill the bucket arrays ``out`` (busy, count, representative id, whether it is set, top name code; pre-set
    to zeros/-1) from the events ``ev`` (start, end, id, name code), sorted by (start, id) with end >= start.

    ``scratch`` (one zero per name code) holds the name totals of one bucket's starters at a time.
    """
    s, e, ids, codes = ev
    busy, count, rep, has_rep, top = out
    n = len(s)
    nb = len(busy)
    b1 = b0 + nb
    lo_t = b0 << k
    hi_t = b1 << k
    # Union pieces: an event starting after everything before it has ended opens a new piece.
    ps = 0
    pe = 0
    for i in range(n + 1):
        if 0 < i < n and s[i] <= pe:
            pe = max(pe, e[i])
            continue
        if i > 0:       # close the piece [ps, pe): its length inside each bucket
            cs = max(ps, lo_t)
            ce = min(pe, hi_t)
            if ce > cs:
                for b in range(cs >> k, ((ce - 1) >> k) + 1):
                    busy[b - b0] += min(ce, (b + 1) << k) - max(cs, b << k)
        if i < n:
            ps = s[i]
            pe = e[i]
    # Starters (contiguous per bucket, events being sorted by start): count, longest, dominant name.
    i = 0
    while i < n and (s[i] >> k) < b0:
        i += 1
    while i < n and (s[i] >> k) < b1:
        b = s[i] >> k
        j = i
        best = -1
        best_id = 0
        while j < n and (s[j] >> k) == b:
            d = e[j] - s[j]
            if d > best or (d == best and ids[j] < best_id):
                best = d
                best_id = ids[j]
            if codes[j] >= 0:
                scratch[codes[j]] += d
            j += 1
        r = b - b0
        count[r] = j - i
        rep[r] = best_id
        has_rep[r] = True
        tc = -1
        td = -1
        for m in range(i, j):
            c = codes[m]
            if c >= 0 and (scratch[c] > td or (scratch[c] == td and c < tc)):
                td = scratch[c]
                tc = c
        for m in range(i, j):
            if codes[m] >= 0:
                scratch[codes[m]] = 0
        top[r] = tc
        i = j
    # Buckets without starters that are busy show their covering event: of the events started before the bucket,
    # the first to reach the largest end (a running maximum).
    j = 0
    run_end = 0
    run_idx = -1
    for r in range(nb):
        edge = (b0 + r) << k
        while j < n and s[j] < edge:
            if run_idx < 0 or e[j] > run_end:
                run_end = e[j]
                run_idx = j
            j += 1
        if count[r] == 0 and busy[r] > 0 and run_idx >= 0:
            rep[r] = ids[run_idx]
            has_rep[r] = True
            top[r] = codes[run_idx]


def _compiled() -> Callable[..., None] | None:
    with _lock:
        if "fn" in _state:
            return _state["fn"]  # type: ignore[return-value]
        fn = None
        try:
            import numba

            fn = numba.njit(nogil=True, cache=True, boundscheck=False)(_bucket_pass)
            _smoke_test(fn)
        except ImportError:  # pragma: no cover - only where numba is not installed
            fn = None
        except Exception as exc:  # pragma: no cover - a broken numba installation
            warnings.warn(f"trnprof: the compiled bucketing kernel is unavailable ({type(exc).__name__}: {exc}); "
                          "using the vectorised path", RuntimeWarning, stacklevel=3)
            fn = None
        _state["fn"] = fn
        return fn


def available(n_events: int) -> bool:
    """True when ``n_events`` events should be bucketed by the kernel and it can be (compiling it now if needed)."""
    switch = os.environ.get(ENV_SWITCH, "")
    if switch == "0" or (switch != "1" and n_events < MIN_EVENTS):
        return False
    return _compiled() is not None


def _smoke_test(fn: Callable[..., None]) -> None:
    """Compile (or load) the kernel's signature and check one known answer."""
    s = np.array([0, 4, 40], np.int64)
    e = np.array([10, 6, 40], np.int64)
    out = _run(fn, (s, e, np.array([1, 2, 3], np.int64), np.array([0, -1, 1], np.int64)), 2, 2, buckets=(0, 4))
    got = [a.tolist() for a in out]
    if got != [[4, 4, 2, 0], [1, 1, 0, 0], [1, 2, 1, 0], [True, True, True, False], [0, -1, 0, -1]]:
        raise RuntimeError("kernel self-check failed")


def _run(fn: Callable[..., None], ev: tuple[np.ndarray, ...], n_names: int, k: int, *,
         buckets: tuple[int, int]) -> tuple[np.ndarray, ...]:
    b0, b1 = buckets
    nb = b1 - b0
    out = (np.zeros(nb, np.int64), np.zeros(nb, np.int64), np.zeros(nb, np.int64), np.zeros(nb, np.bool_),
           np.full(nb, NONE, np.int64))
    fn(ev, k, b0, out, np.zeros(max(1, n_names), np.int64))
    return out


def bucketize(ev: TrackEvents, k: int, b0: int, b1: int, *, compiled: bool = True) -> pa.Table:
    """:func:`profiler.db.lod.bucketize` of events without values: buckets [b0, b1) of level ``k``.

    ``compiled=False`` runs the same code as plain Python (slow; for tests).
    """
    fn = _compiled() if compiled else _bucket_pass
    if fn is None:
        raise RuntimeError("the compiled bucketing kernel is unavailable")
    arrays = tuple(np.ascontiguousarray(a, dtype=np.int64) for a in (ev.start, ev.end, ev.ids, ev.codes))
    busy, count, rep, has_rep, top = _run(fn, arrays, len(ev.names), k, buckets=(b0, b1))
    return pa.table({
        dbs.LEVEL: pa.array(np.full(b1 - b0, k, np.int32)),
        dbs.BUCKET: pa.array(np.arange(b0, b1, dtype=np.int64)),
        dbs.BUSY_NS: pa.array(busy),
        dbs.COUNT: pa.array(count),
        dbs.LONGEST_ID: pa.array(rep, pa.int64(), mask=~has_rep),
        dbs.TOP_NAME: names_of(top, ev.names),
    })


__all__ = ["ENV_SWITCH", "MIN_EVENTS", "available", "bucketize"]
