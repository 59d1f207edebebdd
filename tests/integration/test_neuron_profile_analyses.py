"""The analyses on profiles shaped like real hardware's: no Flow table, no FLOP fields, no DMA packets."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import profiler
from profiler.analyses import performance_bounds, time_by
from profiler.cli import main


@pytest.fixture(scope="module")
def neuron_like(mlp_sample, tmp_path_factory):
    """The mlp recording exported as Neuron Parquet, then stripped as real profiles are: no Flow table."""
    root = tmp_path_factory.mktemp("neuron")
    out = root / "full"
    assert main(["export", str(mlp_sample), "--format", "parquet", "-o", str(out), "--quiet"]) == 0
    (out / "Flow.parquet").unlink()
    pq.write_table(pa.table({"total_time": [3.8e-5], "event_count": [4242]}), out / "Summary.parquet")
    return out


def _variant(src, tmp_path, name, *, drop_columns=(), drop_tables=()):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    for table in drop_tables:
        for f in dst.glob(f"{table}*.parquet"):
            f.unlink()
    if drop_columns:
        t = pq.read_table(dst / "Instruction.parquet")
        pq.write_table(t.drop_columns([c for c in drop_columns if c in t.column_names]), dst / "Instruction.parquet")
    return dst


def test_without_flop_fields_the_ideal_compute_bounds_and_flops_are_unknown_not_zero(neuron_like, tmp_path):
    path = _variant(neuron_like, tmp_path, "noflops", drop_columns=("raw_flops", "adjusted_flops"))
    with profiler.open(path) as t:
        b = performance_bounds(t)
        ops = time_by(t, "operator")
        s = t.summary()
    # it said 0 ns: every Tensor ns "lost to under-utilisation"
    assert b["compute_bound_ideal_ns"] is None and b["compute_bound_ideal_useful_ns"] is None
    assert b["tensor_underutilization_gap_ns"] is None and b["compute_bound_ns"] > 0
    assert any("records no FLOPs" in n for n in b["notes"])
    for column in ("flops", "adjusted_flops", "model_flops", "mfu", "hfu"):
        assert ops.column(column).null_count == ops.num_rows, column
    assert s["hfu_pct"] is None and s["mfu_pct"] is None


def test_without_dma_packets_the_memory_bounds_are_unknown(neuron_like, tmp_path):
    path = _variant(neuron_like, tmp_path, "nodma", drop_tables=("DmaPacket", "DmaQueuesInfo"))
    with profiler.open(path) as t:
        b = performance_bounds(t)
    # "DMA idle for the whole kernel, 1.93x faster without it" was about data the profile does not hold
    assert b["memory_bound_ns"] is None and b["memory_bound_ideal_ns"] is None
    assert b["inputs"]["necessary_bytes"] is None and b["speedups"]["memory_bound_ns"] is None
    assert any("has no DMA packets" in n for n in b["notes"])


def test_what_a_profile_without_flows_or_spans_cannot_say_is_said(neuron_like, tmp_path, capsys):
    assert main(["waits", str(neuron_like)]) == 0
    assert "the trace has no Flow rows (dependencies, which Neuron profiles do not record), so what each wait " \
           "waited for is unknown" in capsys.readouterr().err
    no_spans = _variant(neuron_like, tmp_path, "nospans", drop_tables=("Span",))
    assert main(["calltree", str(no_spans)]) != 0
    assert "`trnprof calltree --instructions`" in capsys.readouterr().err
    assert main(["calltree", str(no_spans), "--instructions"]) == 0
    capsys.readouterr()
    assert main(["info", str(neuron_like)]) == 0          # the Neuron tables the import kept are listed
    out = capsys.readouterr().out
    assert "  Summary " in out and "1 rows" in out
    assert main(["memory", str(neuron_like)]) == 0        # (the export keeps the operands' addresses)


def test_a_recording_without_matmuls_has_zero_flops_not_unknown(tmp_path):
    from tracer.sim import run_kernel

    run_kernel("softmax", {"rows": 256, "cols": 256}, trace_path=tmp_path / "s.trace")
    with profiler.open(tmp_path / "s.trace") as t:
        ops = time_by(t, "operator")
        b = performance_bounds(t)
    assert ops.column("flops").to_pylist() == [0] * ops.num_rows and ops.column("mfu").null_count < ops.num_rows
    assert b["compute_bound_ideal_ns"] == 0 and not any("records no FLOPs" in n for n in b["notes"])
