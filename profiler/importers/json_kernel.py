"""A compiled one-pass JSON parser for blocks of array elements: validates the text, finds each object's members
and parses numbers exactly, in one walk over the bytes (numba, without holding the GIL).

The vectorised scanner (:mod:`profiler.importers.json_scan`) needs several numpy passes over every byte and every
quote and bracket, plus msgspec to validate; this kernel does all of that in one pass at about a nanosecond per byte.
For each complete object at the array's level it records, for each wanted key, where its value is (string contents
or raw text), its kind and whether it holds escapes or line breaks; numeric keys (``ts``, ``dur``, ``pid``) are
parsed to exact scaled integers (``1695835572943558.123`` µs -> ``1695835572943558123`` ns, rounded half to even
below the scale) when written as plain decimals, and flagged for the exact slow path otherwise (numbers in strings,
exponents, magnitudes beyond 2**62).

The kernel never decides alone that input is bad: it stops at the first byte it does not accept, and the caller
then lets the vectorised path and msgspec word and locate the fault (and handle what the kernel leaves alone:
elements that are not objects, surrogate escapes, nesting deeper than :data:`MAX_NESTING`).

numba is imported and the kernel compiled (or loaded from numba's on-disk cache, ~0.3 s) on first use only, so
small inputs that do not need it start quickly.  :func:`available` is False when numba is missing or fails, and
when ``TRNPROF_JSON_KERNEL=0`` is set; the importers then use the vectorised scanner throughout.  The kernel's
source is :mod:`profiler.importers.json_kernel_src`.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from profiler.importers import json_kernel_src as src
from profiler.importers import json_kernel_tracks_src as tsrc
from profiler.importers.json_kernel_src import (  # noqa: F401  (re-exported constants)
    ABSENT,
    ARRAY,
    ARRAY_END,
    END,
    ERROR,
    FLAG_ESCAPE,
    FLAG_NEWLINE,
    FULL,
    KEY_TABLE_LENGTHS,
    MAX_NESTING,
    NUM_NONE,
    NUM_OK,
    NUM_SLOW,
    OBJECT,
    SCALAR,
    STRING,
    UNSURE,
)
from tracer.jit import compile_functions

#: ``TRNPROF_JSON_KERNEL=0`` turns the kernel off (the vectorised scanner does everything); ``=1`` uses it for
#: every input, however small (by default only inputs large enough to repay its start-up).
ENV_SWITCH = "TRNPROF_JSON_KERNEL"

_lock = threading.Lock()
_state: dict[str, object] = {}


def available() -> bool:
    """True when the compiled kernel can be used (compiling or loading it now if needed)."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return False
    return _compile()


def _compile() -> bool:
    with _lock:
        if "ok" in _state:
            return bool(_state["ok"])
        _state["ok"] = compile_functions((src, tsrc), smoke_test=_smoke_test, what="the compiled JSON kernel",
                                         fallback="using the slower vectorised scanner", nogil=True,
                                         prepare=_install_trailing_zeros)
        return bool(_state["ok"])


def _install_trailing_zeros(numba: Any) -> None:
    """The scanner counts trailing zero bits with numba's intrinsic (its Python stand-in is slow)."""
    from numba.cpython.unsafe.numbers import trailing_zeros

    src.trailing_zeros = trailing_zeros


def _smoke_test() -> None:
    """Compile (or load) every signature the importers use, and check one known answer."""
    spec = KeySpec(("ph", "ts", "pid"), (-1, 3, 0))
    res = ElementScanner(spec).scan(b'{"ph": "X", "ts": 12.5, "pid": 7}, {"ts": "1"}]', 0, False)
    if (res.count, res.status, int(res.number[0, 0]), int(res.number[1, 0])) != (2, ARRAY_END, 12500, 7):
        raise RuntimeError("kernel self-check failed")
    one = np.zeros(1, np.int64)
    tsrc.pair_codes(one, one, one.copy(), np.zeros(16, np.int64), np.zeros(16, np.int64), np.full(16, -1, np.int64),
                   one.copy())
    depth, parent = np.empty(3, np.int32), np.empty(3, np.int64)
    s3, e3 = np.array([0, 1, 5]), np.array([10, 3, 5])
    nested = tsrc.nest_rows(s3, e3, np.arange(3), depth, parent, np.empty(3, np.int64))
    if not nested or depth.tolist() != [0, 1, 1] or parent.tolist() != [-1, 0, 0]:
        raise RuntimeError("kernel self-check failed")
    order = np.empty(3, np.int64)
    if not tsrc.order_by_track(np.array([1, 0, 1]), s3, e3, np.zeros(3, np.int64), np.full(2, -1, np.int64), order) \
            or order.tolist() != [1, 0, 2]:
        raise RuntimeError("kernel self-check failed")
    bound = np.empty(2, np.int64)
    tsrc.bind_flows(s3, e3, np.arange(3), parent, np.array([4, 2]), np.array([True, False]), bound)
    if bound.tolist() != [0, 2]:
        raise RuntimeError("kernel self-check failed")


