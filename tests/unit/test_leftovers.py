"""What processes killed outright left: removed by the next process, never the work of a running one."""

from __future__ import annotations

import subprocess
import sys

from profiler.cli import main
from profiler.leftovers import ingest_temporary_pid, recording_aside_pid, remove_left_by_dead


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_only_the_leftovers_of_dead_processes_go(tmp_path):
    dead = _dead_pid()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        db = tmp_path / "t.trace.trnprof.duckdb"
        names = [f".{db.name}.{dead}.1a2b3c4d.tmp", f".{db.name}.{dead}.1a2b3c4d.tmp.wal",
                 f".{db.name}.{alive.pid}.5e6f7a8b.tmp", f".other.duckdb.{dead}.1a2b3c4d.tmp", db.name]
        for n in names:
            (tmp_path / n).write_text("x")
        (tmp_path / f".{db.name}.{dead}.1a2b3c4d.tmp.spill").mkdir()
        removed = remove_left_by_dead(tmp_path, ingest_temporary_pid(db))
        assert sorted(removed) == sorted([names[0], names[1], f".{db.name}.{dead}.1a2b3c4d.tmp.spill"])
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])
        trace = tmp_path / "k.trace"
        for pid in (dead, alive.pid):
            (tmp_path / f".k.trace.recording-{pid}").mkdir()
        assert remove_left_by_dead(tmp_path, recording_aside_pid(trace)) == [f".k.trace.recording-{dead}"]
        assert (tmp_path / f".k.trace.recording-{alive.pid}").is_dir()
    finally:
        alive.kill()
        alive.wait()


def test_ingest_and_record_force_clear_what_killed_runs_left(tmp_path, capsys):
    dead = _dead_pid()
    trace = tmp_path / "s.trace"
    assert main(["record", "softmax", "-p", "rows=128", "-p", "cols=64", "-o", str(trace), "-q"]) == 0
    aside = tmp_path / f".s.trace.recording-{dead}"
    aside.mkdir()
    (aside / "Instruction.arrows").write_bytes(b"partial")
    left = tmp_path / f".s.trace.trnprof.duckdb.{dead}.0badcafe.tmp"
    left.write_bytes(b"half a database")
    assert main(["ingest", str(trace), "--quiet"]) == 0
    assert not left.exists()
    assert main(["record", "softmax", "-p", "rows=128", "-p", "cols=64", "-o", str(trace), "-q", "--force"]) == 0
    assert not aside.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.trace", "s.trace.trnprof.duckdb"]
