"""The compiled scheduling loop of the loop fast path writes exactly the trace the Python loop writes.

Every shipped kernel and random looped programs run with the fast path on, once with ``TRNPROF_JIT=0`` (Python loop)
and once with ``TRNPROF_JIT=1`` (compiled loop from the first segment): every table must be equal row for row.  A spy
on the kernel checks that it really scheduled the segments and that its hand-overs to Python (a template's layout
to fill, a full throttle window, a transfer that loads the queues unevenly) were exercised.  The kernel's reservation
search is checked against :func:`tracer.sim.dma.reserve`.
"""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_sim_fastpath import KERNEL_CASES, KERNEL_IDS, _assert_same, _looped_kernel, _run, body_strategy
from tracer.sim.dma import reserve
from tracer.sim.fastpath import controller, schedule_jit
from tracer.sim.fastpath import schedule_kernel as K

pytestmark = pytest.mark.skipif(not schedule_jit._load(), reason="numba is not available")


@pytest.fixture
def spy(monkeypatch):
    """Counts the kernel's calls by stop reason, the rows it was given and the uniform-DMA trims it did."""
    seen: collections.Counter[str] = collections.Counter()
    kernel = K.schedule_rows

    def spied(j, n, *args):
        stop = kernel(j, n, *args)
        state = args[9]
        seen[["done", "need", "grow", "transfer"][int(state[K.REASON])]] += 1
        seen["trimmed"] += int(state[K.UTRIM])
        return stop

    def schedule(prog, *args):
        seen["rows"] += prog.n
        return real_schedule(prog, *args)

    real_schedule = schedule_jit.schedule
    monkeypatch.setattr(K, "schedule_rows", spied)
    monkeypatch.setattr(schedule_jit, "schedule", schedule)
    return seen


def _both(monkeypatch, tmp, kernel, params, arch, overrides=None):  # noqa: PLR0917
    monkeypatch.setattr(schedule_jit, "MIN_ROWS", 0)  # every segment, however short
    monkeypatch.setenv(schedule_jit.ENV_SWITCH, "0")
    python = _run(tmp, kernel, params, arch, True, overrides)
    monkeypatch.setenv(schedule_jit.ENV_SWITCH, "1")
    compiled = _run(tmp, kernel, params, arch, True, overrides)
    return python, compiled


@pytest.mark.parametrize(("kernel", "params", "arch", "overrides"), KERNEL_CASES,
                         ids=KERNEL_IDS)
def test_compiled_loop_writes_the_python_loops_trace(tmp_path, monkeypatch, spy, kernel, params, arch,  # noqa: PLR0917
                                                     overrides):
    monkeypatch.setattr(controller, "TARGET", 32)
    monkeypatch.setattr(controller, "MIN_SEGMENT", 2)  # (scaled down alike)
    monkeypatch.setattr(schedule_jit, "_WINDOW", 1)  # the throttle window buffer has to grow
    # no layouts filled in advance: the kernel stops for each new (template, queue rotation)
    monkeypatch.setattr(schedule_jit.CoreArrays, "prefill_uniform", lambda *a: None)
    python, compiled = _both(monkeypatch, tmp_path, kernel, params, arch, overrides)
    assert spy["rows"] == compiled[0].fast_path_instructions > 0.5 * compiled[0].instructions
    _assert_same(python, compiled)
    assert spy["need"] > 0
    if kernel in ("matmul_naive", "attention", "mlp") and arch == "trn2":  # the Tensor engine throttle's window
        assert spy["grow"] > 0
    if kernel in ("softmax", "rmsnorm", "dma_stream"):  # over 256 reservations of the DMA engines
        assert spy["trimmed"] > 0


def _uneven_dma_kernel(nc):
    """Transfers of 100 partition rows: the packets do not spread evenly over the 16 queues."""
    x = nc.input("x", (100, 64 * 48), "bf16")
    y = nc.output("y", (100, 64 * 48), "bf16")
    for i in nc.sequential_range(48):
        t = nc.sbuf_tile((100, 64), "bf16", name="t")
        nc.dma_copy(t, x[:, i * 64:(i + 1) * 64])
        u = nc.sbuf_tile((100, 64), "bf16", name="u")
        nc.tensor_copy(u, t)
        nc.dma_copy(y[:, i * 64:(i + 1) * 64], u, engine="GpSimd")


