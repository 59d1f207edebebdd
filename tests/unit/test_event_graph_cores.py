"""The dependency graph keeps each NeuronCore's engines, streams, DMA queues and DMA engines apart: a trace of two
cores with the same engine and queue names, interleaved in time, gets no edge from one core to the other."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.event_graph import build_graph
from profiler.analyses.inputs import resolve_scope
from tracer import TraceWriter
from tracer import schema as ts


def _write(path) -> None:
    n = 12    # instructions alternate between the cores, each core's back to back on Tensor
    core = np.arange(n) % 2
    start = (np.arange(n) // 2) * 100 + core * 10
    end = start + 90
    m = 8     # packets: one per transfer, alternating cores, on queue qSyncIO0 / DMA engine 0 of each
    pcore = np.arange(m) % 2
    pstart = 2000 + (np.arange(m) // 2) * 100 + pcore * 10
    with TraceWriter(path, metadata={"arch": "trn2", "is_simulation": True}) as w:
        w.append(ts.INSTRUCTION.name, {
            ts.ID: np.arange(n, dtype=np.int64), ts.START_TS: start, ts.END_TS: end, ts.DURATION_NS: end - start,
            ts.ENGINE: ["Tensor"] * n, ts.OPCODE: ["MATMUL"] * n, ts.OPERANDS: [""] * n,
            ts.PC: np.arange(n, dtype=np.int64), ts.PCORE_IDX: core.astype(np.int64)})
        w.append(ts.DMA_PACKET.name, {
            ts.ID: np.arange(m, dtype=np.int64), ts.START_TS: pstart, ts.END_TS: pstart + 90,
            ts.DURATION_NS: np.full(m, 90, np.int64), ts.PCORE_IDX: pcore.astype(np.int64),
            ts.DMA_PACKET.column("packet_idx").name: np.zeros(m, np.int32),
            rs.T_PACKET_AGGREGATION_ID: np.arange(m, dtype=np.int64),
            ts.ENGINE_IDX: np.zeros(m, np.int64), ts.QUEUE_NAME: ["qSyncIO0"] * m,
            ts.READ_BYTES: np.full(m, 512, np.int64), ts.WRITE_BYTES: np.full(m, 512, np.int64),
            ts.TRANSFER_BYTES: np.full(m, 512, np.int64)})


def test_no_edge_joins_two_cores(tmp_path):
    _write(tmp_path / "two.trace")
    with profiler.open(tmp_path / "two.trace") as trace:
        graph = build_graph(trace, resolve_scope(trace))
        core_of = dict(trace.sql("SELECT id, pcore_idx FROM Instruction").fetchall())
        pkt_core = dict(trace.sql("SELECT id, pcore_idx FROM DmaPacket").fetchall())
    node_core = [core_of[i] if t == "Instruction" else pkt_core[i]
                 for t, i in zip(graph.table.tolist(), graph.ident.tolist(), strict=True)]
    pairs = list(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    assert pairs and all(node_core[u] == node_core[v] for u, v in pairs)
    # each core's own chains are there: 5 stream edges per core, 3 queue edges per core
    kinds = graph.edge_kind.tolist()
    assert kinds.count(rs.EDGE_STREAM) == 10 and kinds.count(rs.EDGE_QUEUE) == 6


# -- random traces against a brute-force oracle of the ordering edges -----------------------------------------------
CASES = st.fixed_dictionaries({
    # (core, engine, track of the engine, duration); starts are distinct (a random permutation), ids are issue order
    "instructions": st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["Tensor", "Vector"]), st.booleans(),
                                       st.integers(1, 40)), min_size=1, max_size=14),
    # (core, queue group, DMA engine, duration): one packet per transfer
    "packets": st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["qSyncIO", "qGpSimdIO"]), st.integers(0, 1),
                                  st.integers(1, 40)), max_size=10),
    "seed": st.integers(0, 2**16),
})


def _write_random(path, case) -> tuple[list[tuple], list[tuple]]:
    rng = np.random.default_rng(case["seed"])
    ins, pkts = case["instructions"], case["packets"]
    s_ins = rng.permutation(200)[:len(ins)] * 3          # distinct starts: time order is unambiguous
    s_pkt = 1000 + rng.permutation(200)[:len(pkts)] * 3
    rows_i = [(i, c, e, f"{e}{'Matrix' if t and e == 'Tensor' else ''}", int(s), int(s) + d)
              for i, ((c, e, t, d), s) in enumerate(zip(ins, s_ins, strict=True))]
    rows_p = [(j, c, f"{g}{q}", q, int(s), int(s) + d) for j, ((c, g, q, d), s) in enumerate(zip(pkts, s_pkt,
                                                                                                  strict=True))]
    with TraceWriter(path, metadata={"arch": "trn2"}, background_flush=False) as w:
        w.append(ts.INSTRUCTION.name, {
            ts.ID: np.array([r[0] for r in rows_i], np.int64), ts.PCORE_IDX: np.array([r[1] for r in rows_i], np.int64),
            ts.ENGINE: [r[2] for r in rows_i], ts.TIMELINE_TRACK: [r[3] for r in rows_i],
            ts.START_TS: np.array([r[4] for r in rows_i], np.int64),
            ts.END_TS: np.array([r[5] for r in rows_i], np.int64),
            ts.DURATION_NS: np.array([r[5] - r[4] for r in rows_i], np.int64), ts.OPCODE: ["OP"] * len(rows_i),
            ts.OPERANDS: [""] * len(rows_i), ts.PC: np.zeros(len(rows_i), np.int64)})
        if rows_p:
            m = len(rows_p)
            w.append(ts.DMA_PACKET.name, {
                ts.ID: np.arange(m, dtype=np.int64), ts.PCORE_IDX: np.array([r[1] for r in rows_p], np.int64),
                ts.QUEUE_NAME: [r[2] for r in rows_p], ts.ENGINE_IDX: np.array([r[3] for r in rows_p], np.int64),
                ts.START_TS: np.array([r[4] for r in rows_p], np.int64),
                ts.END_TS: np.array([r[5] for r in rows_p], np.int64),
                ts.DURATION_NS: np.array([r[5] - r[4] for r in rows_p], np.int64),
                ts.DMA_PACKET.column("packet_idx").name: np.zeros(m, np.int32),
                rs.T_PACKET_AGGREGATION_ID: np.arange(m, dtype=np.int64),
                ts.READ_BYTES: np.full(m, 64, np.int64), ts.WRITE_BYTES: np.full(m, 64, np.int64),
                ts.TRANSFER_BYTES: np.full(m, 64, np.int64)})
    return rows_i, rows_p


def _chained(rows, group, order) -> set[tuple]:
    """Brute force: consecutive rows of each group in ``order``, kept when the first ends by the second's start."""
    out = set()
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault(group(r), []).append(r)
    for members in groups.values():
        members.sort(key=order)
        for a, b in itertools.pairwise(members):
            if a[5] <= b[4]:
                out.add((a, b))
    return out


