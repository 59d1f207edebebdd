"""``trnprof ingest``: turn a trace (directory or any importable profile) into one DuckDB database."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

import duckdb

from profiler.cli._progress import ingest_bars
from profiler.db import ingest_warnings
from profiler.db.cache import cache_key, cache_path, ingest_lock, stored_info
from profiler.db.connection import is_duckdb_file, read_info
from profiler.db.ingest import ingest
from profiler.db_schema import INFO_CACHE_KEY, INFO_FORMAT_VERSION, INFO_TABLE
from profiler.errors import CommandError
from profiler.sources import open_source


class IngestCommand:
    """Ingest a trace into a DuckDB database (Neuron-named tables, track/slice tables and the zoom index).

    Without -o the database goes where `profiler.open` looks for its cache (beside the input, or the user cache
    directory), so later commands on the same input reuse it.  The database is built in a temporary file and
    renamed at the end: an interrupted ingest leaves nothing that looks valid.
    """

    name = "ingest"
    help = "ingest a trace into a DuckDB database"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("input", help="trace directory or importable profile")
        parser.add_argument("-o", "--output", help="database file to write (default: the cache location)")
        parser.add_argument("--force", action="store_true", help="replace an existing database")
        parser.add_argument("--quiet", action="store_true", help="no progress bar and no summary line")

    def run(self, args: argparse.Namespace) -> int:
        src_path = Path(args.input)
        if src_path.is_file() and is_duckdb_file(src_path):
            raise CommandError(f"{src_path}: already a DuckDB database; nothing to ingest")
        with ingest_warnings.collecting() as opened:
            source = open_source(src_path)
        out = Path(args.output) if args.output else cache_path(src_path)
        key = cache_key(source)
        info = None if args.output or args.force else stored_info(out)
        if info is not None and info.get(INFO_CACHE_KEY) == key:
            ingest_warnings.repeat(ingest_warnings.decode(info), already_shown=opened)
            if not args.quiet:
                print(f"{out} (up to date)")
            return 0
        if not args.output:  # the cache directory is ours to create (profiler.open creates it too)
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CommandError(f"{out.parent}: cannot create the cache directory ({exc.strerror or exc}); set "
                                   "TRNPROF_CACHE_DIR to a writable directory or pass -o") from None
        _check_output(out, src_path, force=args.force, cache=not args.output)
        t0 = time.perf_counter()
        with contextlib.ExitStack() as stack:
            if not args.output:
                # the cache entry other commands build too: one build at a time (a second `ingest` or a `summary`
                # started meanwhile waits for it, then finds it up to date)
                stack.enter_context(ingest_lock(out))
                info = None if args.force else stored_info(out)
                if info is not None and info.get(INFO_CACHE_KEY) == key:
                    if not args.quiet:
                        print(f"{out} (up to date)")
                    return 0
            with ingest_bars(None if not args.quiet else False) as progress:
                ingest(source, out, cache_key=key, progress=progress, warned=opened)
        if not args.quiet:
            print(f"{out} ({out.stat().st_size / 1e6:,.1f} MB, {time.perf_counter() - t0:.1f} s)")
        return 0


def _check_output(out: Path, src: Path, *, force: bool, cache: bool) -> None:
    """Refuse an output that would destroy something: the input itself (or a file inside the input trace), an
    existing file without ``force``, anything but an earlier database with it (a directory, a device, another
    file; a damaged file at the ``cache`` location is replaced), or a place where the database cannot be
    written."""
    o, i = out.resolve(), src.resolve()
    if o == i or o.is_relative_to(i):
        raise CommandError(f"{out}: the database would overwrite the input {src}; choose another output path")
    if out.exists() or out.is_symlink():
        if out.is_dir():
            if cache:
                raise CommandError(f"{out}: the trace's cache entry is a directory; remove it, or set "
                                   "TRNPROF_CACHE_DIR, or pass -o")
            raise CommandError(f"{out}: is a directory; choose a file name for the database")
        if not force and not cache:   # (an out-of-date cache entry is trnprof's own to rebuild)
            raise CommandError(f"{out}: exists; pass --force to replace it")
        if not out.is_file() or not (cache or is_duckdb_file(out)):
            raise CommandError(f"{out}: exists and is not a DuckDB database; --force only replaces a trnprof "
                               "database: choose another output path")
        if not cache:
            why = _not_trnprof_database(out)
            if why is not None:
                raise CommandError(f"{out}: exists and is {why}; --force only replaces a trnprof database: "
                                   "choose another output path (or delete the file yourself)")
    parent = out.parent
    if not parent.is_dir():
        raise CommandError(f"{out}: {parent} is not an existing directory; create it or choose another output path")
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=f".{out.name}.", suffix=".probe"):
            pass
    except OSError as exc:
        raise CommandError(f"{out}: cannot write in {parent} ({exc.strerror or exc}); choose another output "
                           "path") from None


def _not_trnprof_database(path: Path) -> str | None:
    """None when ``path`` is a database trnprof wrote (it has ``trnprof_info`` with a format version), else what
    it is instead.  A damaged database whose info cannot be read is not recognised either: it may be anyone's."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except (duckdb.Error, OSError) as exc:
        return f"a DuckDB file that cannot be opened ({str(exc).strip().splitlines()[0][:160] if str(exc) else exc!r})"
    try:
        info = read_info(con)
    except duckdb.Error as exc:
        return f"a DuckDB file that cannot be read ({str(exc).strip().splitlines()[0][:160] if str(exc) else exc!r})"
    finally:
        con.close()
    if not info or not info.get(INFO_FORMAT_VERSION):
        return f"a DuckDB database trnprof did not write (no {INFO_TABLE} table)"
    return None


COMMAND = IngestCommand()