def test_transfers_loading_queues_unevenly_go_to_python(tmp_path, monkeypatch, spy):
    monkeypatch.setattr(controller, "TARGET", 8)
    monkeypatch.setattr(controller, "MIN_SEGMENT", 1)  # (scaled down alike: a kernel of 145 instructions)
    python, compiled = _both(monkeypatch, tmp_path, _uneven_dma_kernel, {}, "trn1")
    assert spy["rows"] > 0.5 * compiled[0].instructions
    assert spy["transfer"] > 0
    _assert_same(python, compiled)


def _split_dma_kernel(nc, n: int = 48, cols: int = 2048):
    """Sync loads, a Vector copy, GpSimd stores: each store is issued before the next load but ready after it, so
    the loads' shares split around the stores' packets (one packet per row; ``cols=2100``: two unequal ones)."""
    x = nc.input("x", (128, cols * n), "bf16")
    y = nc.output("y", (128, cols * n), "bf16")
    for i in nc.sequential_range(n):
        t = nc.sbuf_tile((128, cols), "bf16", name="t")
        nc.dma_copy(t, x[:, i * cols:(i + 1) * cols])
        u = nc.sbuf_tile((128, cols), "bf16", name="u")
        nc.tensor_copy(u, t)
        nc.dma_copy(y[:, i * cols:(i + 1) * cols], u, engine="GpSimd")


def _many_gaps_kernel(nc, iters: int = 6, stores: int = 90, fill: int = 600):
    """Per iteration: GpSimd spaces out small stores (one packet per queue each), then Sync loads a tile of 80
    packets per queue, issued after the stores but ready before them: its shares split into ~80 runs, one per gap
    (more than the compiled loop places: tracer.sim.fastpath.schedule_kernel.RUNS_MAX)."""
    x = nc.input("x", (128, 20480 * iters), "bf16")
    y = nc.output("y", (16, 2048 * stores * iters), "bf16")
    s = nc.sbuf_tile((16, 2048), "bf16", name="s")
    nc.memset(s, 1.0)
    pad = nc.sbuf_tile((128, fill), "fp32", name="pad")
    for i in nc.sequential_range(iters):
        for j in nc.static_range(stores):
            nc.memset(pad, 0.0)
            nc.dma_copy(y[:, (i * stores + j) * 2048:(i * stores + j + 1) * 2048], s, engine="GpSimd")
        big = nc.sbuf_tile((128, 20480), "bf16", name="big")
        nc.dma_copy(big, x[:, i * 20480:(i + 1) * 20480])


def _splits(path) -> list[list[int]]:
    from tracer.schema import DMA_TRANSFER
    return pa.ipc.open_stream(path / "fast.trace" / DMA_TRANSFER.file_name).read_all()["split_packet"].to_pylist()


@pytest.mark.parametrize(("kernel", "params", "in_kernel"), [
    (_split_dma_kernel, {}, True),                   # packets of one length: split in the compiled loop
    (_split_dma_kernel, {"cols": 2100}, False),      # two packets per row of unequal lengths: Python splits
    (_many_gaps_kernel, {}, False),                  # more runs than the loop places
], ids=["equal-packets", "unequal-packets", "many-runs"])
def test_shares_split_around_other_packets_as_python_splits_them(tmp_path, monkeypatch, spy, kernel, params,  # noqa: PLR0917
                                                                  in_kernel):
    monkeypatch.setattr(controller, "TARGET", 8)
    monkeypatch.setattr(controller, "MIN_SEGMENT", 1)
    python, compiled = _both(monkeypatch, tmp_path, kernel, params, "trn1")
    assert spy["rows"] > 0.5 * compiled[0].instructions
    _assert_same(python, compiled)
    runs = max(len(s) for s in _splits(tmp_path)) + 1
    assert runs > (K.RUNS_MAX if kernel is _many_gaps_kernel else 1)
    assert (spy["transfer"] == 0) == in_kernel, dict(spy)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=body_strategy, iters=st.integers(6, 40), deviate=st.tuples(st.integers(0, 7), st.integers(0, 6)),
       carry=st.booleans(), inner=st.booleans(), scoped=st.booleans(), arch=st.sampled_from(["trn1", "trn2"]),
       prefill=st.booleans())
def test_random_looped_programs_compiled(tmp_path_factory, monkeypatch, body, iters, deviate, carry, inner,  # noqa: PLR0917
                                         scoped, arch, prefill):
    monkeypatch.setattr(controller, "TARGET", 4)
    monkeypatch.setattr(schedule_jit, "_WINDOW", 1)
    if not prefill:
        monkeypatch.setattr(schedule_jit.CoreArrays, "prefill_uniform", lambda *a: None)
    kern = _looped_kernel(body, iters, deviate, carry, inner, scoped)
    _assert_same(*_both(monkeypatch, tmp_path_factory.mktemp("jit"), kern, {}, arch))


