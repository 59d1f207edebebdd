"""Every analysis on the hand-made trace of :mod:`tests.golden.handmade`, against answers worked out by hand."""

from __future__ import annotations

import json

import pytest

import profiler
from profiler.analyses import (
    bounds_table,
    critical_path,
    critical_path_breakdown,
    dependency_waits,
    dma_efficiency,
    idle_gaps,
    performance_bounds,
    recommendations,
    small_transfer_regions,
    time_by,
    wait_sentences,
    wait_summary,
)
from profiler.analyses import schema as rs
from profiler.errors import QueryError
from tests.golden.handmade import write_handmade


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = write_handmade(tmp_path_factory.mktemp("handmade") / "hm.trace")
    with profiler.open(path) as t:
        yield t


def test_bounds_whole_kernel(trace):
    b = performance_bounds(trace)
    assert (b[rs.START_NS], b[rs.END_NS]) == (0, 370)  # first DMA start to last DMA end
    expected = {
        rs.TOTAL_TIME_NS: 370, rs.MEMORY_BOUND_NS: 115, rs.MEMORY_BOUND_IDEAL_NS: 62.5,
        rs.MEMORY_BOUND_NO_RELOADS_NS: 37.5, rs.COMPUTE_BOUND_NS: 150, rs.COMPUTE_BOUND_IDEAL_NS: 70,
        rs.COMPUTE_BOUND_IDEAL_USEFUL_NS: 50, rs.PERFECT_PIPELINE_NS: 150,
        rs.DMA_IDLE_GAP_NS: 255, rs.DMA_INEFFICIENCY_GAP_NS: 52.5, rs.EXCESS_TRAFFIC_GAP_NS: 25,
        rs.TENSOR_IDLE_GAP_NS: 220, rs.TENSOR_UNDERUSE_GAP_NS: 80, rs.TRANSPOSE_GAP_NS: 20,
        rs.SERIALIZATION_GAP_NS: 220,
    }
    for key, value in expected.items():
        assert b[key] == pytest.approx(value), key
    assert b[rs.BOTTLENECK] == "Tensor"
    assert b[rs.ENGINE_ACTIVE_NS] == {"Tensor": 150, "Vector": 60, "Scalar": 0, "GpSimd": 10, "Sync": 20, "DMA": 115}
    inputs = b[rs.INPUTS]
    # the 4-byte instruction fetch is not transferred data; the reloaded tile counts once in the necessary bytes
    assert (inputs[rs.DMA_TRANSFER_BYTES], inputs[rs.NECESSARY_BYTES]) == (250, 150)
    assert (inputs[rs.HW_FLOPS], inputs[rs.TRANSPOSE_FLOPS]) == (70, 20)
    # bottleneck-aware: removing DMA overheads cannot beat the Tensor engine's 150 ns; compute ones the DMA's 115
    assert b[rs.SPEEDUPS][rs.MEMORY_BOUND_NO_RELOADS_NS] == pytest.approx(370 / 150)
    assert b[rs.SPEEDUPS][rs.COMPUTE_BOUND_IDEAL_USEFUL_NS] == pytest.approx(370 / 115)
    assert b[rs.SPEEDUPS][rs.PERFECT_PIPELINE_NS] == pytest.approx(370 / 150)
    json.dumps(b)  # JSON-ready as returned
    table = bounds_table(b)
    assert table.column(rs.BOUND).to_pylist() == list(rs.BOUND_KEYS)
    assert table.column(rs.GAP_NS).to_pylist() == pytest.approx([255, 52.5, 25, 220, 80, 20, 220])


def test_bounds_window_and_overrides(trace):
    b = performance_bounds(trace, 80, 230, necessary_bytes=400)
    assert b[rs.TOTAL_TIME_NS] == 150
    assert b[rs.COMPUTE_BOUND_NS] == 150 and b[rs.MEMORY_BOUND_NS] == 0  # P1 ends exactly at 80
    assert b[rs.MEMORY_BOUND_IDEAL_NS] == 0  # no packet starts inside
    assert b[rs.MEMORY_BOUND_NO_RELOADS_NS] == pytest.approx(100)  # 400 B at 4 B/ns, as given
    assert b[rs.BOTTLENECK] == "Tensor" and b[rs.SERIALIZATION_GAP_NS] == 0