@dataclass
class ElementScan:
    """What :meth:`ElementScanner.scan` found.

    Attributes:
        count: complete objects.
        end: position just after the last complete object (the start position when there is none).
        status: END (the buffer ends, possibly inside an element), ARRAY_END, ERROR or UNSURE.
        at: position of the array's closing bracket (ARRAY_END) or of the fault (ERROR, UNSURE).
        opens / closes: each object's ``{`` and ``}`` positions.
        start / stop / kind / flag: per wanted key (rows, in :class:`KeySpec` order) and object (columns): the
            value's byte range (string contents; raw text otherwise; empty at the ``{`` when absent), its kind
            (ABSENT, STRING, OBJECT, ARRAY, SCALAR) and FLAG_* bits.
        number / number_state: per numeric key (in key order) and object: the exact scaled value and NUM_* state.
    """

    count: int
    end: int
    status: int
    at: int
    opens: np.ndarray
    closes: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    kind: np.ndarray
    flag: np.ndarray
    number: np.ndarray
    number_state: np.ndarray


@dataclass(frozen=True)
class KeySpec:
    """The keys the kernel extracts, and the decimal scale of those parsed as numbers (-1: not a number).

    A scale of 3 turns microseconds into nanoseconds; 0 accepts integers only (``pid``, ``tid``).
    """

    names: tuple[str, ...]
    scales: tuple[int, ...]

    @property
    def numeric(self) -> tuple[str, ...]:
        """The keys parsed as numbers, in the order of :attr:`ElementScan.number`'s rows."""
        return tuple(k for k, sc in zip(self.names, self.scales, strict=True) if sc >= 0)


