"""A trace directory's layout: one Arrow IPC stream file per table, named ``<Table>.arrows``; checking and preparing
a directory to write a trace into.

Kept apart from :mod:`tracer.schema` and :mod:`tracer.writer` (which import pyarrow) so that the simulating process
can check its output path without loading Arrow: its trace is written by the writer process.
"""

from __future__ import annotations

import os
from pathlib import Path

from tracer.errors import TraceExistsError

#: File name suffix of one table's Arrow IPC stream file.
TABLE_FILE_SUFFIX = ".arrows"
#: The Metadata table's name (:data:`tracer.schema.METADATA`), and its file, the first one a writer writes: a
#: directory holding it is a trace (checked without loading Arrow).
METADATA_TABLE = "Metadata"
METADATA_FILE_NAME = METADATA_TABLE + TABLE_FILE_SUFFIX
#: Metadata's field of each HBM tensor's kind (here, not in tracer.schema: the simulating process names it).
HBM_TENSORS = "hbm_tensors"


def check_trace_directory(path: str | os.PathLike[str], *, overwrite: bool) -> list[Path]:
    """The table files of an existing trace at ``path`` that writing a new one there would replace; nothing is
    touched.

    Raises:
        TraceExistsError: a trace exists and not ``overwrite``; the path is a file or a non-empty directory holding
            no trace.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise TraceExistsError(f"{p}: exists and is not a directory; choose another output path")
    if not p.is_dir():
        return []
    existing = [f for f in p.iterdir() if f.name.endswith(TABLE_FILE_SUFFIX)]
    others = [f for f in p.iterdir() if not f.name.endswith(TABLE_FILE_SUFFIX)]
    if existing and not overwrite:
        raise TraceExistsError(f"{p}: a trace already exists here; pass overwrite=True (--force) to replace it")
    if others and not existing:
        raise TraceExistsError(f"{p}: directory is not empty and holds no trace; choose an empty or new path")
    return existing


def prepare_trace_directory(path: str | os.PathLike[str], *, overwrite: bool) -> None:
    """Create the trace directory ``path``, or empty an existing trace there when ``overwrite``.

    Raises:
        TraceExistsError: what :func:`check_trace_directory` refuses, or the directory cannot be created.
    """
    p = Path(path)
    for f in check_trace_directory(p, overwrite=overwrite):
        f.unlink()
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceExistsError(f"{p}: cannot create trace directory: {exc.strerror}") from None
