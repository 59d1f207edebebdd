"""Imported profiles at the edges an audit found: a crash, silent repairs, lost columns and counts off by one."""

from __future__ import annotations

import json
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import profiler
from profiler.importers.common import TraceImportWarning
from tests.unit.test_import_neuron import METADATA_74, instruction_part


def _instructions(n: int = 10, **change) -> list[dict]:
    rows = [{"timestamp": 1000 + 100 * i, "duration": 80, "label": ["TensorMatrix", "Vector"][i % 2],
             "opcode": ["MATMUL", "TT"][i % 2], "operands": "", "hlo_name": "dot.1"} for i in range(n)]
    for i, fields in change.items():
        rows[int(i.removeprefix("row"))].update(fields)
    return rows


def _ingest(path, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = profiler.open(path)
    return t, [str(w.message) for w in caught if issubclass(w.category, TraceImportWarning)]


def test_a_neuron_json_summary_of_empty_objects_is_ignored(tmp_path):
    """It stopped the ingest with an internal error (a table of no column)."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"summary": [{}], "instruction": _instructions()}))
    t, _ = _ingest(path, tmp_path)
    with t:
        assert t.sql("SELECT count(*) FROM Instruction").fetchall() == [(10,)]


@pytest.mark.parametrize(("change", "said"), [
    ({"row3": {"duration": None}}, "1 instruction without a numeric duration was made zero-length"),
    ({"row3": {"duration": -50}}, "1 instruction with a negative duration was made zero-length"),
])
def test_neuron_json_durations_repaired_are_said(tmp_path, change, said):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"instruction": _instructions(**change)}))
    t, said_all = _ingest(path, tmp_path)
    t.close()
    assert any(said in w for w in said_all), said_all


def test_a_neuron_json_without_durations_says_every_busy_time_will_read_zero(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"instruction": [{k: v for k, v in r.items() if k != "duration"}
                                                for r in _instructions()]}))
    t, said = _ingest(path, tmp_path)
    with t:
        summary = t.summary()
    assert any("10 instructions without a numeric duration" in w and "will read 0" in w for w in said), said
    # the zero-length instructions at the last timestamp count too (the range ended before them)
    assert sum(e["instruction_count"] for e in summary["engines"].values()) == 10


def test_split_parquet_parts_with_other_columns(tmp_path):
    """A column only a later part has was dropped unsaid; a column it lacks is null."""
    d = tmp_path / "profile"
    d.mkdir()
    pq.write_table(pa.table(METADATA_74), d / "Metadata.parquet")
    pq.write_table(instruction_part([0, 1, 2], ["tensor"] * 3), d / "Instruction_0.parquet")
    later = instruction_part([3, 4], ["tensor"] * 2).drop(["hlo_name"]).append_column("new_col", pa.array([1, 2]))
    pq.write_table(later, d / "Instruction_1.parquet")
    t, said = _ingest(d, tmp_path)
    with t:
        rows = t.sql("SELECT count(*), count(hlo_name) FROM Instruction").fetchall()
    assert rows == [(5, 3)]
    assert any("'new_col' appear only after the table's first part and are left out" in w for w in said), said


def test_hfu_is_unknown_without_flop_counts(tmp_path):
    d = tmp_path / "profile"
    d.mkdir()
    pq.write_table(pa.table(METADATA_74), d / "Metadata.parquet")
    pq.write_table(instruction_part([0, 1, 2], ["tensor"] * 3).drop(["raw_flops"]), d / "Instruction.parquet")
    t, _ = _ingest(d, tmp_path)
    with t:
        s = t.summary()
    assert s["hfu_pct"] is None and s["mfu_pct"] is None   # unknown, not 0%


def _profile(tmp_path, instructions: pa.Table):
    d = tmp_path / "profile"
    d.mkdir()
    pq.write_table(pa.table(METADATA_74), d / "Metadata.parquet")
    pq.write_table(instructions, d / "Instruction.parquet")
    return d


def _set(table: pa.Table, name: str, values) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, pa.array(values))


def test_parquet_times_are_made_whole_rather_than_refused(tmp_path):
    """One null start_ts or duration_ns, or a fractional ns, refused the whole profile; no end_ts column did too."""
    base = instruction_part([0, 1, 2, 3], ["tensor"] * 4)
    part = _set(_set(base, "duration_ns", [5, None, 5, 5]), "start_ts", [100, 110, None, 130])
    part = _set(part, "end_ts", [105.4, 115.0, 125.0, 135.0])
    t, said = _ingest(_profile(tmp_path, part), tmp_path)
    with t:
        rows = t.sql("SELECT id, start_ts, end_ts, duration_ns FROM Instruction ORDER BY id").fetchall()
    assert rows == [(0, 100, 105, 5), (1, 110, 115, 5), (3, 130, 135, 5)]
    assert any("skipped 1 rows without a start_ts" in w for w in said), said


def test_parquet_without_end_ts_takes_start_plus_duration(tmp_path):
    t, _ = _ingest(_profile(tmp_path, instruction_part([0, 1], ["tensor"] * 2).drop(["end_ts"])), tmp_path)
    with t:
        assert t.sql("SELECT start_ts, end_ts FROM Instruction ORDER BY id").fetchall() == [(100, 105), (110, 115)]


def test_a_table_both_whole_and_split_is_read_once(tmp_path):
    """Both were read: every row counted twice, unsaid."""
    import os

    d = _profile(tmp_path, instruction_part([0, 1, 2, 3], ["tensor"] * 4))
    pq.write_table(instruction_part([0, 1], ["tensor"] * 2), d / "Instruction_0.parquet")
    old = (d / "Instruction.parquet").stat().st_mtime - 100
    os.utime(d / "Instruction.parquet", (old, old))   # the split parts were written last
    t, said = _ingest(d, tmp_path)
    with t:
        assert t.sql("SELECT count(*) FROM Instruction").fetchall() == [(2,)]
    assert any("read Instruction_0.parquet (written last), left out Instruction.parquet" in w for w in said), said


def test_counter_values_near_the_float_limit_give_finite_means_and_no_numpy_warnings(tmp_path):
    """The time integral overflowed: numpy's overflow warnings reached the user and NaN means were stored."""
    events = [{"ph": "C", "name": "big", "pid": 1, "ts": ts, "args": {"v": v}}
              for ts, v in ((0, 1e308), (10, -1e308), (20, 1e308), (30, 5.0))]
    events.append({"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 0, "dur": 40})
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        t = profiler.open(path)
    with t:
        bad = t.sql("SELECT count(*) FROM counter_lod WHERE NOT isfinite(mean_value)").fetchall()
    assert bad == [(0,)]


def test_async_events_with_a_global_id2_pair_across_processes(tmp_path):
    """The end (on another process) was dropped and the slice ran to the end of the trace."""
    events = [{"ph": "b", "name": "g", "cat": "c", "pid": 1, "tid": 1, "ts": 200, "id2": {"global": "0x5"}},
              {"ph": "e", "name": "g", "cat": "c", "pid": 3, "tid": 1, "ts": 210, "id2": {"global": "0x5"}},
              {"ph": "b", "name": "l", "cat": "c", "pid": 1, "tid": 1, "ts": 220, "id2": {"local": "0x5"}},
              {"ph": "e", "name": "l", "cat": "c", "pid": 1, "tid": 1, "ts": 230, "id2": {"local": "0x5"}},
              {"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 0, "dur": 300}]
    path = tmp_path / "async.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t, said = _ingest(path, tmp_path)
    with t:
        rows = t.sql("SELECT name, start_ts, end_ts FROM slice WHERE name IN ('g', 'l') ORDER BY name").fetchall()
    assert rows == [("g", 200_000, 210_000), ("l", 220_000, 230_000)]
    assert not any("async" in w for w in said), said


def test_times_too_large_are_told_apart_from_times_that_are_not_numbers(tmp_path):
    """Both read "without a valid numeric ts": a unit mix-up looked like garbage."""
    events = [{"ph": "X", "name": "far", "pid": 1, "tid": 1, "ts": 1e18, "dur": 1},
              {"ph": "X", "name": "text", "pid": 1, "tid": 1, "ts": "soon", "dur": 1},
              {"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 5, "dur": 1}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t, said = _ingest(path, tmp_path)
    t.close()
    joined = " | ".join(said)
    assert "1 events with a ts beyond ±2^62 ns" in joined and "1 events without a valid numeric ts" in joined
    path = tmp_path / "n.json"
    path.write_text(json.dumps({"instruction": _instructions(row0={"timestamp": 10**30})}))
    t, said = _ingest(path, tmp_path)
    t.close()
    assert any("skipped 1 instructions with a timestamp beyond ±2^62 ns" in w for w in said), said


def test_a_folder_of_traces_is_named_as_such(tmp_path, mlp_sample):
    import shutil

    from profiler.sources import open_source
    from tracer.errors import TraceFormatError

    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in (0, 1):
        path = folder / f"rank-{rank}.json"
        path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}))
    shutil.copytree(mlp_sample, folder / "mlp.trace")
    with pytest.raises(TraceFormatError, match=r"it holds traces \(mlp.trace, rank-0.json, rank-1.json\): give one "
                                               r"of them, or `trnprof serve` the folder"):
        open_source(folder)


@pytest.mark.parametrize(("text", "warned"), [
    ('{"traceEvents": [EV]}{"traceEvents": [EV]}', True),          # cat a.json b.json
    ('[EV]\n[EV]', True),
    ('[EV]garbage', True),
    ('{"traceEvents": [EV], "meta": {"a": "} {", "b": [1, {"c": "]"}]}, "x": 2}\n', False),
    ('[EV]  \n', False),
    ('[EV', False),                                               # the format allows a missing ']'
])
def test_data_after_the_trace_is_said(tmp_path, text, warned):
    """Two traces joined into one file lost the second without a word."""
    ev = json.dumps({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1})
    path = tmp_path / "t.json"
    path.write_text(text.replace("EV", ev))
    t, said = _ingest(path, tmp_path)
    t.close()
    assert any("goes on after its trace ends" in w for w in said) == warned, said


@pytest.mark.parametrize(("values", "outcome"), [
    (pa.array([100.0, float("nan"), 120.0, 130.0]), "skipped 1 rows without a start_ts"),
    (pa.array([100, 2**63 + 5, 120, 130], pa.uint64()), "column 'start_ts' cannot be read as int64"),
])
def test_parquet_times_that_cannot_be_ns_are_skipped_or_refused_in_one_line(tmp_path, values, outcome):
    from tracer.errors import TraceFormatError

    part = instruction_part([0, 1, 2, 3], ["tensor"] * 4)
    part = part.set_column(part.schema.get_field_index("start_ts"), "start_ts", values)
    d = _profile(tmp_path, part)
    try:
        t, said = _ingest(d, tmp_path)
    except TraceFormatError as exc:
        said = [str(exc)]
    else:
        t.close()
    assert any(outcome in w for w in said), said