def test_bounds_bad_window(trace):
    with pytest.raises(QueryError, match="empty window"):
        performance_bounds(trace, 100, 100)
    with pytest.raises(QueryError, match="integer"):
        performance_bounds(trace, "0", 10)
    with pytest.raises(QueryError, match="no core 3"):
        performance_bounds(trace, core=3)
    for bad in (-1, 2**40, "0", True):  # said as a core index, not as a time
        with pytest.raises(QueryError, match=r"core must be a core index \(pcore_idx"):
            performance_bounds(trace, core=bad)


def test_waits(trace):
    waits = dependency_waits(trace)
    assert waits.column(rs.ID).to_pylist() == [2, 4]
    assert waits.column(rs.WAITED_ON).to_pylist() == ["qSyncIO1", "Tensor"]
    assert waits.column(rs.WAITED_ON_ID).to_pylist() == [1, 3]
    assert waits.column(rs.WAIT_NS).to_pylist() == [50, 10]
    summary = wait_summary(trace)
    assert summary.to_pylist()[0] == {rs.ENGINE: "Tensor", rs.WAITED_ON_KIND: rs.WAIT_KIND_DMA,
                                      rs.WAITED_ON: "qSyncIO1", rs.COUNT: 1, rs.WAIT_NS: 50,
                                      rs.FRACTION: pytest.approx(50 / 370)}
    assert wait_sentences(summary)[0] == "Tensor spent 13.5% of its time waiting on DMA queue qSyncIO1 (1 waits)"
    grouped = wait_summary(trace, queue_groups=True)
    assert grouped.column(rs.WAITED_ON).to_pylist() == ["qSyncIO", "Tensor"]
    # a window cutting the wait [30, 80) keeps only its inside part
    assert dependency_waits(trace, 60, 200).column(rs.WAIT_NS).to_pylist() == [20]


def test_idle_gaps(trace):
    gaps = idle_gaps(trace)
    rows = [(g[rs.ENGINE], g[rs.START_NS], g[rs.END_NS], g[rs.CAUSE], g[rs.CAUSE_RESOURCE], g[rs.CAUSE_ID])
            for g in gaps.to_pylist()]
    assert rows == [
        ("Sync", 20, 370, rs.CAUSE_END, None, None),
        ("GpSimd", 0, 300, rs.CAUSE_DEPENDENCY, "Vector", 4),
        ("Vector", 0, 240, rs.CAUSE_DEPENDENCY, "Tensor", 3),
        ("DMA", 80, 320, rs.CAUSE_TRIGGER, "GpSimd", 5),
        ("Tensor", 230, 370, rs.CAUSE_END, None, None),
        ("Tensor", 0, 80, rs.CAUSE_DEPENDENCY, "qSyncIO1", 1),
        ("Vector", 300, 370, rs.CAUSE_END, None, None),
        ("GpSimd", 310, 370, rs.CAUSE_END, None, None),
        ("DMA", 5, 20, rs.CAUSE_TRIGGER, "Sync", 0),
    ]
    assert gaps.column(rs.RANK).to_pylist() == list(range(1, 10))
    only = idle_gaps(trace, engines=["Tensor"], min_ns=100, limit=5)
    assert [(g[rs.START_NS], g[rs.END_NS]) for g in only.to_pylist()] == [(230, 370)]


def test_critical_path(trace):
    path = critical_path(trace)
    steps = [(r[rs.TABLE], r[rs.ID], r[rs.EDGE], r[rs.GAP_BEFORE_NS]) for r in path.to_pylist()]
    assert steps == [("Instruction", 0, rs.EDGE_START, 0), ("Instruction", 1, rs.EDGE_STREAM, 0),
                     ("DmaPacket", 1, rs.EDGE_TRIGGER, 10), ("Instruction", 2, "flow", 0),
                     ("Instruction", 3, rs.EDGE_STREAM, 0), ("Instruction", 4, "flow", 10),
                     ("Instruction", 5, "flow", 0), ("DmaPacket", 2, rs.EDGE_TRIGGER, 10)]
    assert sum(path.column(rs.DUR_NS).to_pylist()) == 340
    assert None not in path.column(rs.TRACK_ID).to_pylist()
    breakdown = {(r[rs.KIND], r[rs.RESOURCE], r[rs.NAME]): r[rs.TOTAL_NS]
                 for r in critical_path_breakdown(path).to_pylist()}
    assert breakdown[(rs.NODE_INSTRUCTION, "Tensor", "MATMUL")] == 150
    assert breakdown[(rs.KIND_GAP, rs.EDGE_TRIGGER, None)] == 20
    # what held each gapped step back: P1 its trigger (I1 + the 10 ns issue latency), I4 the MATMUL it waited for
    assert [(r[rs.ID], r[rs.GAP_CAUSE]) for r in path.to_pylist() if r[rs.GAP_BEFORE_NS]] == [
        (1, rs.EDGE_TRIGGER), (4, "flow"), (2, rs.EDGE_TRIGGER)]
    assert [r[rs.GAP_CAUSE] for r in path.to_pylist() if not r[rs.GAP_BEFORE_NS]] == [None] * 5
    assert breakdown[(rs.KIND_GAP, "flow", None)] == 10
    assert sum(breakdown.values()) == 370  # durations plus gaps cover the path's span exactly
    # a window keeps only the events starting in it
    assert critical_path(trace, 200, 370).column(rs.ID).to_pylist() == [4, 5, 2]


