"""Longest paths in directed acyclic graphs with node and edge weights (the critical-path algorithm).

Pure and independent of traces: nodes are ``0..n-1``, edges are parallel ``src``/``dst`` arrays.  The length of a
path is the sum of its nodes' weights plus the sum of its edges' weights.  Dynamic programming over a topological
order: ``O(nodes + edges)``, compiled with numba for graphs of :data:`MIN_GRAPH` nodes and edges or more (the same
sums in the same order, so the same path; ``TRNPROF_DAG_KERNEL=0`` / ``=1`` forces Python / the kernel).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class LongestPath:
    """A longest path: its nodes in order, the edge index used to reach each node (-1 for the first), its length."""

    nodes: np.ndarray
    edges: np.ndarray
    length: float


def topological_order(num_nodes: int, src: np.ndarray, dst: np.ndarray,
                      hint: np.ndarray | None = None) -> np.ndarray:
    """A topological order of the nodes; ``hint`` (e.g. nodes sorted by start time) is used when it is one.

    Raises:
        ValueError: the graph has a cycle.
    """
    if hint is not None and len(hint) == num_nodes:
        pos = np.empty(num_nodes, dtype=np.int64)
        pos[hint] = np.arange(num_nodes)
        if not len(src) or bool(np.all(pos[src] < pos[dst])):
            return np.asarray(hint, dtype=np.int64)
    indegree = np.bincount(dst, minlength=num_nodes).tolist() if len(dst) else [0] * num_nodes
    out_start, out_dst = _csr(num_nodes, src, dst)
    starts = out_start.tolist()
    targets = out_dst.tolist()
    ready = [v for v in range(num_nodes) if indegree[v] == 0]
    ready.reverse()
    order: list[int] = []
    while ready:
        v = ready.pop()
        order.append(v)
        for t in targets[starts[v]:starts[v + 1]]:
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    if len(order) != num_nodes:
        raise ValueError("the graph has a cycle; a dependency graph must be acyclic")
    return np.asarray(order, dtype=np.int64)


def _csr(num_nodes: int, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row pointers and values of ``values`` grouped by ``keys`` (stable within a key)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(num_nodes + 1, dtype=np.int64)
    if len(keys):
        np.cumsum(np.bincount(keys, minlength=num_nodes), out=ptr[1:])
    return ptr, np.asarray(values)[order]


def longest_path(num_nodes: int, node_weight: Sequence[float] | np.ndarray, src: Sequence[int] | np.ndarray,
                 dst: Sequence[int] | np.ndarray, edge_weight: Sequence[float] | np.ndarray | None = None, *,
                 sink: int | Sequence[int] | np.ndarray | None = None,
                 order_hint: np.ndarray | None = None) -> LongestPath:
    """The heaviest path of a DAG, ending at ``sink`` (the heaviest one ending at any of several sinks given, the
    first listed among equals; or wherever the heaviest path ends).

    Weights are non-negative, so the path always continues through a predecessor while there is one: it starts at
    a node without predecessors.  Among equally heavy predecessors the edge listed first wins, so callers list
    edges in order of preference.

    Args:
        num_nodes: number of nodes.
        node_weight: weight of each node (e.g. its duration); must be non-negative.
        src: edge sources (the predecessor).
        dst: edge targets (the dependent).
        edge_weight: weight of each edge; default 0.
        sink: the node the path must end at.
        order_hint: a candidate topological order, used when valid (saves the sort).

    Raises:
        ValueError: a cycle, an edge naming a node that does not exist, or a bad sink.
    """
    w = np.asarray(node_weight, dtype=np.float64)
    s = np.asarray(src, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    ew = np.zeros(len(s)) if edge_weight is None else np.asarray(edge_weight, dtype=np.float64)
    if w.shape != (num_nodes,) or s.shape != d.shape or ew.shape != s.shape:
        raise ValueError("node_weight needs one value per node and src, dst, edge_weight one per edge")
    if len(s) and (s.min() < 0 or d.min() < 0 or s.max() >= num_nodes or d.max() >= num_nodes):
        raise ValueError("an edge names a node that does not exist")
    if (len(w) and w.min() < 0) or (len(ew) and ew.min() < 0) or not (np.isfinite(w).all() and np.isfinite(ew).all()):
        raise ValueError("node and edge weights must be finite and non-negative")
    sinks = None if sink is None else np.atleast_1d(np.asarray(sink, dtype=np.int64))
    if sinks is not None and (not len(sinks) or sinks.min() < 0 or sinks.max() >= num_nodes):
        raise ValueError(f"sink {sink} is not a node")
    if num_nodes == 0:
        return LongestPath(np.zeros(0, np.int64), np.zeros(0, np.int64), 0.0)
    order = topological_order(num_nodes, s, d, order_hint)
    in_ptr, in_edges = _csr(num_nodes, d, np.arange(len(s)))
    kernel = _compiled() if _use_kernel(num_nodes + len(s)) else None
    if kernel is not None:
        dist_a = np.zeros(num_nodes, np.float64)
        best_a = np.full(num_nodes, -1, np.int64)
        kernel(order, in_ptr, in_edges.astype(np.int64), s, ew, w, dist_a, best_a)
        dist, best = dist_a.tolist(), best_a.tolist()
    else:
        dist, best = _relax(order, in_ptr, in_edges, s, ew, w)
    src_l = s.tolist()
    end = int(np.argmax(dist)) if sinks is None else int(sinks[int(np.argmax(np.asarray(dist)[sinks]))])
    nodes = [end]
    edges = []
    while best[nodes[-1]] >= 0:
        e = best[nodes[-1]]
        edges.append(e)
        nodes.append(src_l[e])
    nodes.reverse()
    edges.reverse()
    return LongestPath(np.asarray(nodes, np.int64), np.asarray([-1, *edges], np.int64), float(dist[end]))



def _relax(order: np.ndarray, in_ptr: np.ndarray, in_edges: np.ndarray, src: np.ndarray, ew: np.ndarray,  # noqa: PLR0917
           w: np.ndarray) -> tuple[list[float], list[int]]:
    """The dynamic programme in Python: per node in ``order``, the heaviest path ending there and the edge it came
    in by (the first listed among equals)."""
    ptr = in_ptr.tolist()
    edges_in = in_edges.tolist()
    src_l = src.tolist()
    ew_l = ew.tolist()
    w_l = w.tolist()
    dist = [0.0] * len(w_l)
    best = [-1] * len(w_l)
    for v in order.tolist():
        arg = -1
        top = 0.0
        for e in edges_in[ptr[v]:ptr[v + 1]]:
            cand = dist[src_l[e]] + ew_l[e]
            if arg < 0 or cand > top:
                top = cand
                arg = e
        best[v] = arg
        dist[v] = w_l[v] + top
    return dist, best


def _relax_kernel(order: np.ndarray, in_ptr: np.ndarray, in_edges: np.ndarray, src: np.ndarray,  # noqa: PLR0917
                  ew: np.ndarray, w: np.ndarray, dist: np.ndarray, best: np.ndarray) -> None:
    """:func:`_relax` for numba, into ``dist`` and ``best``: the same float64 sums in the same order, so the same
    path.  (Two forms on purpose: run as plain Python, this one indexes numpy arrays, ~3x slower than
    :func:`_relax`'s lists on the small graphs that stay in Python; a test runs both on random DAGs.)"""
    for v in order:
        arg = -1
        top = 0.0
        for j in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[j]
            cand = dist[src[e]] + ew[e]
            if arg < 0 or cand > top:
                top = cand
                arg = e
        best[v] = arg
        dist[v] = w[v] + top


#: Environment switch: ``0`` keeps the dynamic programme in Python, ``1`` compiles it whatever the graph's size.
ENV_SWITCH = "TRNPROF_DAG_KERNEL"
#: Smallest graph (nodes + edges) relaxed by the compiled kernel: below it, Python (~1 us per edge) costs less than
#: loading the kernel (numba's import and on-disk cache, ~0.5 s the first time in a process).
MIN_GRAPH = 200_000
_lock = threading.Lock()
_state: dict[str, Any] = {}


def _use_kernel(size: int) -> bool:
    switch = os.environ.get(ENV_SWITCH, "")
    return switch != "0" and (switch == "1" or size >= MIN_GRAPH)


def _compiled() -> Any:
    """The numba-compiled :func:`_relax_kernel` (None when numba is missing or broken: Python then)."""
    with _lock:
        if "fn" not in _state:
            fn = None
            try:
                import numba

                fn = numba.njit(nogil=True, cache=True, boundscheck=False)(_relax_kernel)
                dist, best = np.zeros(2), np.full(2, -1, np.int64)
                fn(np.array([0, 1]), np.array([0, 0, 1]), np.array([0]), np.array([0]), np.array([1.0]),
                   np.array([2.0, 3.0]), dist, best)
                if dist.tolist() != [2.0, 6.0] or best.tolist() != [-1, 0]:
                    raise RuntimeError("kernel self-check failed")
            except ImportError:  # pragma: no cover - only where numba is not installed
                fn = None
            except Exception as exc:  # pragma: no cover - a broken numba installation
                warnings.warn(f"trnprof: the compiled longest-path kernel is unavailable ({type(exc).__name__}: "
                              f"{exc}); using Python", RuntimeWarning, stacklevel=3)
                fn = None
            _state["fn"] = fn
        return _state["fn"]
