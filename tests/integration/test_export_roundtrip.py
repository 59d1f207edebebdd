"""Export then import gives back the same events: Chrome JSON and Neuron-shaped Parquet, whole and windowed."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import profiler
from profiler.cli import main
from profiler.exporters import TimeWindow, export_chrome, export_parquet
from tracer import TraceWriter

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"

EVENTS_SQL = """
SELECT e.start_ts, e.end_ts, e.name, k.group_name, k.name AS track FROM (
  SELECT track_id, start_ts, end_ts, opcode AS name FROM Instruction
  UNION ALL SELECT track_id, start_ts, end_ts, coalesce(variable, queue_name) FROM DmaPacket
  UNION ALL SELECT track_id, start_ts, end_ts, name FROM slice) e JOIN track k USING (track_id)
{where} ORDER BY ALL
"""
FLOW_ENDS_SQL = """
WITH ev AS (
  SELECT 'Instruction' AS tbl, id, start_ts, end_ts, opcode AS name FROM Instruction
  UNION ALL SELECT 'Span', id, start_ts, end_ts, name FROM slice)
SELECT o.start_ts, o.name, i.start_ts, i.name FROM Flow f
  JOIN ev o ON o.tbl = f.out_table AND o.id = f.out_id
  JOIN ev i ON i.tbl = f.in_table AND i.id = f.in_id ORDER BY ALL