def test_operator_and_opcode_tables(trace):
    ops = {r[rs.OPERATOR]: r for r in time_by(trace, "operator").to_pylist()}
    mm = ops["mm"]
    assert (mm[rs.TIME_NS], mm[rs.BUSY_NS], mm[rs.TENSOR_NS], mm[rs.FLOPS], mm[rs.MODEL_FLOPS]) == (150, 150, 150,
                                                                                                 70, 50)
    assert mm[rs.MFU] == pytest.approx(50 / 150) and mm[rs.HFU] == pytest.approx(70 / 150)
    assert ops["load"][rs.HBM_READ_BYTES] == 200 and ops["store"][rs.HBM_WRITE_BYTES] == 50
    codes = {(r[rs.ENGINE], r[rs.OPCODE]): r[rs.INSTRUCTIONS] for r in time_by(trace, "opcode").to_pylist()}
    assert codes == {("Sync", "DMA_TRIGGER"): 2, ("Tensor", "MATMUL"): 2, ("Vector", "TENSOR_COPY"): 1,
                     ("GpSimd", "DMA_TRIGGER"): 1}
    lines = time_by(trace, "source", 0, 100)
    assert sorted(lines.column(rs.SOURCE).to_pylist()) == ["k.py:1", "k.py:2", "k.py:3"]
    with pytest.raises(QueryError, match="group by"):
        time_by(trace, "layer")


def test_dma_efficiency(trace):
    eff = dma_efficiency(trace)
    assert (eff[rs.EFF_PACKETS], eff[rs.EFF_BYTES], eff[rs.EFF_ACTIVE_NS]) == (4, 254, 115)
    hist = [(r[rs.SIZE_LO], r[rs.SIZE_HI], r[rs.PACKETS]) for r in eff[rs.EFF_HISTOGRAM].to_pylist()]
    assert hist == [(4, 8, 1), (32, 64, 1), (64, 128, 2)]
    tensors = {r[rs.VARIABLE]: r for r in eff[rs.EFF_TENSORS].to_pylist()}
    assert (tensors["a"][rs.LOADED_BYTES], tensors["a"][rs.DISTINCT_BYTES], tensors["a"][rs.RELOAD_FACTOR]) == (
        200, 100, 2.0)
    assert tensors["c"][rs.STORED_BYTES] == 50
    queues = {r[rs.QUEUE]: r for r in eff[rs.EFF_QUEUES].to_pylist()}
    assert queues["qSyncIO0"][rs.THROUGHPUT_GBPS] == pytest.approx(2.0)
    # 100 ns buckets: [0, 100) holds the fetch and both loads, [300, 400) the store; regions span their packets
    regions = small_transfer_regions(trace, small_bytes=128, bucket_ns=100)
    assert [(r[rs.START_NS], r[rs.END_NS], r[rs.SMALL_PACKETS]) for r in regions.to_pylist()] == [(0, 80, 3),
                                                                                                 (320, 370, 1)]
    # under 64 B only the fetch (5 of 105 ns in its bucket) and the store are small: only the store's bucket counts
    regions = small_transfer_regions(trace, small_bytes=64, bucket_ns=100)
    assert [(r[rs.START_NS], r[rs.END_NS]) for r in regions.to_pylist()] == [(320, 370)]
    with pytest.raises(QueryError, match="bucket_ns"):
        small_transfer_regions(trace, bucket_ns=0)


