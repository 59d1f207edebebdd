"""Outputs never destroy what is not theirs: ``export``, ``ingest`` and ``synth`` refuse to overwrite their input,
special files and foreign files or directories (even with ``--force``), say so in one line naming the path, and
replace an earlier output only once the new one is complete."""

from __future__ import annotations

import os

import pytest

from profiler.cli import main
from profiler.synth import synth_trace
from tracer import IncompleteTraceWarning, TraceReader, TraceWriter
from tracer.errors import TraceFormatError
from tracer.sim import run_kernel


@pytest.fixture(scope="module")
def trace_and_db(tmp_path_factory):
    root = tmp_path_factory.mktemp("safety")
    trace = root / "t1"
    run_kernel("matmul_naive", {"M": 256, "N": 512, "K": 256}, trace_path=trace, emit="inline")
    db = root / "t1.duckdb"
    assert main(["ingest", str(trace), "-o", str(db), "--quiet"]) == 0
    return trace, db


def _one_line_error(capsys, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("trnprof: error: "), err
    for needle in needles:
        assert needle in err, err
    return err


def _snapshot(path):
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())} if path.is_dir() else path.read_bytes()


def test_export_parquet_never_replaces_a_directory_that_is_not_an_export(trace_and_db, tmp_path, capsys):
    _, db = trace_and_db
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "readme.txt").write_text("keep me")
    assert main(["export", str(db), "--format", "parquet", "-o", str(mine), "--force", "--quiet"]) != 0
    _one_line_error(capsys, str(mine), "readme.txt", "choose an empty or new directory")
    assert (mine / "readme.txt").read_text() == "keep me"
    # an earlier export is replaced
    out = tmp_path / "pq"
    for _ in range(2):
        assert main(["export", str(db), "--format", "parquet", "-o", str(out), "--force", "--quiet"]) == 0
    assert all(p.suffix == ".parquet" for p in out.iterdir())


def test_export_never_replaces_a_special_file(trace_and_db, tmp_path, capsys):
    _, db = trace_and_db
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["export", str(db), "--format", "chrome", "-o", str(fifo), "--force", "--quiet"]) != 0
    _one_line_error(capsys, str(fifo), "not a regular file")
    assert fifo.is_fifo()


def test_export_and_ingest_never_overwrite_their_input(trace_and_db, tmp_path, capsys):
    trace, db = trace_and_db
    before_db, before_trace = _snapshot(db), _snapshot(trace)
    assert main(["export", str(db), "--format", "chrome", "-o", str(db), "--force", "--quiet"]) != 0
    _one_line_error(capsys, "would overwrite the input")
    assert main(["export", str(trace), "--format", "parquet", "-o", str(trace.parent), "--force", "--quiet"]) != 0
    _one_line_error(capsys, "would overwrite the input")
    assert main(["ingest", str(trace), "-o", str(trace / "Instruction.arrows"), "--force", "--quiet"]) != 0
    _one_line_error(capsys, "would overwrite the input")
    assert _snapshot(db) == before_db and _snapshot(trace) == before_trace


def test_ingest_force_replaces_only_a_database(trace_and_db, tmp_path, capsys):
    trace, _ = trace_and_db
    notes = tmp_path / "notes.duckdb"
    notes.write_text("my notes, not a database")
    assert main(["ingest", str(trace), "-o", str(notes), "--force", "--quiet"]) != 0
    _one_line_error(capsys, str(notes), "not a DuckDB database")
    assert notes.read_text() == "my notes, not a database"
    db = tmp_path / "db.duckdb"
    for _ in range(2):  # an earlier database is replaced
        assert main(["ingest", str(trace), "-o", str(db), "--force", "--quiet"]) == 0


def test_ingest_force_never_replaces_a_duckdb_database_trnprof_did_not_write(trace_and_db, tmp_path, capsys):
    """--force replaces an earlier trnprof database only: someone's own DuckDB file (no trnprof_info), or one that
    cannot be read to tell, is refused in one line naming it and kept as it was."""
    import duckdb

    trace, db = trace_and_db
    mine = tmp_path / "my.duckdb"
    con = duckdb.connect(str(mine))
    con.execute("CREATE TABLE customers AS SELECT * FROM range(1000)")
    con.close()
    before = mine.read_bytes()
    assert main(["ingest", str(trace), "-o", str(mine), "--force", "--quiet"]) == 2
    _one_line_error(capsys, str(mine), "a DuckDB database trnprof did not write", "--force only replaces a trnprof "
                    "database")
    assert mine.read_bytes() == before
    con = duckdb.connect(str(mine), read_only=True)
    assert con.execute("SELECT count(*) FROM customers").fetchall() == [(1000,)]
    con.close()
    damaged = tmp_path / "damaged.duckdb"
    data = db.read_bytes()
    damaged.write_bytes(data[:12288] + os.urandom(4096) + data[16384:])  # its first block: the catalog
    assert main(["ingest", str(trace), "-o", str(damaged), "--force", "--quiet"]) == 2
    _one_line_error(capsys, str(damaged), "cannot be")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", ["ingest", "export"])
