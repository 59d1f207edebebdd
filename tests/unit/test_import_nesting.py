"""Slice nesting, B/E pairing and flow binding against brute-force oracles."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.importers.nesting import enclosing, match_begin_end, nest_intervals, track_order


def _nested_intervals(draw, track: int, lo: int, hi: int, *, depth: int, out: list) -> None:
    """Random properly nested intervals inside [lo, hi)."""
    t = lo
    while t < hi and len(out) < 40:
        if draw(st.booleans()):
            t += draw(st.integers(0, 3))
        length = draw(st.integers(0, max(0, min(6, hi - t))))
        if t + length > hi:
            break
        out.append((track, t, t + length))
        if length > 1 and depth < 4 and draw(st.booleans()):
            _nested_intervals(draw, track, t + draw(st.integers(0, 1)), t + length, depth=depth + 1, out=out)
        t += length + (0 if length else 1)


@st.composite
def nested(draw):
    out: list = []
    for track in range(draw(st.integers(1, 3))):
        _nested_intervals(draw, track, 0, 30, depth=0, out=out)
    perm = draw(st.permutations(range(len(out))))
    return [out[i] for i in perm]


def _oracle_depth(rows):
    """Depth = number of other intervals on the track that strictly enclose or precede-and-contain it."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][1], -rows[i][2], i))
    depth, parent = {}, {}
    stack: list[int] = []
    current = None
    for i in order:
        tr, s, _ = rows[i]
        if tr != current:
            stack, current = [], tr
        while stack:
            top = stack[-1]
            te = rows[top][2]
            if s < te:   # (a zero-length interval holds nothing: not even another at its time)
                break
            stack.pop()
        depth[i] = len(stack)
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return depth, parent


@settings(max_examples=150, deadline=None)
@given(nested())
def test_nesting_matches_a_stack(rows):
    tr = np.array([r[0] for r in rows], np.int64)
    s = np.array([r[1] for r in rows], np.int64)
    e = np.array([r[2] for r in rows], np.int64)
    got = nest_intervals(tr, s, e)
    depth, parent = _oracle_depth(rows)
    assert got.depth.tolist() == [depth[i] for i in range(len(rows))]
    assert got.parent.tolist() == [parent[i] for i in range(len(rows))]
    assert got.overlapping_slices == 0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 20), st.integers(0, 8)), max_size=30))
def test_overlapping_tracks_get_lanes_that_never_collide(raw):
    tr = np.array([r[0] for r in raw], np.int64)
    s = np.array([r[1] for r in raw], np.int64)
    e = s + np.array([r[2] for r in raw], np.int64)
    got = nest_intervals(tr, s, e)
    for i in range(len(raw)):
        for j in range(len(raw)):
            if i != j and tr[i] == tr[j] and got.depth[i] == got.depth[j]:
                # same lane: no overlap of positive-length intervals
                assert not (s[i] < e[j] and s[j] < e[i] and e[i] > s[i] and e[j] > s[j])
        p = got.parent[i]
        if p >= 0:
            assert tr[p] == tr[i] and s[p] <= s[i] and e[i] <= e[p] and got.depth[p] == got.depth[i] - 1


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.booleans()), max_size=40))
def test_begin_end_pairs_like_a_stack_per_thread(raw):
    thread = np.array([r[0] for r in raw], np.int64)
    is_begin = np.array([r[1] for r in raw], np.bool_)
    ts = np.arange(len(raw), dtype=np.int64)
    partner, open_b, stray_e = match_begin_end(thread, ts, is_begin)
    stacks: dict[int, list[int]] = {}
    expected = [-1] * len(raw)
    strays = 0
    for i, (th, b) in enumerate(raw):
        st_ = stacks.setdefault(th, [])
        if b:
            st_.append(i)
        elif st_:
            j = st_.pop()
            expected[i], expected[j] = j, i
        else:
            strays += 1
    assert partner.tolist() == expected
    assert stray_e == strays
    assert open_b == sum(len(v) for v in stacks.values())


@settings(max_examples=100, deadline=None)
@given(nested(), st.lists(st.tuples(st.integers(0, 2), st.integers(-1, 31)), max_size=10))
def test_enclosing_is_the_deepest_containing_slice(rows, queries):
    tr = np.array([r[0] for r in rows], np.int64)
    s = np.array([r[1] for r in rows], np.int64)
    e = np.array([r[2] for r in rows], np.int64)
    nest = nest_intervals(tr, s, e)
    order = track_order(tr, s, e)
    inverse = np.empty(len(order), np.int64)
    inverse[order] = np.arange(len(order))
    par = nest.parent[order]
    par_sorted = np.where(par >= 0, inverse[np.maximum(par, 0)], -1)
    qt = np.array([q[0] for q in queries], np.int64)
    qs = np.array([q[1] for q in queries], np.int64)
    t_sorted = tr[order]
    got = enclosing(s[order], e[order], par_sorted, seg_lo=np.searchsorted(t_sorted, qt, "left"),
                    seg_hi=np.searchsorted(t_sorted, qt, "right"), t=qs)
    for k, (t_q, time) in enumerate(queries):
        inside = [i for i, (t_, a, b) in enumerate(rows) if t_ == t_q and (a <= time < b or a == b == time)]
        if not inside:
            assert got[k] == -1
        else:
            best = max(nest.depth[i] for i in inside)
            assert got[k] >= 0 and nest.depth[order[got[k]]] == best and order[got[k]] in inside