"""


@pytest.fixture(scope="module")
def source_trace(tmp_path_factory) -> Path:
    """A trace with every kind of row: engine instructions, DMA packets, nested spans, counters and flows."""
    path = tmp_path_factory.mktemp("rt") / "mixed.trace"
    rng = np.random.default_rng(7)
    n = 400
    start = np.cumsum(rng.integers(1, 50, n)).astype(np.int64) + 10**12 + 1   # odd ns: sub-microsecond digits
    dur = rng.integers(0, 40, n).astype(np.int64)
    engines = np.array(["Tensor", "Vector", "Scalar", "GpSimd", "Sync"])[np.arange(n) % 5]
    with TraceWriter(path, metadata={"arch": "trn2", "is_simulation": True}, background_flush=False) as w:
        w.append("Instruction", {"id": np.arange(n), "start_ts": start, "end_ts": start + dur, "duration_ns": dur,
                                 "engine": engines, "opcode": [f"OP{i % 7}" for i in range(n)],
                                 "operands": ['S[1]>="2"\\n' if i % 9 == 0 else "" for i in range(n)],
                                 "pc": np.arange(n) // 5, "pcore_idx": np.zeros(n, np.int64)})
        m = 50
        ds = start[:m] + 3
        w.append("DmaPacket", {"id": np.arange(m), "start_ts": ds, "end_ts": ds + 100, "duration_ns": np.full(m, 100),
                               "queue_name": [f"qSyncIO{i % 2}" for i in range(m)], "read_bytes": np.full(m, 64),
                               "write_bytes": np.full(m, 64), "transfer_bytes": np.full(m, 64),
                               "variable": [None if i % 3 else "w" for i in range(m)],
                               "pcore_idx": np.zeros(m, np.int64)})
        # spans: a layer containing two operators, each containing a kernel; one starting with its parent
        base = 10**12
        spans = [(0, base, base + 1000, "layer.0", None, 0), (1, base, base + 400, "op.a", 0, 1),
                 (2, base + 100, base + 300, "kern", 1, 2), (3, base + 500, base + 999, "op.b", 0, 1),
                 (4, base + 500, base + 500, "mark", 3, 2)]
        w.append("Span", {"id": [s[0] for s in spans], "start_ts": [s[1] for s in spans],
                          "end_ts": [s[2] for s in spans], "duration_ns": [s[2] - s[1] for s in spans],
                          "name": [s[3] for s in spans], "parent_id": [s[4] for s in spans],
                          "depth": [s[5] for s in spans], "category": ["layer", "operator", "kernel", "operator",
                                                                        "mark"],
                          "track_group": ["NeuronCore 0"] * 5, "track_name": ["framework"] * 5,
                          "args": ['{"k": 1}', None, '{"s": "x\\"y"}', None, None]})
        w.append("Counter", {"timestamp": [base, base + 10, base + 20], "name": ["sbuf_bytes"] * 3,
                             "value": [1.0, 2.5, 0.0], "track_group": ["NeuronCore 0"] * 3})
        w.append("Flow", {"in_id": [5, 2, 3], "out_id": [0, 1, 0], "in_table": ["Instruction", "Span", "Span"],
                          "out_table": ["Instruction", "Span", "Span"], "dependency_type": ["flow"] * 3})
    return path


def _open(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return profiler.open(path)


def _events(trace, where: str = "") -> list[tuple]:
    return trace.sql(EVENTS_SQL.format(where=where)).fetchall()


def test_chrome_export_then_import_gives_the_same_events(source_trace, tmp_path):
    with _open(source_trace) as db:
        stats = export_chrome(db, tmp_path / "t.json")
        assert stats.events["flow"] == 3
        events = _events(db)
        flows = db.sql(FLOW_ENDS_SQL).fetchall()
        counters = db.sql("SELECT timestamp, name, value FROM Counter ORDER BY ALL").fetchall()
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["displayTimeUnit"] == "ns" and doc["otherData"]["arch"] == "trn2"
    with _open(tmp_path / "t.json") as back:
        got = back.sql("SELECT s.start_ts, s.end_ts, s.name, k.group_name, k.name FROM slice s JOIN track k "
                       "USING (track_id) ORDER BY ALL").fetchall()
        assert got == events
        assert back.sql("SELECT timestamp, name, value FROM Counter ORDER BY ALL").fetchall() == counters
        got_flows = back.sql("SELECT o.start_ts, o.name, i.start_ts, i.name FROM Flow f JOIN slice o ON o.id = "
                             "f.out_id JOIN slice i ON i.id = f.in_id ORDER BY ALL").fetchall()
        assert got_flows == flows
        depth = dict(back.sql("SELECT name, depth FROM slice WHERE name IN ('layer.0', 'op.a', 'kern', 'mark')")
                     .fetchall())
        assert depth == {"layer.0": 0, "op.a": 1, "kern": 2, "mark": 2}


def test_chrome_export_nests_every_thread_for_perfetto(source_trace, tmp_path):
    """Perfetto and chrome://tracing need the X events of one thread to nest: overlapping DMA packets go to lanes."""
    with _open(source_trace) as db:
        export_chrome(db, tmp_path / "t.json")
        overlapping = db.sql("SELECT count(*) FROM DmaPacket a JOIN DmaPacket b ON a.track_id = b.track_id AND "
                             "a.id < b.id AND a.start_ts < b.end_ts AND b.start_ts < a.end_ts").fetchall()[0][0]
    assert overlapping > 0                       # the fixture really has packets in flight together
    doc = json.loads((tmp_path / "t.json").read_text())
    _assert_threads_nest(doc)
    lanes = [e for e in doc["traceEvents"] if e["ph"] == "M" and "lane_of" in e.get("args", {})]
    assert lanes and all(e["args"]["name"].startswith("qSyncIO") for e in lanes)


def _assert_threads_nest(doc: dict) -> None:
    """The X events of every (pid, tid) of a Chrome trace nest."""
    threads: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":  # exact ns (the file's µs have three decimals)
            start = round(e["ts"] * 1000)
            threads.setdefault((e["pid"], e["tid"]), []).append((start, start + round(e["dur"] * 1000)))
    for key, spans in threads.items():
        stack: list[int] = []
        for s, e in sorted(spans, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1], key
            stack.append(e)


