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
    with pytest.raises(KernelError, match=r"output y differs from the numpy reference \(max abs error .*, max rel "
                                          r"error 1\)"):
        run_kernel(softmax_of_zeros, check=True)


def test_check_allows_the_dtype_tolerance_of_the_largest_magnitude():
    """2.9% of the largest magnitude passes in bf16, 3.1% fails, wherever the error lies."""
    for error, passes in ((0.029, True), (0.031, False)):
        def ref(inputs, error=error, **_):
            want = np.full((128, 64), 1e-3, np.float32)
            want[0, 0] = 0.5
            want[5, 7] -= error * 0.5  # the kernel's 1e-3 there is off by `error` of the largest magnitude
            return {"y": want}

        @kernel(reference=ref)
        def small_values(nc):
            y = nc.output("y", (128, 64), "bf16")
            t = nc.sbuf_tile((128, 64), "bf16")
            nc.memset(t, 1e-3)
            nc.memset(t[0:1, 0:1], 0.5)
            nc.dma_copy(y, t)

        if passes:
            assert run_kernel(small_values, check=True).checks[0].ok
        else:
            with pytest.raises(KernelError, match="differs"):
                run_kernel(small_values, check=True)


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
