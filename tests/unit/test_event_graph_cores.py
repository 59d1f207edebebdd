"""The dependency graph keeps each NeuronCore's engines, streams, DMA queues and DMA engines apart: a trace of two
cores with the same engine and queue names, interleaved in time, gets no edge from one core to the other."""

from __future__ import annotations

import numpy as np

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
