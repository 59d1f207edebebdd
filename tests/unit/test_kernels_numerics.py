"""Each shipped kernel's numerics against its numpy reference, and --check failing loudly on a mismatch."""

from __future__ import annotations

import numpy as np
import pytest

from tracer.errors import KernelError
from tracer.kernels import BUILTIN_KERNELS, kernel
from tracer.sim import run_kernel
from tracer.sim.dtypes import round_bf16

SMALL = {
    "matmul_naive": {"M": 256, "N": 512, "K": 384},
    "matmul_blocked": {"M": 512, "N": 512, "K": 256, "block_m": 2},
    "matmul_rowload": {"M": 256, "N": 1024, "K": 256, "block_m": 2},
    "linear": {"tokens": 256, "d_in": 384, "d_out": 512, "tile_n": 256},
    "softmax": {"rows": 200, "cols": 300},          # a partial last row tile
    "rmsnorm": {"rows": 130, "cols": 96},
    "layernorm": {"rows": 130, "cols": 1100},     # bn_stats on 512, 512 and 76 columns; a partial row tile
    "attention": {"seq": 256, "head_dim": 64},
    "mlp": {"layers": 2, "d_model": 128, "d_ff": 256, "tokens": 128},
    "dma_stream": {"rows": 128, "cols": 512, "tile_cols": 256},
}


def test_every_shipped_kernel_is_covered():
    assert set(SMALL) == set(BUILTIN_KERNELS)


@pytest.mark.parametrize("name", BUILTIN_KERNELS)
def test_kernel_matches_numpy_reference(name):
    arch = "trn1" if name in ("softmax", "mlp", "matmul_blocked") else "trn2"
    result = run_kernel(name, SMALL[name], arch=arch, check=True)
    assert result.checks and all(c.ok for c in result.checks)
    out = next(iter(result.outputs.values()))
    assert np.isfinite(out).all() and np.abs(out).max() > 0


def test_attention_with_dma_transposed_probabilities_matches_numpy():
    pe = run_kernel("attention", {"seq": 256, "head_dim": 64}, check=True)
    dma = run_kernel("attention", {"seq": 256, "head_dim": 64, "probs_transpose": "dma"}, check=True)
    assert dma.checks[0].ok
    assert dma.checks[0].max_abs_error <= 2 * pe.checks[0].max_abs_error + 1e-6  # the same bf16 P^T either way
    # one DMA (triggered from GpSimd) per kv block instead of the PE transpose and the copy from PSUM
    assert dma.engine_instructions["GpSimd"] > pe.engine_instructions["GpSimd"]
    assert dma.engine_instructions["Tensor"] < pe.engine_instructions["Tensor"]
    assert dma.dma_transfers > pe.dma_transfers


