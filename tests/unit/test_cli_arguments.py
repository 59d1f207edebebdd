"""Bad arguments of every kind: one line on stderr naming the option and the fix, a non-zero exit, no traceback."""

from __future__ import annotations

import argparse
import math
import shutil
from collections import namedtuple
from pathlib import Path

import duckdb
import pytest

from profiler.cli import MAX_SEED, _analysis, main, sql, synth
from profiler.cli.export import parse_time
from profiler.db.lod import TIME_LIMIT

BIG = "99999999999999999999999999"


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(err: str, *needles: str) -> None:
    assert err.startswith("trnprof: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "usage:" not in err
    for needle in needles:
        assert needle in err, (needle, err)


# -- argparse usage errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, needles", [
    (["export", "t.trace", "-o", "x.json"], ["export: ", "required: --format", "`trnprof export --help`"]),
    (["summary", "db", "--start", "1.5xs"], ["summary: argument --start", "expected a time such as 1500 (ns), 1.5us"]),
    (["export", "t", "--format", "xml", "-o", "x"], ["export: argument --format: invalid choice: 'xml'"]),
    (["info", "db", "--bogus"], ["info: unrecognized arguments: --bogus", "`trnprof info --help`"]),
    (["export", "t", "--format", "chrome", "-o", "x", "--end", "-1us"],
     ["export: argument --end: expected one argument", "write --end=-1us", "`trnprof export --help`"]),
    (["export", "t", "--format", "chrome", "-o", "x", "--en", "-1us"], ["write --end=-1us"]),
    (["no-such-command"], ["argument COMMAND: invalid choice", "`trnprof --help`"]),
    ([], ["required: COMMAND"]),
])
def test_usage_errors_are_one_line(capsys, argv, needles):
    code, out, err = run(capsys, argv)
    assert code == 2 and out == ""
    assert_one_line(err, *needles)


def test_usage_error_with_a_newline_in_an_argument_stays_one_line(capsys):
    code, _, err = run(capsys, ["info", "db", "extra\nline"])
    assert code == 2
    assert_one_line(err, "unrecognized arguments: extra line")


def test_help_and_version_still_print(capsys):
    code, out, err = run(capsys, ["--version"])
    assert code == 0 and out.startswith("trnprof ") and err == ""
    code, out, err = run(capsys, ["export", "--help"])
    assert code == 0 and out.startswith("usage: trnprof export") and "--end TIME" in out and err == ""


# -- times and cores -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, option", [
    (["summary", "db", "--end", BIG], "--end"),
    (["summary", "db", "--start", "-" + BIG], "--start"),
    (["bounds", "db", "--end", str(TIME_LIMIT + 1)], "--end"),
    (["waits", "db", "--start", str(-TIME_LIMIT - 1)], "--start"),
])
def test_window_times_beyond_int64_range_are_refused(capsys, argv, option):
    code, out, err = run(capsys, argv)
    assert code == 2 and out == ""
    assert_one_line(err, f"argument {option}", "beyond +-2**62 ns", "give a time within the trace")


def test_every_window_option_takes_a_unit():
    assert [_analysis.time_ns(t) for t in ("1500", "1.5us", "2ms", "-3s", "7ns", " 2.0005us ")] == [
        1500, 1500, 2_000_000, -3_000_000_000, 7, 2000]


def test_time_limits_are_inclusive():
    assert _analysis.time_ns(str(TIME_LIMIT)) == TIME_LIMIT
    assert _analysis.time_ns(str(-TIME_LIMIT)) == -TIME_LIMIT
    with pytest.raises(argparse.ArgumentTypeError):
        _analysis.time_ns(str(TIME_LIMIT + 1))


