"""The dependency chain ending at one event (profiler.analyses.critical_path.chain_to), against a brute-force
longest-path oracle over the same dependency graph, on real recordings."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.critical_path import chain_to, critical_path
from profiler.analyses.event_graph import build_graph
from profiler.analyses.inputs import resolve_scope
from profiler.errors import QueryError

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.fixture(scope="module", params=["matmul_naive-trn2.trace", "mlp-trn2.trace"])
def recording(request, tmp_path_factory):
    from profiler.cli import main

    db = tmp_path_factory.mktemp("chain") / "t.duckdb"     # (no cache written beside the bundled samples)
    assert main(["ingest", str(SAMPLES / request.param), "-o", str(db)]) == 0
    with profiler.open(db) as t:
        graph = build_graph(t, resolve_scope(t))
        yield t, graph


def _heaviest_to(graph, sink: int) -> int:
    """Brute force: the weight (sum of durations) of the heaviest path ending at ``sink``, by relaxing the edges
    in order of their source's end (edges go forward in time) -- independent of profiler.analyses.dag."""
    w = (graph.end - graph.start).astype(np.int64)
    best = w.copy()
    order = np.argsort(graph.end[graph.src], kind="stable")
    for _ in range(2):   # a second pass changes nothing when the edges were taken in time order
        for e in order.tolist():
            u, v = int(graph.src[e]), int(graph.dst[e])
            best[v] = max(best[v], best[u] + w[v])
    return int(best[sink])


@settings(max_examples=25, deadline=None)
@given(pick=st.floats(0, 1))
def test_the_chain_is_a_heaviest_path_of_dependencies_ending_at_the_event(recording, pick):
    trace, graph = recording
    instructions = np.flatnonzero(graph.table == "Instruction")
    node = int(instructions[int(pick * (len(instructions) - 1))])
    chain = chain_to(trace, "Instruction", int(graph.ident[node]))
    rows = chain.to_pylist()
    assert rows[-1][rs.ID] == graph.ident[node] and rows[-1][rs.TABLE] == "Instruction"
    # each step is joined to the next by an edge of the graph, forward in time
    edges = set(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    key = {(str(t), int(i)): n for n, (t, i) in enumerate(zip(graph.table, graph.ident, strict=True))}
    nodes = [key[(r[rs.TABLE], r[rs.ID])] for r in rows]
    for u, v in itertools.pairwise(nodes):
        assert (u, v) in edges and graph.end[u] <= graph.start[v]
    assert [r[rs.STEP] for r in rows] == list(range(len(rows)))
    assert all(r[rs.GAP_BEFORE_NS] >= 0 for r in rows)
    # ... and no path to the event is heavier
    assert sum(r[rs.DUR_NS] for r in rows) == _heaviest_to(graph, node)
    # the graph the caller keeps gives the same chain
    assert chain_to(trace, "Instruction", int(graph.ident[node]), graph=graph).equals(chain)


def test_the_chain_to_the_last_event_is_the_critical_path_and_a_chain_to_a_step_is_its_prefix(recording):
    trace, graph = recording
    path = critical_path(trace).to_pylist()
    last = path[-1]
    assert chain_to(trace, last[rs.TABLE], last[rs.ID], graph=graph).to_pylist() == path
    middle = path[len(path) // 2]
    if middle[rs.TABLE] == "Instruction":
        got = chain_to(trace, "Instruction", middle[rs.ID]).to_pylist()
        assert [(r[rs.TABLE], r[rs.ID]) for r in got] == [(r[rs.TABLE], r[rs.ID]) for r in path[:len(got)]]


def test_a_packet_leads_to_its_transfers_stretch_on_its_queue(recording):
    trace, _graph = recording
    packet = trace.sql("SELECT id, start_ts, queue_name FROM DmaPacket ORDER BY start_ts LIMIT 1 OFFSET 100"
                       ).fetchall()[0]
    rows = chain_to(trace, "DmaPacket", packet[0]).to_pylist()
    assert rows[-1][rs.KIND] == rs.NODE_DMA and rows[-1][rs.RESOURCE] == packet[2]
    assert rows[-1][rs.START_NS] <= packet[1] <= rows[-1][rs.END_NS]


@pytest.mark.parametrize(("table", "ident", "message"), [
    ("Span", 1, "leads to instructions and DMA packets"),
    ("Flow", 1, "leads to instructions and DMA packets"),
    ("Instruction", 10**12, "no row with id"),
])
def test_what_has_no_chain_is_a_one_line_error(recording, table, ident, message):
    trace, _graph = recording
    with pytest.raises(QueryError, match=message) as info:
        chain_to(trace, table, ident)
    assert "\n" not in str(info.value)


def test_a_window_without_dma_segments_has_a_critical_path(recording):
    """A window whose instructions' flows name DMA packets it does not hold (the graph once failed there)."""
    trace, _graph = recording
    first = trace.sql("SELECT min(start_ts) FROM Instruction").fetchall()[0][0]
    early = trace.sql(f"SELECT count(*) FROM DmaPacket WHERE start_ts <= {first}").fetchall()[0][0]
    assert early == 0    # (the samples start with an instruction: their first DMA trigger)
    path = critical_path(trace, first, first + 1)
    assert path.num_rows >= 1 and set(path.column(rs.TABLE).to_pylist()) == {"Instruction"}


def test_every_matmul_is_joined_to_the_loadstationary_issued_before_it(recording):
    """The PE array multiplies with the weights its LDWEIGHTS loaded: the graph joins them in program order even
    when the next LDWEIGHTS, loading in the background, starts with the MATMUL (ordering the engine's instructions
    by start time lost the edge, and the critical path then showed the MATMUL's wait as an unexplained gap)."""
    trace, graph = recording
    pairs = trace.sql("SELECT l.id, m.id FROM Instruction m JOIN Instruction l ON l.id = m.id - 1 "
                      "WHERE m.opcode = 'MATMUL' AND l.opcode = 'LDWEIGHTS' AND l.end_ts <= m.start_ts").fetchall()
    assert len(pairs) > 10
    node = {int(i): n for n, i in enumerate(graph.ident.tolist()) if graph.table[n] == "Instruction"}
    edges = set(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    assert all((node[ldw], node[mm]) in edges for ldw, mm in pairs)


def test_transfers_sharing_a_dma_engine_are_joined_across_queues(recording):
    """Queue q of every group is served by DMA engine q: a transfer can wait for another group's packets on its
    engine, so consecutive segments on one engine (brute force, by start time) are joined whatever their queue."""
    trace, graph = recording
    engine_of = dict(trace.sql("SELECT DISTINCT queue_name, engine_idx FROM DmaPacket").fetchall())
    segs = np.flatnonzero(graph.table == "DmaPacket")
    edges = set(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    by_engine: dict[int, list[int]] = {}
    for n in segs.tolist():
        by_engine.setdefault(engine_of[graph.resource[n]], []).append(n)
    joined = across = 0
    for nodes in by_engine.values():
        nodes.sort(key=lambda n: (graph.start[n], graph.end[n]))
        for u, v in itertools.pairwise(nodes):
            if graph.end[u] <= graph.start[v]:
                assert (u, v) in edges
                joined += 1
                across += graph.resource[u] != graph.resource[v]
    assert joined > 0
    groups = len(set(engine_of)) // len(set(engine_of.values()))   # queue groups (mlp: loads on Sync only)
    assert (across > 0) == (groups > 1)                               # (matmul_naive: stores on GpSimd too)
    assert (rs.EDGE_DMA_ENGINE in set(graph.edge_kind.tolist())) == (groups > 1)
