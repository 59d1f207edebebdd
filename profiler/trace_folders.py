"""Folders of traces: a directory that is not itself a trace but holds several (a sweep's ``--trace-dir``, a
directory of recordings), as ``trnprof serve DIR`` takes it.

:func:`traces_in_folder` lists the traces directly inside a folder: trnprof trace directories (a recording still
running included), databases written by ``trnprof ingest``, and files or directories an importer recognises --
not the ingest cache's files, hidden files, nor the folder's sweep file.  A sweep's traces come first, in the
sweep's order (:mod:`profiler.sweep_table`), then the others by name.
"""

from __future__ import annotations

import os
from pathlib import Path

from profiler.db.cache import CACHE_SUFFIX
from profiler.db.connection import is_duckdb_file
from profiler.sources import detect_import, is_trace_directory
from profiler.sweep_table import SWEEP_FILE, read_sweep_file
from tracer.errors import TraceFormatError

#: Most entries a folder may have for its traces to be listed (each is looked at: a huge directory is a mistake).
MAX_FOLDER_ENTRIES = 5000


def is_trace_folder(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a directory that is not a trace itself (not a trace directory, not Neuron Explorer
    output): a folder whose traces :func:`traces_in_folder` lists."""
    p = Path(path)
    return p.is_dir() and not is_trace_directory(p) and not _importable(p)


def traces_in_folder(path: str | os.PathLike[str]) -> list[Path]:
    """The traces directly inside the folder ``path`` (see the module docstring); TraceFormatError naming the
    folder when it holds none, has too many entries to look at, or its sweep file cannot be read."""
    folder = Path(path)
    try:
        entries = list(os.scandir(folder))
    except OSError as exc:
        raise TraceFormatError(f"{folder}: cannot list the folder ({exc.strerror})") from None
    if len(entries) > MAX_FOLDER_ENTRIES:
        raise TraceFormatError(f"{folder}: {len(entries):,} entries, more than {MAX_FOLDER_ENTRIES:,} to look "
                               "through for traces; pass the traces themselves")
    found = sorted(Path(e.path) for e in entries if _is_trace_entry(Path(e.path)))
    sweep = read_sweep_file(folder)
    if sweep is not None:
        ordered = [p for p in (sweep.trace_path(i) for i in range(sweep.table.num_rows)) if p in found]
        found = ordered + [p for p in found if p not in ordered]
    if not found:
        raise TraceFormatError(f"{folder}: holds no trace (trace directories, .duckdb databases or importable "
                               "profiles); pass a trace, or a folder of them")
    return found


def _is_trace_entry(p: Path) -> bool:
    name = p.name
    if name.startswith(".") or name == SWEEP_FILE or name.endswith((CACHE_SUFFIX, ".lock")) or \
            ".trnprof.live-" in name:
        return False
    if p.is_dir():
        return is_trace_directory(p) or _importable(p)
    return is_duckdb_file(p) or _importable(p)


def _importable(p: Path) -> bool:
    try:
        return detect_import(p) is not None
    except (OSError, TraceFormatError):
        return False


__all__ = ["MAX_FOLDER_ENTRIES", "is_trace_folder", "traces_in_folder"]