@pytest.mark.parametrize("arch", ["trn1", "trn2"])
def test_linear_transposes_its_operands_either_way(arch):
    params = {"tokens": 256, "d_in": 256, "d_out": 512}
    dma = run_kernel("linear", {**params, "transpose": "dma"}, arch=arch, check=True)
    pe = run_kernel("linear", {**params, "transpose": "pe"}, arch=arch, check=True)
    assert dma.checks[0].ok and pe.checks[0].ok
    # the PE way: a TRANSPOSE (and its LDWEIGHTS) per 128x128 block of x and w, and a copy out of PSUM each
    blocks = (256 // 128) * (256 // 128) * (512 // 512) + (512 // 128) * (256 // 128)
    assert pe.engine_instructions["Tensor"] - dma.engine_instructions["Tensor"] == 2 * blocks
    assert dma.dma_transfers < pe.dma_transfers


def test_fp32_matmul_is_accurate_to_fp32():
    result = run_kernel("matmul_rowload", {"M": 128, "N": 512, "K": 256, "block_m": 1, "row_n": 512,
                                           "dtype": "fp32"}, check=True)
    assert result.checks[0].max_rel_error < 1e-5


def test_numerics_do_not_change_timing():
    params = {"seq": 256, "head_dim": 64}
    with_numerics = run_kernel("attention", params, numerics=True)
    timing_only = run_kernel("attention", params)
    assert with_numerics.simulated_ns == timing_only.simulated_ns
    assert timing_only.outputs is None


def _bad_reference(inputs, **_):
    return {"y": inputs["x"] * 1.5}


def _copy_through_sbuf(nc, n):
    x = nc.input("x", (128, n), "fp32")
    y = nc.output("y", (128, n), "fp32")
    t = nc.sbuf_tile((128, n), "fp32")
    nc.dma_copy(t, x)
    nc.dma_copy(y, t)


@kernel(reference=_bad_reference)
def scaled_copy(nc, n=256):
    _copy_through_sbuf(nc, n)


def test_check_fails_loudly_on_a_mismatch():
    with pytest.raises(KernelError, match=r"--check failed for kernel scaled_copy: output y differs"):
        run_kernel(scaled_copy, check=True)


def _softmax_rows(inputs, **_):
    x = inputs["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


@kernel(reference=_softmax_rows)
def softmax_of_zeros(nc, cols=4096):
    """Writes zeros where a softmax goes: every value is under 1, so a tolerance scaled to 1 passed it."""
    nc.input("x", (128, cols), "bf16")
    y = nc.output("y", (128, cols), "bf16")
    t = nc.sbuf_tile((128, cols), "bf16")
    nc.memset(t, 0.0)
    nc.dma_copy(y, t)


def test_check_holds_small_outputs_to_their_own_scale():
    with pytest.raises(KernelError, match=r"output y differs from the numpy reference \(.* elements outside the "
                                          r"tolerance, .*max abs error .* \(1 of the largest reference value\)"):
        run_kernel(softmax_of_zeros, check=True)


def _constant_kernel(values: np.ndarray, out_dtype: str = "bf16", tile_dtype: str | None = None,
                     reference_values: np.ndarray | None = None, tolerance: float | None = None):
    """A kernel writing ``values`` (set element by element from HBM) whose reference says ``reference_values``."""
    want = values if reference_values is None else reference_values

    def ref(inputs, **_):
        return {"y": want.astype(np.float64)}

    @kernel(reference=ref, tolerance=tolerance)
    def constant(nc):
        x = nc.input("x", values.shape, "fp32", init=values)
        y = nc.output("y", values.shape, out_dtype)
        t = nc.sbuf_tile(values.shape, tile_dtype or out_dtype)
        nc.dma_copy(t, x) if (tile_dtype or out_dtype) == "fp32" else nc.tensor_copy(t, _fp32_copy(nc, x))
        nc.dma_copy(y, t) if (tile_dtype or out_dtype) == out_dtype else nc.dma_copy(y, _as(nc, t, out_dtype))

    return constant


def _fp32_copy(nc, x):
    t = nc.sbuf_tile(x.shape, "fp32")
    nc.dma_copy(t, x)
    return t


def _as(nc, t, dtype):
    o = nc.sbuf_tile(t.shape, dtype)
    nc.tensor_copy(o, t)
    return o


def _check(k):
    try:
        return run_kernel(k, check=True).checks[0]
    except KernelError as exc:
        return exc.result.checks[0]


def test_check_bounds_each_element_by_an_ulp_relative_and_an_ulp_of_the_largest_value():
    """bf16: tol = 2^-7; an element w may be off by tol*|w| + tol*max|w| (1.5 with max 8: 0.0742, 9.5 ulps)."""
    want = np.full((128, 64), 1.25, np.float32)
    want[0, 0] = 8.0
    want[5, 7] = 1.5
    for ulps, passes in ((9, True), (10, False)):
        got = want.copy()
        got[5, 7] = 1.5 + ulps * 2 ** -7                          # exact in bf16
        c = _check(_constant_kernel(got, reference_values=want))
        assert c.ok == passes and c.precision == "bf16", (ulps, c)
        if not passes:
            assert c.note == ("1 of 8,192 elements outside the tolerance, the worst at [5, 7]: 1.57812 where the "
                              "reference has 1.5")
        # the same values in fp32 throughout: fp32's tolerance (2^-16) fails both
        assert not _check(_constant_kernel(got, "fp32", reference_values=want)).ok
        # an fp32 output computed through a bf16 tile: bf16's tolerance again
        c = _check(_constant_kernel(got, "fp32", tile_dtype="bf16", reference_values=want))
        assert c.ok == passes and c.precision == "bf16, the coarsest type the kernel used"


def test_check_fails_a_systematic_error_of_a_percent_in_bf16():
    """x 1.01 everywhere stays within each bf16 element's own bound (1 ulp is 0.4-0.8%, plus the absolute part)
    but not in norm; x 1.002 passes."""
    rng = np.random.default_rng(1)
    want = round_bf16(rng.normal(size=(128, 256)).astype(np.float32))
    for factor, passes in ((1.01, False), (1.002, True)):
        c = _check(_constant_kernel(round_bf16((want * factor).astype(np.float32)), reference_values=want))
        assert c.ok == passes, (factor, c)
        if not passes:
            assert "in norm" in c.note and c.norm_error == pytest.approx(0.01, rel=0.1)


def test_check_fails_a_wrong_part_whose_values_are_small():
    """Halves of magnitude 1 and 0.05: the small half 50% wrong passed the old 3%-of-the-largest rule."""
    rng = np.random.default_rng(2)
    want = rng.uniform(0.5, 1.0, (128, 128)).astype(np.float32)
    want[:, 64:] *= 0.05
    want = round_bf16(want)
    got = want.copy()
    got[:, 64:] *= 0.5
    c = _check(_constant_kernel(round_bf16(got), reference_values=want))
    assert not c.ok and "elements outside the tolerance" in c.note
    assert c.max_rel_error < 0.03     # (what the old rule compared: it passed)


def test_check_matches_equal_infinities_and_names_an_inf_of_one_side():
    want = np.ones((4, 8), np.float32)
    want[1, 2] = np.inf
    assert _check(_constant_kernel(want.copy(), "fp32", reference_values=want)).ok
    got = want.copy()
    got[1, 2] = 3.0
    c = _check(_constant_kernel(got, "fp32", reference_values=want))
    assert not c.ok and c.note == ("the reference has 1 infinite value where the other has finite ones (first at "
                                   "[1, 2])")
    flipped = want.copy()
    flipped[1, 2] = -np.inf
    c = _check(_constant_kernel(flipped, "fp32", reference_values=want))
    assert not c.ok and c.note == ("the output has 1 infinity of the opposite sign to the reference's (first at "
                                   "[1, 2]: -inf where the reference has inf)")


def test_an_all_zero_reference_holds_the_output_to_the_inputs_scale():
    """log(exp(x)) - x in fp32 is a few 1e-7 off zero: the element bound, relative to a reference of zeros, made
    any rounding fail (a review); it is relative to the inputs' largest magnitude then. A real residual fails."""
    def ref(inputs, **_):
        return {"y": np.zeros((128, 64))}

    def residual(nc, off=0.0):
        x = nc.input("x", (128, 64), "fp32")
        y = nc.output("y", (128, 64), "fp32")
        t = nc.sbuf_tile((128, 64), "fp32")
        nc.dma_copy(t, x)
        e = nc.sbuf_tile((128, 64), "fp32")
        nc.activation(e, t, "exp")
        nc.activation(e, e, "log")
        d = nc.sbuf_tile((128, 64), "fp32")
        nc.tensor_tensor(d, e, t, "subtract")
        nc.tensor_scalar(d, d, "add", off)
        nc.dma_copy(y, d)

    ok = run_kernel(kernel(reference=ref)(residual), check=True).checks[0]
    assert ok.ok and 0 < ok.max_abs_error < 1e-6 and "the inputs' scale" in ok.describe()
    with pytest.raises(KernelError, match="elements outside the tolerance"):
        run_kernel(kernel(reference=ref)(residual), {"off": 1e-2}, check=True)


def test_a_kernel_sets_its_own_tolerance():
    want = np.ones((4, 8), np.float32)
    got = want * np.float32(1.05)
    assert not _check(_constant_kernel(got, "fp32", reference_values=want)).ok
    c = _check(_constant_kernel(got, "fp32", reference_values=want, tolerance=0.1))
    assert c.ok and c.tolerance == 0.1 and c.precision == "the kernel's own"
    with pytest.raises(Exception, match=r"tolerance=...\) takes a number >= 0, not 'x'"):
        kernel(reference=_bad_reference, tolerance="x")
    kernel(reference=_bad_reference, tolerance=np.float32(0.01))    # (a numpy scalar is a number)


def test_a_failed_check_names_every_output_and_keeps_the_result():
    def ref(inputs, **_):
        return {"a": inputs["x"] * 2, "b": inputs["x"] * 3}

    @kernel(reference=ref)
    def two_outputs(nc):
        x = nc.input("x", (4, 8), "fp32")
        for name in ("a", "b"):
            y = nc.output(name, (4, 8), "fp32")
            t = nc.sbuf_tile((4, 8), "fp32")
            nc.dma_copy(t, x)
            nc.dma_copy(y, t)

    with pytest.raises(KernelError, match=r"output a differs .*; output b differs") as info:
        run_kernel(two_outputs, check=True)
    result = info.value.result
    assert [c.ok for c in result.checks] == [False, False]
    np.testing.assert_array_equal(result.outputs["a"], result.outputs["b"])   # (both the copied input)


def test_matmul_refuses_a_psum_tile_that_is_not_fp32():
    def k(nc, psum="bf16"):
        a = nc.input("a", (2, 2), "bf16")
        t = nc.sbuf_tile((2, 2), "bf16")
        nc.dma_copy(t, a)
        acc = nc.psum_tile((2, 2), psum)
        nc.matmul(acc, t, t)

    with pytest.raises(KernelError, match=r"matmul dst .* is a bf16 PSUM tile; the PE array accumulates in fp32"):
        run_kernel(k, numerics=True)
    run_kernel(k, {"psum": "fp32"}, numerics=True)


def test_gelu_is_x_phi_x_and_its_tanh_approximation_is_its_own_function():
    import math

    x = np.array([[-5.0, -3.0, -1.0, 0.0, 0.5, 2.0, 4.0]], np.float32)

    def k(nc, func="gelu"):
        xi = nc.input("x", x.shape, "fp32", init=x)
        y = nc.output("y", x.shape, "fp32")
        t = nc.sbuf_tile(x.shape, "fp32")
        nc.dma_copy(t, xi)
        u = nc.sbuf_tile(x.shape, "fp32")
        nc.activation(u, t, func)
        nc.dma_copy(y, u)

    exact = [0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x[0].tolist()]
    tanh = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))) for v in x[0].tolist()]
    got = run_kernel(k, numerics=True).outputs["y"][0]
    np.testing.assert_allclose(got, exact, rtol=1e-6, atol=1e-12)      # (through erfc: the tail exact too)
    approx = run_kernel(k, {"func": "gelu_apprx_tanh"}, numerics=True).outputs["y"][0]
    np.testing.assert_allclose(approx, tanh, rtol=1e-6, atol=1e-6)     # (fp32: 1 + tanh cancels in the tail)
    assert abs(approx[1] - got[1]) > 0.1 * abs(got[1])                 # (the two differ by 10% at -3)


