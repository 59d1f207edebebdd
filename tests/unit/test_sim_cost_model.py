"""Cost-model rules: presets, overrides, DMA efficiency, PE peak, DMA bandwidth, throttle, and the matmul ladder."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from tests.unit.test_sim_dependencies import record
from tracer.errors import ConfigError
from tracer.sim import cost_model, overridable_names, run_kernel


def test_presets_hold_the_documented_numbers():
    trn1, trn2 = cost_model("trn1"), cost_model("trn2")
    assert (trn1.pe_clock_ghz, trn1.dve_clock_ghz, trn1.act_clock_ghz) == (2.8, 1.12, 1.4)
    assert (trn2.pe_clock_ghz, trn2.dve_clock_ghz, trn2.act_clock_ghz) == (2.4, 0.96, 1.2)
    assert trn1.dma_bandwidth_gbps == 16 * 17 and trn2.dma_bandwidth_gbps == 16 * 23
    assert trn1.pe_peak_flops == pytest.approx(91.75e12, rel=1e-3)
    assert trn2.pe_peak_flops == pytest.approx(78.64e12, rel=1e-3)
    assert trn2.throttle_enabled and not trn1.throttle_enabled
    assert trn1.sbuf_partition_bytes == 192 * 1024 and trn2.psum_partition_bytes == 16 * 1024


def test_dma_efficiency_meets_both_documented_anchors():
    cm = cost_model("trn2")
    assert cm.dma_overhead_bytes == pytest.approx(512.0)
    assert cm.dma_efficiency(2048) == pytest.approx(0.9)
    assert cm.dma_efficiency(4096) == pytest.approx(1.0)
    assert cm.dma_efficiency(1 << 20) == 1.0
    sizes = [32, 64, 128, 256, 512, 1024, 2048, 3000, 4095, 4096]
    effs = [cm.dma_efficiency(b) for b in sizes]
    assert all(a < b for a, b in itertools.pairwise(effs)), "efficiency rises with the chunk size"
    assert effs[0] < 0.1


def test_overrides_are_validated_and_recorded():
    cm = cost_model("trn1", {"dma_bandwidth_gbps": "100", "dma_start_latency_ns": 0, "throttle_enabled": "on"})
    assert cm.dma_bandwidth_gbps == 100.0 and cm.dma_start_latency_ns == 0 and cm.throttle_enabled
    assert json.loads(cm.to_json())["overridden"] == ["dma_bandwidth_gbps", "dma_start_latency_ns",
                                                       "throttle_enabled"]
    with pytest.raises(ConfigError, match="unknown cost-model constant 'dma_speed'; valid names: .*dma_bandwidth_gbps"):
        cost_model("trn2", {"dma_speed": 1})
    with pytest.raises(ConfigError, match="expected a number"):
        cost_model("trn2", {"pe_clock_ghz": "fast"})
    with pytest.raises(ConfigError, match="must be positive"):
        cost_model("trn2", {"pe_clock_ghz": "-1"})
    with pytest.raises(ConfigError, match="affine_select_overhead_cycles=-1: must be 0 or more"):
        cost_model("trn2", {"affine_select_overhead_cycles": "-1"})
    assert cost_model("trn2", {"affine_select_overhead_cycles": "0"}).affine_select_overhead_cycles == 0
    with pytest.raises(ConfigError, match=r"access_overhead_cycles=1e22: must be at most 1e\+12"):   # (overflowed)
        cost_model("trn2", {"access_overhead_cycles": "1e22"})
    with pytest.raises(ConfigError, match="whole number"):
        cost_model("trn2", {"dma_queues": "2.5"})
    with pytest.raises(ConfigError, match="unknown architecture"):
        cost_model("trn9")
    assert "arch" not in overridable_names() and "pe_clock_ghz" in overridable_names()


def test_metadata_is_filled(tmp_path):
    _r, t = record(tmp_path, "softmax", {"rows": 128, "cols": 256}, "trn1")
    meta = t["Metadata"].to_pylist()[0]
    assert meta["is_simulation"] and meta["recording_complete"] and meta["arch"] == "trn1"
    assert meta["profile_name"] == "softmax" and json.loads(meta["kernel_params"])["cols"] == 256
    cm = json.loads(meta["cost_model"])
    assert cm["pe_clock_ghz"] == 2.8 and cm["dma_start_latency_ns"] == 1300
    assert meta["dma_ddr_bandwidth"] == pytest.approx(272e9) and meta["num_dma_engines_per_neuroncore"] == 16
    assert meta["tensor_engine_num_rows"] == 128 and meta["tensor_engine_clock_freq"] == pytest.approx(2.8)
    assert meta["instance_type"] == "trn1.2xlarge" and meta["ticks_per_nanosec"] == 1
    assert meta["first_hw_timestamp"] == 0 and meta["last_hw_timestamp"] > 0


def _pe_checks(tables, cm):
    ins = tables["Instruction"]
    op = np.asarray(ins["opcode"].to_pylist())
    mm = op == "MATMUL"
    flops = np.asarray(ins["adjusted_flops"].to_numpy(zero_copy_only=False))[mm]
    dur = np.asarray(ins["duration_ns"])[mm]
    assert (flops / dur <= cm.pe_peak_flops * 1e-9 * (1 + 1e-9)).all(), "a matmul beat the PE peak"
    raw = np.asarray(ins["raw_flops"].to_numpy(zero_copy_only=False))[mm]
    assert (raw == 2 * 128 * 128 * 512).all()
    return flops.sum()


def test_large_rowload_keeps_tensor_busy_and_under_peak(tmp_path):
    result, tables = record(tmp_path, "matmul_rowload", {"M": 2048, "N": 2048, "K": 2048}, "trn2")
    assert result.engine_busy["Tensor"] >= 0.80
    total = _pe_checks(tables, result.cost)
    assert total == pytest.approx(2 * 2048**3)
    assert result.pe_flops / (result.simulated_ns * 1e-9) <= result.cost.pe_peak_flops


@pytest.mark.parametrize("arch", ["trn1", "trn2"])
def test_naive_matmul_is_dma_bound_and_clearly_slower_than_rowload(arch):
    p = {"M": 1024, "N": 1024, "K": 1024}
    naive = run_kernel("matmul_naive", p, arch=arch)
    blocked = run_kernel("matmul_blocked", p, arch=arch)
    rowload = run_kernel("matmul_rowload", p, arch=arch)
    cm = naive.cost
    dma_busy = naive.dma_queue_busy_ns / (cm.dma_queues * naive.simulated_ns)
    assert dma_busy > 0.75 and dma_busy > 2 * naive.engine_busy["Tensor"], "V0 is DMA-bound"
    assert naive.simulated_ns > 2.0 * rowload.simulated_ns
    assert naive.simulated_ns > blocked.simulated_ns > rowload.simulated_ns
    assert naive.dma_bytes > blocked.dma_bytes == rowload.dma_bytes  # blocking removes the reloads


def _window_rate(tables, window_ns):
    pk = tables["DmaPacket"]
    s = np.asarray(pk["start_ts"]).astype(np.float64)
    e = np.asarray(pk["end_ts"]).astype(np.float64)
    b = np.asarray(pk["transfer_bytes"]).astype(np.float64)
    edges = np.arange(s.min(), e.max() + window_ns, window_ns)
    moved = np.zeros(len(edges) - 1)
    for i in range(len(moved)):
        lo, hi = edges[i], edges[i + 1]
        overlap = np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0, None)
        moved[i] = (b * overlap / (e - s)).sum()
    return moved / window_ns  # bytes per ns = GB/s


@pytest.mark.parametrize("overrides", [{}, {"dma_bandwidth_gbps": 100}])
def test_dma_only_kernel_never_exceeds_the_dma_bandwidth(tmp_path, overrides):
    path = tmp_path / "dma.trace"
    result = run_kernel("dma_stream", {"rows": 512, "cols": 4096, "tile_cols": 2048}, trace_path=path,
                        overrides=overrides)
    from tracer import TraceReader

    tables = {n: TraceReader(path).read_table(n) for n in ("DmaPacket",)}
    bw = result.cost.dma_bandwidth_gbps
    rate = _window_rate(tables, 1000)
    assert rate.max() <= bw * (1 + 1e-6)
    assert rate.max() >= 0.9 * bw, "4 KiB rows saturate the queues"
    pk = tables["DmaPacket"]
    thr = np.asarray(pk["throughput"])
    assert (thr <= bw / 16 * 1e9 * (1 + 1e-6)).all()
    total = result.dma_bytes / (np.asarray(pk["end_ts"]).max() - np.asarray(pk["start_ts"]).min())
    assert total <= bw


def test_small_transfers_are_less_efficient():
    small = run_kernel("dma_stream", {"rows": 256, "cols": 4096, "tile_cols": 64})
    big = run_kernel("dma_stream", {"rows": 256, "cols": 4096, "tile_cols": 2048})
    assert small.dma_bytes == big.dma_bytes
    assert small.simulated_ns > 3 * big.simulated_ns


def test_dma_starts_after_the_documented_latency(tmp_path):
    _r, t = record(tmp_path, "dma_stream", {"rows": 128, "cols": 256, "tile_cols": 256})
    ins, pk = t["Instruction"], t["DmaPacket"]
    first_trigger = np.asarray(ins["start_ts"])[0]
    assert np.asarray(pk["start_ts"]).min() - first_trigger == 1300
    fast = run_kernel("dma_stream", {"rows": 128, "cols": 256, "tile_cols": 256},
                      overrides={"dma_start_latency_ns": 0})
    assert fast.simulated_ns <= _r.simulated_ns - 2 * 1300


def test_trn2_throttle_ramps_the_tensor_engine(tmp_path):
    _r2, t2 = record(tmp_path, "matmul_rowload", {"M": 512, "N": 1024, "K": 1024}, "trn2")
    _r1, t1 = record(tmp_path, "matmul_rowload", {"M": 512, "N": 1024, "K": 1024}, "trn1")
    for tables, ramps in ((t2, True), (t1, False)):
        ins = tables["Instruction"]
        mm = np.asarray(ins["opcode"].to_pylist()) == "MATMUL"
        dur = np.asarray(ins["duration_ns"])[mm]
        if ramps:
            assert dur[0] >= 1.9 * dur.min(), "the first matmul runs at about half speed"
            assert dur[-1] == dur.min()
            counters = tables["Counter"].to_pydict()
            levels = [v for n, v in zip(counters["name"], counters["value"], strict=True)
                      if n == "tensor_throttle_percent"]
            assert levels[0] == 50.0 and max(levels) == 100.0
        else:
            assert (dur == dur.min()).all()


def test_counters_track_sbuf_and_psum(tmp_path):
    _r, t = record(tmp_path, "attention", {"seq": 256, "head_dim": 64})
    c = t["Counter"].to_pydict()
    names = set(c["name"])
    assert {"sbuf_usage_bytes", "psum_banks_in_use"} <= names
    psum = [v for n, v in zip(c["name"], c["value"], strict=True) if n == "psum_banks_in_use"]
    assert min(psum) >= 0 and max(psum) <= 8
    ts = [x for n, x in zip(c["name"], c["timestamp"], strict=True) if n == "sbuf_usage_bytes"]
    assert ts == sorted(ts)


def test_cost_model_doc_lists_every_constant_with_its_preset_values():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "cost-model.md").read_text()
    missing = [name for name in overridable_names() if f"`{name}`" not in doc]
    assert not missing, f"docs/cost-model.md does not document: {missing}"
    assert "| `pe_clock_ghz` | 2.8 | 2.4 |" in doc and "| `dma_bandwidth_gbps` | 272 | 368 |" in doc


@pytest.mark.parametrize("name", ["vector_channels", "scalar_channels", "gpsimd_channels", "num_physical_cores",
                                  "ticks_per_nanosec"])
def test_constants_only_the_metadata_carries_are_refused(name):
    """Setting one changed no time, only the Metadata (ticks_per_nanosec=3 then misdescribed ns timestamps)."""
    from tracer.errors import ConfigError
    from tracer.sim.arch import cost_model, overridable_names

    with pytest.raises(ConfigError, match=rf"^--set {name}: it only describes the hardware in the trace's Metadata"):
        cost_model("trn2", {name: "4"})
    assert name not in overridable_names()


@pytest.mark.parametrize("arch", ["trn1", "trn2"])
def test_pe_transposes_are_not_counted_as_the_models_flops(arch):
    """The record headline and the sweep's tensor_tflops counted PE transposes as work (attention 6.65 TFLOPS where
    its matmuls ran at 4.44): linear's matmuls are the same work whichever way its operands are transposed."""
    params = {"tokens": 256, "d_in": 256, "d_out": 512}
    dma = run_kernel("linear", {**params, "transpose": "dma"}, arch=arch)
    pe = run_kernel("linear", {**params, "transpose": "pe"}, arch=arch)
    assert pe.pe_flops == dma.pe_flops == 2 * 256 * 256 * 512
    assert dma.pe_transpose_flops == 0 and pe.pe_transpose_flops > 0
    line = next(x for x in pe.summary_lines() if x.startswith("Tensor engine:"))
    assert "bf16-equivalent TFLOPS of matmuls" in line and "PE transposes another" in line and line.endswith("TFLOPS")
