"""Trace sources: everything ``trnprof ingest`` can read, behind one streaming protocol.

A :class:`TraceSource` yields ``(table_name, record_batch)`` pairs in one pass over its input, tables
interleaved in any order, so a multi-GB input is read once with bounded memory.  Table names and the types of
known columns are those of :mod:`tracer.schema`; sources may also yield columns the schema does not know (a
Neuron Explorer field trnprof does not model) and tables it does not know (Neuron's ``Summary``,
``ActiveTime``, ...) — the ingest keeps them, so queries written for Neuron Explorer keep working.  Every batch
of one table in one ``read()`` has the same schema.  The one-row ``Metadata`` table is yielded like any other
(anywhere in the stream; importers that learn it while reading yield it last).

Importers for other formats live in :mod:`profiler.importers`; :func:`open_source` asks each of their
detectors, in order, whether it recognises the input by content.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

import pyarrow as pa

from tracer import schema
from tracer.errors import IncompleteTraceWarning, TraceFormatError
from tracer.reader import TraceReader

#: Called with the number of input bytes consumed since the previous call.
ProgressCallback = Callable[[int], None]


@runtime_checkable
class TraceSource(Protocol):
    """One ingestible input."""

    #: The path the user gave.
    path: Path
    #: Short name of the input format, e.g. ``trnprof-trace``, ``neuron-parquet``, ``chrome-json``.
    format_name: str

    def input_files(self) -> list[Path]:
        """Every file the source reads (their sizes and mtimes key the ingest cache)."""

    def input_size(self) -> int:
        """Total bytes the source will consume (the progress bar's total)."""

    def read(self, progress: ProgressCallback | None = None) -> Iterator[tuple[str, pa.RecordBatch]]:
        """Yield ``(table_name, batch)`` in one streaming pass; report consumed bytes to ``progress``."""


class TraceDirectorySource:
    """A trnprof trace directory (Arrow IPC stream files written by :class:`tracer.TraceWriter`)."""

    format_name = "trnprof-trace"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.reader = TraceReader(self.path)
        if not self.reader.recording_complete:
            warnings.warn(f"{self.path}: the recording is not complete (still running, killed or failed); using the "
                          "rows it holds so far", IncompleteTraceWarning, stacklevel=2)

    def input_files(self) -> list[Path]:
        return [p for name in self.reader.table_names() for p in self.reader.table_files(name)]

    def input_size(self) -> int:
        return sum(p.stat().st_size for p in self.input_files())

    def read(self, progress: ProgressCallback | None = None) -> Iterator[tuple[str, pa.RecordBatch]]:
        for name in self.reader.table_names():
            size = sum(p.stat().st_size for p in self.reader.table_files(name))
            reported = [0]   # each batch's file bytes as it is read, then the rest of the files (schema, a tail)

            def on_bytes(n: int, reported: list[int] = reported) -> None:
                reported[0] += n
                if progress is not None:
                    progress(n)

            for batch in self.reader.batches(name, on_bytes=on_bytes if progress is not None else None):
                yield name, batch
            if progress is not None and size > reported[0]:
                progress(size - reported[0])


def is_trace_directory(path: Path) -> bool:
    """True when ``path`` is a directory holding a trnprof Metadata file."""
    return path.is_dir() and (path / schema.METADATA.file_name).exists()


def _has_table_files(path: Path) -> bool:
    """True when directory ``path`` holds a trnprof table file (``Instruction.arrows``, ...)."""
    try:
        return any((path / t.file_name).exists() for t in (*schema.TABLES, *schema.STORAGE_TABLES))
    except OSError:
        return False


def detect_import(path: Path) -> TraceSource | None:
    """The importer's source that reads ``path`` (Neuron Explorer Parquet, neuron-profile JSON, Chrome trace JSON,
    recognised by content: :data:`profiler.importers.DETECTORS`, in order); None when none recognises it."""
    from profiler.importers import DETECTORS

    for detect in DETECTORS:
        source = detect(path)
        if source is not None:
            return source
    return None


def open_source(path: str | os.PathLike[str]) -> TraceSource:
    """The source that reads ``path``, recognised by content; TraceFormatError naming the path otherwise."""
    p = Path(path)
    if not p.exists():
        raise TraceFormatError(f"{p}: no such file or directory")
    if is_trace_directory(p):
        return TraceDirectorySource(p)
    source = detect_import(p)
    if source is not None:
        return source
    hint = ""
    if p.is_dir() and _has_table_files(p):  # a trnprof trace that lost its Metadata, as TraceReader says it
        raise TraceFormatError(f"{p}: holds trace table files but no {schema.METADATA.file_name}: a damaged trnprof "
                               "trace (its Metadata is missing); record or export it again")
    if p.is_dir():  # a folder of traces (one per rank, say) is not itself one
        try:  # (the first 64 entries: a look, not a scan of a huge folder)
            children = sorted(p.iterdir())[:64]
            inside = [c.name for c in children if is_trace_directory(c) or detect_import(c) is not None]
        except OSError:
            inside = []
        if inside:
            shown = ", ".join(inside[:3]) + (", ..." if len(inside) > 3 else "")
            hint = f"; it holds traces ({shown}): give one of them, or `trnprof serve` the folder to browse them all"
    raise TraceFormatError(
        f"{p}: not a recognised trace (expected a trnprof trace directory, a trnprof database, Neuron Explorer "
        f"Parquet output, neuron-profile JSON, or Chrome trace JSON){hint}"
    )
