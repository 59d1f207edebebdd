"""Error messages point at fixes that exist (each of these named an option or statement that was refused)."""

from __future__ import annotations

import pytest

from profiler.cli import main


def test_timeline_query_has_the_timeout_its_message_names(mlp_sample, tmp_path, capsys):
    out = tmp_path / "t.html"
    assert main(["timeline", str(mlp_sample), "-o", str(out), "--timeout", "0.2",
                 "--query", "SELECT count(*) AS start_ts FROM range(100000000000)"]) == 2
    assert "query timed out after 0.2 s (raise timeout_s / --timeout" in capsys.readouterr().err
    assert not out.exists()
    assert main(["timeline", str(mlp_sample), "-o", str(out), "--timeout", "30",
                 "--query", "SELECT 0 AS start_ts, 100 AS end_ts, 'q' AS name"]) == 0
    assert out.exists()


def test_sql_does_not_advise_a_setting_it_refuses(mlp_sample, capsys):
    deep = "+".join(["1"] * 2000)
    assert main(["sql", str(mlp_sample), f"SELECT {deep}"]) == 2
    err = capsys.readouterr().err
    assert "Max expression depth limit of 1000 exceeded" in err
    assert "SET max_expression_depth" not in err and "cannot change settings such as max_expression_depth" in err


def test_a_positional_value_starting_with_a_dash_is_explained(mlp_sample, capsys):
    assert main(["search", str(mlp_sample), "-x"]) == 2
    assert "a value starting with '-' goes after `--`: write `trnprof search ... -- -x`" in capsys.readouterr().err
    assert main(["search", str(mlp_sample)]) == 2
    assert "goes after" not in capsys.readouterr().err  # nothing dashed was given
    assert main(["search", str(mlp_sample), "--", "-x"]) == 0


@pytest.mark.parametrize(("fmt", "line"), [
    ("csv", r"0101,01:30:00,\x00\xFF,1,1"),
    ("json", r'{"bt": "0101", "i": "01:30:00", "b": "\\x00\\xFF", "x": 1, "x_2": 1}'),
])
def test_sql_prints_bit_interval_and_blob_as_duckdb_shows_them(mlp_sample, capsys, fmt, line):
    # before: BIT as its padded bytes b'\x04\xf5', INTERVAL as MonthDayNano(...), BLOB as a Python bytes repr
    query = r"SELECT bit '0101' bt, INTERVAL 90 MINUTE i, '\x00\xff'::BLOB b, 1 x, 1 x"
    assert main(["sql", str(mlp_sample), query, "--format", fmt]) == 0
    assert line in capsys.readouterr().out


def test_the_python_api_keeps_arrow_types_unless_asked(mlp_sample):
    import profiler

    with profiler.open(mlp_sample) as t:
        raw = t.sql_arrow("SELECT bit '0101' bt, 2 n")
        text = t.sql_arrow("SELECT bit '0101' bt, 2 n", text_types=["BIT"])
    assert raw.column("bt").type == "binary" and text.to_pylist() == [{"bt": "0101", "n": 2}]


def test_a_short_critical_path_on_a_trace_without_dependencies_says_why(mlp_sample, tmp_path, capsys):
    synth = tmp_path / "syn.trace"
    assert main(["synth", "--events", "20000", "--tracks", "42", "-o", str(synth)]) == 0
    capsys.readouterr()
    assert main(["critical-path", str(synth)]) == 0
    out = capsys.readouterr().out
    assert "of the window: the trace has no Flow rows (dependencies" in out
    assert main(["critical-path", str(mlp_sample)]) == 0  # a recording: Flow edges, a path over the whole kernel
    assert "Flow rows" not in capsys.readouterr().out
    # a profile without Flow rows whose path covers the window (a Neuron profile's, one queue's order) says it too
    pq = tmp_path / "pq"
    assert main(["export", str(mlp_sample), "--format", "parquet", "-o", str(pq), "--quiet"]) == 0
    (pq / "Flow.parquet").unlink()
    assert main(["critical-path", str(pq)]) == 0
    out = capsys.readouterr().out
    assert "note: the trace has no Flow rows (dependencies, which Neuron profiles do not record)" in out
