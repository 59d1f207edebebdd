"""HBM outputs and scratch hold no values until the kernel writes them: in a run that computes values (numerics,
``--check``) reading a part never written is a KernelError naming the kernel's line and the part, and ``--check``
names an output part the kernel never wrote (zeros there could match a reference by chance)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from tracer.errors import KernelError
from tracer.kernels import kernel
from tracer.sim import run_kernel

HERE = "test_sim_hbm_written.py"


def _line_of(fn, needle: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if needle in text)


def k_reads_scratch(nc):
    s = nc.scratch("s", (128, 64), "bf16")
    y = nc.output("y", (128, 64), "bf16")
    t = nc.sbuf_tile((128, 64), "bf16")
    nc.dma_copy(t, s[:, :])  # BAD
    nc.dma_copy(y[:, :], t)


def k_reads_part_of_scratch(nc):
    x = nc.input("x", (128, 64), "bf16")
    s = nc.scratch("s", (128, 64), "bf16")
    y = nc.output("y", (128, 64), "bf16")
    t = nc.sbuf_tile((128, 64), "bf16")
    nc.dma_copy(t, x[:, :])
    nc.dma_copy(s[0:128, 0:32], t[:, 0:32])
    u = nc.sbuf_tile((128, 64), "bf16")
    nc.dma_copy(u, s[:, :])  # BAD
    nc.dma_copy(y[:, :], u)


def k_reads_own_output_first(nc):
    y = nc.output("y", (4, 64), "fp32")
    t = nc.sbuf_tile((128, 64), "fp32")
    nc.dma_copy(t, y[2:3, :].broadcast(128))  # BAD


def k_transposes_unwritten_scratch(nc):
    s = nc.scratch("s", (64, 128), "bf16")
    t = nc.sbuf_tile((128, 64), "bf16")
    nc.dma_transpose(t, s[:, :])  # BAD


@pytest.mark.parametrize(("fn", "pattern"), [
    (k_reads_scratch, r"dma_copy src reads HBM scratch tensor s \(declared at test_sim_hbm_written.py:\d+\) "
                      r"\[0:128, 0:64\] before the kernel wrote it; it holds no values"),
    (k_reads_part_of_scratch, r"\[0:128, 0:64\] before the kernel wrote it \(its part \[0:128, 32:64\] was never "
                              r"written\)"),
    (k_reads_own_output_first, r"reads HBM output tensor y .* \[2:3, 0:64\] before the kernel wrote it;"),
    (k_transposes_unwritten_scratch, r"dma_transpose src reads HBM scratch tensor s"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_read_of_unwritten_hbm_names_the_line_and_the_part(fn, pattern):
    with pytest.raises(KernelError, match=pattern) as info:
        run_kernel(fn, numerics=True)
    assert str(info.value).startswith(f"{HERE}:{_line_of(fn, '# BAD')}: "), str(info.value)


def test_a_timing_only_run_tracks_no_hbm_contents():
    """Without values there is nothing to read wrongly: the run's timing does not depend on them."""
    result = run_kernel(k_reads_scratch)
    assert result.instructions > 0


def k_scratch_round_trip(nc):
    """Written in two halves by an affine loop (its expansion writes through the same API), then read whole."""
    x = nc.input("x", (128, 64), "fp32")
    s = nc.scratch("s", (128, 64), "fp32")
    y = nc.output("y", (128, 64), "fp32")
    for i in nc.affine_range(2):
        t = nc.sbuf_tile((64, 64), "fp32")
        nc.dma_copy(t, x[i * 64:(i + 1) * 64, :])
        nc.dma_copy(s[i * 64:(i + 1) * 64, :], t)
    u = nc.sbuf_tile((128, 64), "fp32")
    nc.dma_copy(u, s[:, :])
    nc.dma_copy(y[:, :], u)


def test_written_halves_make_a_whole_that_reads_back():
    result = run_kernel(kernel(reference=lambda inputs: {"y": inputs["x"]})(k_scratch_round_trip), check=True)
    assert all(c.ok for c in result.checks)


def k_half_output(nc):
    y = nc.output("y", (128, 64), "fp32")
    t = nc.sbuf_tile((128, 64), "fp32")
    nc.memset(t, 0.0)
    nc.dma_copy(y[0:64, :], t[0:64, :])


def test_check_names_an_output_part_never_written_even_where_zeros_would_match():
    zeros = kernel(reference=lambda inputs: {"y": np.zeros((128, 64), np.float32)})(k_half_output)
    with pytest.raises(KernelError, match=r"output y differs from the numpy reference \(the kernel never wrote "
                                          r"4,096 of its 8,192 elements, within \[64:128, 0:64\]; "):
        run_kernel(zeros, check=True)