def test_check_needs_a_reference():
    def no_ref(nc):
        y = nc.output("y", (1, 4), "fp32")
        t = nc.sbuf_tile((1, 4), "fp32")
        nc.memset(t, 1.0)
        nc.dma_copy(y, t)

    with pytest.raises(KernelError, match="no numpy reference"):
        run_kernel(no_ref, check=True)


def test_bf16_rounding_is_round_to_nearest_even():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-9, -2.5, 3.14159265], np.float32)
    got = round_bf16(x)
    # bf16 keeps 8 significant bits: 1 + 2^-8 is a tie -> even (1.0); 1 + 3*2^-8 -> 1 + 2^-6
    np.testing.assert_array_equal(got[:5], np.array([1.0, 1.0, 1.0 + 2**-6, 1.0, -2.5], np.float32))
    assert abs(got[5] - 3.140625) < 1e-7
    assert np.isnan(round_bf16(np.array([np.nan], np.float32)))[0]


def test_inputs_are_deterministic_per_seed():
    a = run_kernel("dma_stream", SMALL["dma_stream"], numerics=True, seed=1).outputs["y"]
    b = run_kernel("dma_stream", SMALL["dma_stream"], numerics=True, seed=1).outputs["y"]
    c = run_kernel("dma_stream", SMALL["dma_stream"], numerics=True, seed=2).outputs["y"]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(a, round_bf16(a))  # bf16 tensors hold bf16 values


