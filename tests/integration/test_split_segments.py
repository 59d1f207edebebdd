"""The dependency graph of a recording whose DMA shares split around other queues' packets (trace format 2.5): a
DMA node is a run of one transfer's packets back to back on one queue, never a stretch holding another queue's
packets, and edges to and from packets land on the run that holds them."""

from __future__ import annotations

import numpy as np
import pytest

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.critical_path import chain_to, critical_path
from profiler.analyses.event_graph import build_graph
from profiler.analyses.inputs import resolve_scope
from tests.unit.test_sim_dependencies import _stores_then_loads
from tracer.sim import run_kernel


@pytest.fixture(scope="module")
def split_recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("split") / "split.trace"
    run_kernel(_stores_then_loads, {"loads": 24}, arch="trn2", overrides={"dve_clock_ghz": 0.5}, trace_path=path)
    with profiler.open(path) as t:
        yield t, build_graph(t, resolve_scope(t))


def _packets(t):
    return t.sql("SELECT id, packet_aggregation_id AS agg, queue_name AS queue, engine_idx AS engine, start_ts AS s, "
                 "end_ts AS e FROM DmaPacket ORDER BY id").to_arrow_table().to_pydict()


def test_a_dma_node_is_a_run_of_its_own_packets(split_recording):
    t, graph = split_recording
    pk = _packets(t)
    dma = np.flatnonzero(graph.kind == rs.NODE_DMA)
    by_last = {i: k for k, i in enumerate(pk["id"])}
    pairs_with_two_runs = 0
    seen: dict[tuple[int, str], int] = {}
    for n in dma.tolist():
        last = by_last[int(graph.ident[n])]
        agg, queue, engine = pk["agg"][last], pk["queue"][last], pk["engine"][last]
        s, e = int(graph.start[n]), int(graph.end[n])
        inside = [k for k in range(len(pk["id"])) if pk["engine"][k] == engine and s <= pk["s"][k] < e]
        # every packet its engine moved in the node's span is the node's transfer's, on its queue, back to back
        assert all(pk["agg"][k] == agg and pk["queue"][k] == queue for k in inside)
        assert sum(pk["e"][k] - pk["s"][k] for k in inside) == e - s
        seen[(agg, queue)] = seen.get((agg, queue), 0) + 1
        pairs_with_two_runs += seen[(agg, queue)] == 2
    assert pairs_with_two_runs > 0   # (the case: shares split into runs)


def test_edges_from_a_split_share_start_at_the_run_holding_the_packet(split_recording):
    """The chain to a packet of a share's first run ends at that run, not at the share's last one; the critical
    path's steps never overlap."""
    t, graph = split_recording
    pk = _packets(t)
    row = {i: k for k, i in enumerate(pk["id"])}
    runs: dict[tuple[int, str], list[int]] = {}
    for n in np.flatnonzero(graph.kind == rs.NODE_DMA).tolist():
        k = row[int(graph.ident[n])]
        runs.setdefault((pk["agg"][k], pk["queue"][k]), []).append(n)
    split = [min(nodes, key=lambda n: graph.start[n]) for nodes in runs.values() if len(nodes) > 1]
    assert split
    n = split[0]
    chain = chain_to(t, "DmaPacket", int(graph.ident[n]), graph=graph)
    assert chain.column(rs.END_NS).to_pylist()[-1] == int(graph.end[n])
    path = critical_path(t)
    s, e = np.asarray(path.column(rs.START_NS)), np.asarray(path.column(rs.END_NS))
    assert (s[1:] >= e[:-1]).all()