@st.composite
def _reservations(draw):
    gaps = draw(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 50)), max_size=12))
    starts, ends, t = [], [], draw(st.integers(0, 20))
    for gap, length in gaps:
        starts.append(t + gap)
        ends.append(t + gap + length)
        t = ends[-1]
    requests = draw(st.lists(st.tuples(st.integers(0, t + 60), st.integers(1, 40)), min_size=1, max_size=8))
    return starts, ends, requests


@settings(max_examples=200, deadline=None)
@given(case=_reservations())
def test_kernel_reserve_matches_the_python_reserve(case):
    starts, ends, requests = case
    us, ue = np.zeros(32, np.int64), np.zeros(32, np.int64)
    n = len(starts)
    us[:n], ue[:n] = starts, ends
    for s, d in requests:
        before = (list(starts), list(ends))
        want = reserve(starts, ends, s, d)
        got, n, low = K.reserve(us, ue, n, s, d)
        assert got == want
        assert (us[:n].tolist(), ue[:n].tolist()) == (starts, ends)
        # nothing below the reported lowest changed index changed
        assert before[0][:low] == starts[:low] and before[1][:low] == ends[:low]


def test_switch_and_start_up(monkeypatch):
    monkeypatch.setenv(schedule_jit.ENV_SWITCH, "0")
    assert not schedule_jit.use(10 ** 9)
    monkeypatch.delenv(schedule_jit.ENV_SWITCH)
    monkeypatch.setattr(schedule_jit, "_loaded", {})
    monkeypatch.setattr(schedule_jit, "_python_rows", [0])
    monkeypatch.setattr(schedule_jit, "_load", lambda: True)
    assert not schedule_jit.use(schedule_jit.ENGAGE_ROWS - 1)  # not enough work yet to repay loading numba
    assert not schedule_jit.use(schedule_jit.MIN_ROWS - 1)  # too short to repay the hand-over
    assert schedule_jit.use(schedule_jit.MIN_ROWS)


def test_a_loop_predicting_a_long_run_loads_the_kernel_at_once(monkeypatch):
    """After a loop's first iteration, its instructions times the iterations left predict the run ahead: at least
    EXPECT_ROWS loads numba at the next segment instead of after ENGAGE_ROWS instructions in Python."""
    monkeypatch.delenv(schedule_jit.ENV_SWITCH, raising=False)
    monkeypatch.setattr(schedule_jit, "_loaded", {})
    monkeypatch.setattr(schedule_jit, "_python_rows", [0])
    monkeypatch.setattr(schedule_jit, "_expected", [False])
    monkeypatch.setattr(schedule_jit, "_load", lambda: True)
    schedule_jit.expect(schedule_jit.EXPECT_ROWS - 1)
    assert not schedule_jit.use(schedule_jit.MIN_ROWS)
    schedule_jit.expect(schedule_jit.EXPECT_ROWS)
    assert not schedule_jit.use(schedule_jit.MIN_ROWS - 1)  # still too short to hand over
    assert schedule_jit.use(schedule_jit.MIN_ROWS)

    # the fast path makes the prediction: softmax's row loop (64 iterations of a few instructions each)
    from tracer.sim import run_kernel

    for limit, expected in ((10 ** 9, False), (100, True)):
        monkeypatch.setattr(schedule_jit, "EXPECT_ROWS", limit)
        monkeypatch.setattr(schedule_jit, "_expected", [False])
        run_kernel("softmax", {"rows": 8192, "cols": 128})
        assert schedule_jit._expected[0] is expected


def test_a_broken_numba_falls_back_to_python_with_a_warning(monkeypatch):
    monkeypatch.setattr(schedule_jit, "_loaded", {})
    monkeypatch.setattr(schedule_jit, "_smoke_test", lambda: (_ for _ in ()).throw(RuntimeError("broken")))
    monkeypatch.setenv(schedule_jit.ENV_SWITCH, "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not schedule_jit.use(schedule_jit.MIN_ROWS)
    assert any("compiled scheduling loop is unavailable" in str(w.message) for w in caught)
    assert not schedule_jit.use(schedule_jit.MIN_ROWS)  # decided once
