"""NKI's fused Vector instructions: ``scalar_tensor_tensor``, ``tensor_scalar_reduce`` and ``tensor_tensor_scan``.

Values against numpy written out step by step (hypothesis), costs against the documented estimates
(docs/cost-model.md, "Vector, Scalar, GpSimd"), and the errors of misuse.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_sim_select_ops import instructions, loaded
from tracer.errors import KernelError
from tracer.sim import cost_model, run_kernel

P, F = 16, 20
_NP = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "max": np.maximum, "min": np.minimum}


def _init(seed):
    def init(_rng, shape):
        return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)
    return init


def _kernel(case, dtype="fp32", f=F, **kw):
    def kern(nc):
        x = nc.input("x", (P, f), dtype, init=_init(1))
        w = nc.input("w", (P, f), dtype, init=_init(2))
        y = nc.output("y", (P, f), "fp32")
        r_out = nc.output("r", (P, 1), "fp32")
        t = nc.sbuf_tile((P, f), dtype, name="t")
        nc.dma_copy(t, x)
        u = nc.sbuf_tile((P, f), dtype, name="u")
        nc.dma_copy(u, w)
        col = nc.sbuf_tile((P, 1), "fp32", name="col")
        nc.iota(col, base=-1.0, partition_step=0.125)
        arg = {k: (col if v == "col" else v) for k, v in kw.items()}
        out = nc.sbuf_tile((P, f), "fp32", name="out")
        r = nc.sbuf_tile((P, 1), "fp32", name="r")
        nc.memset(r, 0.0)
        if case == "stt":
            nc.scalar_tensor_tensor(out, t, arg["op0"], arg["operand0"], arg["op1"], u, reverse0=arg["reverse0"],
                                    reverse1=arg["reverse1"])
        elif case == "tsr":
            nc.tensor_scalar_reduce(out, t, arg["op"], arg["operand"], reduce_dst=r, reduce_op=arg["reduce_op"],
                                    reverse=arg["reverse"])
        else:
            nc.tensor_tensor_scan(out, t, u, arg["initial"], arg["op0"], arg["op1"], reverse0=arg["reverse0"],
                                  reverse1=arg["reverse1"])
        nc.dma_copy(y, out)
        nc.dma_copy(r_out, r)
    return kern


def _side(fn, a, b, reverse):
    return fn(b, a) if reverse else fn(a, b)


COL = (-1.0 + 0.125 * np.arange(P, dtype=np.float64))[:, None]
ops = st.sampled_from(sorted(_NP))


@settings(max_examples=30, deadline=None)
@given(op0=ops, op1=ops, operand0=st.sampled_from([0.5, -3.0, "col"]), reverse0=st.booleans(), reverse1=st.booleans())
def test_scalar_tensor_tensor_values(op0, op1, operand0, reverse0, reverse1):
    kw = {"op0": op0, "op1": op1, "operand0": operand0, "reverse0": reverse0, "reverse1": reverse1}
    got = run_kernel(_kernel("stt", **kw), numerics=True).outputs["y"]
    x, w = _init(1)(None, (P, F)).astype(np.float64), _init(2)(None, (P, F)).astype(np.float64)
    a = COL if operand0 == "col" else operand0
    want = _side(_NP[op1], _side(_NP[op0], x, a, reverse0), w, reverse1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(op=ops, operand=st.sampled_from([0.5, -3.0, "col"]), reduce_op=st.sampled_from(["add", "max", "min"]),
       reverse=st.booleans())
def test_tensor_scalar_reduce_values(op, operand, reduce_op, reverse):
    kw = {"op": op, "operand": operand, "reduce_op": reduce_op, "reverse": reverse}
    out = run_kernel(_kernel("tsr", **kw), numerics=True).outputs
    x = _init(1)(None, (P, F)).astype(np.float64)
    want = _side(_NP[op], x, COL if operand == "col" else operand, reverse)
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-5)
    red = {"add": np.sum, "max": np.max, "min": np.min}[reduce_op](want, axis=1, keepdims=True)
    np.testing.assert_allclose(out["r"], red, rtol=1e-5, atol=1e-4)


@settings(max_examples=30, deadline=None)
@given(op0=st.sampled_from(["add", "multiply", "max"]), op1=st.sampled_from(["add", "subtract", "multiply"]),
       initial=st.sampled_from([0.0, 1.5, "col"]), reverse0=st.booleans(), reverse1=st.booleans())
def test_tensor_tensor_scan_values_column_by_column(op0, op1, initial, reverse0, reverse1):
    kw = {"op0": op0, "op1": op1, "initial": initial, "reverse0": reverse0, "reverse1": reverse1}
    got = run_kernel(_kernel("scan", f=8, **kw), numerics=True).outputs["y"]
    x, w = _init(1)(None, (P, 8)).astype(np.float64), _init(2)(None, (P, 8)).astype(np.float64)
    prev = (COL if initial == "col" else np.full((P, 1), initial))[:, 0]
    want = np.empty_like(x)
    for i in range(8):
        # NKI's definition: result[:, i] = op1(op0(data0[:, i], result[:, i-1]), data1[:, i]); reverse swaps
        prev = want[:, i] = _side(_NP[op1], _side(_NP[op0], x[:, i], prev, reverse0), w[:, i], reverse1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _durations(tmp_path, kern, name, arch="trn2"):
    ins = instructions(tmp_path, kern, name, arch=arch)
    return dict(zip(ins["opcode"], ins["duration_ns"], strict=True))


@pytest.mark.parametrize("arch", ["trn1", "trn2"])
def test_costs_are_the_documented_estimates(tmp_path, arch):
    cm = cost_model(arch)
    ns = lambda cycles: cm.cycles_to_ns(cycles, cm.dve_clock_ghz)  # noqa: E731
    base = {"op0": "add", "op1": "multiply", "operand0": 0.5, "reverse0": False, "reverse1": False}
    # two inputs (as tensor_tensor): 2N; bf16 data and operand1 with subtract then multiply and N even: N
    assert _durations(tmp_path, _kernel("stt", **base), "stt", arch)["SCALAR_TENSOR_TENSOR"] == ns(60 + 2 * F)
    fast = {**base, "op0": "subtract"}
    assert _durations(tmp_path, _kernel("stt", dtype="bf16", **fast), "stt16", arch)["SCALAR_TENSOR_TENSOR"] == \
        ns(60 + F)
    assert _durations(tmp_path, _kernel("stt", dtype="bf16", f=21, **fast), "stt21", arch)["SCALAR_TENSOR_TENSOR"] \
        == ns(60 + 2 * 21)
    assert _durations(tmp_path, _kernel("stt", **fast), "stt32", arch)["SCALAR_TENSOR_TENSOR"] == ns(60 + 2 * F)
    # tensor_scalar's cost plus one minimum interval for the reduction
    tsr = {"op": "add", "operand": 1.0, "reduce_op": "add", "reverse": False}
    assert _durations(tmp_path, _kernel("tsr", f=200, **tsr), "tsr", arch)["TENSOR_SCALAR_REDUCE"] == \
        ns(60 + 200 + 64)
    scan = {"op0": "multiply", "op1": "add", "initial": 0.0, "reverse0": False, "reverse1": False}
    assert _durations(tmp_path, _kernel("scan", f=200, **scan), "scan", arch)["TENSOR_TENSOR_SCAN"] == \
        ns(60 + 2 * 200)


def _bad(case):
    def kern(nc):
        _x, t, d = loaded(nc, (P, F))
        r = nc.sbuf_tile((P, 1), "fp32", name="r")
        ps = nc.psum_tile((P, F), "fp32", name="ps")
        nc.tensor_copy(ps, t)
        ps2 = nc.psum_tile((P, F), "fp32", name="ps2")
        nc.tensor_copy(ps2, t)
        if case == "stt-operand1-column":
            nc.scalar_tensor_tensor(d, t, "add", 1.0, "multiply", r)
        elif case == "stt-two-psum":
            nc.scalar_tensor_tensor(d, ps, "add", 1.0, "multiply", ps2)
        elif case == "stt-op":
            nc.scalar_tensor_tensor(d, t, "add", 1.0, "power", t)
        elif case == "tsr-reduce-shape":
            nc.tensor_scalar_reduce(d, t, "add", 1.0, reduce_dst=d)
        elif case == "tsr-reduce-op":
            nc.tensor_scalar_reduce(d, t, "add", 1.0, reduce_dst=r, reduce_op="subtract")
        elif case == "scan-two-psum":
            nc.tensor_tensor_scan(d, ps, ps2, 0.0, "add", "add")
        elif case == "scan-initial":
            nc.tensor_tensor_scan(d, t, t, t, "add", "add")
        elif case == "scan-reverse":
            nc.tensor_tensor_scan(d, t, t, 0.0, "add", "add", reverse1=1)
    return kern


@pytest.mark.parametrize(("case", "message"), [
    ("stt-operand1-column", "shape mismatch: dst 16x20, data 16x20, operand1 16x1"),
    ("stt-two-psum", "reads data and operand1 both from PSUM"),
    ("stt-op", "unknown scalar_tensor_tensor op1 'power'"),
    ("tsr-reduce-shape", r"reduce_dst must be \[16, 1\], got 16x20"),
    ("tsr-reduce-op", "unknown tensor_scalar_reduce reduce_op 'subtract'; choose one of add, max, min"),
    ("scan-two-psum", "reads data0 and data1 both from PSUM"),
    ("scan-initial", r"initial must be a number or a \[16, 1\] tile slice, got 16x20"),
    ("scan-reverse", "reverse1 must be True or False, not int '1'"),
])
def test_misuse_is_a_kernel_error_naming_the_line(case, message):
    with pytest.raises(KernelError, match=message) as err:
        run_kernel(_bad(case), numerics=True)
    assert str(err.value).startswith("test_sim_fused_ops.py:")


# -- max8 / find_index8 (top-k) ---------------------------------------------------------------------------------------
def _top8(f, seed, dst_dtype="fp32"):
    def init(_rng, shape):   # few distinct values: ties, and values found more than once
        return np.random.default_rng(seed).integers(-6, 7, shape).astype(np.float32) / 2
    def kern(nc):
        x = nc.input("x", (P, f), "fp32", init=init)
        v_out = nc.output("v", (P, 8), "fp32")
        i_out = nc.output("i", (P, 8), "fp32")
        t = nc.sbuf_tile((P, f), "fp32", name="t")
        nc.dma_copy(t, x)
        m = nc.sbuf_tile((P, 8), "fp32", name="m")
        nc.max8(m, t)
        ix = nc.sbuf_tile((P, 8), dst_dtype, name="ix")
        nc.find_index8(ix, t, m)
        nc.dma_copy(v_out, m)
        nc.dma_copy(i_out, ix)
    return kern, init


def _pairing(row, vals, descending):
    """NKI's pairing, written out: a value vals holds k times takes its first k positions in row, ascending across
    its columns (find_index8) or descending (match_replace8); -1 for a column with none left."""
    out = [-1.0] * len(vals)
    for v in set(vals):
        cols = [j for j, u in enumerate(vals) if u == v]
        found = [i for i, u in enumerate(row) if u == v][:len(cols)]
        for j, i in zip(cols[::-1] if descending else cols, found, strict=False):
            out[j] = float(i)
    return out


@settings(max_examples=25, deadline=None)
@given(f=st.integers(8, 300), seed=st.integers(0, 10 ** 6))
def test_max8_and_find_index8_against_a_sort_and_a_search(f, seed):
    kern, init = _top8(f, seed)
    out = run_kernel(kern, numerics=True).outputs
    x = init(None, (P, f))
    for p in range(P):
        want = sorted(x[p].tolist(), reverse=True)[:8]
        assert out["v"][p].tolist() == want
        assert out["i"][p].tolist() == _pairing(x[p].tolist(), want, False)


def test_find_index8_and_match_replace8_pair_duplicates_as_nki_documents():
    """NKI's example: data [1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8], vals [3, 8, 8, 8, 8, 8, 8, 8]: match_replace8's
    positions are [2, 10, 9, 8, 7, 6, 5, 4], find_index8's the other way round across the duplicates."""
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)

    def kern(nc):
        x = nc.input("x", (1, 11), "fp32", init=data)
        w = nc.input("w", (1, 8), "fp32", init=vals)
        t = nc.sbuf_tile((1, 11), "fp32", name="t")
        nc.dma_copy(t, x)
        v = nc.sbuf_tile((1, 8), "fp32", name="v")
        nc.dma_copy(v, w)
        found = nc.sbuf_tile((1, 8), "fp32", name="found")
        nc.find_index8(found, t, v)
        rep = nc.sbuf_tile((1, 11), "fp32", name="rep")
        idx = nc.sbuf_tile((1, 8), "fp32", name="idx")
        nc.match_replace8(rep, t, v, -1.0, dst_idx=idx)
        for name, tile, shape in (("found", found, (1, 8)), ("rep", rep, (1, 11)), ("idx", idx, (1, 8))):
            nc.dma_copy(nc.output(name, shape, "fp32"), tile)
    out = run_kernel(kern, numerics=True).outputs
    assert out["idx"][0].tolist() == [2, 10, 9, 8, 7, 6, 5, 4]
    assert out["found"][0].tolist() == [2, 4, 5, 6, 7, 8, 9, 10]
    assert out["rep"][0].tolist() == [1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]


