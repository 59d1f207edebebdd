"""Interval arithmetic on half-open int64 nanosecond intervals ``[start, end)``: clip, union, gaps.

Pure numpy, vectorised, no trace access: the analyses fetch arrays and call these.  Empty and inverted intervals
(``end <= start``) contribute nothing.  Touching intervals (``[0, 5)`` and ``[5, 8)``) merge into one.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pyarrow as pa

_I64 = np.int64


def _arrays(starts: Sequence[int] | np.ndarray, ends: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(starts, dtype=_I64)
    e = np.asarray(ends, dtype=_I64)
    if s.shape != e.shape or s.ndim != 1:
        raise ValueError(f"starts and ends must be 1-D arrays of equal length, not {s.shape} and {e.shape}")
    return s, e


def clip(starts: Sequence[int] | np.ndarray, ends: Sequence[int] | np.ndarray, t0: int | None,
         t1: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the intervals inside ``[t0, t1)`` (``None``: unbounded), empty results dropped."""
    s, e = _arrays(starts, ends)
    if t0 is not None:
        s = np.maximum(s, t0)
    if t1 is not None:
        e = np.minimum(e, t1)
    keep = e > s
    return s[keep], e[keep]


def merge(starts: Sequence[int] | np.ndarray, ends: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals as sorted, disjoint, non-touching intervals."""
    s, e = _arrays(starts, ends)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new_run = np.empty(len(s), dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new_run)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def union_ns(starts: Sequence[int] | np.ndarray, ends: Sequence[int] | np.ndarray, t0: int | None = None,
             t1: int | None = None) -> int:
    """Length of the union of the intervals, clipped to ``[t0, t1)``."""
    ms, me = merge(*clip(starts, ends, t0, t1))
    return int((me - ms).sum())


def gaps(starts: Sequence[int] | np.ndarray, ends: Sequence[int] | np.ndarray, t0: int,
         t1: int) -> tuple[np.ndarray, np.ndarray]:
    """The idle intervals of ``[t0, t1)``: its complement of the intervals' union, in time order."""
    if t1 <= t0:
        return np.zeros(0, _I64), np.zeros(0, _I64)
    ms, me = merge(*clip(starts, ends, t0, t1))
    gs = np.concatenate([[t0], me]).astype(_I64)
    ge = np.concatenate([ms, [t1]]).astype(_I64)
    keep = ge > gs
    return gs[keep], ge[keep]


def union_ns_by(groups: Sequence[Hashable] | np.ndarray, starts: Sequence[int] | np.ndarray,
                ends: Sequence[int] | np.ndarray, t0: int | None = None,
                t1: int | None = None) -> dict[Hashable, int]:
    """Union length per group (e.g. per engine), clipped to ``[t0, t1)``; groups without time get 0."""
    g = np.asarray(groups, dtype=object) if not isinstance(groups, np.ndarray) else groups
    s, e = _arrays(starts, ends)
    if len(g) != len(s):
        raise ValueError("groups, starts and ends must have the same length")
    out: dict[Hashable, int] = {}
    if len(g) == 0:
        return out
    codes, uniques = _factorize(g)
    for i, key in enumerate(uniques):
        m = codes == i
        out[key] = union_ns(s[m], e[m], t0, t1)
    return out


def _factorize(values: np.ndarray) -> tuple[np.ndarray, list[Hashable]]:
    """Integer codes of ``values`` and the distinct values (``None`` is a value of its own)."""
    try:
        encoded = pa.array(values, from_pandas=False).dictionary_encode(null_encoding="encode")
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):  # tuples and other objects
        index: dict[Hashable, int] = {}
        codes = np.fromiter((index.setdefault(v, len(index)) for v in values.tolist()), dtype=_I64,
                            count=len(values))
        return codes, list(index)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(_I64)
    return codes, encoded.dictionary.to_pylist()
