"""The bundled sample traces exist, cover the promised kernels, and regenerate to the same table contents."""

from __future__ import annotations

import pytest

from tests.unit.test_sim_fastpath import plain_table
from tracer import TraceReader
from tracer.samples import SAMPLES, make_sample, sample_trace_paths


def test_samples_are_bundled_and_small():
    paths = sample_trace_paths()
    assert [p.name for p in paths] == [f"{s.name}.trace" for s in SAMPLES]
    total = sum(f.stat().st_size for p in paths for f in p.iterdir())
    assert total < 8e6
    kernels = {(TraceReader(p).metadata["profile_name"], TraceReader(p).metadata["arch"]) for p in paths}
    assert {("matmul_naive", "trn2"), ("matmul_blocked", "trn2"), ("matmul_rowload", "trn2")} <= kernels
    for p in paths:
        reader = TraceReader(p)
        assert reader.recording_complete and reader.metadata["is_simulation"]
    spans = TraceReader(next(p for p in paths if "mlp" in p.name)).read_table("Span").to_pydict()
    assert {"layer", "operator"} <= set(spans["category"])
    assert "layer0" in spans["name"] and "layer0.up_proj" in spans["name"]


@pytest.mark.parametrize("name", ["mlp-trn2", "softmax-trn1"])
def test_regenerating_a_sample_gives_identical_tables(tmp_path, name):
    sample = next(s for s in SAMPLES if s.name == name)
    fresh = TraceReader(make_sample(sample, tmp_path / "fresh.trace"))
    bundled = TraceReader(sample.path)
    assert fresh.table_names() == bundled.table_names()
    for table in bundled.table_names():
        a, b = bundled.read_table(table), fresh.read_table(table)
        if table == "Metadata":
            drop = ["tool_version"]
            a, b = a.drop_columns(drop), b.drop_columns(drop)
        else:  # logical content: record-batch boundaries (and so each batch's dictionary) depend on wall time
            a, b = plain_table(a), plain_table(b)
        assert a.equals(b), f"{name}: table {table} differs from the bundled sample; rerun make_samples.py"
