"""Analyses on traces recorded by the simulator: the matmul progression, the what-if workflow through the CLI,
and invariants that tie the analyses to each other on a kernel that keeps every engine busy."""

from __future__ import annotations

import itertools
import json

import pytest

import profiler
from profiler.analyses import (
    critical_path,
    critical_path_breakdown,
    idle_gaps,
    performance_bounds,
    recommendations,
    wait_summary,
)
from profiler.analyses import schema as rs
from profiler.cli import main
from tracer.sim import run_kernel


def _bounds(kernel, params, path):
    run_kernel(kernel, params, arch="trn2", trace_path=path)
    with profiler.open(path) as trace:
        return performance_bounds(trace), recommendations(trace)


def test_matmul_progression(tmp_path):
    """naive -> DMA-bound; blocked -> Tensor-bound; row loads -> Tensor engine near its peak."""
    naive, naive_recs = _bounds("matmul_naive", {"M": 2048, "N": 2048, "K": 1024}, tmp_path / "naive.trace")
    big = {"M": 2048, "N": 4096, "K": 2048}
    blocked, _ = _bounds("matmul_blocked", big, tmp_path / "blocked.trace")
    rowload, _ = _bounds("matmul_rowload", big, tmp_path / "rowload.trace")
    assert naive[rs.BOTTLENECK] == rs.DMA
    assert naive[rs.MEMORY_BOUND_NS] > 0.95 * naive[rs.TOTAL_TIME_NS]
    assert {"reloads", "small_dma"} <= set(naive_recs.column(rs.RULE).to_pylist())
    assert blocked[rs.BOTTLENECK] == "Tensor"
    assert rowload[rs.BOTTLENECK] == "Tensor"
    assert rowload[rs.COMPUTE_BOUND_NS] > 0.95 * rowload[rs.TOTAL_TIME_NS]
    assert rowload[rs.COMPUTE_BOUND_IDEAL_NS] > 0.9 * rowload[rs.TOTAL_TIME_NS]
    # each step moves less redundant data per FLOP
    ratio = [b[rs.INPUTS][rs.DMA_TRANSFER_BYTES] / b[rs.INPUTS][rs.HW_FLOPS] for b in (naive, blocked, rowload)]
    assert ratio[0] > ratio[1] >= ratio[2]


def test_what_if_record_then_diff(tmp_path, capsys):
    a, b = str(tmp_path / "a.trace"), str(tmp_path / "b.trace")
    params = ["-p", "M=1024", "-p", "N=1024", "-p", "K=1024"]
    assert main(["record", "matmul_naive", *params, "-o", a, "-q"]) == 0
    assert main(["record", "matmul_naive", *params, "--set", "dma_bandwidth_gbps=736", "-o", b, "-q"]) == 0
    capsys.readouterr()
    assert main(["diff", a, b, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result[rs.DIFF_TRACES][rs.B]["overridden"] == ["dma_bandwidth_gbps"]
    total = result[rs.DIFF_TOTAL]
    assert total[rs.B] < 0.8 * total[rs.A]  # a DMA-bound kernel speeds up with twice the DMA bandwidth
    bounds = {m[rs.METRIC]: m for m in result[rs.DIFF_BOUNDS]}
    assert bounds[rs.MEMORY_BOUND_IDEAL_NS][rs.RATIO] == pytest.approx(0.5)
    assert bounds[rs.COMPUTE_BOUND_IDEAL_NS][rs.DELTA] == 0  # same FLOPs
    opcodes = result[rs.DIFF_BY]["opcode"]
    assert all(r[rs.PRESENCE] == "both" and r[rs.A_COUNT] == r[rs.B_COUNT] for r in opcodes)


def test_analyses_agree_on_attention(tmp_path):
    path = tmp_path / "attention.trace"
    run_kernel("attention", {"seq": 512, "head_dim": 128}, arch="trn2", trace_path=path)
    with profiler.open(path) as trace:
        window = (0, trace.time_range[1])
        bounds = performance_bounds(trace, *window)
        gaps = idle_gaps(trace, *window)
        path_table = critical_path(trace)
        waits = wait_summary(trace, *window)
    total = window[1] - window[0]
    for engine, active in bounds[rs.ENGINE_ACTIVE_NS].items():
        idle = sum(g[rs.DUR_NS] for g in gaps.to_pylist() if g[rs.ENGINE] == engine)
        assert active + idle == total or active == 0, engine  # gaps are exactly the complement of activity
    steps = path_table.to_pylist()
    assert steps[-1][rs.END_NS] == max(s[rs.END_NS] for s in steps)
    for prev, step in itertools.pairwise(steps):
        assert step[rs.GAP_BEFORE_NS] == step[rs.START_NS] - prev[rs.END_NS] >= 0
    span = steps[-1][rs.END_NS] - steps[0][rs.START_NS]
    assert sum(r[rs.TOTAL_NS] for r in critical_path_breakdown(path_table).to_pylist()) == span
    for row in waits.to_pylist():
        assert 0 <= row[rs.WAIT_NS] <= total
