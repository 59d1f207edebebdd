"""Per-instruction cost rules of docs/cost-model.md, checked on the durations the simulator records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.unit.test_sim_dependencies import record


def _ns(cycles: float, ghz: float) -> int:
    return math.ceil(cycles / ghz - 1e-9)


def _rows(tables, opcode):
    ins = tables["Instruction"].to_pylist()
    return [r for r in ins if r["opcode"] == opcode]


def vector_ops(nc):
    a = nc.sbuf_tile((128, 1024), "bf16", name="a")
    b = nc.sbuf_tile((128, 1024), "bf16", name="b")
    c = nc.sbuf_tile((128, 1024), "bf16", name="c")
    f = nc.sbuf_tile((128, 1024), "fp32", name="f")
    one = nc.sbuf_tile((128, 1), "fp32", name="one")
    nc.memset(a, 1.0)                                   # GpSimd
    nc.memset(b, 2.0)
    nc.memset(one, 1.0)
    nc.tensor_tensor(c, a, b, "add")                    # Vector, 2 inputs
    nc.tensor_copy(a, b)                                # Vector copy, bf16 SBUF -> SBUF
    nc.tensor_copy(f, b)                                # Vector copy to fp32: no performance mode
    nc.tensor_scalar(b, c, "multiply", 2.0)             # independent of the copy just before
    nc.tensor_scalar(c, b, "add", 1.0)                  # reads b, written by the instruction just before
    nc.activation(f, a, "exp")                          # Scalar
    nc.activation(f, a, "exp", scale=one, bias=one)     # same cost with per-partition scale and bias
    nc.tensor_reduce(one, one, "add")                   # tiny: the 64-cycle minimum


@pytest.mark.parametrize("arch", ["trn1", "trn2"])
def test_vector_scalar_gpsimd_costs(tmp_path, arch):
    result, t = record(tmp_path, vector_ops, arch=arch)
    cm = result.cost
    perf = 4 if arch == "trn2" else 1
    tt = _rows(t, "TENSOR_TENSOR")[0]
    assert tt["duration_ns"] == _ns(60 + 2 * 1024, cm.dve_clock_ghz)
    copies = _rows(t, "TENSOR_COPY")
    assert copies[0]["duration_ns"] == _ns(60 + 1024 / perf, cm.dve_clock_ghz)
    assert copies[0]["performance_mode"] == ("4x" if perf == 4 else None)
    assert copies[1]["duration_ns"] == _ns(60 + 1024, cm.dve_clock_ghz) and copies[1]["performance_mode"] is None
    ts = _rows(t, "TENSOR_SCALAR")
    assert ts[0]["duration_ns"] == _ns(60 + 1024 / perf, cm.dve_clock_ghz)
    assert ts[1]["duration_ns"] == _ns(60 + 1024 / perf + 100, cm.dve_clock_ghz), "dependent back-to-back: +100"
    act = _rows(t, "ACTIVATE")
    assert act[0]["duration_ns"] == act[1]["duration_ns"] == _ns(60 + 1024, cm.act_clock_ghz)
    assert act[0]["scalar_activation_fn"] == "EXP" and act[0]["engine"] == "Scalar"
    memset = _rows(t, "MEMSET")[0]
    assert memset["engine"] == "GpSimd" and memset["duration_ns"] == _ns(60 + 1024, cm.pool_clock_ghz)
    tiny = _rows(t, "TENSOR_REDUCE")[0]
    assert tiny["duration_ns"] == _ns(64, cm.dve_clock_ghz), "the 64-cycle minimum instruction interval"
    assert tt["sbuf_read_bytes"] == 2 * 128 * 1024 * 2 and tt["sbuf_write_bytes"] == 128 * 1024 * 2


def dependent_by_region(nc):
    t = nc.sbuf_tile((128, 512), "fp32", name="t")
    u = nc.sbuf_tile((128, 512), "fp32", name="u")
    nc.memset(t, 1.0)
    nc.tensor_copy(u, t)                                    # all of u
    nc.tensor_scalar(u[:, 0:256], t[:, 0:256], "add", 1.0)  # the left half of u
    z = nc.sbuf_tile((128, 256), "fp32", name="z")
    nc.tensor_scalar(z, u[:, 256:512], "add", 1.0)          # the right half: not the last instruction's result
    nc.tensor_scalar(z, z, "add", 1.0)                      # the last instruction's result


@pytest.mark.parametrize("arch", ["trn1", "trn2"])
def test_the_dependent_overhead_counts_only_the_region_read(tmp_path, arch):
    """It was added whenever the last Vector instruction wrote anywhere in the tile read."""
    result, t = record(tmp_path, dependent_by_region, arch=arch)
    clock = result.cost.dve_clock_ghz
    ts = _rows(t, "TENSOR_SCALAR")
    assert ts[1]["duration_ns"] == _ns(60 + 256, clock)
    assert ts[2]["duration_ns"] == _ns(60 + 256 + 100, clock)


def pe_ops(nc):
    w = nc.sbuf_tile((128, 128), "bf16", name="w")
    x = nc.sbuf_tile((128, 512), "bf16", name="x")
    w32 = nc.sbuf_tile((128, 128), "fp32", name="w32")
    x32 = nc.sbuf_tile((128, 512), "fp32", name="x32")
    for t, v in ((w, 1.0), (x, 1.0), (w32, 1.0), (x32, 1.0)):
        nc.memset(t, v)
    p = [nc.psum_tile((128, 512), "fp32", name=f"p{i}") for i in range(4)]
    nc.matmul(p[0], w, x)                      # N = 512
    nc.matmul(p[1][:, 0:128], w, x[:, 0:128])    # N = 128
    nc.matmul(p[2][0:64, 0:32], w[:, 0:64], x[:, 0:32])  # N = 32: the 64-cycle floor; M = 64
    nc.matmul(p[3], w32, x32)                  # fp32: 4x
    tp = nc.psum_tile((128, 128), "fp32", name="tp")
    nc.transpose(tp, w)


def test_tensor_engine_costs_and_flops(tmp_path):
    result, t = record(tmp_path, pe_ops, arch="trn1")
    cm = result.cost
    mm = _rows(t, "MATMUL")
    assert [r["duration_ns"] for r in mm] == [_ns(512, 2.8), _ns(128, 2.8), _ns(64, 2.8), _ns(4 * 512, 2.8)]
    assert [r["raw_flops"] for r in mm] == [2 * 128 * 128 * 512, 2 * 128 * 128 * 128, 2 * 128 * 64 * 32,
                                            2 * 128 * 128 * 512]
    assert mm[3]["adjusted_flops"] == 4 * mm[3]["raw_flops"] and mm[0]["adjusted_flops"] == mm[0]["raw_flops"]
    assert {r["timeline_track"] for r in mm} == {"TensorMatrix"}
    ldw = _rows(t, "LDWEIGHTS")
    assert {r["timeline_track"] for r in ldw} == {"Tensor"}
    assert ldw[0]["duration_ns"] == _ns(cm.min_instruction_cycles, 2.8)
    # LoadStationary runs in the background: the next LDWEIGHTS starts before the previous MATMUL ends
    assert ldw[1]["start_ts"] < mm[0]["end_ts"] and mm[1]["start_ts"] >= ldw[1]["end_ts"]
    tr = _rows(t, "TRANSPOSE")[0]
    assert tr["tensor_instruction_type"] == "TRANSPOSE" and tr["raw_flops"] == 2 * 128 * 128 * 128
    assert tr["duration_ns"] == _ns(128, 2.8)
    assert ldw[-1]["tensor_instruction_type"] == "TRANSPOSE"


def test_dma_trigger_and_packets(tmp_path):
    result, t = record(tmp_path, "dma_stream", {"rows": 128, "cols": 8192, "tile_cols": 8192}, "trn2")
    cm = result.cost
    trig = _rows(t, "DMA_TRIGGER")
    assert trig[0]["engine"] == "Sync" and trig[0]["duration_ns"] == _ns(64, cm.neuroncore_clock_ghz)
    assert trig[1]["engine"] == "Sync"
    pk = t["DmaPacket"]
    first = pk.filter(np.asarray(pk["packet_aggregation_id"]) == 0)
    # 128 rows of 16 KiB: four 4 KiB packets per row, 512 packets dealt to 16 queues
    assert first.num_rows == 512 and set(first["transfer_bytes"].to_pylist()) == {4096}
    assert set(first["packet_idx"].to_pylist()) == {0, 1, 2, 3}
    assert first["queue_name"].to_pylist()[:2] == ["qSyncIO0", "qSyncIO1"]
    dur = np.asarray(first["duration_ns"])
    assert (dur == math.ceil(4096 / 23)).all(), "4 KiB rows saturate: full per-queue rate"
    assert set(first["source"].to_pylist()) == {"HBM"} and set(first["dest"].to_pylist()) == {"SBUF"}
    assert set(first["queue_type"].to_pylist()) == {"input"} and set(first["variable"].to_pylist()) == {"x"}