@settings(max_examples=25, deadline=None)
@given(case=CASES)
def test_ordering_edges_match_a_brute_force(case):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.trace"
        rows_i, rows_p = _write_random(path, case)
        with profiler.open(path) as trace:
            graph = build_graph(trace, resolve_scope(trace))
    want = (_chained(rows_i, lambda r: (r[1], r[3]), lambda r: r[4])       # per core and track, in time
            | _chained(rows_i, lambda r: (r[1], r[2]), lambda r: r[0])     # per core and engine, in program order
            | _chained(rows_p, lambda r: (r[1], r[2]), lambda r: r[4])     # per core and queue, in time
            | _chained(rows_p, lambda r: (r[1], r[3]), lambda r: r[4]))    # per core and DMA engine, in time
    def key(n):
        return ("I" if graph.table[n] == "Instruction" else "P", int(graph.ident[n]))

    got = {(key(u), key(v)) for u, v in zip(graph.src.tolist(), graph.dst.tolist(), strict=True)}
    kind = {id(r): "I" for r in rows_i} | {id(r): "P" for r in rows_p}
    expected = {((kind[id(a)], a[0]), (kind[id(b)], b[0])) for a, b in want}
    assert got == expected
    if len(rows_i) >= 8:   # (not vacuous: a trace of a few instructions already has edges)
        assert got
