"""Analyses on random traces (written and ingested for real) against a per-nanosecond brute-force oracle."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profiler
from profiler.analyses import idle_gaps, performance_bounds
from profiler.analyses import schema as rs
from tracer import TraceWriter
from tracer import schema as ts

SPAN = 80
ENGINES = ("Tensor", "Vector")

spans = st.tuples(st.integers(0, SPAN - 1), st.integers(1, 12))
traces = st.fixed_dictionaries({
    "instructions": st.lists(st.tuples(st.sampled_from(ENGINES), spans), min_size=1, max_size=12),
    "packets": st.lists(spans, min_size=1, max_size=8),
    "window": st.tuples(st.integers(0, SPAN), st.integers(0, SPAN)),
})


def _write(path: Path, instructions, packets) -> None:
    with TraceWriter(path, metadata={"dma_ddr_bandwidth": 1e9}, background_flush=False) as w:
        w.append_rows(ts.INSTRUCTION.name, [
            {ts.ID: i, ts.START_TS: s, ts.END_TS: min(s + d, SPAN), ts.DURATION_NS: min(s + d, SPAN) - s,
             ts.ENGINE: e, ts.OPCODE: "OP", ts.OPERANDS: "", ts.PC: i}
            for i, (e, (s, d)) in enumerate(instructions)])
        w.append_rows(ts.DMA_PACKET.name, [
            {ts.ID: i, ts.QUEUE_NAME: f"q{i % 2}", ts.START_TS: s, ts.END_TS: min(s + d, SPAN),
             ts.DURATION_NS: min(s + d, SPAN) - s, ts.READ_BYTES: 64, ts.WRITE_BYTES: 64, ts.TRANSFER_BYTES: 64}
            for i, (s, d) in enumerate(packets)])


def _mask(items, t0, t1):
    cells = np.zeros(SPAN, bool)
    for s, d in items:
        cells[s:min(s + d, SPAN)] = True
    return cells[t0:t1]


def _runs(mask, offset):
    out, k = [], 0
    while k < len(mask):
        if mask[k]:
            j = k
            while j < len(mask) and mask[j]:
                j += 1
            out.append((offset + k, offset + j))
            k = j
        else:
            k += 1
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces)
def test_active_time_and_idle_gaps_match_the_oracle(case):
    t0, t1 = sorted(case["window"])
    if t1 == t0:
        t1 = t0 + 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.trace"
        _write(path, case["instructions"], case["packets"])
        with profiler.open(path) as trace:
            bounds = performance_bounds(trace, t0, t1)
            gaps = idle_gaps(trace, t0, t1, engines=[*ENGINES, rs.DMA]).to_pylist()
            # the causes of only the gaps kept are looked up: a limited call is the full one cut (and re-ranked)
            cut = idle_gaps(trace, t0, t1, engines=[*ENGINES, rs.DMA], min_ns=3, limit=4).to_pylist()
    for engine in ENGINES:
        busy = _mask([x[1] for x in case["instructions"] if x[0] == engine], t0, t1)
        assert bounds[rs.ENGINE_ACTIVE_NS][engine] == int(busy.sum())
        got = sorted((g[rs.START_NS], g[rs.END_NS]) for g in gaps if g[rs.ENGINE] == engine)
        assert got == _runs(~busy, t0)
        for g in gaps:
            if g[rs.ENGINE] == engine and g[rs.NEXT_ID] is not None:  # the next instruction starts as the gap ends
                starting = [i for i, (e, (s, _d)) in enumerate(case["instructions"]) if e == engine
                            and s == g[rs.END_NS]]
                assert g[rs.NEXT_ID] == min(starting)
    dma = _mask(case["packets"], t0, t1)
    assert bounds[rs.MEMORY_BOUND_NS] == int(dma.sum())
    assert sorted((g[rs.START_NS], g[rs.END_NS]) for g in gaps if g[rs.ENGINE] == rs.DMA) == _runs(~dma, t0)
    durations = [g[rs.DUR_NS] for g in gaps]
    assert durations == sorted(durations, reverse=True)
    kept = [{**g, rs.RANK: i} for i, g in enumerate((g for g in gaps if g[rs.DUR_NS] >= 3), start=1)][:4]
    assert cut == kept


waiting = st.fixed_dictionaries({
    # (engine, start, duration, wait before the start); waits may begin before 0 and end after the window
    "instructions": st.lists(st.tuples(st.sampled_from(ENGINES), st.integers(0, SPAN - 1), st.integers(1, 6),
                                       st.integers(0, 30)), min_size=1, max_size=10),
    "window": st.tuples(st.integers(0, SPAN), st.integers(0, SPAN)),
})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(waiting)
def test_wait_summary_matches_the_oracle_in_any_window(case):
    """A wait's part inside the window, per engine, as a union: one cut by the window's end counted 0."""
    from profiler.analyses import dependency_waits, wait_summary

    t0, t1 = sorted(case["window"])
    if t1 == t0:
        t1 = t0 + 1
    rows = case["instructions"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.trace"
        with TraceWriter(path, metadata={"dma_ddr_bandwidth": 1e9}, background_flush=False) as w:
            w.append_rows(ts.INSTRUCTION.name, [
                {ts.ID: i, ts.START_TS: s, ts.END_TS: s + d, ts.DURATION_NS: d, ts.ENGINE: e, ts.OPCODE: "OP",
                 ts.OPERANDS: "", ts.PC: i, ts.EVT_WAIT_TIME_NS: wait}
                for i, (e, s, d, wait) in enumerate(rows)])
        with profiler.open(path) as trace:
            summary = {r[rs.ENGINE]: r for r in wait_summary(trace, t0, t1).to_pylist()}
            detail = dependency_waits(trace, t0, t1).to_pylist()
    for engine in ENGINES:
        cells = np.zeros(2 * SPAN + 40, bool)  # offset 40: waits start as early as -30
        shown = [(s, wait) for e, s, _d, wait in rows if e == engine and wait and s - wait < t1 and s > t0]
        for s, wait in shown:
            cells[40 + s - wait:40 + s] = True
        expected = int(cells[40 + t0:40 + t1].sum())
        if not shown:
            assert engine not in summary
            continue
        assert summary[engine][rs.WAIT_NS] == expected, (engine, shown, (t0, t1))
        assert summary[engine][rs.COUNT] == len(shown)
        assert summary[engine][rs.FRACTION] == expected / (t1 - t0)
    assert sum(r[rs.WAIT_NS] for r in detail) == sum(
        min(s, t1) - max(s - wait, t0) for _e, s, _d, wait in rows if wait and s - wait < t1 and s > t0)