def test_check_needs_an_output():
    from tracer.kernels import kernel as mark

    @mark(reference=lambda inputs: {})
    def no_output(nc):
        t = nc.sbuf_tile((1, 4), "fp32")
        nc.memset(t, 1.0)

    with pytest.raises(KernelError, match="declares no output tensor"):
        run_kernel(no_output, check=True)


def _strict_reference(inputs, n=256):
    return {"y": inputs["x"]}


@kernel(reference=_strict_reference)
def copy_with_a_mode(nc, n=256, mode="plain"):
    _copy_through_sbuf(nc, n)


def test_a_reference_that_cannot_take_the_parameters_is_named_at_its_own_line():
    """It was named at runner.py:383, trnprof's own line."""
    import inspect

    line = inspect.getsourcelines(_strict_reference)[1]
    with pytest.raises(KernelError, match=rf"^test_kernels_numerics.py:{line}: the numpy reference of kernel "
                                          r"copy_with_a_mode cannot be called .* \(n, mode\): .*'mode'; take them all"):
        run_kernel(copy_with_a_mode, check=True)


def test_a_float64_residual_reference_is_held_as_zeros_at_the_smallest_inputs_scale():
    """A reference of ~1e-16 (a float64 residual) failed a correct fp32 kernel ('1.07e+09 of the largest reference
    value'); an unused mask input of -30000 let a 0.25 error pass an all-zero reference (a review)."""
    from tracer.sim.check import compare

    want = np.full((4, 8), 1e-16)
    got = np.full((4, 8), 2e-7)
    c = compare("y", got, want, tol=2.0 ** -16, precision="fp32", zero_scale=1.0)
    assert c.ok and "negligible" in c.describe() and "no norm test" in c.describe()

    def ref(inputs, **_):
        return {"y": np.zeros((128, 8))}

    @kernel(reference=ref)
    def masked(nc):
        nc.input("mask", (128, 8), "fp32", init=np.full((128, 8), -30000.0))
        nc.input("x", (128, 8), "fp32", init=np.ones((128, 8)))
        y = nc.output("y", (128, 8), "fp32")
        t = nc.sbuf_tile((128, 8), "fp32")
        nc.memset(t, 0.25)
        nc.dma_copy(y, t)

    with pytest.raises(KernelError, match="elements outside the tolerance"):
        run_kernel(masked, check=True)
