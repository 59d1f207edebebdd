"""``dma_transpose``: values, cost (the documented transpose efficiency), errors, and the same trace from every path.

The DMA engines transpose from HBM at ``dma_transpose_hbm_efficiency`` (0.9) and from SBUF at
``dma_transpose_sbuf_efficiency`` (0.5) of the rate a copy of the destination's shape gets (docs/cost-model.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_sim_affine import _affine_kernel
from tests.unit.test_sim_affine import _assert_same as _assert_same_symbolic
from tests.unit.test_sim_affine import _run as _run_affine
from tests.unit.test_sim_dependencies import check_trace_dependencies
from tests.unit.test_sim_fastpath import _assert_same, _looped_kernel, _run
from tracer import TraceReader
from tracer.errors import ConfigError, KernelError
from tracer.sim import cost_model, run_kernel
from tracer.sim.fastpath import controller, schedule_jit

ROWS, COLS = 96, 64          # a rectangular source: the destination is 64 x 96


def _ramp(rng, shape):
    return (np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape) % 97) - 48


def _transposes(dtype: str):
    def kern(nc):
        x = nc.input("x", (ROWS, COLS), dtype, init=_ramp)
        y = nc.output("y", (ROWS, COLS), dtype)
        t = nc.sbuf_tile((COLS, ROWS), dtype, name="xt")
        nc.dma_transpose(t, x)                      # HBM -> SBUF: x^T
        back = nc.sbuf_tile((ROWS, COLS), dtype, name="back")
        nc.dma_transpose(back, t, engine="GpSimd")  # SBUF -> SBUF: x again
        nc.dma_copy(y, back)
        z = nc.output("z", (COLS, ROWS), dtype)
        nc.dma_copy(z, t)
    return kern


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_values_are_transposed_from_hbm_and_from_sbuf(dtype):
    result = run_kernel(_transposes(dtype), numerics=True)
    x = _ramp(None, (ROWS, COLS))   # small integers: exact in both types
    np.testing.assert_array_equal(result.outputs["z"], x.T)
    np.testing.assert_array_equal(result.outputs["y"], x)


def _one_dma(transpose: bool):
    """One 128 x 1024 bf16 destination (2 KiB per partition row), copied or transposed from HBM."""
    def kern(nc):
        x = nc.input("x", (1024, 128) if transpose else (128, 1024), "bf16")
        dst = nc.sbuf_tile((128, 1024), "bf16", name="dst")
        (nc.dma_transpose if transpose else nc.dma_copy)(dst, x)
    return kern


def _packets(tmp_path, kern, name, overrides=None):
    path = tmp_path / f"{name}.trace"
    run_kernel(kern, arch="trn2", overrides=overrides, trace_path=path, emit="inline")
    reader = TraceReader(path)
    pk = reader.read_table("DmaPacket").to_pydict()
    ins = reader.read_table("Instruction").to_pydict()
    return np.asarray(pk["duration_ns"]), pk, ins


def test_a_transpose_from_hbm_runs_at_its_efficiency(tmp_path):
    cm = cost_model("trn2")
    copy, _pk, _ins = _packets(tmp_path, _one_dma(False), "copy")
    tr, pk, ins = _packets(tmp_path, _one_dma(True), "transpose")
    row = 1024 * 2
    assert len(tr) == len(copy) == 128                                  # one packet per destination partition row
    assert (copy == cm.dma_packet_ns(row, row)).all()
    assert (tr == cm.dma_packet_ns(row, row, 0.9)).all()
    assert tr[0] == pytest.approx(copy[0] / 0.9, abs=1)
    assert sum(pk["transfer_bytes"]) == 128 * row
    assert any("transpose" in text for text in ins["operands"])


def test_a_transpose_within_sbuf_runs_at_its_efficiency_and_the_constant_can_be_changed(tmp_path):
    def kern(nc):
        x = nc.input("x", (128, 128), "bf16")
        src = nc.sbuf_tile((128, 128), "bf16", name="src")
        nc.dma_copy(src, x)
        dst = nc.sbuf_tile((128, 128), "bf16", name="dst")
        nc.dma_transpose(dst, src)
        copy = nc.sbuf_tile((128, 128), "bf16", name="copy")
        nc.dma_copy(copy, src)
    cm = cost_model("trn2")
    dur, pk, _ins = _packets(tmp_path, kern, "sb")
    qnames = np.asarray(pk["queue_name"])
    sb = np.char.find(qnames.astype(str), "SB") >= 0
    row = 128 * 2
    transposed, copied = dur[sb][:128], dur[sb][128:]
    assert (transposed == cm.dma_packet_ns(row, row, 0.5)).all() and (copied == cm.dma_packet_ns(row, row)).all()
    assert transposed.sum() > 1.9 * copied.sum()
    same, _pk, _ins = _packets(tmp_path, kern, "sb1", {"dma_transpose_sbuf_efficiency": "1"})
    assert (same[sb][:128] == copied).all()


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2"])
def test_the_efficiencies_are_fractions(value):
    with pytest.raises(ConfigError, match="dma_transpose_hbm_efficiency"):
        cost_model("trn1", {"dma_transpose_hbm_efficiency": value})


def _bad(case: str):
    def kern(nc):
        x = nc.input("x", (128, 64), "bf16")
        x32 = nc.input("x32", (128, 64), "fp32")
        t = nc.sbuf_tile((64, 128), "bf16", name="t")
        if case == "fp32":
            nc.dma_transpose(nc.sbuf_tile((64, 128), "fp32"), x32)
        elif case == "shape":
            nc.dma_transpose(nc.sbuf_tile((128, 64), "bf16"), x)
        elif case == "psum-src":
            ps = nc.psum_tile((128, 64), "bf16")
            nc.memset(ps, 0.0)
            nc.dma_transpose(t, ps)
        elif case == "hbm-dst":
            nc.dma_transpose(nc.output("y", (64, 128), "bf16"), x)
        elif case == "broadcast":
            nc.dma_transpose(nc.sbuf_tile((64, 128), "bf16"), x[0:1, :].broadcast(128))
        elif case == "convert":
            nc.dma_transpose(nc.sbuf_tile((64, 128), "fp16"), x)
        elif case == "engine":
            nc.dma_transpose(t, x, engine="Tensor")
        elif case == "unwritten":
            nc.dma_transpose(t, nc.sbuf_tile((128, 64), "bf16", name="empty"))
    return kern


@pytest.mark.parametrize(("case", "message"), [
    ("fp32", "2-byte elements"),
    ("shape", "needs a 64x128 destination, not 128x64"),
    ("psum-src", "cannot access PSUM"),
    ("hbm-dst", "must be in SBUF, not HBM"),
    ("broadcast", "cannot read a broadcast view"),
    ("convert", "cannot convert bf16 to fp16"),
    ("engine", "engine 'Tensor' cannot run this operation"),
    ("unwritten", "before it was written"),
])
def test_bad_transposes_name_the_kernel_line(case, message):
    with pytest.raises(KernelError, match=message) as err:
        run_kernel(_bad(case))
    assert "test_sim_dma_transpose.py:" in str(err.value)


# Loop bodies with transposes from HBM (odd b) and within SBUF (even b; in place when a == b), among other work.
BODY = [("dmat", 0, 1, 0), ("vec", 1, 2, 3), ("dmat", 1, 0, 1), ("act", 2, 0, 1), ("dmat", 2, 2, 0), ("load", 3, 1, 0)]


def test_looped_transposes_write_the_same_trace_on_every_path(tmp_path, monkeypatch):
    monkeypatch.setattr(controller, "TARGET", 8)
    monkeypatch.setattr(controller, "MIN_SEGMENT", 2)
    kern = _looped_kernel(BODY, 24, (5, 2), True, True, False)
    general = _run(tmp_path, kern, {}, "trn2", False)
    fast = _run(tmp_path, kern, {}, "trn2", True)
    assert fast[0].fast_path_instructions > 0.5 * fast[0].instructions
    _assert_same(general, fast)
    assert check_trace_dependencies(general[1]) > 0
    monkeypatch.setenv(schedule_jit.ENV_SWITCH, "1")   # the compiled scheduling loop from the first segment
    (tmp_path / "jit").mkdir()
    _assert_same(general, _run(tmp_path / "jit", kern, {}, "trn2", True))


def test_affine_loops_with_transposes_expand_to_the_concrete_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(controller, "TARGET", 8)
    kern = _affine_kernel(BODY, 5, 3, "sequential", False, 2, deep=True)
    concrete = _run_affine(tmp_path, kern, {}, "trn1", False, False)
    symbolic = _run_affine(tmp_path, kern, {}, "trn1", True, True)
    _assert_same_symbolic(concrete, symbolic)


def test_attention_can_transpose_its_probabilities_by_dma():
    """The choice the parameter offers, measured: the DMA's start latency sits in every kv step's chain."""
    pe = run_kernel("attention", {"seq": 512, "probs_transpose": "pe"})
    dma = run_kernel("attention", {"seq": 512, "probs_transpose": "dma"})
    no_latency = run_kernel("attention", {"seq": 512, "probs_transpose": "dma"},
                            overrides={"dma_start_latency_ns": "0"})
    assert dma.simulated_ns > pe.simulated_ns > 0
    assert no_latency.simulated_ns < dma.simulated_ns
    with pytest.raises(ConfigError, match="2-byte dtype"):
        run_kernel("attention", {"seq": 256, "probs_transpose": "dma", "dtype": "fp32"})
    with pytest.raises(ConfigError, match="must be pe or dma"):
        run_kernel("attention", {"seq": 256, "probs_transpose": "vector"})