@pytest.mark.parametrize("text", [BIG, "-" + BIG + "s", "4611686018427387.905us", "9" * 5000])
def test_export_times_beyond_range_are_refused(tmp_path, capsys, text):
    code, out, err = run(capsys, ["export", str(tmp_path / "none.trace"), "--format", "chrome",
                                  "-o", str(tmp_path / "x.json"), f"--end={text}"])
    assert code == 2 and out == ""
    assert_one_line(err, "--end", "beyond +-2**62 ns")
    assert len(err) < 300


def test_parse_time_keeps_the_full_range():
    assert parse_time(str(TIME_LIMIT), "--end") == TIME_LIMIT
    assert parse_time("4611686018.427387904s", "--end") == TIME_LIMIT
    assert parse_time("-1.5us", "--start") == -1500


@pytest.mark.parametrize("argv", [["bounds", "db", "--core", BIG], ["diff", "a", "b", "--core", BIG],
                                  ["gaps", "db", "--core", "-1"], ["diff", "a", "b", "--core", str(2**31)]])
def test_core_must_be_a_sane_index(capsys, argv):
    code, out, err = run(capsys, argv)
    assert code == 2 and out == ""
    assert_one_line(err, "argument --core", "core index")
    assert "time" not in err and "ns" not in err.split("(see")[0]


@pytest.mark.parametrize("argv", [["gaps", "db", "--limit", BIG], ["diff", "a", "b", "--limit", "-2"]])
def test_limit_must_be_a_row_count(capsys, argv):
    code, _, err = run(capsys, argv)
    assert code == 2
    assert_one_line(err, "argument --limit", "row count")


# -- sql --timeout ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["inf", "1e10", "1e30", "0", "-1", "nan", "-inf", "86401", "soon"])
def test_sql_timeout_must_be_a_sane_number_of_seconds(capsys, value):
    code, out, err = run(capsys, ["sql", "db", "SELECT 1", f"--timeout={value}"])
    assert code == 2 and out == ""
    assert_one_line(err, "argument --timeout", "at most 86400", repr(value))


def test_sql_timeout_range_is_accepted(small_trace, capsys):
    assert sql.timeout_seconds("86400") == 86400.0 and math.isclose(sql.timeout_seconds("0.5"), 0.5)
    code, out, _ = run(capsys, ["sql", str(small_trace), "SELECT 41 + 1 AS x", "--timeout", "0.5"])
    assert code == 0 and "42" in out


# -- seeds, events and free space ------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, option", [
    (["synth", "--events", "1000", "--seed", "-1", "-o", "{out}"], "--seed"),
    (["synth", "--events", "1000", "--seed", str(2**64), "-o", "{out}"], "--seed"),
    (["synth", "--events", "0", "-o", "{out}"], "--events"),
    (["synth", "--events", str(synth.MAX_EVENTS + 1), "-o", "{out}"], "--events"),
    (["synth", "--events", "10", "--tracks", "0", "-o", "{out}"], "--tracks"),
    (["record", "softmax", "--no-trace", "--seed", "-1"], "--seed"),
    (["record", "softmax", "--no-trace", "--seed=x"], "--seed"),
])
def test_seed_and_event_counts_are_checked_before_running(tmp_path, capsys, argv, option):
    out_dir = tmp_path / "s.trace"
    code, out, err = run(capsys, [a.format(out=out_dir) for a in argv])
    assert code == 2 and out == ""
    assert_one_line(err, f"argument {option}")
    assert not out_dir.exists()


def test_synth_accepts_the_largest_seed(tmp_path, capsys):
    out_dir = tmp_path / "s.trace"
    assert main(["synth", "--events", "500", "--seed", str(MAX_SEED), "-o", str(out_dir)]) == 0
    assert out_dir.is_dir()


DiskUsage = namedtuple("DiskUsage", "total used free")


