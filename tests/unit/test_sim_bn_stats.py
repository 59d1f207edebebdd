"""``bn_stats`` / ``bn_aggr``: per-partition statistics against numpy, their documented costs, misuse, and the
``layernorm`` kernel built on them.

bn_stats writes (count, mean, variance * count) of each partition's even elements, then of its odd ones; bn_aggr
combines any number of such triples into the mean and the population variance (docs/kernels.md, "Operations";
costs in docs/cost-model.md, "Vector, Scalar, GpSimd").
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_sim_select_ops import instructions
from tracer.errors import KernelError
from tracer.sim import cost_model, run_kernel

P = 16


def _values(cols, seed):
    def init(_rng, shape):
        rng = np.random.default_rng(seed)
        return (rng.standard_normal(shape) * rng.uniform(0.1, 10.0, (shape[0], 1)) + rng.uniform(-5, 5, (shape[0], 1))
                ).astype(np.float32)
    return init


def _stats_kernel(widths, seed):
    cols = sum(widths)

    def kern(nc):
        x = nc.input("x", (P, cols), "fp32", init=_values(cols, seed))
        st_out = nc.output("stats", (P, 6 * len(widths)), "fp32")
        mv_out = nc.output("mv", (P, 2), "fp32")
        t = nc.sbuf_tile((P, cols), "fp32", name="t")
        nc.dma_copy(t, x)
        stats = nc.sbuf_tile((P, 6 * len(widths)), "fp32", name="stats")
        c0 = 0
        for k, w in enumerate(widths):
            nc.bn_stats(stats[:, 6 * k:6 * k + 6], t[:, c0:c0 + w])
            c0 += w
        mv = nc.sbuf_tile((P, 2), "fp32", name="mv")
        nc.bn_aggr(mv, stats)
        nc.dma_copy(st_out, stats)
        nc.dma_copy(mv_out, mv)
    return kern


@settings(max_examples=30, deadline=None)
@given(widths=st.lists(st.integers(1, 512), min_size=1, max_size=4), seed=st.integers(0, 1000))
def test_statistics_match_numpy_element_by_element(widths, seed):
    result = run_kernel(_stats_kernel(widths, seed), numerics=True)
    x = _values(sum(widths), seed)(None, (P, sum(widths))).astype(np.float64)
    stats, mv = result.outputs["stats"], result.outputs["mv"]
    c0 = 0
    for k, w in enumerate(widths):
        part = x[:, c0:c0 + w]
        for half, cols in ((0, part[:, 0::2]), (1, part[:, 1::2])):
            got = stats[:, 6 * k + 3 * half:6 * k + 3 * half + 3]
            n = cols.shape[1]
            assert (got[:, 0] == n).all()
            if n:
                np.testing.assert_allclose(got[:, 1], cols.mean(axis=1), rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(got[:, 2], ((cols - cols.mean(axis=1, keepdims=True)) ** 2).sum(axis=1),
                                           rtol=1e-4, atol=1e-4)
            else:
                assert (got[:, 1:] == 0).all()
        c0 += w
    np.testing.assert_allclose(mv[:, 0], x.mean(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mv[:, 1], x.var(axis=1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arch", ["trn1", "trn2"])
def test_costs_are_the_documented_estimates(tmp_path, arch):
    cm = cost_model(arch)
    widths = [512, 300, 40]
    ins = instructions(tmp_path, _stats_kernel(widths, 1), "bn", arch=arch)
    stats = [i for i, op in enumerate(ins["opcode"]) if op == "BN_STATS"]
    aggr = ins["opcode"].index("BN_AGGR")
    assert [ins["engine"][i] for i in (*stats, aggr)] == ["Vector"] * 4
    clock = cm.dve_clock_ghz
    # bn_stats: the Vector rule, one input of its columns (the first reads the DMA's tile, the others too: none
    # reads the previous Vector instruction's result)
    assert [ins["duration_ns"][i] for i in stats] == [cm.cycles_to_ns(60 + w, clock) for w in widths]
    # bn_aggr: the access overhead and 13 cycles per triple (3 bn_stats x 2 halves), after the bn_stats that wrote
    # its last columns: the dependent-instruction overhead too
    assert ins["duration_ns"][aggr] == cm.cycles_to_ns(60 + 13 * 6 + 100, clock)
    free = instructions(tmp_path, _stats_kernel(widths, 1), "bn1", {"bn_aggr_cycles_per_triple": "40",
                                                                     "dve_dependent_overhead_cycles": "0"}, arch=arch)
    assert free["duration_ns"][aggr] == cm.cycles_to_ns(60 + 40 * 6, clock)


def _bad(case):
    def kern(nc):
        x = nc.input("x", (P, 1024), "fp32")
        t = nc.sbuf_tile((P, 1024), "fp32", name="t")
        nc.dma_copy(t, x)
        s6 = nc.sbuf_tile((P, 6), "fp32", name="s6")
        if case == "wide":
            nc.bn_stats(s6, t[:, 0:513])
        elif case == "stats-shape":
            nc.bn_stats(s6[:, 0:5], t[:, 0:64])
        elif case == "partitions":
            nc.bn_stats(s6[0:8, :], t[:, 0:64])
        elif case == "hbm":
            nc.bn_stats(s6, x[:, 0:64])
        elif case == "unwritten":
            u = nc.sbuf_tile((P, 64), "fp32", name="u")
            nc.bn_stats(s6, u)
        elif case == "aggr-triples":
            nc.bn_stats(s6, t[:, 0:64])
            mv = nc.sbuf_tile((P, 2), "fp32", name="mv")
            nc.bn_aggr(mv, s6[:, 0:4])
        elif case == "aggr-shape":
            nc.bn_stats(s6, t[:, 0:64])
            mv = nc.sbuf_tile((P, 3), "fp32", name="mv")
            nc.bn_aggr(mv, s6)
        elif case == "aggr-unwritten":
            mv = nc.sbuf_tile((P, 2), "fp32", name="mv")
            nc.bn_aggr(mv, s6)
    return kern


@pytest.mark.parametrize(("case", "message"), [
    ("wide", "bn_stats reads at most 512 elements per partition .*not 513: call it on each 512-column slice"),
    ("stats-shape", r"bn_stats of 16x64 writes a \[16, 6\] dst, got 16x5"),
    ("partitions", r"bn_stats of 16x64 writes a \[16, 6\] dst, got 8x6"),
    ("hbm", "bn_stats src must be in SBUF or PSUM, not HBM"),
    ("unwritten", "bn_stats src reads tile u .* before it was written"),
    ("aggr-triples", "src has 4 elements per partition, not a multiple of 3"),
    ("aggr-shape", r"bn_aggr of 16x6 writes a \[16, 2\] dst \(mean, variance\), got 16x3"),
    ("aggr-unwritten", "bn_aggr src reads tile s6 .* before it was written"),
])
def test_misuse_is_a_kernel_error_naming_the_line(case, message):
    with pytest.raises(KernelError, match=message) as err:
        run_kernel(_bad(case), numerics=True)
    assert str(err.value).startswith("test_sim_bn_stats.py:")


@pytest.mark.parametrize(("rows", "cols", "dtype", "arch"), [(256, 2048, "bf16", "trn2"), (200, 700, "fp32", "trn1"),
                                                             (3, 1, "bf16", "trn2")])
def test_layernorm_matches_numpy(rows, cols, dtype, arch):
    result = run_kernel("layernorm", {"rows": rows, "cols": cols, "dtype": dtype}, arch=arch, check=True)
    assert result.checks[0].ok
    # per row tile: one bn_stats per 512 columns, a bn_aggr, the fused (x - mean) * rstd, * gamma (Vector);
    # + beta on GpSimd
    tiles, chunks = -(-rows // 128), -(-cols // 512)
    assert result.engine_instructions["Vector"] == tiles * (chunks + 3)
    assert result.engine_instructions["Scalar"] == tiles          # rsqrt(var + eps)
