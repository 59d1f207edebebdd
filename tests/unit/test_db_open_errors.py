"""Opening a bad database file: every kind (not DuckDB, truncated, foreign, tables or columns missing or of the
wrong type) is refused by ``open_database`` with one TraceFormatError line naming the file and the fix; a good
database still opens, and the check reads the catalog only."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import feather

import profiler
from profiler import db_schema as dbs
from profiler.db.connection import (
    check_database,
    close_database,
    expected_tables,
    open_database,
    schema_problems,
    stored_columns,
)
from profiler.db.ingest import STANDARD_TABLES, ingest
from profiler.sources import TraceDirectorySource
from profiler.synth import synth_trace
from tests.conftest import instruction_columns
from tracer import schema as ts
from tracer.errors import TraceFormatError

FIX = "trnprof ingest TRACE -o"


@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database made by ``ingest`` from a small synthetic trace (instructions, DMA, spans, counters)."""
    base = tmp_path_factory.mktemp("dbopen")
    trace = synth_trace(base / "g.trace", events=600, tracks=3, seed=5)
    return ingest(TraceDirectorySource(trace), base / "good.duckdb")


@pytest.fixture
def copy_of(good_db: Path, tmp_path: Path) -> Callable[[str], Path]:
    """``copy_of(name)``: a fresh copy of the good database at ``tmp_path / name``."""
    def make(name: str) -> Path:
        dst = tmp_path / name
        shutil.copyfile(good_db, dst)
        return dst
    return make


def _alter(path: Path, *statements: str) -> Path:
    con = duckdb.connect(str(path))
    try:
        for statement in statements:
            con.execute(statement)
    finally:
        con.close()
    return path


def _refusal(path: Path) -> str:
    """The one-line TraceFormatError message ``open_database(path)`` raises (fails the test if it opens)."""
    with pytest.raises(TraceFormatError) as info:
        close_database(open_database(path))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


def _opens(path: Path) -> dict[str, str]:
    con = open_database(path)
    try:
        return check_database(con, path)
    finally:
        close_database(con)


