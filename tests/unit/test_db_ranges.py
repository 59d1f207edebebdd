"""Exact range totals against brute force: one track's busy time and count, the union across tracks (summary DMA)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profiler
from profiler import db_schema as dbs
from profiler.db.ranges import track_totals, union_busy_ns, union_length
from tracer import schema as ts
from tracer import write_trace


def _union(pairs, a, b):
    """Brute force: covered instants of [a, b) by the intervals (integer time)."""
    covered = set()
    for s, e in pairs:
        covered.update(range(max(s, a), min(e, b)))
    return len(covered)


@st.composite
def packets(draw):
    """DMA packets on (core, queue) with overlaps within and across queues, zero-length ones included."""
    n = draw(st.integers(1, 40))
    rows = []
    for _ in range(n):
        s = draw(st.integers(-50, 400))
        rows.append((draw(st.sampled_from([0, 1])), draw(st.sampled_from(["q0", "q1", "q2"])), s,
                     s + draw(st.one_of(st.just(0), st.integers(1, 30), st.integers(1, 200)))))
    return rows


def _write(path, rows, instructions):
    m = len(rows)
    tables = {"DmaPacket": {
        ts.ID: np.arange(m) + 100, ts.PCORE_IDX: [r[0] for r in rows], ts.QUEUE_NAME: [r[1] for r in rows],
        ts.START_TS: [r[2] for r in rows], ts.END_TS: [r[3] for r in rows],
        ts.DURATION_NS: [r[3] - r[2] for r in rows], ts.READ_BYTES: [8] * m, ts.WRITE_BYTES: [8] * m,
        ts.TRANSFER_BYTES: [10 * (i + 1) for i in range(m)], ts.VARIABLE: ["v"] * m}}
    k = len(instructions)
    if k:
        tables["Instruction"] = {
            ts.ID: np.arange(k) + 1, ts.START_TS: [s for s, _ in instructions], ts.END_TS: [e for _, e in instructions],
            ts.DURATION_NS: [e - s for s, e in instructions], ts.ENGINE: ["Tensor"] * k, ts.OPCODE: ["MATMUL"] * k,
            ts.OPERANDS: ["x"] * k, ts.PC: np.arange(k), ts.PCORE_IDX: [0] * k}
    write_trace(path, tables, metadata={"arch": "trn2"}, overwrite=True)


RANGES = st.lists(st.tuples(st.integers(-100, 450), st.integers(0, 500)), min_size=1, max_size=4)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(packets(), st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), max_size=25), RANGES)
def test_range_totals_match_brute_force(tmp_path_factory, rows, inst, ranges):
    instructions = sorted((s, s + d) for s, d in inst)
    path = tmp_path_factory.mktemp("rg") / "t.trace"
    _write(path, rows, instructions)
    with profiler.open(path) as trace:
        tracks = trace.tracks().to_pylist()
        queues = {}
        for t in tracks:
            if t[dbs.KIND] == "dma_queue":
                queues.setdefault(t[dbs.CORE], []).append(t[dbs.TRACK_ID])
        lo, hi = trace.time_range
        for a, length in [*ranges, (lo, hi - lo), (lo - 10, hi - lo + 20)]:
            b = a + length
            for core, ids in queues.items():
                mine = [(s, e) for c, _, s, e in rows if c == core]
                expect = _union(mine, a, b)
                assert trace.busy_ns(ids, a, b) == expect
                infos = [trace.track_info(t) for t in ids]
                assert union_busy_ns(trace._cursor(), infos, a, b, chunk_rows=3) == expect   # many chunks
            for t in tracks:
                name = t[ts.NAME]
                if t[dbs.KIND] == "dma_queue":
                    mine = [(s, e) for c, q, s, e in rows if c == t[dbs.CORE] and q == name]
                else:
                    mine = instructions
                busy, count = track_totals(trace._cursor(), trace.track_info(t[dbs.TRACK_ID]), a, b)
                assert busy == _union(mine, a, b) == trace.busy_ns(t[dbs.TRACK_ID], a, b)
                assert count == sum(1 for s, _ in mine if a <= s < b) == trace.event_count(t[dbs.TRACK_ID], a, b)
            if b > a:
                s = trace.summary(a, b)
                assert s["dma"]["active_time_ns"] == sum(
                    _union([(x, y) for c, _, x, y in rows if c == core], a, b) for core in queues)
                assert s["dma"]["transfer_bytes"] == sum(10 * (i + 1) for i, r in enumerate(rows) if a <= r[2] < b)
                if instructions:
                    assert s["engines"]["Tensor"]["instruction_count"] == sum(1 for x, _ in instructions if a <= x < b)


@given(st.lists(st.tuples(st.integers(-20, 60), st.integers(-5, 30)), max_size=30))
def test_union_length(pairs):
    s = np.array([p[0] for p in pairs], np.int64)
    e = s + np.array([p[1] for p in pairs], np.int64)
    assert union_length(s, e) == _union(list(zip(s.tolist(), e.tolist(), strict=True)), -100, 200)
