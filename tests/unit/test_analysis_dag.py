"""Longest paths on random DAGs against an exhaustive oracle that enumerates every path."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.analyses.dag import longest_path, topological_order
from profiler.analyses.hbm_regions import union_area


@st.composite
def dags(draw):
    """A random DAG: nodes 0..n-1 relabelled by a random permutation, edges from a lower to a higher rank."""
    n = draw(st.integers(1, 8))
    perm = draw(st.permutations(range(n)))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    src = [perm[i] for i, _ in chosen]
    dst = [perm[j] for _, j in chosen]
    w = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    ew = draw(st.lists(st.integers(0, 5), min_size=len(chosen), max_size=len(chosen)))
    sink = draw(st.one_of(st.none(), st.integers(0, n - 1),
                          st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))  # several sinks
    return n, w, src, dst, ew, sink


def _all_paths(n, src, dst):
    """Every path (as node and edge lists), by depth-first enumeration from every node."""
    out_edges = {v: [k for k, s in enumerate(src) if s == v] for v in range(n)}
    paths = []

    def walk(nodes, edges):
        paths.append((nodes, edges))
        for k in out_edges[nodes[-1]]:
            walk([*nodes, dst[k]], [*edges, k])

    for v in range(n):
        walk([v], [])
    return paths


def _length(path, w, ew):
    nodes, edges = path
    return sum(w[v] for v in nodes) + sum(ew[k] for k in edges)


@settings(max_examples=300, deadline=None)
@given(dags())
def test_longest_path_matches_exhaustive_search(dag):
    n, w, src, dst, ew, sink = dag
    found = longest_path(n, w, src, dst, ew, sink=sink)
    sinks = None if sink is None else [sink] if isinstance(sink, int) else sink
    candidates = [p for p in _all_paths(n, src, dst) if sinks is None or p[0][-1] in sinks]
    assert found.length == max(_length(p, w, ew) for p in candidates)
    # the path returned is a real path of that length, ending at the sink and starting at a node with no predecessor
    nodes, edges = found.nodes.tolist(), found.edges.tolist()
    assert edges[0] == -1
    for k, (u, v) in zip(edges[1:], itertools.pairwise(nodes), strict=True):
        assert (src[k], dst[k]) == (u, v)
    assert _length((nodes, edges[1:]), w, ew) == found.length
    assert sinks is None or nodes[-1] in sinks
    assert nodes[0] not in dst


@settings(max_examples=100, deadline=None)
@given(dags())
def test_topological_order_ignores_a_wrong_hint(dag):
    n, _w, src, dst, _ew, _sink = dag
    order = topological_order(n, np.array(src, np.int64), np.array(dst, np.int64), hint=np.arange(n)[::-1])
    pos = {v: i for i, v in enumerate(order.tolist())}
    assert sorted(pos) == list(range(n))
    assert all(pos[s] < pos[d] for s, d in zip(src, dst, strict=True))


def test_ties_prefer_the_edge_listed_first():
    # node 2 can be reached from 0 or 1 with equal weight: the first-listed edge (from 1) wins
    found = longest_path(3, [5, 5, 1], [1, 0], [2, 2], sink=2)
    assert found.nodes.tolist() == [1, 2]


def test_bad_graphs_are_refused():
    with pytest.raises(ValueError, match="cycle"):
        longest_path(2, [1, 1], [0, 1], [1, 0])
    with pytest.raises(ValueError, match="does not exist"):
        longest_path(2, [1, 1], [0], [5])
    with pytest.raises(ValueError, match="non-negative"):
        longest_path(2, [1, -1], [0], [1])
    assert longest_path(0, [], [], []).nodes.tolist() == []


rects = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12), st.integers(0, 12)),
                 max_size=8)


@settings(max_examples=300, deadline=None)
@given(rects)
def test_union_area_matches_a_grid(boxes):
    grid = np.zeros((12, 12), bool)
    for r0, r1, c0, c1 in boxes:
        grid[r0:r1, c0:c1] = True
    cols = [np.array([b[k] for b in boxes], np.int64) for k in range(4)]
    assert union_area(*cols) == int(grid.sum())


@settings(max_examples=150, deadline=None)
@given(dags(), st.floats(0, 1e6, allow_nan=False))
def test_the_compiled_kernel_finds_the_same_path_as_python(dag, scale):
    """``TRNPROF_DAG_KERNEL=1`` (numba) against ``=0`` (Python) on the same graphs, fractional weights included:
    the same sums in the same order give the same path, length and tie choices."""
    import os

    n, w, src, dst, ew, sink = dag
    wf = [x * scale / 7 for x in w]
    results = []
    for switch in ("0", "1"):
        os.environ["TRNPROF_DAG_KERNEL"] = switch
        try:
            results.append(longest_path(n, wf, src, dst, ew, sink=sink))
        finally:
            os.environ.pop("TRNPROF_DAG_KERNEL", None)
    a, b = results
    assert a.nodes.tolist() == b.nodes.tolist() and a.edges.tolist() == b.edges.tolist() and a.length == b.length