# -- files that are not a (whole) trnprof database ----------------------------------------------------------
def _truncated_half(good: Path, dst: Path) -> None:
    data = good.read_bytes()
    dst.write_bytes(data[: len(data) // 2])


def _truncated_one_byte(good: Path, dst: Path) -> None:
    dst.write_bytes(good.read_bytes()[:-1])


def _header_only(good: Path, dst: Path) -> None:
    dst.write_bytes(good.read_bytes()[:12288])


def _random_bytes(_good: Path, dst: Path) -> None:
    dst.write_bytes(np.random.default_rng(1).integers(0, 256, 100_000, dtype=np.uint8).tobytes())


def _empty(_good: Path, dst: Path) -> None:
    dst.write_bytes(b"")


def _text(_good: Path, dst: Path) -> None:
    dst.write_text("SELECT * FROM Instruction;\nnot a database\n")


def _parquet(_good: Path, dst: Path) -> None:
    pq.write_table(pa.table({"a": [1, 2, 3]}), dst)


def _arrow(_good: Path, dst: Path) -> None:
    feather.write_feather(pa.table({"a": [1, 2, 3]}), dst)


def _foreign_duckdb(_good: Path, dst: Path) -> None:
    _alter(dst, "CREATE TABLE measurements (x INTEGER, label VARCHAR)", "INSERT INTO measurements VALUES (1, 'a')")


BAD_FILES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "truncated to half": (_truncated_half, "truncated DuckDB database"),
    "truncated by one byte": (_truncated_one_byte, "truncated DuckDB database"),
    "header only": (_header_only, "cannot open the database"),
    "random bytes": (_random_bytes, "not a DuckDB database (unrecognised binary content)"),
    "empty": (_empty, "not a DuckDB database (the file is empty)"),
    "text": (_text, "not a DuckDB database (it is a text file)"),
    "parquet": (_parquet, "not a DuckDB database (it is a Parquet file)"),
    "arrow": (_arrow, "not a DuckDB database (it is an Arrow IPC file)"),
    "foreign duckdb": (_foreign_duckdb, "not one trnprof wrote"),
}


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_bad_file_is_one_line_error_naming_file_and_fix(kind: str, good_db: Path, tmp_path: Path) -> None:
    make, what = BAD_FILES[kind]
    path = tmp_path / "x.duckdb"
    make(good_db, path)
    message = _refusal(path)
    assert what in message
    assert f"{FIX} {path}`" in message


@pytest.mark.parametrize("kind", ["truncated to half", "truncated by one byte", "header only", "foreign duckdb"])
def test_profiler_open_refuses_bad_duckdb_files(kind: str, good_db: Path, tmp_path: Path) -> None:
    """The public entry (what every CLI command and the dashboard use) gives the same one-line error."""
    make, what = BAD_FILES[kind]
    path = tmp_path / "y.duckdb"
    make(good_db, path)
    with pytest.raises(TraceFormatError, match=re.escape(what)) as info:
        profiler.open(path).close()
    assert "\n" not in str(info.value) and str(path) in str(info.value)


# -- damaged schema -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("table", [t for t in expected_tables() if t != dbs.INFO_TABLE])
def test_missing_table_is_refused(table: str, copy_of: Callable[[str], Path]) -> None:
    path = _alter(copy_of("dropped.duckdb"), f'DROP TABLE "{table}"')
    message = _refusal(path)
    assert f"not a complete trnprof database (table {table} is missing)" in message
    assert f"{FIX} {path}`" in message


def test_missing_info_table_means_not_made_by_trnprof(copy_of: Callable[[str], Path]) -> None:
    path = _alter(copy_of("noinfo.duckdb"), f"DROP TABLE {dbs.INFO_TABLE}")
    assert "not one trnprof wrote (no trnprof_info table)" in _refusal(path)


@pytest.mark.parametrize(("table", "column"), [(ts.INSTRUCTION.name, ts.OPCODE), (ts.INSTRUCTION.name, ts.START_TS),
                                               (ts.DMA_PACKET.name, ts.TRANSFER_BYTES), (dbs.TRACK_TABLE, dbs.KIND),
                                               (dbs.LOD_TABLE, dbs.BUSY_NS), (dbs.INFO_TABLE, dbs.INFO_VALUE)])
def test_missing_column_is_refused(table: str, column: str, copy_of: Callable[[str], Path]) -> None:
    path = _alter(copy_of("nocol.duckdb"), f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
    assert f"(column {table}.{column} is missing)" in _refusal(path)


@pytest.mark.parametrize(("column", "sql_type", "expected"), [(ts.OPCODE, "INTEGER", "VARCHAR"),
                                                              (ts.START_TS, "VARCHAR", "an integer type"),
                                                              (ts.RAW_FLOPS, "BOOLEAN", "an integer type")])
def test_column_of_wrong_type_is_refused(column: str, sql_type: str, expected: str,
                                         copy_of: Callable[[str], Path]) -> None:
    path = _alter(copy_of("retyped.duckdb"), f'ALTER TABLE Instruction DROP COLUMN "{column}"',
                  f'ALTER TABLE Instruction ADD COLUMN "{column}" {sql_type}')
    assert f"(column Instruction.{column} is {sql_type}, expected {expected})" in _refusal(path)


def test_many_problems_name_the_first_three_and_count_the_rest(copy_of: Callable[[str], Path]) -> None:
    path = _alter(copy_of("many.duckdb"), "DROP TABLE lod", "DROP TABLE counter_lod", "DROP TABLE slice",
                  "ALTER TABLE Flow DROP COLUMN gap_time", "ALTER TABLE Instruction DROP COLUMN layer")
    message = _refusal(path)
    assert message.count(" is missing") == 3 and "; and 2 more)" in message


# -- what still opens -----------------------------------------------------------------------------------------
def test_good_database_opens_with_its_info(good_db: Path) -> None:
    info = _opens(good_db)
    assert info[dbs.INFO_FORMAT_VERSION] == dbs.DB_FORMAT_VERSION
    with profiler.open(good_db) as trace:
        assert trace.sql("SELECT count(*) FROM Instruction").fetchall()[0][0] > 0


def test_extra_tables_columns_and_same_kind_types_are_accepted(copy_of: Callable[[str], Path]) -> None:
    """Only what trnprof relies on is checked: additions, optional tables and a narrower integer still open."""
    path = _alter(copy_of("extra.duckdb"), "CREATE TABLE notes (x INTEGER)",
                  "ALTER TABLE Instruction ADD COLUMN compiler_opcode VARCHAR",
                  "ALTER TABLE Instruction ALTER COLUMN pcore_idx TYPE INTEGER",
                  f'DROP TABLE IF EXISTS "{ts.DMA_QUEUES_INFO.name}"')
    assert _opens(path)[dbs.INFO_FORMAT_VERSION] == dbs.DB_FORMAT_VERSION


def test_a_database_of_an_earlier_minor_version_without_a_later_column_still_opens(copy_of) -> None:
    """Metadata.table_rows came with 3.2: every database ingested before was refused as "damaged or altered"."""
    ver = (f'UPDATE {dbs.INFO_TABLE} SET "{dbs.INFO_VALUE}" = \'{{}}\' '
           f'WHERE "{dbs.INFO_KEY}" = \'{dbs.INFO_FORMAT_VERSION}\'')
    old = _alter(copy_of("old.duckdb"), "ALTER TABLE Metadata DROP COLUMN table_rows", ver.format("3.1"))
    assert _opens(old)[dbs.INFO_FORMAT_VERSION] == "3.1"
    now = _alter(copy_of("now.duckdb"), "ALTER TABLE Metadata DROP COLUMN table_rows")
    assert "column Metadata.table_rows is missing" in _refusal(now)     # one that says 3.2 must have it


class _PartialSource:
    """A TraceSource with a few Instruction rows of some columns only (the ingest adds the others)."""

    format_name = "test-source"

    def __init__(self, path: Path, rows: int) -> None:
        self.path = path
        self.rows = rows

    def input_files(self) -> list[Path]:
        return [self.path]

    def input_size(self) -> int:
        return 1

    def read(self, progress: object = None) -> object:
        cols = instruction_columns(self.rows)
        yield ts.INSTRUCTION.name, pa.RecordBatch.from_pydict({k: pa.array(v) for k, v in cols.items()})


@pytest.mark.parametrize("rows", [1, 25])
def test_databases_of_minimal_sources_pass_the_check(rows: int, tmp_path: Path) -> None:
    """What the check requires is what ingest always creates, even from a source with few rows and columns."""
    db = ingest(_PartialSource(tmp_path / "src", rows), tmp_path / "min.duckdb")
    assert _opens(db)
    assert set(STANDARD_TABLES) <= set(expected_tables())


def test_schema_problems_of_a_catalog() -> None:
    catalog = {name.lower(): {f.name.lower(): "BIGINT" for f in schema} for name, schema in expected_tables().items()}
    catalog["instruction"].pop(ts.OPCODE)
    catalog["track"][dbs.KIND] = "VARCHAR"
    problems = schema_problems(catalog, expected_tables())
    assert f"column {ts.INSTRUCTION.name}.{ts.ENGINE} is BIGINT, expected VARCHAR" in problems
    assert f"column {ts.INSTRUCTION.name}.{ts.OPCODE} is missing" in problems
    assert not any(p.startswith(f"column {dbs.TRACK_TABLE}.{dbs.KIND} ") for p in problems)


# -- cost: the catalog, never the data -------------------------------------------------------------------------
class _Recorder:
    """A connection stand-in recording every SQL statement run through it."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.statements: list[str] = []

    def execute(self, sql: str, params: object = None) -> duckdb.DuckDBPyConnection:
        self.statements.append(sql)
        return self.con.execute(sql, params)


def test_check_reads_only_the_catalog_and_the_info_table(good_db: Path) -> None:
    con = open_database(good_db)
    try:
        recorder = _Recorder(con)
        check_database(recorder, good_db)  # type: ignore[arg-type]
        assert stored_columns(con)
    finally:
        close_database(con)
    sources = {m.lower() for s in recorder.statements for m in re.findall(r"\bFROM\s+(\S+)", s, re.IGNORECASE)}
    assert sources <= {"duckdb_columns()", "duckdb_tables()", "pragma_database_size()", f'"{dbs.INFO_TABLE}"'}
