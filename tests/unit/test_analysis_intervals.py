"""Interval arithmetic against a brute-force oracle: a boolean array with one cell per nanosecond."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.analyses import intervals

SPAN = 64

interval_lists = st.lists(st.tuples(st.integers(0, SPAN), st.integers(0, SPAN)), max_size=12)
windows = st.tuples(st.integers(0, SPAN), st.integers(0, SPAN))


def _arrays(pairs):
    return (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))


def _busy(pairs, t0=0, t1=SPAN):
    """The oracle: which nanoseconds of [t0, t1) some interval covers."""
    cells = np.zeros(SPAN, bool)
    for s, e in pairs:
        cells[s:e] = True  # empty when e <= s
    window = np.zeros(SPAN, bool)
    window[t0:t1] = True
    return cells & window, window


def _runs(mask):
    """Maximal runs of True as (start, end) pairs."""
    out, k = [], 0
    while k < len(mask):
        if mask[k]:
            j = k
            while j < len(mask) and mask[j]:
                j += 1
            out.append((k, j))
            k = j
        else:
            k += 1
    return out


@settings(max_examples=300, deadline=None)
@given(interval_lists)
def test_merge_is_the_union_as_disjoint_runs(pairs):
    s, e = intervals.merge(*_arrays(pairs))
    busy, _ = _busy(pairs)
    assert list(zip(s.tolist(), e.tolist(), strict=True)) == _runs(busy)


@settings(max_examples=300, deadline=None)
@given(interval_lists, windows)
def test_union_and_gaps_within_a_window(pairs, window):
    t0, t1 = min(window), max(window)
    busy, inside = _busy(pairs, t0, t1)
    assert intervals.union_ns(*_arrays(pairs), t0, t1) == int(busy.sum())
    gs, ge = intervals.gaps(*_arrays(pairs), t0, t1)
    assert list(zip(gs.tolist(), ge.tolist(), strict=True)) == _runs(inside & ~busy)


@settings(max_examples=200, deadline=None)
@given(interval_lists, windows)
def test_clip_keeps_exactly_the_inside_parts(pairs, window):
    t0, t1 = min(window), max(window)
    cs, ce = intervals.clip(*_arrays(pairs), t0, t1)
    assert bool(np.all(cs < ce)) and bool(np.all(cs >= t0)) and bool(np.all(ce <= t1))
    expected = [(max(s, t0), min(e, t1)) for s, e in pairs if min(e, t1) > max(s, t0)]
    assert list(zip(cs.tolist(), ce.tolist(), strict=True)) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, SPAN), st.integers(0, SPAN)),
                max_size=15))
def test_union_by_group(rows):
    groups = np.array([r[0] for r in rows], dtype=object)
    got = intervals.union_ns_by(groups, [r[1] for r in rows], [r[2] for r in rows])
    for g in {r[0] for r in rows}:
        busy, _ = _busy([(r[1], r[2]) for r in rows if r[0] == g])
        assert got[g] == int(busy.sum())
    assert set(got) == {r[0] for r in rows}


def test_shape_errors_and_empty_window():
    with pytest.raises(ValueError, match="equal length"):
        intervals.merge([1, 2], [3])
    gs, ge = intervals.gaps([0], [5], 10, 10)
    assert len(gs) == len(ge) == 0
