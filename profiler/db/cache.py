"""The ingest cache: which database answers for an input path, and ingesting it once when needed.

Any input that :func:`profiler.sources.open_source` accepts is ingested once into a cached database keyed by the
source format and the size and modification time of every input file.  The cache lives beside the input
(``<input>.trnprof.duckdb``) when that directory is writable, else in the user cache directory
(``$TRNPROF_CACHE_DIR``, ``$XDG_CACHE_HOME/trnprof`` or ``~/.cache/trnprof``).  ``TRNPROF_CACHE_DIR`` set
forces that directory.  A database whose stored key differs from the input's current key is rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb

from profiler import db_schema as dbs
from profiler.db import ingest_warnings
from profiler.db.connection import check_database, is_duckdb_file
from profiler.db.ingest import IngestProgress, ingest
from profiler.sources import TraceSource, open_source
from tracer.errors import TraceFormatError
from tracer.user_cache import CACHE_DIR_ENV, user_cache_dir

CACHE_SUFFIX = ".trnprof.duckdb"


def cache_key(source: TraceSource) -> str:
    """A digest of the source format, the database format and every input file's path, size and mtime."""
    files = []
    for f in sorted(source.input_files()):
        st = f.stat()
        files.append([str(f.resolve()), st.st_size, st.st_mtime_ns])
    text = json.dumps([source.format_name, dbs.DB_FORMAT_VERSION, files])
    return hashlib.sha256(text.encode()).hexdigest()


def cache_path(input_path: Path) -> Path:
    """Where the cached database of ``input_path`` lives."""
    resolved = input_path.resolve()
    if not os.environ.get(CACHE_DIR_ENV) and os.access(resolved.parent, os.W_OK):
        return resolved.with_name(resolved.name + CACHE_SUFFIX)
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    return user_cache_dir() / f"{resolved.name}-{digest}{CACHE_SUFFIX}"


def stored_info(db: Path) -> dict[str, str] | None:
    """The ``trnprof_info`` of database ``db`` when it is a sound trnprof database of this format, else None
    (missing, foreign, damaged or of another format)."""
    if not db.exists() or not is_duckdb_file(db):
        return None
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error:
        return None
    try:
        info = check_database(con, db)  # a damaged or altered entry is rebuilt, not refused
    except (duckdb.Error, TraceFormatError):
        return None
    finally:
        con.close()
    if info is None or info.get(dbs.INFO_FORMAT_VERSION) != dbs.DB_FORMAT_VERSION:
        return None
    return info


def stored_cache_key(db: Path) -> str | None:
    """The cache key stored in database ``db``, or None when it is missing, foreign or of another format."""
    info = stored_info(db)
    return None if info is None else info.get(dbs.INFO_CACHE_KEY)


def resolve_database(path: str | os.PathLike[str], *, force: bool = False,
                     progress: IngestProgress | None = None) -> Path:
    """The database for ``path``: the file itself when it is a DuckDB file, else the (re)built cache entry.

    The warnings the database's ingest gave (a damaged or incomplete input) are given again
    (:mod:`profiler.db.ingest_warnings`), so a cached or stored database of a damaged trace never looks clean.
    """
    p = Path(path)
    if p.is_file() and (is_duckdb_file(p) or p.suffix == ".duckdb"):  # (a damaged one: open_database says why)
        ingest_warnings.repeat(ingest_warnings.read_stored(p))
        return p
    with ingest_warnings.collecting() as opened:
        source = open_source(p)
    key = cache_key(source)
    db = cache_path(p)
    if db.is_dir():   # said before an ingest that could not be stored there
        raise TraceFormatError(f"{db}: the cache entry of {p} is a directory; remove it, or set {CACHE_DIR_ENV} to "
                               "another directory for the cache")

    def current() -> dict[str, str] | None:
        """The cache entry's info when it answers for the input as it is now."""
        info = None if force else stored_info(db)
        return info if info is not None and info.get(dbs.INFO_CACHE_KEY) == key else None

    info = current()
    if info is None:
        with ingest_lock(db):  # another thread or process may be ingesting the same input: wait, then reuse it
            info = current()
            if info is None:
                return ingest(source, db, cache_key=key, progress=progress, warned=opened)
    ingest_warnings.repeat(ingest_warnings.decode(info), already_shown=opened)
    return db


#: One lock per cache entry for the threads of this process (the file lock below serializes processes).
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def ingest_lock(db: Path) -> Iterator[None]:
    """Hold the right to (re)build cache entry ``db``: a lock for this process's threads, and an exclusive
    ``fcntl`` lock on ``<db>.lock`` for other processes (where the platform has it and the file can be made)."""
    with _THREAD_LOCKS_GUARD:
        lock = _THREAD_LOCKS.setdefault(str(db), threading.Lock())
    with lock:
        try:
            import fcntl
        except ImportError:  # not POSIX: threads only
            yield
            return
        path = db.with_name(db.name + ".lock")
        while True:
            try:
                db.parent.mkdir(parents=True, exist_ok=True)  # (the user cache directory may not exist yet)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:  # a directory we may read but not write: the ingest itself says why it cannot write
                yield
                return
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, path):
                break
            os.close(fd)  # its last holder removed the file we waited on: lock the one at the path now
        try:
            yield
        finally:
            # no lock file is left beside the user's input: removed while still held, so a process waiting on
            # it sees (above) that it is gone and locks a new one
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)  # releases the lock


def _same_file(fd: int, path: Path) -> bool:
    """True when ``path`` still names the file open as ``fd``."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
