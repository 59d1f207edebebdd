"""Hardware and model FLOPs, worked out by hand: HFU counts BF16-equivalent ``adjusted_flops`` (``raw_flops`` where a
profile has none), MFU the ``raw_flops`` of the matmuls that are not transposes -- in the summary, the bounds and
the low-MFU recommendation alike (the summary's MFU equalled its HFU for FP32, so an FP32 kernel 4x slower than it
could be read as 63% MFU, and the bounds counted a matmul without ``adjusted_flops`` as no work at all).

Peak 1 FLOP/ns (a 1 x 1 PE array at 0.5 GHz):

    Tensor  I0 MATMUL    [0,100)   raw 25, adjusted 100  (an FP32 matmul: 4x the hardware work)
            I1 MATMUL    [100,150) raw 50, adjusted null (an imported profile without adjusted_flops)
            I2 TRANSPOSE [150,200) raw 20, adjusted 20
"""

from __future__ import annotations

import json

import pytest

import profiler
from profiler.analyses import performance_bounds, recommendations
from profiler.analyses import schema as rs
from tracer import TraceWriter
from tracer import schema as ts

METADATA = {"is_simulation": True, "arch": "handmade", "profile_name": "flops", "dma_ddr_bandwidth": 4e9,
            "tensor_engine_num_rows": 1, "tensor_engine_num_cols": 1, "tensor_engine_clock_freq": 0.5}
MATMULS = [(0, 0, 100, 25, 100, "REGULAR"), (1, 100, 150, 50, None, "REGULAR"), (2, 150, 200, 20, 20, "TRANSPOSE")]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("flops") / "f.trace"
    with TraceWriter(path, metadata=METADATA, background_flush=False) as w:
        w.append_rows(ts.INSTRUCTION.name, [
            {ts.ID: i, ts.START_TS: s, ts.END_TS: e, ts.DURATION_NS: e - s, ts.ENGINE: "Tensor",
             ts.OPCODE: "MATMUL", ts.OPERANDS: "", ts.PC: i, ts.PCORE_IDX: 0, ts.TIMELINE_TRACK: "Tensor",
             ts.EVT_WAIT_TIME_NS: 0, "raw_flops": raw, "adjusted_flops": adjusted,
             "tensor_instruction_type": kind}
            for i, s, e, raw, adjusted, kind in MATMULS])
    with profiler.open(path) as t:
        yield t


def test_the_summary_counts_model_flops_raw_and_hardware_flops_bf16_equivalent(trace):
    s = trace.summary(0, 200)
    assert s["hfu_pct"] == pytest.approx(100 * (100 + 50 + 20) / 200)
    assert s["mfu_pct"] == pytest.approx(100 * (25 + 50) / 200)


def test_the_bounds_count_a_matmul_without_adjusted_flops_by_its_raw_ones(trace):
    b = performance_bounds(trace, 0, 200)
    inputs = b[rs.INPUTS]
    assert (inputs[rs.HW_FLOPS], inputs[rs.TRANSPOSE_FLOPS], inputs[rs.MODEL_FLOPS]) == (170, 20, 75)
    assert b[rs.COMPUTE_BOUND_IDEAL_NS] == pytest.approx(170)
    assert b[rs.COMPUTE_BOUND_IDEAL_USEFUL_NS] == pytest.approx(150)


def test_low_mfu_fires_on_the_model_flops(trace):
    rows = {r[rs.RULE]: r for r in recommendations(trace, 0, 200).to_pylist()}
    assert "low_mfu" in rows, rows.keys()
    evidence = json.loads(rows["low_mfu"][rs.EVIDENCE])
    assert evidence["mfu"] == pytest.approx(75 / 200) and evidence["model_flops"] == 75
    assert "Model FLOPs utilisation is 37.5%" in rows["low_mfu"][rs.MESSAGE]