def test_an_output_that_cannot_be_written_names_the_output(trace_and_db, tmp_path, capsys, command):
    trace, db = trace_and_db
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = blocker / "out.x"  # its "directory" is a file
    argv = ["ingest", str(trace), "-o", str(out)] if command == "ingest" else \
        ["export", str(db), "--format", "chrome", "-o", str(out)]
    assert main([*argv, "--quiet"]) != 0
    _one_line_error(capsys, str(out), "not an existing directory")


def test_an_interrupted_synth_leaves_the_old_trace_as_it_was(tmp_path):
    out = tmp_path / "syn"
    synth_trace(out, 1000)
    before = _snapshot(out)

    def stop(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        synth_trace(out, 400_000, overwrite=True, chunk_events=100_000, progress=stop)
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["syn"]  # no temporary directory left
    synth_trace(out, 2000, overwrite=True)
    assert TraceReader(out).read_table("Instruction").num_rows + TraceReader(out).read_table("DmaPacket").num_rows \
        == 2000


def test_an_incomplete_recording_is_ingested_with_a_warning(tmp_path):
    from profiler.sources import open_source

    path = tmp_path / "partial"
    TraceWriter(path, metadata={"arch": "trn2"}).close(complete=False)
    with pytest.warns(IncompleteTraceWarning, match="not complete"):
        open_source(path)


def test_a_profile_without_events_is_refused(tmp_path):
    from profiler.db.ingest import ingest
    from profiler.sources import open_source

    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    with pytest.raises(TraceFormatError, match="holds no events"):
        ingest(open_source(empty), tmp_path / "e.duckdb")
    assert list(tmp_path.iterdir()) == [empty]  # nothing that looks like a database


def test_sigterm_during_ingest_removes_the_temporary_database(tmp_path, capsys, monkeypatch):
    """SIGTERM ends a command through its cleanup (by default it would kill the process and leave the hidden
    temporary database behind)."""
    import signal

    import profiler.db.ingest as ingest_module

    trace = tmp_path / "syn"
    synth_trace(trace, 50_000)
    real = ingest_module.IndexBuilder

    class Killed(real):  # type: ignore[misc, valid-type]
        def build(self):
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while the index is being built
            return super().build()

    monkeypatch.setattr(ingest_module, "IndexBuilder", Killed)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["ingest", str(trace), "-o", str(tmp_path / "db.duckdb"), "--quiet"]) == 143
    _one_line_error(capsys, "terminated")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["syn"]
    assert signal.getsignal(signal.SIGTERM) == before  # the caller's handler is back


def test_damage_found_only_when_reading_data_is_a_one_line_error(trace_and_db, tmp_path, capsys):
    """Blocks overwritten inside a full-length database pass the open checks (they read the catalog only) and
    fail at the query that reads them: a one-line error, never an internal error."""
    _, db = trace_and_db
    data = db.read_bytes()
    failures = 0
    for k in range(3, 20):
        bad = tmp_path / f"bad{k}.duckdb"
        at = len(data) * k // 20 // 4096 * 4096
        bad.write_bytes(data[:at] + os.urandom(4096) + data[at + 4096:])
        code = main(["summary", str(bad)])
        err = capsys.readouterr().err
        if code:
            failures += 1
            assert code == 2 and len(err.strip().splitlines()) == 1 and "internal error" not in err, err
    assert failures > 0


def test_a_recording_predicted_to_outgrow_the_disk_stops_early(tmp_path, capsys, monkeypatch):
    import shutil
    from collections import namedtuple

    import profiler.cli.record as record_module

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(record_module.shutil, "disk_usage", lambda path: usage(10**12, 10**12 - 4096, 4096))
    monkeypatch.setattr(record_module._DiskGuard, "RESERVE_BYTES", 0)  # the prediction, not the floor, stops it
    out = tmp_path / "big.trace"
    argv = ["record", "matmul_naive", "-p", "M=16384", "-p", "N=8192", "-p", "K=8192", "-o", str(out), "-q"]
    assert main(argv) != 0
    _one_line_error(capsys, str(out), "GB are free", "--no-trace")
    assert TraceReader(out).recording_complete is False  # what was written is kept, marked incomplete
    monkeypatch.setattr(record_module.shutil, "disk_usage", shutil.disk_usage)  # with room, a small one runs
    assert main(["record", "matmul_naive", "-p", "M=256", "-p", "N=512", "-p", "K=256", "-o", str(tmp_path / "s"),
                 "-q"]) == 0


def test_a_recording_without_a_prediction_stops_when_the_disk_is_nearly_full(tmp_path, capsys, monkeypatch):
    """--check computes values, so the loop fast path and its prediction are off: the free-space floor stops it."""
    from collections import namedtuple

    import profiler.cli.record as record_module

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(record_module.shutil, "disk_usage", lambda path: usage(10**12, 10**12 - 5 * 10**7, 5 * 10**7))
    out = tmp_path / "checked.trace"
    assert main(["record", "softmax", "-p", "rows=16384", "--check", "-o", str(out), "-q"]) != 0
    _one_line_error(capsys, str(out), "the disk is nearly full (47.7 MiB free", "keeping what was written")
    assert TraceReader(out).recording_complete is False