class ElementScanner:
    """Runs the kernel for one stream, reusing its output buffers (fresh large arrays cost page faults).

    Only one thread may use a scanner at a time.
    """

    def __init__(self, spec: KeySpec) -> None:
        self.spec = spec
        encoded = [k.encode() for k in spec.names]
        self._koff = np.zeros(len(encoded) + 1, np.int64)
        self._koff[1:] = np.cumsum([len(e) for e in encoded])
        self._kbytes = np.frombuffer(b"".join(encoded) or b"\0", np.uint8).copy()
        self._ktab = np.full(KEY_TABLE_LENGTHS * 256, -1, np.int64)
        for j, e in enumerate(encoded):
            if 0 < len(e) < KEY_TABLE_LENGTHS:
                at = len(e) * 256 + e[0]
                self._ktab[at] = j if self._ktab[at] == -1 else -2
        self._scales = np.array(spec.scales, np.int64)
        self._num_slot = np.full(len(spec.scales), -1, np.int64)
        numeric = np.flatnonzero(self._scales >= 0)
        self._num_slot[numeric] = np.arange(len(numeric))
        self._stack = np.empty(MAX_NESTING + 1, np.uint8)
        self._cap = 0
        self._grow(1 << 14)

    def _grow(self, cap: int) -> None:
        k, nn = len(self.spec.names), int((self._scales >= 0).sum())
        self._cap = cap
        self._opens = np.empty(cap, np.int64)
        self._closes = np.empty(cap, np.int64)
        self._start = np.empty((cap, k), np.int64)
        self._stop = np.empty((cap, k), np.int64)
        self._kind = np.empty((cap, k), np.int8)
        self._flag = np.empty((cap, k), np.int8)
        self._number = np.empty((cap, nn), np.int64)
        self._number_state = np.empty((cap, nn), np.int8)

    def scan(self, buf: bytes, pos: int, need_comma: bool) -> ElementScan:
        """Parse the objects of a JSON array from ``buf[pos:]``, which starts between two elements (before the
        comma when ``need_comma``)."""
        b = np.frombuffer(buf, np.uint8)
        if b.ctypes.data % 8:
            b = b.copy()
        w = b[: len(b) // 8 * 8].view(np.uint64)
        end = len(b)
        parts: list[tuple[np.ndarray, ...]] = []
        while True:
            count, last, status, at = src.scan_elements(
                b, w, pos, end, need_comma, self._kbytes, self._koff, self._ktab, self._scales, self._num_slot,
                self._opens, self._closes, self._start, self._stop, self._kind, self._flag, self._number,
                self._number_state, self._stack)
            sl = slice(0, count)
            parts.append((self._opens[sl].copy(), self._closes[sl].copy(), self._start[sl].T.copy(),
                          self._stop[sl].T.copy(), self._kind[sl].T.copy(), self._flag[sl].T.copy(),
                          self._number[sl].T.copy(), self._number_state[sl].T.copy()))
            if status != FULL:
                break
            # A block of small objects filled the buffers: go on from the last object with larger ones.
            pos, need_comma = last, True
            self._grow(self._cap * 4)
        if len(parts) == 1:
            cols = parts[0]
        else:
            cols = tuple(np.concatenate([p[k] for p in parts], axis=0 if k < 2 else 1) for k in range(8))
        return ElementScan(len(cols[0]), last, status, at, *cols)


def compiled() -> bool:
    """True when the kernel has been compiled in this process (without compiling it)."""
    return bool(_state.get("ok"))


def nest_stack(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Depth (int32) and parent (local index or -1) of one track's slices sorted by (start, end descending), or
    None when they do not nest (or the kernel is not compiled).  See :func:`json_kernel_tracks_src.nest_rows`."""
    depth = np.empty(len(s), np.int32)
    parent = np.empty(len(s), np.int64)
    ok = nest_track(np.ascontiguousarray(s, np.int64), np.ascontiguousarray(e, np.int64), np.arange(len(s)),
                    depth, parent)
    return (depth, parent) if ok else None


def nest_track(start: np.ndarray, end: np.ndarray, rows: np.ndarray, depth: np.ndarray, parent: np.ndarray) -> bool:
    """Nest one track's slices ``rows`` of the whole columns in place (see :func:`json_kernel_tracks_src.nest_rows`);
    False when they do not nest or the kernel is not compiled (``depth``/``parent`` at ``rows`` are then to be
    rewritten)."""
    if not compiled():
        return False
    return bool(tsrc.nest_rows(start, end, np.ascontiguousarray(rows, np.int64), depth, parent,
                              np.empty(len(rows), np.int64)))


def order_by_track(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """Indices sorting the rows by (track, start, end descending, index) in one counting sort, when every track's
    rows already come in time order (as in most traces); None otherwise, or when the kernel is not compiled or the
    tracks are not small non-negative integers."""
    if not compiled() or not len(track):
        return np.zeros(0, np.int64) if compiled() else None
    lo, hi = int(track.min()), int(track.max())
    if lo < 0 or hi >= 1 << 24:
        return None
    order = np.empty(len(track), np.int64)
    ok = tsrc.order_by_track(np.ascontiguousarray(track, np.int64), start, end, np.zeros(hi + 2, np.int64),
                            np.full(hi + 1, -1, np.int64), order)
    return order if ok else None


def bind_flows(start: np.ndarray, end: np.ndarray, rows: np.ndarray, *, parent: np.ndarray, t: np.ndarray,
               enclosing: np.ndarray) -> np.ndarray | None:
    """The slice (global index, or -1) each flow event of one track binds to (see
    :func:`json_kernel_tracks_src.bind_flows`); None when not compiled.

    Args:
        start / end / parent: every slice's times and parent (global index or -1), int64.
        rows: the track's slices sorted by (start, end descending).
        t: the events' times; enclosing: whether each binds to the enclosing slice (else the next starting).
    """
    if not compiled():
        return None
    out = np.empty(len(t), np.int64)
    tsrc.bind_flows(start, end, np.ascontiguousarray(rows, np.int64), parent, np.ascontiguousarray(t, np.int64),
                   np.ascontiguousarray(enclosing, np.bool_), out)
    return out


def pair_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dictionary-encode the pairs ``(a[i], b[i])`` of two int64 arrays: (code of each row, first row of each code).

    Codes number the distinct pairs in order of first appearance.  Compiled when the kernel is available, numpy
    otherwise.
    """
    a = np.ascontiguousarray(a, np.int64)
    b = np.ascontiguousarray(b, np.int64)
    n = len(a)
    if not compiled():
        if n == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        _, first_rows, inverse = np.unique(np.stack([a, b], 1), axis=0, return_index=True, return_inverse=True)
        order = np.argsort(first_rows, kind="stable")
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        return rank[inverse.ravel()], first_rows[order]
    size = 16
    while size < 2 * n:
        size *= 2
    codes = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    k = tsrc.pair_codes(a, b, codes, np.empty(size, np.int64), np.empty(size, np.int64), np.full(size, -1, np.int64),
                       first)
    return codes, first[:k]
