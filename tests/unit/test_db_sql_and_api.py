"""User SQL is read-only and sandboxed (hostile SQL, timeouts); summary, event, search and flows are exact."""

from __future__ import annotations

import json

import numpy as np
import pytest

import profiler
from profiler.cli import main
from tracer import schema as ts
from tracer import write_trace

# Two Tensor instructions overlapping by 5 ns, one Vector instruction, DMA packets overlapping on two queues.
INSTRUCTIONS = {
    ts.ID: [1, 2, 3, 4], ts.START_TS: [0, 10, 40, 100], ts.END_TS: [15, 30, 60, 110],
    ts.DURATION_NS: [15, 20, 20, 10], ts.ENGINE: ["Tensor", "Tensor", "Vector", "Tensor"],
    ts.OPCODE: ["MATMUL", "MATMUL", "ACTIVATE", "MATMUL"], ts.OPERANDS: ["a", "b", "c", "d"],
    ts.PC: [0, 1, 0, 2], ts.PCORE_IDX: [0, 0, 0, 0], ts.RAW_FLOPS: [1000, 2000, 0, 4000],
    ts.ADJUSTED_FLOPS: [1000, 2000, 0, 4000], ts.TENSOR_INSTRUCTION_TYPE: ["REGULAR", "TRANSPOSE", None, "REGULAR"],
    ts.HLO_NAME: ["dot.1", "dot.1", "exp.2", "dot.9"], ts.LAYER: ["mlp", "mlp", "attn", "mlp"],
    ts.NKI_SOURCE_LOCATION: ["k.py:3", "k.py:3", "k.py:7", "k.py:12"],
}
PACKETS = {
    ts.ID: [10, 11, 12], ts.START_TS: [0, 5, 50], ts.END_TS: [20, 25, 70], ts.DURATION_NS: [20, 20, 20],
    ts.QUEUE_NAME: ["q0", "q1", "q0"], ts.READ_BYTES: [100, 100, 100], ts.WRITE_BYTES: [100, 100, 100],
    ts.TRANSFER_BYTES: [1000, 2000, 500], ts.PCORE_IDX: [0, 0, 0], ts.VARIABLE: ["w", "x", None],
}
FLOWS = {ts.IN_ID: [2, 4], ts.OUT_ID: [1, 2], ts.IN_TABLE: ["Instruction", "Instruction"],
         ts.OUT_TABLE: ["Instruction", "Instruction"], ts.DEPENDENCY_TYPE: ["flow", "anti"], ts.GAP_TIME: [-5, 70]}
META = {"arch": "trn2", "tensor_engine_num_rows": 128, "tensor_engine_num_cols": 128, "tensor_engine_clock_freq": 2.0}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("api") / "k.trace"
    write_trace(path, {"Instruction": INSTRUCTIONS, "DmaPacket": PACKETS, "Flow": FLOWS}, metadata=META)
    with profiler.open(path) as t:
        yield t