@settings(max_examples=25, deadline=None)
@given(f=st.integers(8, 200), seed=st.integers(0, 10 ** 6), rounds=st.integers(1, 3))
def test_max8_and_match_replace8_find_the_top_k(f, seed, rounds):
    """k = 8 x rounds largest values, by max8 then match_replace8 with -inf, again and again (NKI's top-k)."""
    def init(_rng, shape):
        return np.random.default_rng(seed).integers(-20, 21, shape).astype(np.float32)

    def kern(nc):
        x = nc.input("x", (P, f), "fp32", init=init)
        work = nc.sbuf_tile((P, f), "fp32", name="work")
        nc.dma_copy(work, x)
        top = nc.sbuf_tile((P, 8 * rounds), "fp32", name="top")
        for r in range(rounds):
            nc.max8(top[:, 8 * r:8 * r + 8], work)
            nc.match_replace8(work, work, top[:, 8 * r:8 * r + 8], float("-inf"))
        nc.dma_copy(nc.output("top", (P, 8 * rounds), "fp32"), top)
    out = run_kernel(kern, numerics=True).outputs["top"]
    x = init(None, (P, f))
    k = min(f, 8 * rounds)
    want = np.full((P, 8 * rounds), -np.inf, np.float32)    # (fewer than k elements: the rest are the fill)
    want[:, :k] = -np.sort(-x, axis=1)[:, :k]
    np.testing.assert_array_equal(out, want)


