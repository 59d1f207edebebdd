"""The real ``trnprof`` command on bad database files: exit code 2 and one ``trnprof: error:`` line naming the file
(and, for DuckDB files, the ``trnprof ingest`` fix), never a traceback or an internal error."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from profiler.db.ingest import ingest
from profiler.sources import TraceDirectorySource
from profiler.synth import synth_trace
from tests.unit.test_db_open_errors import _alter


@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("dbcli")
    trace = synth_trace(base / "g.trace", events=600, tracks=3, seed=7)
    return ingest(TraceDirectorySource(trace), base / "good.duckdb")


def _trnprof(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def _altered(*statements: str) -> Callable[[Path, Path], None]:
    def make(good: Path, dst: Path) -> None:
        shutil.copyfile(good, dst)
        _alter(dst, *statements)
    return make


def _truncated(good: Path, dst: Path) -> None:
    data = good.read_bytes()
    dst.write_bytes(data[: len(data) // 2])


def _foreign(_good: Path, dst: Path) -> None:
    con = duckdb.connect(str(dst))
    try:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    finally:
        con.close()


#: kind -> (how to make it from the good database, whether it is a DuckDB file trnprof should explain).
KINDS: dict[str, tuple[Callable[[Path, Path], None], bool]] = {
    "truncated": (_truncated, True),
    "random bytes": (lambda _g, d: d.write_bytes(bytes(range(256)) * 64), False),
    "empty": (lambda _g, d: d.write_bytes(b""), False),
    "text": (lambda _g, d: d.write_text("hello\n"), False),
    "parquet": (lambda _g, d: pq.write_table(pa.table({"a": [1]}), d), False),
    "foreign duckdb": (_foreign, True),
    "table dropped": (_altered("DROP TABLE Instruction"), True),
    "column dropped": (_altered("ALTER TABLE Instruction DROP COLUMN opcode"), True),
}

COMMANDS: dict[str, tuple[str, ...]] = {
    "summary": ("summary",),
    "sql": ("sql", "{db}", "SELECT count(*) FROM Instruction"),
    "export": ("export", "{db}", "--format", "chrome", "-o", "out.json"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("kind", list(KINDS))
def test_bad_database_is_one_error_line(kind: str, command: str, good_db: Path, tmp_path: Path) -> None:
    make, is_duckdb = KINDS[kind]
    db = tmp_path / "bad.duckdb"
    make(good_db, db)
    args = [a.format(db=db) for a in COMMANDS[command]]
    if "{db}" not in COMMANDS[command]:
        args.append(str(db))
    run = _trnprof(*args, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"trnprof: error: {db}: "), lines[0]
    assert "internal error" not in lines[0] and "Traceback" not in run.stderr
    if is_duckdb:
        assert f"trnprof ingest TRACE -o {db}`" in lines[0]
    assert not (tmp_path / "out.json").exists()


def test_good_database_still_works(good_db: Path, tmp_path: Path) -> None:
    run = _trnprof("sql", good_db, "SELECT count(*) > 0 AS ok FROM Instruction", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "true" in run.stdout.lower()


def test_a_damaged_block_found_while_reading_names_the_database(good_db: Path, tmp_path: Path, capsys) -> None:
    """A data block whose checksum fails is found only when a query reads it, after the database opened cleanly:
    the one-line error still names the file and the `trnprof ingest -o` fix for it."""
    from profiler.cli import main

    size = good_db.stat().st_size
    block = 256 * 1024  # DuckDB's block size: damage one block at a time, headers (the first 12 KiB) left alone
    seen = []
    for start in range(3 * 4096, size - 4096, block):
        bad = tmp_path / f"b{start}.duckdb"
        shutil.copyfile(good_db, bad)
        with open(bad, "r+b") as f:
            f.seek(start + 64)
            f.write(b"A" * 4096)
        for argv in (["sql", str(bad), "SELECT sum(start_ts), count(*), max(name) FROM slice"],
                     ["summary", str(bad)]):
            code = main(argv)
            err = capsys.readouterr().err
            if "cannot read the database" in err:
                seen.append(argv[0])
                assert code == 2 and err.count("\n") == 1
                assert err.startswith(f"trnprof: error: {bad.resolve()}: cannot read the database"), err
                assert f"re-create it with `trnprof ingest TRACE -o {bad.resolve()}`" in err, err
    assert "sql" in seen and "summary" in seen, seen