def test_recommendations(trace, tmp_path):
    recs = recommendations(trace)
    # ranked by bottleneck-aware saving: low_mfu and bottleneck_idle remove their whole gaps (down to DMA's 115 ns,
    # to Tensor's 150 ns); the others only their own time at stake, which 370 ns minus it keeps above every other
    # engine's active time; reloads: the second load of a (factor 2) is half of a's 100 ns of the 155 ns the
    # packets took, so 50/155 of the DMA's 115 active ns (25 at peak)
    reload_ns = 115 * 50 / 155
    assert recs.column(rs.RULE).to_pylist() == ["low_mfu", "bottleneck_idle", "low_active_flops", "small_dma",
                                                "reloads", "transposes"]
    assert recs.column(rs.SAVING_NS).to_pylist() == pytest.approx([255, 220, 80, 52.5, reload_ns, 20])
    assert recs.column(rs.IMPACT_NS).to_pylist() == pytest.approx([320, 220, 80, 52.5, reload_ns, 20])
    assert recs.column(rs.SPEEDUP).to_pylist() == pytest.approx([370 / 115, 370 / 150, 370 / 290, 370 / 317.5,
                                                                 370 / (370 - reload_ns), 370 / 350])
    by_rule = {r[rs.RULE]: r for r in recs.to_pylist()}
    assert "13.5%" in by_rule["low_mfu"][rs.MESSAGE]
    # the window MFU is over is named: the bounds' by default (the summary's MFU is over the whole span)
    assert "(the bounds' window, first DMA start to last DMA end;" in by_rule["low_mfu"][rs.MESSAGE]
    windowed = {r[rs.RULE]: r for r in recommendations(trace, 0, 370).to_pylist()}
    assert "bounds' window" not in windowed["low_mfu"][rs.MESSAGE]
    assert "a 2.0x" in by_rule["reloads"][rs.MESSAGE]
    assert json.loads(by_rule["transposes"][rs.EVIDENCE])["transpose_fraction"] == pytest.approx(20 / 70)
    # spills: 400 B reloaded of 200 B HBM reads is above 25%
    with profiler.open(write_handmade(tmp_path / "spill.trace", spill_reload_bytes=400)) as spilled:
        rules = recommendations(spilled).column(rs.RULE).to_pylist()
    assert "spill_reloads" in rules


def test_the_critical_path_ends_at_the_heaviest_of_the_events_ending_last(tmp_path):
    """MATMUL [0,1000) and a Sync stream DMA_TRIGGER [0,50) -> EVENT_SEMAPHORE [900,1000) end together: the path is
    the MATMUL's 1,000 ns, not the 150 ns of the event that started last."""
    from tracer import TraceWriter
    from tracer import schema as ts

    path = tmp_path / "tie.trace"
    rows = [(0, "Tensor", "MATMUL", 0, 1000), (1, "Sync", "DMA_TRIGGER", 0, 50),
            (2, "Sync", "EVENT_SEMAPHORE", 900, 1000)]
    with TraceWriter(path, metadata={"dma_ddr_bandwidth": 1e9}, background_flush=False) as w:
        w.append_rows(ts.INSTRUCTION.name, [
            {ts.ID: i, ts.START_TS: s, ts.END_TS: e, ts.DURATION_NS: e - s, ts.ENGINE: eng, ts.OPCODE: op,
             ts.OPERANDS: "", ts.PC: i, ts.PCORE_IDX: 0, ts.TIMELINE_TRACK: eng} for i, eng, op, s, e in rows])
    with profiler.open(path) as t:
        steps = critical_path(t).to_pylist()
    assert [(r[rs.NAME], r[rs.DUR_NS]) for r in steps] == [("MATMUL", 1000)]


def test_the_small_dma_sentence_gives_one_rate(trace):
    """Its share and its GB/s came from different bytes (instruction fetches in one, not the other)."""
    import re

    row = next(r for r in recommendations(trace).to_pylist() if r[rs.RULE] == "small_dma")
    share, rate, peak = re.search(r"runs at ([\d.]+)% of its peak rate while active \(([\d.]+) of ([\d.]+) GB/s\)",
                                  row[rs.MESSAGE]).groups()
    assert float(rate) / float(peak) == pytest.approx(float(share) / 100, abs=0.005)


@pytest.mark.parametrize("name", ["matmul_naive-trn2", "matmul_rowload-trn2", "mlp-trn2", "attention-trn2",
                                  "softmax-trn1"])
