"""What the exporters share: the time window, paged reads of a database table, and atomic output files.

Exporters read the database only through :class:`profiler.trace.Trace` (``Trace.sql``, ``Trace.tracks``), a page
of rows at a time (by ``rowid``), so exporting a large trace never materialises a whole table.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db.sqlutil import quote
from profiler.errors import CommandError
from profiler.trace import Trace
from tracer import schema as ts
from tracer.errors import TraceExistsError

#: Rows per page read from the database.
PAGE_ROWS = 1 << 18


@dataclass(frozen=True)
class TimeWindow:
    """A half-open time window [start, end) in ns; ``None`` bounds are open.

    Interval rows are kept when they overlap the window (whole, not clipped); instants and samples when their
    time lies in it.
    """

    start: int | None = None
    end: int | None = None

    def __post_init__(self) -> None:
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise CommandError(f"empty window: --end ({self.end}) must be after --start ({self.start})")

    @property
    def is_all(self) -> bool:
        return self.start is None and self.end is None

    def interval_sql(self, start_col: str = ts.START_TS, end_col: str = ts.END_TS) -> tuple[str, list[int]]:
        """A WHERE condition (and its parameters) selecting intervals that overlap the window."""
        parts, params = [], []
        if self.end is not None:
            parts.append(f"{quote(start_col)} < ?")
            params.append(self.end)
        if self.start is not None:
            parts.append(f"({quote(end_col)} > ? OR {quote(start_col)} >= ?)")
            params += [self.start, self.start]
        return (" AND ".join(parts) or "TRUE"), params

    def point_sql(self, col: str = ts.TIMESTAMP) -> tuple[str, list[int]]:
        """A WHERE condition selecting rows whose time ``col`` lies in the window."""
        parts, params = [], []
        if self.start is not None:
            parts.append(f"{quote(col)} >= ?")
            params.append(self.start)
        if self.end is not None:
            parts.append(f"{quote(col)} < ?")
            params.append(self.end)
        return (" AND ".join(parts) or "TRUE"), params

    def condition(self, trace: Trace, table: str) -> tuple[str, list[int]]:
        """The window condition for database table ``table`` (TRUE for tables without times)."""
        cols = table_columns(trace, table)
        if ts.START_TS in cols and ts.END_TS in cols:
            return self.interval_sql()
        if ts.TIMESTAMP in cols:
            return self.point_sql()
        return "TRUE", []


def table_names(trace: Trace) -> list[str]:
    """Tables of the database (its own bookkeeping tables excluded)."""
    rows = trace.sql("SELECT table_name FROM duckdb_tables() ORDER BY table_name").fetchall()
    internal = {dbs.INFO_TABLE, dbs.TRACK_TABLE, dbs.LOD_TABLE, dbs.COUNTER_LOD_TABLE}
    return [r[0] for r in rows if r[0] not in internal]


def table_columns(trace: Trace, table: str) -> list[str]:
    """Column names of database table ``table``."""
    return [r[0] for r in trace.sql(f"DESCRIBE {quote(table)}").fetchall()]


def count_rows(trace: Trace, table: str, where: str = "TRUE", params: list[int] | None = None) -> int:
    """Rows of ``table`` matching ``where``."""
    return int(trace.sql(f"SELECT count(*) FROM {quote(table)} WHERE {where}", params=params or None).fetchall()[0][0])


def paged(trace: Trace, select: str, table: str, *, where: str = "TRUE", params: list[int] | None = None,
          page_rows: int = PAGE_ROWS) -> Iterator[pa.Table]:
    """``SELECT select FROM table AS s WHERE where``, a page of ``page_rows`` table rows at a time (by rowid)."""
    total = int(trace.sql(f"SELECT count(*) FROM {quote(table)}").fetchall()[0][0])
    for lo in range(0, total, page_rows):
        sql = (f"SELECT {select} FROM {quote(table)} s WHERE s.rowid >= {lo} AND s.rowid < {lo + page_rows} "
               f"AND ({where}) ORDER BY s.rowid")
        page = trace.sql(sql, timeout_s=None, params=params or None).arrow()
        if isinstance(page, pa.RecordBatchReader):
            page = page.read_all()
        if page.num_rows:
            yield page


def empty_schema(trace: Trace, select: str, table: str) -> pa.Schema:
    """The schema of ``SELECT select FROM table AS s``."""
    result = trace.sql(f"SELECT {select} FROM {quote(table)} s LIMIT 0").arrow()
    return result.schema


def _overlaps(out: Path, inputs: Sequence[str | os.PathLike[str]]) -> Path | None:
    """The input that ``out`` is, lies inside, or holds (None when it touches none of them)."""
    o = out.resolve()
    for item in inputs:
        i = Path(item).resolve()
        if o == i or o.is_relative_to(i) or i.is_relative_to(o):
            return Path(item)
    return None


def _check_replaceable(path: Path, directory: bool, suffix: str | None) -> None:
    """Refuse to replace what is not an earlier output of the same kind: a device or other special file, a file
    where a directory goes (or the reverse), a directory holding anything but ``*suffix`` files."""
    if not (path.is_file() or path.is_dir()):
        raise TraceExistsError(f"{path}: exists and is not a regular file or directory; choose another output path")
    if directory != path.is_dir():
        kind = "a directory" if path.is_dir() else "a file"
        raise TraceExistsError(f"{path}: exists and is {kind}; choose another output path")
    if directory and suffix is not None:
        foreign = [f.name for f in path.iterdir() if not (f.is_file() and f.name.endswith(suffix))]
        if foreign:
            raise TraceExistsError(f"{path}: holds {foreign[0]!r}, which is not a {suffix} file of an export; "
                                   "--force only replaces an earlier export: choose an empty or new directory")


@contextlib.contextmanager
def atomic_output(path: Path, *, force: bool, directory: bool = False, inputs: Sequence[str | os.PathLike[str]] = (),
                  suffix: str | None = None) -> Iterator[Path]:
    """A temporary path beside ``path``, renamed over it when the block succeeds (removed when it fails).

    An existing ``path`` is an error unless ``force``; it is replaced only once the new output is complete, and
    only when it is what this output would be (a regular file, or with ``directory`` a directory of ``*suffix``
    files).  ``inputs`` are the paths being read: the output may not be one of them, lie inside one or hold one.
    """
    clash = _overlaps(path, inputs)
    if clash is not None:
        raise CommandError(f"{path}: the output would overwrite the input {clash}; choose another output path")
    if path.exists() or path.is_symlink():
        _check_replaceable(path, directory, suffix)   # what --force cannot replace is said first
        if not force:
            raise TraceExistsError(f"{path}: already exists; pass --force to replace it")
    parent = path.parent
    if not parent.is_dir():
        raise CommandError(f"{path}: {parent} is not an existing directory; create it or choose another output path")
    tmp = parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        try:
            if directory:
                tmp.mkdir()
            else:
                tmp.touch(exist_ok=False)
        except OSError as exc:
            raise CommandError(f"{path}: cannot write in {parent} ({exc.strerror or exc}); choose another output "
                               "path") from None
        yield tmp
        if path.exists():
            old = parent / f".{path.name}.{uuid.uuid4().hex[:8]}.old"
            os.replace(path, old)
            os.replace(tmp, path)
            _remove(old)
        else:
            os.replace(tmp, path)
    finally:
        _remove(tmp)


def _remove(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)