@settings(max_examples=200, deadline=None)
@given(st.one_of(nested(), st.lists(st.tuples(st.just(0), st.integers(0, 12), st.integers(0, 16)), max_size=30)))
def test_compiled_stack_pass_equals_the_vectorised_nesting_whenever_it_accepts(rows):
    """The compiled pass is used only when it accepts a track; then it must agree exactly (instants included)."""
    from profiler.importers.json_kernel import available, nest_stack
    from profiler.importers.nesting import _nest_sorted

    if not available():
        return
    for track in {r[0] for r in rows}:
        s = np.array([r[1] for r in rows if r[0] == track], np.int64)
        e = np.maximum(s, np.array([r[2] for r in rows if r[0] == track], np.int64))
        order = np.lexsort((-e, s))
        s, e = s[order], e[order]
        stacked = nest_stack(s, e)
        d, p, ok = _nest_sorted(s, e)
        assert stacked is not None or not ok or len(s) == 0
        if stacked is not None:
            assert ok and stacked[0].tolist() == d.tolist() and stacked[1].tolist() == p.tolist()


@settings(max_examples=150, deadline=None)
@given(st.one_of(nested(), st.lists(st.tuples(st.integers(0, 1), st.integers(0, 12), st.integers(0, 16)),
                                    max_size=30)),
       st.lists(st.tuples(st.integers(0, 1), st.integers(-1, 20), st.booleans()), max_size=20), st.booleans())
def test_compiled_flow_binding_equals_the_vectorised_one(rows, queries, in_time_order):
    """The compiled search (galloping on from the previous answer when times do not go back) binds exactly as the
    vectorised binary searches, for queries in any order and in time order."""
    from profiler.importers.json_kernel import available, bind_flows
    from profiler.importers.nesting import next_starting

    if not available() or not rows:
        return
    if in_time_order:
        queries = sorted(queries, key=lambda q: q[1])
    tr = np.array([r[0] for r in rows], np.int64)
    s = np.array([r[1] for r in rows], np.int64)
    e = np.maximum(s, np.array([r[2] for r in rows], np.int64))
    nest = nest_intervals(tr, s, e)
    order = nest.order
    inverse = np.empty(len(order), np.int64)
    inverse[order] = np.arange(len(order))
    for track, a, b in nest.segments.tolist():
        rows_t = order[a:b]
        mine = [q for q in queries if q[0] == track]
        t = np.array([q[1] for q in mine], np.int64)
        enc = np.array([q[2] for q in mine], np.bool_)
        got = bind_flows(s, e, rows_t, parent=nest.parent, t=t, enclosing=enc)
        par = nest.parent[rows_t]
        par_local = np.where(par >= 0, inverse[np.maximum(par, 0)] - a, -1)
        lo, hi = np.zeros(len(t), np.int64), np.full(len(t), b - a, np.int64)
        want = np.where(enc, enclosing(s[rows_t], e[rows_t], par_local, seg_lo=lo, seg_hi=hi, t=t),
                        next_starting(s[rows_t], lo, hi, t))
        assert got.tolist() == np.where(want >= 0, rows_t[np.maximum(want, 0)], -1).tolist()


def test_zero_length_slices_at_one_time_are_siblings():
    """They nested inside each other (a real PyTorch trace's back-to-back zero-length calls went 9 deep for 8)."""
    s = np.array([0, 5, 5, 5, 200, 200], np.int64)
    e = np.array([100, 5, 5, 5, 200, 200], np.int64)
    got = nest_intervals(np.zeros(6, np.int64), s, e)
    assert got.depth.tolist() == [0, 1, 1, 1, 0, 0]
    assert got.parent.tolist() == [-1, 0, 0, 0, -1, -1]


def test_the_overlap_count_is_of_the_slices_that_cross_another():
    """It counted every slice of a track that did not nest (alexnet: 123 for 8)."""
    s = np.array([0, 5, 20, 22, 40], np.int64)
    e = np.array([10, 15, 30, 25, 41], np.int64)
    got = nest_intervals(np.zeros(5, np.int64), s, e)
    assert (got.overlapping_tracks, got.overlapping_slices) == (1, 1)