def test_no_recommendation_promises_more_than_its_time_at_stake(name):
    """Removing an overhead shortens the run by at most that overhead: "19 us at stake, up to 4.27x faster" on a
    48.7 us run contradicted itself (an audit); saving = total - total / speedup <= time at stake, in any window."""
    import random
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / f"{name}.trace"
    rng = random.Random(name)
    with profiler.open(sample) as t:
        lo, hi = t.time_range
        windows = [(None, None)] + [tuple(sorted(rng.sample(range(lo, hi), 2))) for _ in range(4)]
        fired = 0
        for a, b in windows:
            recs = recommendations(t, a, b).to_pylist()
            for r in recs:
                fired += 1
                assert r[rs.SAVING_NS] <= r[rs.IMPACT_NS] * (1 + 1e-9) + 1e-6, (a, b, r[rs.RULE])
                if r[rs.SPEEDUP] is not None:
                    total = performance_bounds(t, a, b)[rs.TOTAL_TIME_NS]
                    assert r[rs.SAVING_NS] == pytest.approx(total - total / r[rs.SPEEDUP])
        assert fired


def _vector_chain(nc, rows=256, cols=1024, chain=8, split=False):
    """fp32 tensor_scalar chains: Vector-bound (or, split, half of each chain on GpSimd)."""
    x = nc.input("x", (rows, cols), "fp32")
    y = nc.output("y", (rows, cols), "fp32")
    h = cols // 2
    for r in nc.affine_range(rows // 128):
        t = nc.sbuf_tile((128, cols), "fp32", name="t")
        nc.dma_copy(t, x[r * 128:(r + 1) * 128, :])
        u = nc.sbuf_tile((128, cols), "fp32", name="u")
        nc.tensor_scalar(u, t, "multiply", 1.01)
        for _ in nc.static_range(chain):
            if split:
                nc.tensor_scalar(u[:, 0:h], u[:, 0:h], "add", 0.5)
                nc.tensor_scalar(u[:, h:cols], u[:, h:cols], "add", 0.5, engine="GpSimd")
            else:
                nc.tensor_scalar(u, u, "add", 0.5)
        nc.dma_copy(y[r * 128:(r + 1) * 128, :], u, engine="GpSimd")


def test_a_vector_bound_kernel_is_told_so_and_the_gain_is_in_reach(tmp_path):
    """A Vector-bound kernel got "no rule fired"; now engine_bound names it, its top opcode and line, and its
    "up to" covers what splitting the chains with GpSimd really gains (trn2)."""
    from tracer.sim import run_kernel

    times = {}
    for split in (False, True):
        path = tmp_path / f"v{int(split)}.trace"
        times[split] = run_kernel(_vector_chain, {"split": split}, arch="trn2", trace_path=path,
                                  emit="inline").simulated_ns
        with profiler.open(path) as t:
            recs = {r[rs.RULE]: r for r in recommendations(t).to_pylist()}
        if not split:
            rec = recs["engine_bound"]
            assert rec[rs.TITLE] == "Vector-bound" and "TENSOR_SCALAR at test_analysis_handmade.py:" in rec[rs.MESSAGE]
            assert "of it is work GpSimd can run too" in rec[rs.MESSAGE]
            predicted = rec[rs.SPEEDUP]
    gained = times[False] / times[True]
    assert 1.3 < gained <= predicted * 1.02, (gained, predicted)


def _pingpong(nc, cols=64, steps=60):
    """Vector and Scalar update one tile in turn: a serial chain nothing can overlap."""
    x = nc.input("x", (128, cols), "fp32")
    y = nc.output("y", (128, cols), "fp32")
    t = nc.sbuf_tile((128, cols), "fp32", name="t")
    nc.dma_copy(t, x[:, :])
    for _ in nc.sequential_range(steps):
        nc.tensor_scalar(t, t, "add", 1.0)
        nc.activation(t, t, "copy", scale=0.5)
    nc.dma_copy(y[:, :], t)


def _stores_from(nc, rows=1024, cols=1024, store_engine="Sync"):
    """Load, exp, store per row tile; stores triggered from Sync wait for the exp and hold up the next loads."""
    x = nc.input("x", (rows, cols), "bf16")
    y = nc.output("y", (rows, cols), "bf16")
    for r in nc.affine_range(rows // 128):
        t = nc.sbuf_tile((128, cols), "bf16", name="t")
        nc.dma_copy(t, x[r * 128:(r + 1) * 128, :])
        u = nc.sbuf_tile((128, cols), "bf16", name="u")
        nc.activation(u, t, "exp")
        nc.dma_copy(y[r * 128:(r + 1) * 128, :], u, engine=store_engine)


def test_an_idle_bottleneck_is_told_why_a_chain_or_late_triggers_not_only_to_prefetch(tmp_path):
    """'Prefetch, double-buffer' was the advice for a serial Vector <-> Scalar chain and for stores triggered from
    Sync holding up the loads behind them (an audit): each gets its own, and the fix named for the second (stores
    from GpSimd) makes the kernel faster."""
    from tracer.sim import run_kernel

    def idle_message(kernel, params=None):
        path = tmp_path / f"{kernel.__name__}{len(list(tmp_path.iterdir()))}.trace"
        ns = run_kernel(kernel, params or {}, arch="trn2", trace_path=path, emit="inline").simulated_ns
        with profiler.open(path) as t:
            recs = {r[rs.RULE]: r for r in recommendations(t).to_pylist()}
        return recs.get("bottleneck_idle", {}).get(rs.MESSAGE, ""), ns

    chain, _ = idle_message(_pingpong)
    assert "waits for Scalar's results: a chain of dependent work between Scalar and Vector" in chain
    assert "(prefetch, double-buffer)" not in chain
    sync, slow = idle_message(_stores_from)
    assert "triggers on Sync waited for compute and held up the triggers behind them" in sync
    assert "(stores from GpSimd)" in sync
    gpsimd, fast = idle_message(_stores_from, {"store_engine": "GpSimd"})
    assert fast < 0.8 * slow
    # stores from GpSimd wait for their data but hold up no load: not told to do what it does (a review)
    assert "held up" not in gpsimd


def test_the_kernel_end_barrier_is_not_the_waits_headline(tmp_path):
    """'Sync spent 99.8% of its time waiting on DMA queue qGpSimdIO15 (1 waits)' led every summary: the final
    barrier waits by design; the per-wait table keeps it."""
    from profiler.analyses import wait_summary
    from tracer.sim import run_kernel

    path = tmp_path / "v.trace"
    run_kernel(_vector_chain, {}, arch="trn2", trace_path=path, emit="inline")
    with profiler.open(path) as t:
        summary = wait_summary(t).to_pylist()
        every = dependency_waits(t).to_pylist()
    barrier = [w for w in every if w[rs.OPCODE] == "EVENT_SEMAPHORE"]
    assert len(barrier) == 1 and barrier[0][rs.ENGINE] == "Sync"
    assert all(r[rs.ENGINE] != "Sync" for r in summary) and summary


def test_a_gap_is_attributed_to_what_held_the_step_back_not_to_the_edge_the_path_took():
    """A DMA segment chained on the path to the previous segment of its DMA engine, which ended 40 ns before it,
    but whose trigger (+ the issue latency, the least gap of any trigger edge) released it only then: the gap is
    the trigger's (an audit saw 36% of a latency-bound kernel's path called "gap dma_engine" while the DMA idled)."""
    import numpy as np

    from profiler.analyses.critical_path import holding_edges, path_of
    from profiler.analyses.event_graph import EventGraph

    def graph(engine_end: int) -> EventGraph:
        # nodes: 0 trigger A [0,10) -> 1 segment [110, engine_end) (latency 100); 0 -> 2 trigger B [20,30) ->
        # 3 segment, after 1 on the DMA engine: it starts at max(30 + 100, engine_end)
        start3 = max(130, engine_end)
        obj = lambda *v: np.array(v, dtype=object)  # noqa: E731
        return EventGraph(
            kind=obj("instruction", "dma", "instruction", "dma"), table=obj("Instruction", "DmaPacket",
                                                                            "Instruction", "DmaPacket"),
            ident=np.array([0, 0, 1, 1]), track=np.array([1, 2, 1, 2]), resource=obj("Sync", "q0", "Sync", "q1"),
            name=obj("DMA_TRIGGER", "x", "DMA_TRIGGER", "y"),
            start=np.array([0, 110, 20, start3]), end=np.array([10, engine_end, 30, start3 + 40]),
            src=np.array([0, 2, 1, 0]), dst=np.array([1, 3, 3, 2]),
            edge_kind=obj(rs.EDGE_TRIGGER, rs.EDGE_TRIGGER, rs.EDGE_DMA_ENGINE, rs.EDGE_STREAM), dropped_edges=0)

    g = graph(engine_end=125)               # 1: [110,125); B's trigger releases 3 at 30 + 100 = 130 > 125
    assert g.edge_kind[holding_edges(g)[3]] == rs.EDGE_TRIGGER
    path = path_of(g).to_pylist()
    assert path[-1][rs.EDGE] == rs.EDGE_DMA_ENGINE and path[-1][rs.GAP_CAUSE] == rs.EDGE_TRIGGER
    g = graph(engine_end=200)               # 1 ends at 200, after B's trigger released 3: the engine held it
    assert g.edge_kind[holding_edges(g)[3]] == rs.EDGE_DMA_ENGINE
    assert path_of(g).to_pylist()[-1][rs.GAP_CAUSE] is None   # (no gap: 3 starts when 1 ends)


def _weights(nc, ntiles=32, n=512, reload=1):
    """y_i = W^T x_i with W (128x128) loaded again for every tile (reload=1) or once."""
    w = nc.input("w", (128, 128), "bf16")
    x = nc.input("x", (128, ntiles * n), "bf16")
    y = nc.output("y", (128, ntiles * n), "bf16")
    if not reload:
        wt = nc.sbuf_tile((128, 128), "bf16", name="w_once")
        nc.dma_copy(wt, w[:, :])
    for i in nc.affine_range(ntiles):
        if reload:
            wt = nc.sbuf_tile((128, 128), "bf16", name="w_again")
            nc.dma_copy(wt, w[:, :])
        xt = nc.sbuf_tile((128, n), "bf16", name="xt")
        nc.dma_copy(xt, x[:, i * n:(i + 1) * n])
        acc = nc.psum_tile((128, n), "fp32", name="acc")
        nc.matmul(acc, wt, xt)
        yt = nc.sbuf_tile((128, n), "bf16", name="yt")
        nc.tensor_copy(yt, acc)
        nc.dma_copy(y[:, i * n:(i + 1) * n], yt, engine="GpSimd")


def test_reloads_of_a_small_tensor_are_priced_at_the_time_they_took(tmp_path):
    """W reloaded 32x is ~11% of the bytes (under the byte rule's 20%) but its small, inefficient transfers take
    far more of the DMA's time: reloads fires, names w, and its "up to" covers loading W once (an audit)."""
    from tracer.sim import run_kernel

    slow_path = tmp_path / "reload.trace"
    slow = run_kernel(_weights, {"reload": 1}, arch="trn2", trace_path=slow_path, emit="inline").simulated_ns
    fast = run_kernel(_weights, {"reload": 0}, arch="trn2").simulated_ns
    with profiler.open(slow_path) as t:
        b = performance_bounds(t)
        recs = {r[rs.RULE]: r for r in recommendations(t).to_pylist()}
    assert b[rs.EXCESS_TRAFFIC_GAP_NS] / b[rs.MEMORY_BOUND_IDEAL_NS] < 0.2      # (the byte rule alone: silent)
    rec = recs["reloads"]
    assert "reloaded: w 32.0x" in rec[rs.MESSAGE]
    assert rec[rs.IMPACT_NS] > 2 * b[rs.EXCESS_TRAFFIC_GAP_NS]                   # (priced as moved, not at peak)
    assert slow / fast > 1.05 and rec[rs.SPEEDUP] >= 0.95 * slow / fast


def _reductions(nc, rows=512, cols=1024):
    """Vector reductions only: nothing another engine can run."""
    x = nc.input("x", (rows, cols), "fp32")
    y = nc.output("y", (rows, 1), "fp32")
    for r in nc.affine_range(rows // 128):
        t = nc.sbuf_tile((128, cols), "fp32", name="t")
        nc.dma_copy(t, x[r * 128:(r + 1) * 128, :])
        s = nc.sbuf_tile((128, 1), "fp32", name="s")
        for _ in nc.static_range(6):
            nc.tensor_reduce(s, t, "max")
        nc.dma_copy(y[r * 128:(r + 1) * 128, :], s)


@pytest.mark.parametrize("arch", ["trn1", "trn2"])
def test_engine_bound_promises_only_what_another_engine_can_run(tmp_path, arch):
    """engine_bound priced moving half the work to another engine whatever it was: 'up to 1.86x' for Vector
    reductions nothing else runs, and on trn1 with GpSimd, which takes turns with Vector on SBUF (a review)."""
    from tracer.sim import run_kernel

    path = tmp_path / f"red-{arch}.trace"
    run_kernel(_reductions, {}, arch=arch, trace_path=path, emit="inline")
    with profiler.open(path) as t:
        rec = {r[rs.RULE]: r for r in recommendations(t).to_pylist()}["engine_bound"]
    assert rec[rs.IMPACT_NS] == 0 and rec[rs.SPEEDUP] is None
    assert "none of its work can run on another engine beside it" in rec[rs.MESSAGE].lower()
    path = tmp_path / f"chain-{arch}.trace"
    run_kernel(_vector_chain, {}, arch=arch, trace_path=path, emit="inline")
    with profiler.open(path) as t:
        rec = {r[rs.RULE]: r for r in recommendations(t).to_pylist()}["engine_bound"]
    if arch == "trn1":   # (tensor_scalar runs on Vector or GpSimd, which take turns on SBUF here)
        assert rec[rs.IMPACT_NS] == 0 and "take turns on SBUF" in rec[rs.MESSAGE]
    else:
        assert rec[rs.IMPACT_NS] > 0 and json.loads(rec[rs.EVIDENCE])["partner"] == "GpSimd"


def _round_trip(nc, rows=512, cols=1024, trip=1):
    """exp(x) per row tile, through a scratch HBM tensor and back (trip=1) or not."""
    x = nc.input("x", (rows, cols), "bf16")
    y = nc.output("y", (rows, cols), "bf16")
    s = nc.scratch("s", (rows, cols), "bf16")
    for r in nc.affine_range(rows // 128):
        t = nc.sbuf_tile((128, cols), "bf16", name="t")
        nc.dma_copy(t, x[r * 128:(r + 1) * 128, :])
        u = nc.sbuf_tile((128, cols), "bf16", name="u")
        nc.activation(u, t, "exp")
        if trip:
            nc.dma_copy(s[r * 128:(r + 1) * 128, :], u, engine="GpSimd")
            u = nc.sbuf_tile((128, cols), "bf16", name="back")
            nc.dma_copy(u, s[r * 128:(r + 1) * 128, :])
        nc.dma_copy(y[r * 128:(r + 1) * 128, :], u, engine="GpSimd")


def test_a_scratch_tensors_round_trip_is_not_necessary_traffic(tmp_path):
    """The bounds counted a scratch tensor's bytes as necessary, halving the round trip's excess (an audit): the
    recording says which tensors are scratch (Metadata.hbm_tensors), and only inputs and outputs are necessary."""
    from tracer.sim import run_kernel

    path = tmp_path / "rt.trace"
    run_kernel(_round_trip, {}, arch="trn2", trace_path=path, emit="inline")
    with profiler.open(path) as t:
        assert json.loads(t.metadata["hbm_tensors"]) == {"x": "input", "y": "output", "s": "scratch"}
        b = performance_bounds(t)
        rec = {r[rs.RULE]: r for r in recommendations(t).to_pylist()}["reloads"]
    inputs = b[rs.INPUTS]
    assert inputs[rs.NECESSARY_BYTES] == 2 * 512 * 1024 * 2                # x read once, y written once
    assert inputs[rs.DMA_TRANSFER_BYTES] == 4 * 512 * 1024 * 2             # ... and s written and read back
    assert "where 2,097,152 would do (50.0% of them excess" in rec[rs.MESSAGE]


def _psum_adds(nc, tiles=8, n=512, adds=6):
    """Vector adds a matmul's PSUM result to an SBUF tile, over and over: PSUM work GpSimd cannot take."""
    w = nc.input("w", (128, 128), "bf16")
    x = nc.input("x", (128, tiles * n), "bf16")
    y = nc.output("y", (128, tiles * n), "fp32")
    wt = nc.sbuf_tile((128, 128), "bf16", name="w")
    nc.dma_copy(wt, w[:, :])
    for i in nc.affine_range(tiles):
        xt = nc.sbuf_tile((128, n), "bf16", name="xt")
        nc.dma_copy(xt, x[:, i * n:(i + 1) * n])
        acc = nc.psum_tile((128, n), "fp32", name="acc")
        nc.matmul(acc, wt, xt)
        s = nc.sbuf_tile((128, n), "fp32", name="s")
        nc.memset(s, 0.0)
        for _ in nc.static_range(adds):
            nc.tensor_tensor(s, acc, s, "add")
        nc.dma_copy(y[:, i * n:(i + 1) * n], s, engine="GpSimd")


def test_engine_bound_does_not_offer_psum_work_to_gpsimd(tmp_path):
    """GpSimd cannot access PSUM: Vector's adds of a PSUM result were offered to it, 'up to 1.90x' (a review)."""
    from tracer.sim import run_kernel

    path = tmp_path / "psum.trace"
    run_kernel(_psum_adds, {}, arch="trn2", trace_path=path, emit="inline")
    with profiler.open(path) as t:
        rec = {r[rs.RULE]: r for r in recommendations(t).to_pylist()}.get("engine_bound")
    assert rec is not None and rec[rs.TITLE] == "Vector-bound"
    assert "GpSimd" not in json.dumps(json.loads(rec[rs.EVIDENCE])["movable_ns"])
