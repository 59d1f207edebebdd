"""The three ways of emitting a trace (forked process, thread, inline) write identical tables."""

from __future__ import annotations

import pytest

from tests.unit.test_sim_fastpath import plain_table
from tracer import TraceReader
from tracer.errors import ConfigError, TraceExistsError
from tracer.sim import run_kernel

PARAMS = {"seq": 256, "head_dim": 64}


def _tables(path):
    reader = TraceReader(path)
    return {name: plain_table(reader.read_table(name)) for name in reader.table_names() if name != "Metadata"}


def test_emit_modes_write_identical_tables(tmp_path):
    results = {}
    for mode in ("process", "thread", "inline"):
        run_kernel("attention", PARAMS, trace_path=tmp_path / mode, emit=mode)
        results[mode] = _tables(tmp_path / mode)
        assert TraceReader(tmp_path / mode).recording_complete
    for mode in ("thread", "inline"):
        assert results[mode].keys() == results["process"].keys()
        for name, table in results["process"].items():
            assert results[mode][name].equals(table), f"{mode}: table {name} differs"


def test_emitter_errors_surface_before_simulating(tmp_path):
    run_kernel("softmax", {"rows": 128, "cols": 64}, trace_path=tmp_path / "t")
    with pytest.raises(TraceExistsError, match="a trace already exists here"):
        run_kernel("softmax", {"rows": 128, "cols": 64}, trace_path=tmp_path / "t")
    with pytest.raises(ConfigError, match="trace emission must be process, thread or inline"):
        run_kernel("softmax", {"rows": 128, "cols": 64}, trace_path=tmp_path / "u", emit="carrier-pigeon")