def test_top8_costs_the_vector_rule_and_misuse_is_refused(tmp_path):
    cm = cost_model("trn2")
    kern, _ = _top8(300, 1)
    durations = _durations(tmp_path, kern, "top8")
    assert durations["MAX8"] == cm.cycles_to_ns(60 + 300, cm.dve_clock_ghz)
    # find_index8 reads the max8 it follows: the dependent-instruction overhead
    assert durations["FIND_INDEX8"] == cm.cycles_to_ns(60 + 300 + 100, cm.dve_clock_ghz)
    for f, dtype, message in [(7, "fp32", "max8 reads 8 to 16,384 elements per partition, not 7"),
                              (16385, "fp32", "not 16,385"),
                              (64, "bf16", "find_index8 writes positions: dst must be an fp32 tile, not bf16")]:
        with pytest.raises(KernelError, match=message) as err:
            run_kernel(_top8(f, 1, dtype)[0])
        assert str(err.value).startswith("test_sim_fused_ops.py:")

    def replace(case):
        def kern(nc):
            _x, t, d = loaded(nc, (P, 64))
            v = nc.sbuf_tile((P, 8), "fp32", name="v")
            nc.max8(v, t)
            if case == "dst":
                nc.match_replace8(d[:, 0:8], t, v, 0.0)
            else:
                nc.match_replace8(d, t, v, 0.0, dst_idx=nc.sbuf_tile((P, 8), "bf16", name="idx"))
        return kern
    for case, message in [("dst", "match_replace8 writes dst 16x8 in data's shape 16x64"),
                          ("idx", "match_replace8 writes positions: dst_idx must be an fp32 tile, not bf16")]:
        with pytest.raises(KernelError, match=message):
            run_kernel(replace(case))
