"""The Chrome Trace Event JSON importer: every phase, names, exact times, real PyTorch traces, bad input."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

from profiler.importers.chrome_json import ChromeJsonSource
from profiler.importers.common import TraceImportWarning
from profiler.sources import open_source
from tracer import schema
from tracer.errors import TrnprofError, TruncatedTraceWarning

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"


def read_tables(path: Path, **kwargs) -> dict[str, pa.Table]:
    batches: dict[str, list[pa.RecordBatch]] = {}
    for name, batch in ChromeJsonSource(path, **kwargs).read():
        batches.setdefault(name, []).append(batch)
    return {name: pa.Table.from_batches(b) for name, b in batches.items()}


def write(tmp_path: Path, events: list[dict] | dict, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(events))
    return path


def spans_by_name(tables: dict[str, pa.Table]) -> dict[str, dict]:
    return {r["name"]: r for r in tables["Span"].to_pylist()}


def test_complete_and_begin_end_events_nest_per_thread(tmp_path):
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "trainer"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
        {"ph": "X", "name": "step", "pid": 1, "tid": 2, "ts": 0, "dur": 100, "cat": "user", "args": {"n": 1}},
        {"ph": "B", "name": "fwd", "pid": 1, "tid": 2, "ts": 10},
        {"ph": "X", "name": "matmul", "pid": 1, "tid": 2, "ts": 20, "dur": 5},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 40, "args": {"out": "y"}},
        {"ph": "X", "name": "other", "pid": 1, "tid": 3, "ts": 20, "dur": 5},
    ]
    t = spans_by_name(read_tables(write(tmp_path, events)))
    assert (t["step"]["depth"], t["fwd"]["depth"], t["matmul"]["depth"], t["other"]["depth"]) == (0, 1, 2, 0)
    assert t["matmul"]["parent_id"] == t["fwd"]["id"] and t["fwd"]["parent_id"] == t["step"]["id"]
    assert (t["fwd"]["start_ts"], t["fwd"]["end_ts"], t["fwd"]["duration_ns"]) == (10_000, 40_000, 30_000)
    assert json.loads(t["fwd"]["args"]) == {"out": "y"}            # E args merged into the slice
    assert (t["step"]["track_group"], t["step"]["track_name"]) == ("trainer", "main")
    assert t["other"]["track_name"] == "tid 3" and t["step"]["category"] == "user"
    assert json.loads(t["step"]["args"]) == {"n": 1}


def test_fractional_microseconds_become_exact_nanoseconds(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1695835572943558.123, "dur": 0.001},'
                    '{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": "1695835572943559", "dur": 2.5e-3}]')
    t = spans_by_name(read_tables(path))
    assert t["a"]["start_ts"] == 1695835572943558123 and t["a"]["end_ts"] == 1695835572943558124
    assert t["b"]["start_ts"] == 1695835572943559000 and t["b"]["duration_ns"] == 2   # 2.5 ns rounds to even


def test_instants_counters_and_metadata_order(tmp_path):
    events = [
        {"ph": "M", "name": "process_sort_index", "pid": 9, "args": {"sort_index": -5}},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "late"}},
        {"ph": "M", "name": "process_labels", "pid": 1, "args": {"labels": "CPU"}},
        {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 5, "s": "t"},
        {"ph": "I", "name": "proc-mark", "pid": 1, "tid": 1, "ts": 6, "s": "p"},
        {"ph": "i", "name": "global", "pid": 1, "tid": 1, "ts": 7, "s": "g"},
        {"ph": "X", "name": "first-by-sort", "pid": 9, "tid": 1, "ts": 0, "dur": 1},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 1, "args": {"used": 10, "free": 5}},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 2, "args": {"used": 11, "free": 4, "note": "x"}},
        {"ph": "C", "name": "queue", "pid": 1, "ts": 3, "args": {"value": 7}},
    ]
    with pytest.warns(TraceImportWarning, match="1 non-numeric counter values"):
        tables = read_tables(write(tmp_path, events))
    t = spans_by_name(tables)
    assert t["mark"]["duration_ns"] == 0 and t["mark"]["track_name"] == "tid 1"
    assert t["mark"]["track_group"] == "late (CPU)"
    assert (t["proc-mark"]["track_group"], t["proc-mark"]["track_name"]) == ("late (CPU)", "process instants")
    assert (t["global"]["track_group"], t["global"]["track_name"]) == ("Global", "instants")
    assert t["first-by-sort"]["track_order"] < t["mark"]["track_order"] < t["global"]["track_order"]
    counters = sorted((r["name"], r["timestamp"], r["value"], r["track_group"])
                      for r in tables["Counter"].to_pylist())
    assert counters == [("mem.free", 1000, 5.0, "late (CPU)"), ("mem.free", 2000, 4.0, "late (CPU)"),
                        ("mem.used", 1000, 10.0, "late (CPU)"), ("mem.used", 2000, 11.0, "late (CPU)"),
                        ("queue", 3000, 7.0, "late (CPU)")]


def test_flows_link_the_enclosing_and_next_slices(tmp_path):
    events = [
        {"ph": "X", "name": "launch", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
        {"ph": "X", "name": "inner", "pid": 1, "tid": 1, "ts": 12, "dur": 2},
        {"ph": "X", "name": "kernel", "pid": 2, "tid": 7, "ts": 30, "dur": 10},
        {"ph": "X", "name": "next", "pid": 2, "tid": 7, "ts": 50, "dur": 10},
        {"ph": "f", "id": 1, "pid": 2, "tid": 7, "ts": 30, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 13, "cat": "ac2g", "name": "ac2g"},
        {"ph": "s", "id": 2, "pid": 1, "tid": 1, "ts": 11, "cat": "x"},
        {"ph": "t", "id": 2, "pid": 2, "tid": 7, "ts": 35, "cat": "x"},
        {"ph": "f", "id": 2, "pid": 2, "tid": 7, "ts": 45, "cat": "x"},   # binds to the next slice
        {"ph": "s", "id": 3, "pid": 1, "tid": 1, "ts": 99, "cat": "x"},   # inside no slice
    ]
    with pytest.warns(TraceImportWarning, match="1 flow events not inside any slice"):
        tables = read_tables(write(tmp_path, events))
    t = spans_by_name(tables)
    edges = {(r["out_id"], r["in_id"], r["in_table"], r["out_table"], r["gap_time"])
             for r in tables["Flow"].to_pylist()}
    assert edges == {
        (t["inner"]["id"], t["kernel"]["id"], "Span", "Span", 30_000 - 14_000),
        (t["launch"]["id"], t["kernel"]["id"], "Span", "Span", 30_000 - 20_000),
        (t["kernel"]["id"], t["next"]["id"], "Span", "Span", 50_000 - 40_000),
    }


def test_async_events_get_their_own_track(tmp_path):
    events = [
        {"ph": "b", "name": "request", "cat": "net", "id": "0x1", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "b", "name": "phase", "cat": "net", "id": "0x1", "pid": 1, "tid": 2, "ts": 5},
        {"ph": "n", "name": "tick", "cat": "net", "id": "0x1", "pid": 1, "tid": 2, "ts": 6},
        {"ph": "e", "name": "phase", "cat": "net", "id": "0x1", "pid": 1, "tid": 2, "ts": 8},
        {"ph": "e", "name": "request", "cat": "net", "id": "0x1", "pid": 1, "tid": 1, "ts": 20},
        {"ph": "b", "name": "request", "cat": "net", "id": "0x2", "pid": 1, "tid": 1, "ts": 10},
    ]
    with pytest.warns(TraceImportWarning, match="1 async b events never ended"):
        tables = read_tables(write(tmp_path, events))
    rows = tables["Span"].to_pylist()
    by = {(r["name"], r["start_ts"]): r for r in rows}
    req = by[("request", 0)]
    assert (req["end_ts"], req["track_name"], req["depth"]) == (20_000, "request", 0)
    assert by[("phase", 5000)]["track_name"] == "request" and by[("phase", 5000)]["depth"] == 1
    assert by[("phase", 5000)]["end_ts"] == 8000
    assert by[("tick", 6000)]["parent_id"] == by[("phase", 5000)]["id"]
    assert by[("request", 10_000)]["end_ts"] == 20_000                  # closed at the end of the trace


def test_skipped_and_repaired_events_are_counted_in_one_warning(tmp_path):
    events = [
        {"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
        {"ph": "X", "name": "neg", "pid": 1, "tid": 1, "ts": 10, "dur": -5},
        {"ph": "X", "name": "nots", "pid": 1, "tid": 1, "ts": "soon", "dur": 1},
        {"ph": "P", "name": "sample", "pid": 1, "tid": 1, "ts": 3},
        {"ph": "P", "name": "sample", "pid": 1, "tid": 1, "ts": 4},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 50},
        {"name": "no phase", "ts": 1},
        {"ph": ["X"], "ts": 1},
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tables = read_tables(write(tmp_path, {"traceEvents": events}))
    messages = [str(w.message) for w in caught if isinstance(w.message, TraceImportWarning)]
    assert len(messages) == 1
    msg = messages[0]
    for part in ("1 X events with a negative dur", "1 events without a valid numeric ts",
                 "1 E events without a matching B", "4 events of unsupported phases skipped", "'P' x2"):
        assert part in msg
    t = spans_by_name(tables)
    assert set(t) == {"ok", "neg"} and t["neg"]["duration_ns"] == 0


def test_object_form_gzip_and_array_form_without_bracket_read_the_same(tmp_path):
    events = [{"ph": "X", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(300)]
    a = tmp_path / "a.json.gz"
    a.write_bytes(gzip.compress(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}).encode()))
    b = tmp_path / "b.trace"
    b.write_text(json.dumps(events)[:-1])
    assert open_source(a).format_name == open_source(b).format_name == "chrome-json"
    ta = read_tables(a, block_bytes=1000)["Span"].sort_by("id")
    tb = read_tables(b, block_bytes=777)["Span"].sort_by("id")
    assert ta.to_pylist() == tb.to_pylist()
    assert ta.num_rows == 300 and ta.column("start_ts").to_pylist() == [i * 10_000 for i in range(300)]
    assert ta.schema.field("name").type == schema.SPAN.column("name").type


def test_truncated_file_keeps_complete_events_and_says_so(tmp_path):
    events = [{"ph": "X", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(100)]
    text = json.dumps({"traceEvents": events})
    path = tmp_path / "t.json"
    path.write_text(text[: text.index('"e60"') + 3])
    with pytest.warns(TruncatedTraceWarning, match=r"t\.json: the file ends inside event 60 .* kept the 60"):
        tables = read_tables(path, block_bytes=512)
    assert tables["Span"].num_rows == 60
    meta = tables["Metadata"].to_pylist()[0]
    assert meta["recording_complete"] is False and meta["profile_name"] == "t.json"


@pytest.mark.parametrize("data", [b"\x00\x01binary", b"[1, 2, 3]", b'{"other": []}', b"<html></html>"])
def test_files_that_are_not_chrome_traces_are_refused(tmp_path, data):
    path = tmp_path / "x.json"
    path.write_bytes(data)
    with pytest.raises(TrnprofError, match=str(path)):
        open_source(path)


def test_wrong_types_are_skipped_not_fatal(tmp_path):
    events = [{"ph": "X", "name": {"nested": 1}, "pid": [1], "tid": None, "ts": 1, "dur": "x", "args": 5,
               "cat": 3}]
    with pytest.warns(TraceImportWarning, match="without a valid dur"):
        t = read_tables(write(tmp_path, events))["Span"].to_pylist()[0]
    assert t["name"] == '{"nested": 1}' and t["args"] == "5" and t["category"] == "3"
    assert t["track_group"] == "[1]" and t["track_name"] == "unknown thread"


def _load(path: Path) -> list[dict]:
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


@pytest.mark.parametrize("name", ["alexnet_flows.json.gz", "sampled_rank-0.json.gz"])
def test_real_pytorch_traces_against_the_json_module(name):
    path = DATA / name
    events = _load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceImportWarning)
        tables = read_tables(path, block_bytes=8192)
    spans = sorted(tables["Span"].to_pylist(), key=lambda r: r["id"])   # ids are in file order
    expected = [e for e in events if e["ph"] in ("X", "i")]
    assert len(spans) == len(expected)
    for s, e in zip(spans, expected, strict=True):
        assert s["name"] == e["name"]
        assert s["start_ts"] == round(e["ts"] * 1000)
        assert s["duration_ns"] == round(e.get("dur", 0) * 1000)
        assert json.loads(s["args"]) == e["args"] if "args" in e else s["args"] is None
    names = {(e["pid"], e["tid"]): e["args"]["name"].strip() for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    for s, e in zip(spans, expected, strict=True):
        if (e["pid"], e["tid"]) in names:
            assert s["track_name"] == names[(e["pid"], e["tid"])]
    gpu = [s for s in spans if s["track_group"].endswith("(GPU 0)")]
    assert gpu and all(s["track_name"].startswith(("stream", "Device")) for s in gpu)
