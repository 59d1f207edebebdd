"""Damaged inputs end to end: a corrupt table of a completed recording is one error (exit 2, no crash, no temporary
file left, the earlier database kept); the warnings an ingest gave are given again on every later open of its
database; intervals ending before they start are repaired with a counted warning."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyarrow import ipc

import profiler
from profiler.cli import main
from profiler.db.cache import CACHE_DIR_ENV
from tracer.samples import SAMPLE_DIR

SAMPLE = SAMPLE_DIR / "matmul_naive-trn2.trace"
ROOT = Path(__file__).resolve().parents[2]


def _copy(tmp_path: Path, name: str = "t.trace") -> Path:
    dst = tmp_path / name
    shutil.copytree(SAMPLE, dst)
    return dst


def _overwrite(file: Path, offset: int, junk: bytes = b"A" * 64) -> None:
    with open(file, "r+b") as f:
        f.seek(offset)
        f.write(junk)


def _set_complete(trace: Path, complete: bool) -> None:
    path = trace / "Metadata.arrows"
    table = ipc.open_stream(pa.memory_map(str(path))).read_all()
    i = table.schema.get_field_index("recording_complete")
    table = table.set_column(i, table.schema.field(i), pa.array([complete]))
    with ipc.new_stream(str(path), table.schema) as w:
        w.write_table(table)


def _trnprof(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), CACHE_DIR_ENV: str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "profiler", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


def _one_error(run: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and lines[0].startswith("trnprof: error: "), run.stderr
    assert "internal error" not in lines[0] and "Traceback" not in run.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(("table", "offset"), [("Instruction", 23512), ("DmaTransfer", 7823)])
def test_a_corrupt_batch_is_one_error_not_a_crash_and_leaves_no_temporary_file(tmp_path, table, offset):
    """The reported recipes: 64 bytes of 'A' inside a batch segfaulted in pyarrow's `take` (Instruction) or ended
    in an internal IndexError (DmaTransfer)."""
    assert (SAMPLE / f"{table}.arrows").stat().st_size > offset + 64
    trace = _copy(tmp_path)
    out = tmp_path / "X.duckdb"
    assert _trnprof("ingest", str(SAMPLE_DIR / "softmax-trn1.trace"), "-o", str(out), "--quiet",
                    cwd=tmp_path).returncode == 0
    before = out.read_bytes()
    _overwrite(trace / f"{table}.arrows", offset)
    for argv in (["summary", str(trace)], ["ingest", str(trace), "-o", str(out), "--force", "--quiet"]):
        _one_error(_trnprof(*argv, cwd=tmp_path), f"{table}.arrows: corrupt record batch 1",
                   "completed recording", "record or export the trace again")
    assert out.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") or p.name.endswith(".spill")]


def test_damage_in_a_completed_recording_is_an_error_on_every_run(tmp_path, monkeypatch, capsys):
    """Used to be read as an interrupted recording (all instructions gone), then silent once cached."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    trace = _copy(tmp_path)
    _overwrite(trace / "Instruction.arrows", 32916)
    for _ in range(2):
        assert main(["summary", str(trace)]) == 2
        err = capsys.readouterr().err
        assert "Instruction.arrows: corrupt record batch 1" in err and err.count("\n") == 1, err
    cut = _copy(tmp_path, "cut.trace")
    os.truncate(cut / "Flow.arrows", 3000)
    assert main(["summary", str(cut)]) == 2
    assert "Flow.arrows: corrupt record batch 1" in capsys.readouterr().err


def _warnings_of(callable_) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callable_()
    return [str(w.message) for w in caught]


def test_the_warnings_of_an_ingest_are_repeated_whenever_its_database_is_opened(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    trace = _copy(tmp_path)
    _set_complete(trace, False)  # an interrupted recording: a damaged tail is a warning
    _overwrite(trace / "Instruction.arrows", 32916)

    def open_and_close(path: Path) -> None:
        with profiler.open(path) as t:
            assert t.sql("SELECT count(*) FROM Instruction").fetchall() == [(0,)]

    runs = [_warnings_of(lambda: open_and_close(trace)) for _ in range(3)]  # ingest, then the cached database
    for messages in runs:
        assert sum("Instruction.arrows: damaged tail after 0 complete batch(es)" in m for m in messages) == 1, runs
        assert sum("the recording is not complete" in m for m in messages) == 1, runs
    db = tmp_path / "t.duckdb"
    _warnings_of(lambda: main(["ingest", str(trace), "-o", str(db), "--quiet"]))
    assert db.is_file()
    direct = _warnings_of(lambda: open_and_close(db))  # the database file itself, without its trace
    assert any("damaged tail after 0 complete batch(es)" in m for m in direct), direct
    assert any("the recording is not complete" in m for m in direct), direct


def test_a_truncated_json_keeps_warning_once_cached(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    events = ",".join(f'{{"ph":"X","name":"e{i}","pid":1,"tid":1,"ts":{i},"dur":1}}' for i in range(100))
    text = '{"traceEvents":[' + events + "]}"
    src = tmp_path / "cut.json"
    src.write_text(text[: text.index('"e60"') + 3])
    for _ in range(3):
        messages = _warnings_of(lambda: profiler.open(src).close())
        assert sum("cut.json: the file ends inside event 60" in m for m in messages) == 1, messages


def test_a_cached_ingest_says_it_is_up_to_date_and_repeats_its_warnings(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    trace = _copy(tmp_path)
    _set_complete(trace, False)
    os.truncate(trace / "Flow.arrows", 3000)
    for expected in ("", "(up to date)"):
        messages = _warnings_of(lambda: main(["ingest", str(trace)]))
        assert expected in capsys.readouterr().out
        assert sum("Flow.arrows: damaged tail" in m for m in messages) == 1, messages


def _write_negative(trace: Path) -> None:
    path = trace / "Instruction.arrows"
    table = ipc.open_stream(pa.memory_map(str(path))).read_all()
    i = table.schema.get_field_index("end_ts")
    table = table.set_column(i, table.schema.field(i), pc.subtract(table["start_ts"], 100))
    with ipc.new_stream(str(path), table.schema) as w:
        w.write_table(table)


def test_intervals_ending_before_they_start_are_made_zero_length_with_a_counted_warning(tmp_path, monkeypatch):
    """Was accepted silently: 0 µs Tensor time in summary, negative gaps in bounds."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    trace = _copy(tmp_path, "neg.trace")
    _write_negative(trace)
    for _ in range(2):  # the cached database warns too
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = profiler.open(trace)
        messages = [str(w.message) for w in caught]
        assert sum("neg.trace/Instruction.arrows: 2,177 rows end before they start; made them zero-length" in m
                   for m in messages) == 1, messages
        with t:
            rows = t.sql("SELECT count(*), count(*) FILTER (WHERE end_ts < start_ts OR duration_ns <> 0) "
                         "FROM Instruction").fetchall()
            assert rows == [(2177, 0)]