HOSTILE = [
    "COPY Instruction TO '/tmp/trnprof_stolen.csv'",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "ATTACH '/tmp/trnprof_other.duckdb' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "CREATE TABLE evil AS SELECT 1",
    "INSERT INTO Instruction (id) VALUES (99)",
    "DROP TABLE Instruction",
    "UPDATE track SET name = 'x'",
    "SELECT * FROM no_such_table",
    "SELEC 1",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_sql_is_refused_in_one_line(trace, query):
    with pytest.raises(profiler.QueryError) as info:
        trace.sql(query)
    assert "\n" not in str(info.value)
    assert trace.sql("SELECT count(*) FROM Instruction").fetchall() == [(4,)]


@pytest.mark.parametrize(("query", "named"), [
    ("INSTALL httpfs", "INSTALL"), ("force install httpfs", "FORCE INSTALL"), ("LOAD httpfs", "LOAD"),
    ("-- a comment\ninstall httpfs", "INSTALL"), ("ATTACH 'x.duckdb'", "ATTACH"),
])
def test_a_refused_statement_is_named_as_written(trace, query, named):
    with pytest.raises(profiler.QueryError, match=f"^not allowed: {named} statement "):
        trace.sql(query)


def test_a_query_that_runs_forever_times_out(trace):
    with pytest.raises(profiler.QueryError, match="timed out"):
        trace.sql("SELECT count(*) FROM range(10000000000000) a, range(10) b", timeout_s=0.3)
    assert trace.sql("SELECT 42").fetchall() == [(42,)]


def test_sql_returns_a_relation(trace):
    rel = trace.sql("SELECT opcode, count(*) AS n FROM Instruction GROUP BY ALL ORDER BY n DESC")
    assert rel.fetchall() == [("MATMUL", 3), ("ACTIVATE", 1)]
    assert rel.to_arrow_table().column_names == ["opcode", "n"]


def test_summary_is_exact(trace):
    s = trace.summary()
    assert s["total_time_ns"] == 110
    assert s["engines"]["Tensor"] == {"active_time_ns": 40, "utilization_pct": round(100 * 40 / 110, 4),
                                      "instruction_count": 3}
    assert s["engines"]["Vector"]["active_time_ns"] == 20
    peak_per_ns = 2 * 128 * 128 * 2.0
    assert s["hfu_pct"] == round(100 * 7000 / (peak_per_ns * 110), 4)
    assert s["mfu_pct"] == round(100 * 5000 / (peak_per_ns * 110), 4)    # the transpose is not model work
    assert s["dma"] == {"active_time_ns": 45, "transfer_bytes": 3500, "throughput_gbps": round(3500 / 45, 4),
                        "utilization_pct": round(100 * 45 / 110, 4), "cores": 1}
    part = trace.summary(12, 55)
    assert part["total_time_ns"] == 43
    assert part["engines"]["Tensor"]["active_time_ns"] == 18      # [12, 30)
    assert part["engines"]["Tensor"]["instruction_count"] == 0
    assert part["dma"]["active_time_ns"] == 13 + 5                # [12, 25) and [50, 55)
    assert set(s) == {"total_time_ns", "engines", "hfu_pct", "mfu_pct", "dma"}


def test_selection_summary_uses_the_summary_figures(trace):
    from profiler.selection import selection_summary
    from profiler.summary import tensor_flops

    s = selection_summary(trace, 0, 110)
    assert s.flops == 7000 and tensor_flops(trace, 5, 110) == (6000, 4000)
    assert s.hfu_percent == trace.summary(0, 110)["hfu_pct"] is not None
    assert s.dma_bytes == 3500 and s.dma_throughput_bytes_per_s == 3500 / 110e-9
    assert dict(e[:3:2] for e in s.engines) == {"Tensor": 40, "Vector": 20}


def test_a_bad_regular_expression_is_a_one_line_error(trace):
    for pattern, message in (("/(/", "missing \\)"), ("/a{100000}/", "invalid repetition size"),
                             ("/[z-a]/", "invalid character class range")):
        with pytest.raises(profiler.QueryError, match=message) as info:
            trace.search(pattern)
        assert "\n" not in str(info.value) and str(info.value).startswith("invalid regular expression /")


def test_event_search_and_flows(trace):
    row = trace.event("Instruction", 3)
    assert row["opcode"] == "ACTIVATE" and row["hlo_name"] == "exp.2" and row["start_ts"] == 40
    with pytest.raises(profiler.QueryError, match="no row with id 77"):
        trace.event("Instruction", 77)
    with pytest.raises(profiler.QueryError, match="no table"):
        trace.event("Nope; DROP TABLE x", 1)
    hits = trace.search("K.PY:3")
    assert hits.column("id").to_pylist() == [1, 2]
    assert set(hits.column("matched_field").to_pylist()) == {"nki_source_location"}
    assert trace.search("w", limit=10).column("table_name").to_pylist() == ["DmaPacket"]
    assert trace.search("dot", limit=1).num_rows == 1
    pred, succ = trace.flows("Instruction", 2)
    assert pred.to_pylist()[0] | {"track_id": None} == {
        "table_name": "Instruction", "id": 1, "track_id": None, "start_ts": 0, "end_ts": 15, "name": "MATMUL",
        "dependency_type": "flow", "gap_time": -5}
    assert succ.column("id").to_pylist() == [4] and succ.column("dependency_type").to_pylist() == ["anti"]
    tracks = trace.tracks()
    tensor = next(r["track_id"] for r in tracks.to_pylist() if r["name"] == "Tensor")
    assert pred.column("track_id").to_pylist() == [tensor]


def test_tracks_and_time_range(trace):
    rows = trace.tracks().to_pylist()
    assert [(r["kind"], r["name"], r["event_count"]) for r in rows] == [
        ("engine", "Tensor", 3), ("engine", "Vector", 1), ("dma_queue", "q0", 2), ("dma_queue", "q1", 1)]
    assert trace.time_range == (0, 110)
    dma = next(r for r in rows if r["name"] == "q0")
    assert dma["overlapping"] is False and dma["max_dur_ns"] == 20


def test_trace_is_usable_from_threads_and_closes_idempotently(tmp_path):
    import threading

    path = write_trace(tmp_path / "t.trace", {"Instruction": INSTRUCTIONS})
    t = profiler.open(path)
    results = []

    def work():
        results.append(t.window(0, 120, 10).buckets.num_rows + t.window(0, 120, 1000).events.num_rows)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [results[0]] * 4 and results[0] > 0
    t.close()
    t.close()
    with pytest.raises(profiler.QueryError, match="closed"):
        threading.Thread(target=lambda: t.window(0, 10, 10)).run()


def test_cli_ingest_summary_sql_synth(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TRNPROF_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "s.trace"
    assert main(["synth", "--events", "5000", "--tracks", "7", "--seed", "1", "-o", str(out)]) == 0
    assert main(["synth", "--events", "5000", "-o", str(out)]) == 2          # exists, no --force
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(out), "-o", str(db), "--quiet"]) == 0
    assert main(["ingest", str(out), "-o", str(db), "--quiet"]) == 2         # exists, no --force
    assert main(["ingest", str(out), "-o", str(db), "--quiet", "--force"]) == 0
    capsys.readouterr()
    assert main(["summary", str(db), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) == {"total_time_ns", "engines", "hfu_pct", "mfu_pct", "dma"}
    assert sum(e["instruction_count"] for e in summary["engines"].values()) + 0 > 0
    assert main(["sql", str(db), "SELECT kind, count(*) AS n FROM track GROUP BY ALL ORDER BY kind",
                 "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["kind,n", "dma_queue,2", "engine,5", "span,1"]
    assert main(["sql", str(db), "SELECT 1 AS a", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"a": 1}]
    assert main(["sql", str(db), "SELECT name FROM track ORDER BY sort_order LIMIT 2"]) == 0
    assert capsys.readouterr().out.splitlines()[2:4] == ["Tensor", "Vector"]
    assert main(["sql", str(db), "COPY track TO '/tmp/x.csv'"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trnprof: error: not allowed") and err.count("\n") == 1
    assert main(["sql", str(out), "SELECT count(*) AS n FROM Instruction", "--format", "json"]) == 0
    n_inst = json.loads(capsys.readouterr().out)[0]["n"]
    assert 0 < n_inst < 5000
    assert main(["summary", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["synth", "--events", "0", "-o", str(tmp_path / "z")]) == 2


def test_window_events_carry_lanes_for_overlapping_tracks(trace):
    w = trace.window(0, 110, 1000)
    dma = w.events.filter(np.isin(np.asarray(w.events.column("id")), [10, 11, 12]))
    assert dma.column("depth").to_pylist() == [0, 0, 0]        # one packet per queue at a time here
    names = dict(zip(dma.column("id").to_pylist(), dma.column("name").to_pylist(), strict=True))
    assert names == {10: "w", 11: "x", 12: "q0"}


def test_no_directory_is_open_to_user_sql_not_even_duckdbs_temporary_one(trace):
    """With external access off DuckDB still lets queries read and write its temporary directory
    (``<db>.tmp/``): COPY into it, glob, read_text. The sandbox gives it none, so nothing can be written; a query
    that would spill fails in one line naming the memory setting instead."""
    assert trace.sql("SELECT current_setting('allowed_directories')").fetchall() == [([],)]
    spill = trace.db_path.with_name(trace.db_path.name + ".tmp")
    with pytest.raises(profiler.QueryError):
        trace.sql(f"COPY (SELECT 'x' AS x) TO '{spill}/planted.csv'")
    with pytest.raises(profiler.QueryError, match="TRNPROF_DB_MEMORY_LIMIT"):
        trace.sql("SELECT count(*) FROM (SELECT range r, repeat('x', 60) || range::VARCHAR h FROM range(100000000) "
                  "ORDER BY h DESC)", timeout_s=60)
    assert not spill.exists()


@pytest.mark.parametrize("query", ["CREATE TEMP TABLE t AS SELECT 1 AS x", "CREATE TEMP VIEW v AS SELECT 1 AS x",
                                   "SELECT 1; CREATE TEMP TABLE t AS SELECT 1 AS x", "SET threads = 1"])
def test_only_queries_run_not_even_in_memory_writes(trace, query):
    with pytest.raises(profiler.QueryError, match="not allowed: (CREATE|SET) statement"):
        trace.sql(query)
    for ok in ("DESCRIBE Instruction", "SHOW TABLES", "SUMMARIZE SELECT 1 AS x", "EXPLAIN SELECT 1",
               "PRAGMA table_info('Instruction')", "FROM Instruction LIMIT 1"):
        trace.sql(ok)


@pytest.mark.parametrize(("query", "named"), [
    # EXPLAIN ANALYZE runs what it explains: a temp view named `track` shadowed the trace's table for trnprof
    ("EXPLAIN ANALYZE CREATE TEMP VIEW track AS SELECT 1 AS hijacked", "CREATE statement"),
    ("explain analyse insert into Instruction (id) values (9)", "INSERT statement"),
    ("/* a */ EXPLAIN /* b */ ANALYZE -- c\n CREATE TEMP TABLE t AS SELECT 1", "CREATE statement"),
    ("EXPLAIN (FORMAT json) UPDATE track SET name = 'x'", "UPDATE statement"),
    # PRAGMAs and CALLs that change the instance or the session
    ("PRAGMA add_parquet_key('k', '0123456789112345')", "PRAGMA add_parquet_key"),
    ("PRAGMA enable_verification", "PRAGMA enable_verification"),
    ("CALL checkpoint()", "CALL checkpoint"), ("CHECKPOINT", "CHECKPOINT statement"),
])
def test_explain_and_pragma_run_only_what_reads(trace, query, named):
    with pytest.raises(profiler.QueryError, match=f"^not allowed: {named}"):
        trace.sql(query)
    assert trace.sql("SELECT count(*) FROM track WHERE name IS NOT NULL").fetchall()[0][0] > 0
    for ok in ("EXPLAIN ANALYZE SELECT count(*) FROM Instruction", "EXPLAIN (FORMAT json) SELECT 1",
               "PRAGMA database_list", "pragma version", "CALL pragma_table_info('Instruction')",
               "CALL duckdb_tables()"):
        assert trace.sql_arrow(ok).num_rows > 0


def test_what_a_user_query_leaves_in_its_connection_goes_with_it(trace, monkeypatch):
    """Each user query runs on a cursor of its own, closed after it: even a statement that got past the check (as
    EXPLAIN ANALYZE did) leaves nothing for trnprof's own queries or the next user query."""
    from profiler.db import user_sql

    monkeypatch.setattr(user_sql, "check_statements", lambda cursor, query: False)
    rows = len(trace.tracks())
    before = trace._pool.cursor_count()
    trace.sql("CREATE TEMP VIEW track AS SELECT 1 AS hijacked")
    trace.sql("CREATE TEMP VIEW Instruction AS SELECT 1 AS hijacked")
    assert trace._pool.cursor_count() == before  # the scratch cursor is closed, not kept
    monkeypatch.undo()
    assert len(trace.tracks()) == rows
    assert trace.sql("SELECT count(*) FROM Instruction").fetchall() == [(4,)]


@pytest.mark.parametrize("text", ["layer2", "LAYER1.UP", "matmul", "mlp.py", "w2_", "zzz-none", '"layer1"',
                                  '"MLP.py:71"', '"mlp.py:7"', '"layer1.up_proj"', '""', "/./", "/^layer[0-9]+\\.up/",
                                  "/PY:7[0-9]$/", "/^(matmul|act)/", "/_proj$/", "/zzz|w2_/", "/^$/"])
def test_search_lists_each_matching_event_once(text, tmp_path_factory):
    """Against a brute-force oracle over every searched field: each event once (an instruction whose layer and
    operator both hold the text is one match, not two), named by the first field that matches; text in double
    quotes matches whole fields only, text between slashes is a case-insensitive regular expression matched
    anywhere in a field (the oracle: Python's re, on patterns both it and RE2 read alike)."""
    import re
    from pathlib import Path

    from profiler.search_sql import SEARCH_FIELDS

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "mlp-trn2.trace"
    db = tmp_path_factory.getbasetemp() / "search-mlp.duckdb"   # one ingest for every case (a clean checkout has none)
    if not db.exists():
        assert main(["ingest", str(sample), "-o", str(db)]) == 0
    with profiler.open(db) as t:
        want = {}
        for table, fields in SEARCH_FIELDS.items():
            cols = ", ".join(f'"{f}"' for f in ("id", *fields))
            for row in t.sql_arrow(f'SELECT {cols} FROM "{table}"', max_rows=None).to_pylist():
                if len(text) > 2 and text[0] == text[-1] == '"':
                    first = next((f for f in fields if row[f] is not None and text[1:-1].lower() == row[f].lower()),
                                 None)
                elif len(text) > 2 and text[0] == text[-1] == "/":
                    pattern = re.compile(text[1:-1], re.IGNORECASE)
                    first = next((f for f in fields if row[f] is not None and pattern.search(row[f])), None)
                else:
                    first = next((f for f in fields if row[f] is not None and text.lower() in row[f].lower()), None)
                if first is not None:
                    want[(table, row["id"])] = first
        hits = t.search(text, limit=1_000_000).to_pylist()
        # the same search as one SQL statement (the timeline draws it as a row): the same matches, in time order
        as_sql = t.sql_arrow(t.search_sql(text), max_rows=None).to_pylist()
    assert {(r["table_name"], r["id"]): r["matched_field"] for r in as_sql} == want
    assert {r["track"] for r in as_sql} <= {f"search {text}"[:80]}
    assert [r["start_ts"] for r in as_sql] == sorted(r["start_ts"] for r in as_sql)
    got = {(h["table_name"], h["id"]): h["matched_field"] for h in hits}
    assert len(got) == len(hits)            # no event twice
    assert got == want
    if text in ('"MLP.py:71"', '"layer1"', "/^layer[0-9]+\\.up/", "/PY:7[0-9]$/", "/^(matmul|act)/"):
        assert want, "the case must match something"
    if text == "/./":
        assert len(want) > 100
    assert [h["start_ts"] for h in hits] == sorted(h["start_ts"] for h in hits)


@pytest.mark.parametrize("text", ["x'; DROP TABLE Instruction; --", "it's", "$q", "'", "/'/", '"a\'b"'])
def test_search_sql_writes_any_text_as_a_literal(trace, text):
    """Quotes, placeholders and SQL in the search text stay text: the statement runs read-only and finds what
    ``search`` finds."""
    rows = trace.sql_arrow(trace.search_sql(text), max_rows=None).to_pylist()
    assert [(r["table_name"], r["id"]) for r in rows] == \
        [(h["table_name"], h["id"]) for h in trace.search(text, limit=10**6).to_pylist()]
    with pytest.raises(profiler.QueryError, match="search text must be a non-empty string"):
        trace.search_sql("")


def test_overview_counts_events_per_kind_without_scanning_them(trace):
    """``Trace.overview()``: format, machine, duration and events per track kind (from the track table's counts),
    equal to counting the tables."""
    from profiler.overview import events_text

    o = trace.overview()
    count = {t: trace.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("Instruction", "DmaPacket")}
    assert o["events"] == {"Instruction": count["Instruction"], "DmaPacket": count["DmaPacket"]}
    assert (o["start_ns"], o["end_ns"]) == tuple(trace.time_range)
    assert o["duration_ns"] == o["end_ns"] - o["start_ns"] and o["source_format"] == "trnprof-trace"
    assert o["arch"] == trace.metadata.get("arch")
    assert events_text(o["events"]) == f"{count['Instruction']:,} instructions · {count['DmaPacket']:,} DMA packets"
    assert events_text({"slice": 3, "Counter": 9}) == "3 spans"
    assert events_text({}) == "no events"
