"""DMA engine reservations: never overlapping, each at the earliest idle time (brute-force oracle)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.sim import cost_model
from tracer.sim.core import Core


def _earliest_free(busy: list[tuple[int, int]], t: int, d: int) -> int:
    """Brute force: the smallest s >= t with [s, s + d) free of every busy interval."""
    candidates = sorted({t} | {e for _s, e in busy if e >= t})
    for s in candidates:
        if all(s + d <= bs or s >= be for bs, be in busy):
            return s
    raise AssertionError("unreachable")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2000), st.one_of(
    st.lists(st.integers(1, 120), min_size=1, max_size=6),
    st.tuples(st.integers(1, 120), st.integers(1, 12)).map(lambda dn: [dn[0]] * dn[1]))), min_size=1, max_size=40))
def test_place_moves_each_packet_at_the_earliest_idle_time(requests):
    """A share's packets go in order, each at the earliest time its engine is idle long enough, at or after the
    share's start and the previous packet's end (brute force, packet by packet): the engine never idles while a
    packet it could move waits."""
    core = Core(cost_model("trn2"))
    busy: list[tuple[int, int]] = []
    for t, durations in requests:
        runs = core._place(0, t, tuple(durations), sum(durations))
        want = []
        at = t
        for d in durations:
            at = _earliest_free(busy, at, d)
            want.append((at, at + d))
            at += d
        busy.extend(want)
        got = [(s + sum(durations[k0:k]), s + sum(durations[k0:k + 1]))
               for (k0, s, e), k1 in zip(runs, [r[0] for r in runs[1:]] + [len(durations)], strict=True)
               for k in range(k0, k1)]
        assert got == want
        # runs are maximal: a run ends where the next one does not follow back to back
        assert all(a[2] < b[1] for a, b in itertools.pairwise(runs))
        assert all(e == s + sum(durations[k0:k1]) for (k0, s, e), k1 in
                   zip(runs, [r[0] for r in runs[1:]] + [len(durations)], strict=True))
    starts, ends = core.eng_starts[0], core.eng_ends[0]
    assert starts == sorted(starts) and all(e < s for e, s in zip(ends, starts[1:], strict=False))
    assert sum(e - s for s, e in zip(starts, ends, strict=True)) == sum(sum(d) for _t, d in requests)


def test_uniform_shares_whose_packets_come_in_other_orders_are_placed_queue_by_queue():
    """Rows of 4096 + 4096 + 1000 bytes: every queue gets the same three packets, in rotated orders. Before a busy
    stretch there is an idle gap holding the short packet only: the queue whose share starts with it moves it there,
    the others cannot, so the queues no longer share one state (and no packet waits while its engine idles)."""
    from tracer.sim import records

    cm = cost_model("trn2")
    core = Core(cm)
    plan = records.DmaPlan(cm, rows=16, chunk_bytes=2 * 4096 + 1000, group=0, prefix="q", queue_type="input",
                           src_mem="HBM", dst_mem="SBUF", variable="x", hbm=None)
    long_ns, short_ns = cm.dma_packet_ns(4096, 9192, 1.0), cm.dma_packet_ns(1000, 9192, 1.0)
    assert short_ns < long_ns and plan.equal_totals(0)
    orders = {d[0] for d in plan.queue_packets(0)}
    assert orders == {long_ns, short_ns}  # some queues start with the short packet, some with a long one
    core.u_starts, core.u_ends = [short_ns + 5], [100_000]  # idle [0, short + 5): the short packet fits, no long one
    before = (list(core.u_starts), list(core.u_ends), len(core._cols["x_split_xfer"]))
    assert core.split_uniform(plan, 0, 0, 0) is None
    assert (core.u_starts, core.u_ends, len(core._cols["x_split_xfer"])) == before  # nothing done


def test_engines_are_shared_by_queue_groups():
    """Loads on Sync and stores on GpSimd share the 16 engines: together they never beat the core bandwidth."""
    from tracer.sim import run_kernel

    one = run_kernel("dma_stream", {"rows": 1024, "cols": 4096, "tile_cols": 2048})
    cm = one.cost
    # every byte crosses the DMA engines twice (load + store); at full rate that takes this long at best
    floor_ns = 2 * one.dma_bytes / 2 / cm.dma_bandwidth_gbps
    assert one.simulated_ns >= floor_ns
    assert one.dma_queue_busy_ns <= cm.dma_queues * one.simulated_ns


def test_packet_layout_cache_is_bounded_and_plans_keep_theirs(monkeypatch):
    """The per-geometry layout cache outlives runs; it is cleared when full (a session recording many shapes does
    not grow without bound), and plans made before keep giving the same layouts."""
    from tracer.sim import records
    from tracer.sim.arch import cost_model

    monkeypatch.setattr(records, "_GEOMETRY_CACHE", {})
    monkeypatch.setattr(records, "_GEOMETRY_CACHE_MAX", 4)
    cm = cost_model("trn2")

    def plan(rows: int) -> records.DmaPlan:
        return records.DmaPlan(cm, rows=rows, chunk_bytes=1024, group=0, prefix="q", queue_type="input",
                               src_mem="HBM", dst_mem="SBUF", variable="x", hbm=None)

    first = plan(3)
    before = first.layout(1)
    for rows in range(4, 20):
        plan(rows).layout(0)
        assert len(records._GEOMETRY_CACHE) <= 4
    after = first.layout(1)
    assert after[0] == before[0] and np.array_equal(after[1], before[1]) and np.array_equal(after[2], before[2])
    fresh = plan(3).layout(1)  # rebuilt from scratch after the clear: the same layout
    assert fresh[0] == before[0] and np.array_equal(fresh[1], before[1]) and np.array_equal(fresh[2], before[2])


def test_row_packets_are_shared_per_cost_model_and_read_only():
    """A row's packet sizes and durations are computed once per (cost model, row bytes): another bandwidth gives
    other durations, and the shared arrays cannot be changed through one plan."""
    from tracer.sim import records
    from tracer.sim.arch import cost_model

    def plan(cm, chunk):
        return records.DmaPlan(cm, rows=4, chunk_bytes=chunk, group=0, prefix="q", queue_type="input",
                               src_mem="HBM", dst_mem="SBUF", variable="x", hbm=None)

    base, slow = cost_model("trn2"), cost_model("trn2", {"dma_bandwidth_gbps": "10"})
    a, b, c = plan(base, 6000), plan(base, 6000), plan(slow, 6000)
    assert a.sub_ns is b.sub_ns and a.sub_bytes.tolist() == [4096, 1904]
    assert c.sub_ns is not a.sub_ns and (c.sub_ns > a.sub_ns).all()
    assert c.sub_ns.tolist() == [slow.dma_packet_ns(s, 6000) for s in (4096, 1904)]
    with pytest.raises(ValueError):
        a.sub_ns[0] = 1
    assert np.array_equal(plan(base, 6000).sub_ns, b.sub_ns)


@pytest.mark.parametrize("fast_path", [True, False])
def test_dma_templates_do_not_depend_on_the_hbm_tensor(tmp_path, monkeypatch, fast_path):
    """Each mlp layer loads its own weights: the DMA triggers of later layers reuse earlier layers' templates (the
    tensor is the instruction's ``aux``), so their number does not grow with the layers, and the trace still names
    each transfer's tensor and each trigger's slice."""
    from tracer import TraceReader
    from tracer.sim import core as core_module
    from tracer.sim import run_kernel

    cores = []
    init = core_module.Core.__init__

    def keep(self, *args, **kwargs):
        init(self, *args, **kwargs)
        cores.append(self)

    monkeypatch.setattr(core_module.Core, "__init__", keep)
    d_model, d_ff = 256, 512
    counts = []
    for layers in (3, 6):
        trace = tmp_path / f"t{layers}"
        run_kernel("mlp", {"layers": layers, "d_model": d_model, "d_ff": d_ff, "tokens": 128}, fast_path=fast_path,
                   trace_path=trace)
        counts.append(sum(t.dma is not None and t.dma.hbm is not None for t in cores[-1].templates))
        variables = TraceReader(trace).read_table("DmaTransfer").to_pydict()["variable"]
        for i in range(layers):
            assert variables.count(f"w1_{i}") == d_model // 128 and variables.count(f"w2_{i}") == d_ff // 128
        ops = TraceReader(trace).read_table("Instruction").to_pydict()["operands"]
        for k in range(d_ff // 128):
            assert sum(f"src=w2_{layers - 1}[{128 * k}:{128 * (k + 1)},0:{d_model}]" in text for text in ops) == 1
    assert counts[0] == counts[1]


def uneven_group(nc, n=6):
    """Per iteration: a 4-row transfer of 4 KiB rows (queues 0-3, long packets) then a 2-row one of 128 B
    (queues 4-5, short): the second finishes first but retires with the first, in order."""
    a = nc.input("a", (4 * n, 1024), "fp32")
    b = nc.input("b", (2 * n, 32), "fp32")
    for i in nc.affine_range(n):
        at = nc.sbuf_tile((4, 1024), "fp32", name="at")
        bt = nc.sbuf_tile((2, 32), "fp32", name="bt")
        nc.dma_copy(at, a[4 * i:4 * i + 4, :])
        nc.dma_copy(bt, b[2 * i:2 * i + 2, :])
        u = nc.sbuf_tile((2, 32), "fp32", name="u")
        nc.tensor_scalar(u, bt, "add", 1.0)   # reads only b's tile


@pytest.mark.parametrize("fast_path", [False, True])
def test_a_consumer_held_by_in_order_retirement_names_the_transfer_that_held_it(tmp_path, fast_path):
    """Its Flow edge named its own transfer's last packet, with a gap of 0 though that packet ended earlier; the
    transfer it waited for was named by no edge."""
    from tests.unit.test_sim_dependencies import record

    _result, t = record(tmp_path, uneven_group, fast_path=fast_path)
    ins = {r["id"]: r for r in t["Instruction"].to_pylist()}
    pk = {r["id"]: r for r in t["DmaPacket"].to_pylist()}
    edges = [f for f in t["Flow"].to_pylist() if f["out_table"] == "DmaPacket" and f["in_table"] == "Instruction"
             and ins[f["in_id"]]["opcode"] == "TENSOR_SCALAR"]
    assert len(edges) == 6
    for f in edges:
        consumer, packet = ins[f["in_id"]], pk[f["out_id"]]
        assert packet["variable"] == "a"                        # the long transfer that retired last
        assert f["gap_time"] == consumer["start_ts"] - packet["end_ts"] >= 0


def test_the_fast_path_names_the_same_packets(tmp_path):
    from tests.unit.test_sim_dependencies import record

    flows = []
    for fast_path in (False, True):
        _r, t = record(tmp_path / str(fast_path), uneven_group, {"n": 40}, fast_path=fast_path)
        flows.append(t["Flow"].to_pylist())
    assert flows[0] == flows[1]
