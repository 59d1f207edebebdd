"""`trnprof sql`: one statement, results streamed in batches (any size in constant memory), a bounded text table,
valid JSON for NaN and Infinity, one-line errors."""

from __future__ import annotations

import csv
import io
import json

import pytest

from profiler.cli import main
from profiler.cli import sql as sql_cli
from profiler.synth import synth_trace


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = synth_trace(tmp_path_factory.mktemp("cli_sql") / "s.trace", events=500, tracks=3, seed=3)
    assert main(["sql", str(path), "SELECT 1"]) == 0  # ingest once
    return str(path)


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("query, needle", [
    (";", "empty SQL query"), ("-- c", "empty SQL query"), ("/* only */ ;", "empty SQL query"),
    ("SELECT 1 AS a; SELECT 2 AS b", "one statement at a time"),
    ("SELECT 1; COPY Instruction TO '/tmp/trnprof-x.csv'", "not allowed: COPY"),
])
def test_bad_queries_are_one_line_errors_with_exit_2(db, capsys, query, needle):
    code, out, err = run(capsys, ["sql", db, query])
    assert code == 2 and out == ""
    assert err.startswith("trnprof: error: ") and err.count("\n") == 1 and needle in err, err


def test_a_data_driven_pivot_is_a_read_query(db, capsys):
    code, out, _ = run(capsys, ["sql", db, "PIVOT (SELECT engine FROM Instruction) ON engine USING count(*)",
                                "--format", "json"])
    assert code == 0
    (row,) = json.loads(out)
    total = json.loads(run(capsys, ["sql", db, "SELECT count(*) AS n FROM Instruction", "--format", "json"])[1])
    assert sum(row.values()) == total[0]["n"] > 0


def test_json_is_valid_for_nan_infinity_and_repeated_names(db, capsys):
    code, out, _ = run(capsys, ["sql", db, "SELECT 'nan'::DOUBLE AS n, 'inf'::DOUBLE AS i, '-inf'::FLOAT AS m, "
                                "[1.5, 'nan'::DOUBLE] AS l, {'x': 'inf'::DOUBLE} AS s, 1 AS a, 2 AS a",
                                "--format", "json"])
    assert code == 0
    rows = json.loads(out, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON output"))
    assert rows == [{"n": None, "i": None, "m": None, "l": [1.5, None], "s": {"x": None}, "a": 1, "a_2": 2}]
    assert run(capsys, ["sql", db, "SELECT 1 AS a WHERE false", "--format", "json"])[1] == "[]\n"


def test_csv_and_json_stream_every_row_in_batches(db, capsys, monkeypatch):
    batches = []
    real = sql_cli.ResultWriter.write

    def spy(self, batch):
        batches.append(batch.num_rows)
        real(self, batch)

    monkeypatch.setattr(sql_cli.ResultWriter, "write", spy)
    code, out, err = run(capsys, ["sql", db, "SELECT range AS i, range * 2 AS j FROM range(100000)", "--format",
                                  "csv"])
    assert code == 0 and err == ""
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["i", "j"] and len(rows) == 100_001 and rows[-1] == ["99999", "199998"]
    assert sum(batches) == 100_000 and max(batches) <= 2048        # never the whole result at once
    code, out, _ = run(capsys, ["sql", db, "SELECT range AS i FROM range(5000)", "--format", "json"])
    assert [r["i"] for r in json.loads(out)] == list(range(5000))


def test_the_table_shows_the_first_rows_and_says_how_to_see_more(db, capsys):
    code, out, _ = run(capsys, ["sql", db, "SELECT range AS i FROM range(5000)"])
    lines = out.splitlines()
    assert code == 0 and lines[0] == "i" and len(lines) == 2 + sql_cli.DEFAULT_TABLE_ROWS + 1
    assert lines[-1].startswith("(first 1,000 rows shown; the result has more: raise --max-rows, 0 for all")
    code, out, _ = run(capsys, ["sql", db, "SELECT range AS i FROM range(5000)", "--max-rows", "0"])
    assert out.splitlines()[-1] == "(5,000 rows)" and len(out.splitlines()) == 5003
    code, out, _ = run(capsys, ["sql", db, "SELECT range AS i FROM range(3)", "--max-rows", "3"])
    assert out.splitlines()[-1] == "(3 rows)"
    code, out, _ = run(capsys, ["sql", db, "SELECT repeat('x', 200) AS long, NULL AS n"])
    assert out.splitlines()[2] == "x" * (sql_cli.MAX_CELL - 1) + "…  NULL"


def test_max_rows_cuts_csv_with_a_warning(db, capsys):
    code, out, err = run(capsys, ["sql", db, "SELECT range AS i FROM range(100)", "--format", "csv",
                                  "--max-rows", "2"])
    assert code == 0 and out.splitlines() == ["i", "0", "1"]
    assert err == "trnprof: warning: only the first 2 rows were written (--max-rows); the result has more\n"
    code, _, err = run(capsys, ["sql", db, "SELECT 1", "--max-rows", "-1"])
    assert code == 2 and "argument --max-rows" in err and err.count("\n") == 1


def test_help_documents_streaming_and_limits(capsys):
    assert main(["sql", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--max-rows N" in text and "constant memory" in text and "NaN" in text and "One statement" in text


def test_a_value_holding_a_line_break_stays_on_its_row(mlp_sample, capsys):
    """A name holding a newline broke the table's rows (sql, search and the analysis tables alike)."""
    from profiler.cli import main

    assert main(["sql", str(mlp_sample), "SELECT 'a' || chr(10) || 'b' AS x, 'c' || chr(9) || 'd' AS y"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split() == ["a\\nb", "c\\td"] and lines[3] == "(1 row)"
