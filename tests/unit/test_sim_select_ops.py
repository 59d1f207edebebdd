"""NKI's masking and fused-scalar operations: ``affine_select``, ``tensor_scalar`` with two operators, comparisons.

Values against numpy written out element by element (hypothesis), costs against the documented rules
(docs/cost-model.md, "Vector, Scalar, GpSimd": affine_select ``150 + N`` GpSimd cycles, a second tensor_scalar
operator free), the errors of misuse, and the causal attention kernel built on them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer import TraceReader
from tracer.errors import KernelError
from tracer.kernels.attention import reference
from tracer.sim import cost_model, run_kernel
from tracer.sim.numerics import COMPARE

P, F = 32, 24


def _ramp(_rng, shape):
    return ((np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape) % 23) - 11) / 4


def _select_kernel(offset, mult, step, cmp, fill):
    def kern(nc):
        _x, t, s = loaded(nc, init=_ramp)
        y = nc.output("y", (P, F), "fp32")
        nc.affine_select(s, t, fill, cmp=cmp, offset=offset, channel_multiplier=mult, step=step)
        nc.dma_copy(y, s)
    return kern


@settings(max_examples=40, deadline=None)
@given(offset=st.integers(-40, 40), mult=st.integers(-3, 3), step=st.integers(-3, 3),
       cmp=st.sampled_from(sorted(COMPARE)), fill=st.sampled_from([-3.0e38, -1.5, 0.0, 7.25]))
def test_affine_select_keeps_exactly_the_elements_whose_predicate_holds(offset, mult, step, cmp, fill):
    result = run_kernel(_select_kernel(offset, mult, step, cmp, fill), numerics=True)
    x = _ramp(None, (P, F))
    want = np.empty_like(x)
    ops = {"equal": lambda v: v == 0, "not_equal": lambda v: v != 0, "greater": lambda v: v > 0,
           "greater_equal": lambda v: v >= 0, "less": lambda v: v < 0, "less_equal": lambda v: v <= 0}
    for p in range(P):
        for f in range(F):
            want[p, f] = x[p, f] if ops[cmp](offset + p * mult + f * step) else fill
    np.testing.assert_array_equal(result.outputs["y"], want)


def loaded(nc, shape=(P, F), init=None):
    """An fp32 input (values from ``init``), an SBUF tile it was loaded into, and an SBUF destination of the same
    shape."""
    x = nc.input("x", shape, "fp32", init=init)
    t = nc.sbuf_tile(shape, "fp32", name="t")
    nc.dma_copy(t, x)
    return x, t, nc.sbuf_tile(shape, "fp32", name="d")


def instructions(tmp_path, kern, name, overrides=None, arch="trn2"):
    """The Instruction table of ``kern`` recorded on ``arch`` (with ``overrides``), as a dict of columns."""
    path = tmp_path / f"{name}.trace"
    run_kernel(kern, arch=arch, overrides=overrides, trace_path=path, emit="inline")
    return TraceReader(path).read_table("Instruction").to_pydict()


@pytest.mark.parametrize("arch", ["trn1", "trn2"])
def test_affine_select_costs_its_documented_estimate_on_gpsimd(tmp_path, arch):
    cm = cost_model(arch)
    ins = instructions(tmp_path, _select_kernel(0, 1, -1, "greater_equal", -1.0), "sel", arch=arch)
    i = ins["opcode"].index("AFFINE_SELECT")
    assert ins["engine"][i] == "GpSimd"
    assert ins["duration_ns"][i] == cm.cycles_to_ns(150 + F, cm.pool_clock_ghz)
    assert "cmp=greater_equal offset=0 channel_multiplier=1 step=-1" in ins["operands"][i]
    # the constant is overridable like every other, and the minimum interval still holds
    none = instructions(tmp_path, _select_kernel(0, 1, -1, "greater_equal", -1.0), "sel0",
                         {"affine_select_overhead_cycles": "0"}, arch=arch)
    assert none["duration_ns"][i] == cm.cycles_to_ns(max(64, F), cm.pool_clock_ghz)


def _scalar_kernel(op, operand, op1, operand1, reverse, reverse1, engine="Vector"):  # noqa: PLR0917
    def kern(nc):
        x = nc.input("x", (P, F), "fp32", init=_ramp)
        y = nc.output("y", (P, F), "fp32")
        t = nc.sbuf_tile((P, F), "fp32", name="t")
        nc.dma_copy(t, x)
        col = nc.sbuf_tile((P, 1), "fp32", name="col")
        nc.iota(col, base=0.5, partition_step=0.25)   # per-partition operands 0.5, 0.75, ...
        args = [col if a == "col" else a for a in (operand, operand1)]
        s = nc.sbuf_tile((P, F), "fp32", name="s")
        nc.tensor_scalar(s, t, op, args[0], reverse=reverse, op1=op1, operand1=args[1], reverse1=reverse1,
                         engine=engine)
        nc.dma_copy(y, s)
    return kern


_NP = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "max": np.maximum, "min": np.minimum,
       "greater": np.greater, "less_equal": np.less_equal, "not_equal": np.not_equal}


@settings(max_examples=40, deadline=None)
@given(op=st.sampled_from(sorted(_NP)), op1=st.sampled_from([None, *sorted(_NP)]),
       operand=st.sampled_from([-1.5, 0.25, 2.0, "col"]), operand1=st.sampled_from([-0.5, 3.0, "col"]),
       reverse=st.booleans(), reverse1=st.booleans(), engine=st.sampled_from(["Vector", "GpSimd"]))
def test_tensor_scalar_applies_both_operators_in_order_each_side_as_asked(op, op1, operand, operand1, reverse,  # noqa: PLR0917
                                                                         reverse1, engine):
    if op1 is None:
        operand1, reverse1 = None, False
    result = run_kernel(_scalar_kernel(op, operand, op1, operand1, reverse, reverse1, engine), numerics=True)
    x = _ramp(None, (P, F)).astype(np.float64)
    col = (0.5 + 0.25 * np.arange(P, dtype=np.float64))[:, None]
    a = col if operand == "col" else operand
    want = _NP[op](a, x) if reverse else _NP[op](x, a)
    if op1 is not None:
        b = col if operand1 == "col" else operand1
        want = _NP[op1](b, want) if reverse1 else _NP[op1](want, b)
    np.testing.assert_allclose(result.outputs["y"], np.asarray(want, np.float32), rtol=1e-6)


def test_a_second_operator_costs_nothing(tmp_path):
    one = instructions(tmp_path, _scalar_kernel("multiply", 2.0, None, None, False, False), "one")
    two = instructions(tmp_path, _scalar_kernel("multiply", 2.0, "add", "col", True, True), "two")
    i = one["opcode"].index("TENSOR_SCALAR")
    assert two["opcode"][i] == "TENSOR_SCALAR"
    assert two["duration_ns"][i] == one["duration_ns"][i]
    assert "op=multiply reversed op1=add reversed" in two["operands"][i]
    # the second operand is read: the instruction waits for the iota that wrote it
    assert two["start_ts"][i] >= two["end_ts"][two["opcode"].index("IOTA")]


def test_comparisons_give_ones_and_zeros_in_tensor_tensor():
    def kern(nc):
        _x, t, half = loaded(nc, init=_ramp)
        y = nc.output("y", (P, F), "bf16")
        nc.tensor_scalar(half, t, "multiply", 0.5)
        out = nc.sbuf_tile((P, F), "bf16", name="out")
        nc.tensor_tensor(out, t, half, "greater")   # x > x/2 exactly where x > 0
        nc.dma_copy(y, out)
    result = run_kernel(kern, numerics=True)
    x = _ramp(None, (P, F))
    np.testing.assert_array_equal(result.outputs["y"], (x > 0).astype(np.float32))


def _bad(case):
    def kern(nc):
        _x, t, d = loaded(nc)
        if case == "op1-alone":
            nc.tensor_scalar(d, t, "add", 1.0, op1="multiply")
        elif case == "operand1-alone":
            nc.tensor_scalar(d, t, "add", 1.0, operand1=2.0)
        elif case == "reverse1-alone":
            nc.tensor_scalar(d, t, "add", 1.0, reverse1=True)
        elif case == "reverse-text":
            nc.tensor_scalar(d, t, "subtract", 1.0, reverse="yes")
        elif case == "op1-unknown":
            nc.tensor_scalar(d, t, "add", 1.0, op1="pow", operand1=2.0)
        elif case == "select-psum":
            ps = nc.psum_tile((P, F), "fp32", name="ps")
            nc.tensor_copy(ps, t)
            nc.affine_select(d, ps, 0.0, cmp="equal", channel_multiplier=1)
        elif case == "select-float":
            nc.affine_select(d, t, 0.0, cmp="equal", offset=0.5)
        elif case == "select-cmp":
            nc.affine_select(d, t, 0.0, cmp=">=")
        elif case == "select-shape":
            nc.affine_select(d[:, 0:4], t, 0.0, cmp="equal")
        elif case == "select-unwritten":
            u = nc.sbuf_tile((P, F), "fp32", name="u")
            nc.affine_select(d, u, 0.0, cmp="equal")
        elif case == "select-symbolic":
            for i in nc.affine_range(2):
                nc.affine_select(d, t, 0.0, cmp="equal", offset=i * 4)
    return kern


@pytest.mark.parametrize(("case", "message"), [
    ("op1-alone", "tensor_scalar got op1 without operand1"),
    ("operand1-alone", "tensor_scalar got operand1 without op1"),
    ("reverse1-alone", "reverse1=True without a second operator"),
    ("reverse-text", "reverse must be True or False, not str 'yes'"),
    ("op1-unknown", "unknown tensor_scalar op1 'pow'; choose one of add, subtract"),
    ("select-psum", "src must be in SBUF, not PSUM"),
    ("select-float", "affine_select offset must be an integer, not float '0.5'"),
    ("select-cmp", "unknown affine_select cmp '>='; choose one of equal, not_equal"),
    ("select-shape", "shape mismatch: dst 32x4, src 32x24"),
    ("select-unwritten", "src reads tile u .* before it was written"),
    ("select-symbolic", "symbolic loop index cannot be passed as a value .*nc.sequential_range"),
])
def test_misuse_is_a_kernel_error_naming_the_line(case, message):
    with pytest.raises(KernelError, match=message) as err:
        run_kernel(_bad(case), numerics=True)
    assert "test_sim_select_ops.py:" in str(err.value).split(":")[0] + ":"


@pytest.mark.parametrize(("kv_block", "dtype", "arch"), [(128, "bf16", "trn2"), (64, "bf16", "trn1"),
                                                          (32, "fp32", "trn2")])
def test_causal_attention_matches_numpy_and_skips_the_blocks_after_the_diagonal(kv_block, dtype, arch):
    params = {"seq": 512, "head_dim": 64, "kv_block": kv_block, "dtype": dtype}
    causal = run_kernel("attention", {**params, "causal": True}, arch=arch, check=True)
    full = run_kernel("attention", params, arch=arch)
    assert causal.checks[0].ok
    qblocks, kblocks = 512 // 128, 512 // kv_block
    visited = sum(math.ceil((q + 1) * 128 / kv_block) for q in range(qblocks))
    crossing = sum(1 for q in range(qblocks) for k in range(math.ceil((q + 1) * 128 / kv_block))
                   if (k + 1) * kv_block - 1 > q * 128)
    # two matmuls (scores, P V) and a PE transpose per visited block, each with its LDWEIGHTS
    assert full.engine_instructions["Tensor"] - causal.engine_instructions["Tensor"] == \
        6 * (qblocks * kblocks - visited)
    # one AFFINE_SELECT per block crossing the diagonal, on GpSimd (the memsets of each query block beside it)
    assert causal.engine_instructions["GpSimd"] - full.engine_instructions["GpSimd"] == crossing
    assert causal.simulated_ns < full.simulated_ns


def test_causal_attention_differs_from_the_full_one_where_it_should():
    params = {"seq": 256, "head_dim": 64}
    causal = run_kernel("attention", {**params, "causal": True}, numerics=True).outputs["o"]
    full = run_kernel("attention", params, numerics=True).outputs["o"]
    # the last query sees every key either way; the first only the first key
    np.testing.assert_allclose(causal[-1], full[-1], rtol=0, atol=1e-2)
    assert not np.allclose(causal[0], full[0], atol=1e-2)
    # the oracle --check uses: the first query's output is v[0], the last the full attention's
    rng = np.random.default_rng(3)
    inputs = {"q_t": rng.normal(size=(64, 256)), "k_t": rng.normal(size=(64, 256)), "v": rng.normal(size=(256, 64))}
    ref = reference(inputs, causal=True)["o"]
    np.testing.assert_allclose(ref[0], inputs["v"][0])
    np.testing.assert_allclose(ref[-1], reference(inputs)["o"][-1])
    assert not np.allclose(ref[1], reference(inputs)["o"][1])


def _bad_number(case):
    def kern(nc):
        _x, t, d = loaded(nc)
        if case == "int64-multiplier":
            nc.affine_select(d, t, -1.0, cmp="greater_equal", channel_multiplier=2 ** 62)
        elif case == "huge-offset":
            nc.affine_select(d, t, -1.0, cmp="greater_equal", offset=2 ** 70)
        elif case == "huge-fill":
            nc.affine_select(d, t, 10 ** 400, cmp="equal")
        elif case == "fill-beyond-float32":
            nc.affine_select(d, t, -1e39, cmp="equal")
        elif case == "bool-fill":
            nc.affine_select(d, t, True, cmp="equal")
        elif case == "huge-operand1":
            nc.tensor_scalar(d, t, "add", 1.0, op1="add", operand1=10 ** 400)
        elif case == "numpy-float-offset":   # an integral numpy float is an integer
            nc.affine_select(d, t, -1.0, cmp="greater_equal", offset=np.float32(2.0), channel_multiplier=1)
    return kern


@pytest.mark.parametrize(("case", "message"), [
    ("int64-multiplier", "affine_select channel_multiplier 4611686018427387904 does not fit int32"),
    ("huge-offset", "affine_select offset 1180591620717411303424 does not fit int32"),
    ("huge-fill", r"on_false_value 10{19}\.\.\. is beyond float32 .*use float\('inf'\)"),
    ("fill-beyond-float32", r"on_false_value -1e\+39 is beyond float32"),
    ("bool-fill", "on_false_value must be a number, not bool 'True'"),
    ("huge-operand1", r"operand1 10{19}\.\.\. is beyond float32"),
])
def test_numbers_an_engine_cannot_hold_are_refused_in_every_mode(case, message):
    for numerics in (False, True):   # (a timing-only run checks them alike)
        with pytest.raises(KernelError, match=message) as err:
            run_kernel(_bad_number(case), numerics=numerics)
        assert str(err.value).startswith("test_sim_select_ops.py:")


def test_an_integral_numpy_float_is_an_integer_coefficient():
    result = run_kernel(_bad_number("numpy-float-offset"), numerics=True)
    assert result.instructions > 0


def test_a_psum_operand_halves_the_performance_mode(tmp_path):
    def kern(nc):
        x = nc.input("x", (128, 512), "bf16")
        t = nc.sbuf_tile((128, 512), "bf16", name="t")
        nc.dma_copy(t, x)
        col = nc.sbuf_tile((128, 1), "fp32", name="col")
        nc.memset(col, 2.0)
        pcol = nc.psum_tile((128, 1), "fp32", name="pcol")
        nc.tensor_copy(pcol, col)
        for operand in (col, pcol):
            d = nc.sbuf_tile((128, 512), "bf16", name="d")
            nc.tensor_scalar(d, t, "multiply", 1.0, op1="add", operand1=operand)
    path = tmp_path / "perf.trace"
    run_kernel(kern, arch="trn2", trace_path=path, emit="inline")
    ins = TraceReader(path).read_table("Instruction").to_pydict()
    modes = [m for op, m in zip(ins["opcode"], ins["performance_mode"], strict=True) if op == "TENSOR_SCALAR"]
    assert modes == ["4x", "2x"]


# -- select_reduce: a data-dependent mask ------------------------------------------------------------------------------
def _select_reduce_kernel(threshold, on_false, reverse, reduce):
    def kern(nc):
        _x, t, d = loaded(nc, init=_ramp)
        pred = nc.sbuf_tile((P, F), "bf16", name="pred")
        nc.tensor_scalar(pred, t, "greater", threshold)          # 1.0 / 0.0, as NKI's integer predicate
        col = nc.sbuf_tile((P, 1), "fp32", name="col")
        nc.iota(col, base=-9.0, partition_step=0.5)
        r = nc.sbuf_tile((P, 1), "fp32", name="r")
        nc.memset(r, 0.0)
        nc.select_reduce(d, pred, t, col if on_false == "col" else on_false, reduce_res=r if reduce else None,
                         reverse_pred=reverse)
        nc.dma_copy(nc.output("y", (P, F), "fp32"), d)
        nc.dma_copy(nc.output("r", (P, 1), "fp32"), r)
    return kern


@settings(max_examples=30, deadline=None)
@given(threshold=st.sampled_from([-1.0, 0.0, 0.75, 5.0]), on_false=st.sampled_from([-3.0e38, 0.0, "col"]),
       reverse=st.booleans(), reduce=st.booleans())
def test_select_reduce_picks_by_the_predicate_and_reduces_the_result(threshold, on_false, reverse, reduce):
    out = run_kernel(_select_reduce_kernel(threshold, on_false, reverse, reduce), numerics=True).outputs
    x = _ramp(None, (P, F))
    keep = (x > threshold) != reverse
    other = (-9.0 + 0.5 * np.arange(P, dtype=np.float32))[:, None] if on_false == "col" else np.float32(on_false)
    want = np.where(keep, x, other).astype(np.float32)
    np.testing.assert_array_equal(out["y"], want)
    np.testing.assert_array_equal(out["r"], want.max(axis=1, keepdims=True) if reduce else np.zeros((P, 1)))


def test_select_reduce_costs_two_inputs_and_misuse_is_refused(tmp_path):
    cm = cost_model("trn2")
    ins = instructions(tmp_path, _select_reduce_kernel(0.0, 0.0, False, True), "selred")
    i = ins["opcode"].index("SELECT_REDUCE")
    assert ins["engine"][i] == "Vector"
    # two inputs; it reads the predicate the Vector instruction before it wrote: the dependent overhead too
    assert ins["duration_ns"][i] == cm.cycles_to_ns(60 + 2 * F + 100, cm.dve_clock_ghz)

    def bad(case):
        def kern(nc):
            _x, t, d = loaded(nc)
            if case == "add":
                nc.select_reduce(d, t, t, 0.0, reduce_op="add")
            elif case == "psum":
                ps = nc.psum_tile((P, F), "fp32", name="ps")
                nc.tensor_copy(ps, t)
                nc.select_reduce(d, ps, ps, 0.0)
            else:
                nc.select_reduce(d, t, t, 0.0, reduce_res=d)
        return kern
    for case, message in [("add", "select_reduce reduces with max only .*not 'add'"),
                          ("psum", "select_reduce reads predicate and on_true both from PSUM"),
                          ("res", r"reduce_res must be \[32, 1\], got 32x24")]:
        with pytest.raises(KernelError, match=message) as err:
            run_kernel(bad(case))
        assert str(err.value).startswith("test_sim_select_ops.py:")