def test_chrome_export_puts_a_threads_nesting_levels_back_on_its_thread(tmp_path):
    """Each depth of a thread is a track of its own in the database; exported, they are one thread again (the
    nesting Perfetto draws), and imported back, the same depths."""
    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
        {"ph": "X", "name": "step", "pid": 1, "tid": 2, "ts": 0, "dur": 100},
        {"ph": "X", "name": "fwd", "pid": 1, "tid": 2, "ts": 10, "dur": 30},
        {"ph": "X", "name": "matmul", "pid": 1, "tid": 2, "ts": 20, "dur": 5},
        {"ph": "X", "name": "bwd", "pid": 1, "tid": 2, "ts": 50, "dur": 40},
    ]
    (tmp_path / "in.json").write_text(json.dumps(events))
    query = "SELECT s.name, s.depth, k.name, k.span_depth FROM slice s JOIN track k USING (track_id) ORDER BY ALL"
    with _open(tmp_path / "in.json") as db:
        assert db.sql(query).fetchall() == [("bwd", 1, "main", 1), ("fwd", 1, "main", 1), ("matmul", 2, "main", 2),
                                             ("step", 0, "main", 0)]
        export_chrome(db, tmp_path / "out.json")
    doc = json.loads((tmp_path / "out.json").read_text())
    placed = {e["name"]: (e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "X"}
    assert len(set(placed.values())) == 1
    names = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert names == ["main"]
    with _open(tmp_path / "out.json") as back:
        assert back.sql(query).fetchall() == [("bwd", 1, "main", 1), ("fwd", 1, "main", 1),
                                              ("matmul", 2, "main", 2), ("step", 0, "main", 0)]


def test_chrome_export_of_pipelined_layers_nests_every_thread(tmp_path):
    """A recording's layers and operators overlap without nesting (they run pipelined) and lie on lanes: exported,
    each row's lanes that overlap go to lane threads, so every thread nests for Perfetto."""
    from tracer.sim import run_kernel

    run_kernel("mlp", {"layers": 3}, trace_path=tmp_path / "t.trace")
    with _open(tmp_path / "t.trace") as db:
        lanes = db.sql("SELECT count(*) FROM track WHERE kind = 'span' AND span_depth > 0").fetchall()[0][0]
        export_chrome(db, tmp_path / "t.json")
    assert lanes >= 1
    doc = json.loads((tmp_path / "t.json").read_text())
    _assert_threads_nest(doc)
    span_lanes = [e for e in doc["traceEvents"] if e["ph"] == "M" and "lane_of" in e.get("args", {})
                  and e["args"]["name"] in ("layer", "operator")]
    assert span_lanes


def test_chrome_flows_bind_to_their_own_instructions_not_to_one_starting_inside(mlp_sample, tmp_path):
    """A flow event binds to the innermost event around its time: written at a MATMUL's start, where the LDWEIGHTS
    loading its weights starts too, the arrow went to the LDWEIGHTS (201 of mlp's 437 flows)."""
    every = """
    WITH ev AS (
      SELECT 'Instruction' AS tbl, id, start_ts, end_ts, opcode AS name FROM Instruction
      UNION ALL SELECT 'DmaPacket', id, start_ts, end_ts, coalesce(variable, queue_name) FROM DmaPacket)
    SELECT o.start_ts, o.name, i.start_ts, i.name FROM Flow f
      JOIN ev o ON o.tbl = f.out_table AND o.id = f.out_id
      JOIN ev i ON i.tbl = f.in_table AND i.id = f.in_id ORDER BY ALL"""
    with _open(mlp_sample) as db:
        export_chrome(db, tmp_path / "mlp.json")
        flows = db.sql(every).fetchall()
        nested_starts = db.sql("SELECT count(*) FROM Instruction a JOIN Instruction b ON a.track_id = b.track_id "
                               "AND a.id <> b.id AND a.start_ts = b.start_ts AND b.end_ts < a.end_ts "
                               "AND a.opcode = 'MATMUL'").fetchall()[0][0]
    assert nested_starts > 0 and len(flows) > 100
    with _open(tmp_path / "mlp.json") as back:
        got = back.sql("SELECT o.start_ts, o.name, i.start_ts, i.name FROM Flow f JOIN slice o ON o.id = f.out_id "
                       "JOIN slice i ON i.id = f.in_id ORDER BY ALL").fetchall()
    assert got == flows


def test_span_args_that_are_not_a_json_object_are_wrapped_not_pasted(tmp_path):
    from tracer.writer import write_trace

    texts = ['{"k": 1}', None, "not json", "[1,2]", "", '{"n": {"m": [1, "}"]}}']
    n = len(texts)
    write_trace(tmp_path / "t.trace", {"Span": {
        "id": list(range(n)), "start_ts": [10 * i for i in range(n)], "end_ts": [10 * i + 5 for i in range(n)],
        "duration_ns": [5] * n, "name": [f"s{i}" for i in range(n)], "category": ["c"] * n,
        "track_group": ["G"] * n, "track_name": ["T"] * n, "args": texts}}, metadata={"profile_name": "x"})
    with _open(tmp_path / "t.trace") as db:
        export_chrome(db, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())       # it was invalid JSON ("args":}, "args":not json)
    args = {e["name"]: e.get("args") for e in doc["traceEvents"] if e["ph"] == "X"}
    assert args == {"s0": {"k": 1}, "s1": None, "s2": {"args": "not json"}, "s3": {"args": "[1,2]"},
                    "s4": {"args": ""}, "s5": {"n": {"m": [1, "}"]}}}


def test_parquet_export_then_import_gives_the_same_tables(source_trace, tmp_path):
    out = tmp_path / "pq"
    tables = ("Instruction", "DmaPacket", "Counter", "Flow")
    with _open(source_trace) as db:
        stats = export_parquet(db, out, split_rows=150)
        before = {t: db.sql(f"SELECT * EXCLUDE (track_id) FROM {t} ORDER BY ALL").fetchall()
                  if t != "Flow" else db.sql("SELECT * FROM Flow ORDER BY ALL").fetchall() for t in tables}
        spans = db.sql("SELECT * EXCLUDE (track_id) FROM slice ORDER BY ALL").fetchall()
        events = _events(db)
    names = sorted(p.name for p in out.iterdir())
    assert "Instruction_0.parquet" in names and "Instruction_2.parquet" in names   # 400 rows split by 150
    assert "Metadata.parquet" in names and "Span.parquet" in names
    # the database's own index tables are not trace tables
    assert not any(n.split(".")[0].split("_")[0] in ("lod", "counter", "track", "trnprof") for n in names), names
    assert stats.rows["Instruction"] == 400
    with _open(out) as back:
        for t in tables:
            query = (f"SELECT * EXCLUDE (track_id) FROM {t} ORDER BY ALL" if t != "Flow"
                     else "SELECT * FROM Flow ORDER BY ALL")
            assert back.sql(query).fetchall() == before[t], t
        assert back.sql("SELECT * EXCLUDE (track_id) FROM slice ORDER BY ALL").fetchall() == spans
        assert _events(back) == events
        assert back.metadata["arch"] == "trn2"


def test_windowed_exports_keep_exactly_the_overlapping_events(source_trace, tmp_path):
    with _open(source_trace) as db:
        lo, hi = db.time_range
        a, b = lo + (hi - lo) // 3, lo + (hi - lo) // 2
        window = TimeWindow(a, b)
        expected = _events(db, f"WHERE e.start_ts < {b} AND (e.end_ts > {a} OR e.start_ts >= {a})")
        assert 0 < len(expected) < len(_events(db))
        export_chrome(db, tmp_path / "w.json.gz", window=window)
        export_parquet(db, tmp_path / "w", window=window)
    with _open(tmp_path / "w.json.gz") as back:
        got = back.sql("SELECT s.start_ts, s.end_ts, s.name, k.group_name, k.name FROM slice s JOIN track k "
                       "USING (track_id) ORDER BY ALL").fetchall()
        assert got == expected
    with _open(tmp_path / "w") as back:
        assert _events(back) == expected
        assert all(a <= r[0] < b for r in back.sql("SELECT timestamp FROM Counter").fetchall())


def test_real_pytorch_trace_round_trips_through_chrome_json(tmp_path):
    src = tmp_path / "alexnet.json.gz"
    shutil.copy(DATA / "alexnet_flows.json.gz", src)
    query = ("SELECT s.start_ts, s.end_ts, s.name, s.depth, k.group_name, k.name FROM slice s JOIN track k "
             "USING (track_id) ORDER BY ALL")
    fq = ("SELECT o.start_ts, o.name, i.start_ts, i.name FROM Flow f JOIN slice o ON o.id = f.out_id "
          "JOIN slice i ON i.id = f.in_id ORDER BY ALL")
    with _open(src) as db:
        export_chrome(db, tmp_path / "again.json")
        rows, flows = db.sql(query).fetchall(), db.sql(fq).fetchall()
    with _open(tmp_path / "again.json") as back:
        assert back.sql(query).fetchall() == rows
        assert back.sql(fq).fetchall() == flows and len(flows) == 139


def test_export_command_errors_are_one_line(source_trace, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["export", str(source_trace), "--format", "chrome", "-o", str(out), "--quiet"]) == 0
    assert main(["export", str(source_trace), "--format", "chrome", "-o", str(out)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    before = out.read_bytes()
    assert main(["export", str(source_trace), "--format", "chrome", "-o", str(out), "--start", "soon"]) == 2
    assert "--start 'soon': expected a time" in capsys.readouterr().err
    assert out.read_bytes() == before                 # nothing already written is lost
    assert main(["export", str(source_trace), "--format", "parquet", "-o", str(tmp_path / "no" / "dir")]) == 2
    assert "is not an existing directory; create it" in capsys.readouterr().err
    assert main(["export", str(source_trace), "--format", "chrome", "-o", str(out), "--force", "--relative",
                 "--start", "0", "--end", "1us"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert len(json.loads(out.read_text())["traceEvents"]) < len(json.loads(before)["traceEvents"])


def test_a_recordings_source_files_survive_a_parquet_round_trip(tmp_path):
    from tracer.sim import run_kernel

    rec = tmp_path / "s.trace"
    run_kernel("softmax", {"rows": 256, "cols": 256}, arch="trn1", trace_path=rec)
    out = tmp_path / "pq"
    with _open(rec) as db:
        export_parquet(db, out)
        text = db.source_text("softmax.py")
    assert (out / "SourceFile.parquet").exists() and text and "def softmax" in text
    with _open(out) as back:
        assert back.source_text("softmax.py") == text


def test_a_recordings_chrome_round_trip_keeps_its_metadata_and_blames_nothing_on_the_file(mlp_sample, tmp_path):
    with _open(mlp_sample) as db:
        stats = export_chrome(db, tmp_path / "mlp.json")
        meta = db.metadata
    assert stats.json_bytes == (tmp_path / "mlp.json").stat().st_size - len(b"\n]}\n") - len(
        (tmp_path / "mlp.json").read_bytes().split(b'"traceEvents":[\n')[0]) - len(b'"traceEvents":[\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profiler.open(tmp_path / "mlp.json") as back:
            got = back.metadata
    # the lanes the export laid overlapping rows on are the export's doing, not overlaps in the file's threads
    assert not [w for w in caught if "overlapping without nesting" in str(w.message)]
    for key in ("arch", "is_simulation", "kernel_params", "profile_name", "dma_ddr_bandwidth"):
        assert got[key] == meta[key], key


def test_chrome_export_draws_semaphores_and_a_windows_counters_from_its_start(mlp_sample, tmp_path):
    with _open(mlp_sample) as db:
        lo, hi = db.time_range
        a, b = lo + (hi - lo) // 2, hi
        sems = db.sql(f"SELECT count(*) FROM SemaphoreUpdate WHERE timestamp >= {a} AND timestamp < {b}"
                      ).fetchall()[0][0]
        held = db.sql(f"SELECT count(DISTINCT id) FROM SemaphoreUpdate WHERE timestamp < {a}").fetchall()[0][0]
        counters = db.sql(f"SELECT count(*) FROM Counter WHERE timestamp >= {a} AND timestamp < {b}"
                          ).fetchall()[0][0]
        before = dict(db.sql(f"SELECT name, arg_max(value, timestamp) FROM Counter WHERE timestamp < {a} "
                             "GROUP BY name").fetchall())
        stats = export_chrome(db, tmp_path / "w.json", window=TimeWindow(a, b))
    assert sems and held and before
    assert stats.events["SemaphoreUpdate"] == sems + held
    assert stats.events["Counter"] == counters + len(before)
    doc = json.loads((tmp_path / "w.json").read_text())
    at_start = {e["name"]: e["args"]["value"] for e in doc["traceEvents"]
                if e["ph"] == "C" and round(e["ts"] * 1000) == a}
    for name, value in before.items():      # each counter's value when the window opens, at its start
        assert at_start[name] == value
    assert any(n.startswith("semaphore ") for n in at_start)


def test_parquet_exports_skip_empty_tables_and_a_window_leaves_whole_profile_figures_out(mlp_sample, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from profiler.errors import CommandError

    with _open(mlp_sample) as db:
        export_parquet(db, tmp_path / "whole")
        for bad in (0, -1, 1.5, True):
            with pytest.raises(CommandError, match="split_rows must be a whole number of rows, 1 or more"):
                export_parquet(db, tmp_path / "bad", split_rows=bad)
    assert not (tmp_path / "bad").exists()
    for f in (tmp_path / "whole").iterdir():        # Neuron Explorer writes a table only when it has rows
        assert pq.read_metadata(f).num_rows > 0, f.name
    pq.write_table(pa.table({"total_time": [4.9e-5], "event_count": [2200]}), tmp_path / "whole" / "Summary.parquet")
    with _open(tmp_path / "whole") as db:
        lo, hi = db.time_range
        a, b = lo + (hi - lo) // 3, lo + (hi - lo) // 2
        stats = export_parquet(db, tmp_path / "win", window=TimeWindow(a, b))
        extent = db.sql(f"SELECT min(start_ts), max(end_ts) FROM (SELECT start_ts, end_ts FROM Instruction "
                        f"WHERE start_ts < {b} AND (end_ts > {a} OR start_ts >= {a}) UNION ALL SELECT start_ts, "
                        f"end_ts FROM DmaPacket WHERE start_ts < {b} AND (end_ts > {a} OR start_ts >= {a}) "
                        f"UNION ALL SELECT start_ts, end_ts FROM slice WHERE start_ts < {b} AND (end_ts > {a} OR "
                        f"start_ts >= {a}) UNION ALL SELECT timestamp, timestamp FROM Counter WHERE timestamp >= {a} "
                        f"AND timestamp < {b} UNION ALL SELECT timestamp, timestamp FROM SemaphoreUpdate WHERE "
                        f"timestamp >= {a} AND timestamp < {b})").fetchall()[0]
    assert stats.left_out == ["Summary"] and not (tmp_path / "win" / "Summary.parquet").exists()
    meta = pq.read_table(tmp_path / "win" / "Metadata.parquet").to_pylist()[0]
    assert (meta["first_hw_timestamp"], meta["last_hw_timestamp"]) == extent


def test_export_output_mistakes_are_said_first(source_trace, tmp_path, capsys):
    (tmp_path / "adir").mkdir()
    assert main(["export", str(source_trace), "--format", "chrome", "-o", str(tmp_path / "adir")]) != 0
    err = capsys.readouterr().err
    assert "is a directory; choose another output path" in err and "--force" not in err
    assert main(["export", str(source_trace), "--format", "chrome", "-o", "-"]) != 0
    assert "not to standard output" in capsys.readouterr().err and not Path("-").exists()