def test_synth_refuses_when_the_disk_is_too_small(tmp_path, capsys, monkeypatch):
    asked: list[Path] = []

    def disk_usage(path: Path) -> DiskUsage:
        asked.append(Path(path))
        return DiskUsage(10**9, 10**9 - 5_000_000, 5_000_000)

    monkeypatch.setattr(synth.shutil, "disk_usage", disk_usage)
    out_dir = tmp_path / "new" / "deeper" / "s.trace"
    code, out, err = run(capsys, ["synth", "--events", "10000000", "-o", str(out_dir)])
    assert code == 2 and out == ""
    assert_one_line(err, "--events 10,000,000", "about 201.0 MB", "5.0 MB free", "fewer events", "-o")
    assert asked == [tmp_path]  # the nearest existing parent
    assert not (tmp_path / "new").exists()
    assert main(["synth", "--events", "1000", "-o", str(tmp_path / "s.trace")]) == 0  # fits: 1 MB + 20 kB


def test_size_estimate_covers_a_real_trace(tmp_path):
    for events, tracks in ((20_000, 1), (20_000, 21), (20_000, 2100)):
        out_dir = tmp_path / f"s{tracks}.trace"
        synth.synth_trace(out_dir, events, tracks)
        size = sum(f.stat().st_size for f in out_dir.iterdir())
        assert size <= events * synth.BYTES_PER_EVENT + synth.BYTES_FIXED, (tracks, size / events)


# -- Ctrl-C during a DuckDB query ------------------------------------------------------------------------------
@pytest.mark.parametrize("exc", [RuntimeError("Query interrupted"), duckdb.InterruptException("INTERRUPT Error")])
def test_duckdb_interrupt_is_reported_like_ctrl_c(monkeypatch, capsys, exc):
    def interrupted(args: argparse.Namespace) -> int:
        raise exc

    monkeypatch.setattr(sql.COMMAND, "run", interrupted)
    monkeypatch.delenv("TRNPROF_DEBUG", raising=False)
    code, out, err = run(capsys, ["sql", "db", "SELECT 1"])
    assert code == 130 and out == "" and err == "trnprof: error: interrupted\n"


def test_other_runtime_errors_stay_internal_errors(monkeypatch, capsys):
    def broken(args: argparse.Namespace) -> int:
        raise RuntimeError("something else")

    monkeypatch.setattr(sql.COMMAND, "run", broken)
    monkeypatch.delenv("TRNPROF_DEBUG", raising=False)
    code, _, err = run(capsys, ["sql", "db", "SELECT 1"])
    assert code == 70
    assert_one_line(err, "internal error: RuntimeError: something else")


# -- options that were silently ignored ------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["record", "softmax", "-p", "rows=128", "-p", "rows=256", "--no-trace"],
     "-p rows is given twice (rows=128 and rows=256); give each parameter once"),
    (["record", "softmax", "--no-trace", "-o", "{out}"], "names the trace to write, and --no-trace writes none"),
    (["source", "{sample}", "--source-dir", "{missing}"], "--source-dir {missing}: not a directory"),
])
def test_options_that_would_be_ignored_are_errors(tmp_path, capsys, argv, message):
    # before: the last -p won, -o was ignored, and --source-dir was not looked at when the trace held the text
    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "softmax-trn1.trace"
    shutil.copytree(sample, tmp_path / "s.trace")
    names = {"out": tmp_path / "o.trace", "sample": tmp_path / "s.trace", "missing": tmp_path / "nowhere"}
    code, out, err = run(capsys, [a.format(**names) for a in argv])
    assert code == 2 and out == ""
    assert_one_line(err, message.format(**names))
    assert not (tmp_path / "o.trace").exists()


def test_ctrl_c_while_a_command_loads_is_one_line(capsys, monkeypatch):
    """Importing a command's modules takes up to a second or two: Ctrl-C then printed a 50-line traceback and the
    process died by the signal."""
    from profiler import cli

    def slow_import(words):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "commands_for", slow_import)
    code, out, err = run(capsys, ["summary", "x.trace"])
    assert code == 130 and out == "" and err == "trnprof: error: interrupted\n"
