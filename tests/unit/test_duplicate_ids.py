"""Analyses that join Flow edges on instruction ids refuse a trace whose ids repeat (they answered wrongly)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import profiler
from profiler.analyses import critical_path, dependency_waits, idle_gaps
from profiler.errors import QueryError

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "mlp-trn2.trace"


def _copy(tmp_path: Path, repeat: bool) -> Path:
    path = tmp_path / ("dup.trace" if repeat else "ok.trace")
    shutil.copytree(SAMPLE, path, ignore=shutil.ignore_patterns("*.duckdb*"))
    if repeat:
        file = path / "Instruction.arrows"
        table = pa.ipc.open_stream(file).read_all()
        ids = table.column("id").to_pylist()
        ids[5] = ids[4]
        i = table.schema.get_field_index("id")
        table = table.set_column(i, table.schema.field(i), pa.array(ids, pa.int64()))
        with pa.ipc.new_stream(file, table.schema) as w:
            w.write_table(table)
    return path


@pytest.mark.parametrize("analysis", [critical_path, dependency_waits, idle_gaps])
def test_repeated_instruction_ids_are_refused(analysis, tmp_path):
    with profiler.open(_copy(tmp_path, True)) as t, \
            pytest.raises(QueryError, match=r"dup.trace: instruction id 4 appears more than once .* damaged"):
        analysis(t)
    with profiler.open(_copy(tmp_path, False)) as t:
        assert analysis(t).num_rows > 0
