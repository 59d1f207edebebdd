"""Reading trace directories written by :class:`tracer.writer.TraceWriter`.

The reader validates every file against :mod:`tracer.schema` (table tag, columns, types, format version) and
raises :class:`~tracer.errors.TraceFormatError` naming the file and what is wrong.  A file whose tail is
incomplete (the recording process was killed) yields every complete record batch and reports the damaged tail
as one :class:`~tracer.errors.TruncatedTraceWarning`, never as an exception or garbage rows.

A table may be stored in another form (:data:`tracer.schema.STORED_AS`): a simulator's ``DmaPacket`` rows are
stored as ``DmaTransfer`` + ``DmaPacketLayout`` and expanded here (:mod:`tracer.packets`), so callers always read
``DmaPacket``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyarrow import ipc

from tracer import schema
from tracer.errors import TraceFormatError, TruncatedTraceWarning
from tracer.packets import PacketExpander

#: What pyarrow raises on a damaged stream; a garbage length field can ask for an absurd allocation (ArrowMemoryError).
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowIOError, pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowMemoryError,
                 OSError)


def _schema_prefix(spec: schema.TableSpec) -> bytes:
    """The bytes a writer puts first in ``spec``'s file: the encapsulated schema message."""
    return spec.arrow_schema().serialize().to_pybytes()


def _check_schema(path: Path, spec: schema.TableSpec, found: pa.Schema) -> None:
    meta = found.metadata or {}
    tag = meta.get(schema.META_KEY_TABLE)
    if tag is not None and tag.decode(errors="replace") != spec.name:
        raise TraceFormatError(f"{path}: holds table {tag.decode(errors='replace')!r}, expected {spec.name}")
    version = meta.get(schema.META_KEY_FORMAT_VERSION)
    if version is None:
        raise TraceFormatError(f"{path}: not written by trnprof (no trace format version in its schema)")
    schema.check_format_version(version.decode(errors="replace"), str(path))
    names = set(found.names)
    for col in spec.columns:
        if col.name not in names:
            if col.required:
                raise TraceFormatError(f"{path}: required column {col.name!r} is missing")
            continue
        got = found.field(col.name).type
        if got != col.type:
            raise TraceFormatError(f"{path}: column {col.name!r} has type {got}, expected {col.type}")


class TraceReader:
    """A trace directory opened for reading.

    ``TraceReader(path)`` checks the directory and its Metadata at once; tables are read on demand with
    :meth:`read_table` (whole) or :meth:`batches` (streaming, bounded memory).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise TraceFormatError(f"{self.path}: no such trace directory")
        if not self.path.is_dir():
            raise TraceFormatError(f"{self.path}: is a file, not a trace directory (a trace is a directory of "
                                   f"{schema.TABLE_FILE_SUFFIX} files)")
        meta_file = self.path / schema.METADATA.file_name
        if not meta_file.exists():
            raise TraceFormatError(f"{self.path}: not a trnprof trace (no {schema.METADATA.file_name}); record one "
                                   "with `trnprof record` or import a profile with `trnprof ingest`")
        # Validates Metadata at once, so a wrong or newer-format trace fails on open.
        _ = self.metadata

    @cached_property
    def metadata(self) -> dict[str, Any]:
        """The one Metadata row as a dict."""
        with warnings.catch_warnings(record=True) as caught:  # a damaged Metadata is the error itself
            warnings.simplefilter("always", TruncatedTraceWarning)
            table = self.read_table(schema.METADATA.name)
        if table.num_rows != 1:
            why = "truncated, " if any(issubclass(w.category, TruncatedTraceWarning) for w in caught) else ""
            raise TraceFormatError(f"{self.path / schema.METADATA.file_name}: {why}holds {table.num_rows} rows, "
                                   "expected 1; the trace cannot be read: record or export it again")
        for w in caught:  # anything else is re-issued as it was
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        row = table.to_pylist()[0]
        schema.check_format_version(str(row.get("trace_format_version")), str(self.path))
        return row

    @property
    def recording_complete(self) -> bool:
        """False when the writer never finished (the recording was interrupted or is still running)."""
        return bool(self.metadata.get("recording_complete"))

    def table_names(self) -> list[str]:
        """Known tables present in the directory (stored row by row or in a compact form), in schema order."""
        return [t.name for t in schema.TABLES if self.has_table(t.name)]

    def has_table(self, name: str) -> bool:
        """True when the directory holds table ``name`` (its file, or the files it is stored as)."""
        return (self.path / schema.table_spec(name).file_name).exists() or self._stored(name)

    def _stored(self, name: str) -> bool:
        """True when table ``name`` is stored as other tables (and not row by row)."""
        parts = schema.STORED_AS.get(name)
        return parts is not None and not (self.path / schema.table_spec(name).file_name).exists() and \
            (self.path / schema.table_spec(parts[0]).file_name).exists()

    def file_path(self, name: str) -> Path:
        """Path of the file holding table ``name``'s rows (which may not exist); for a table stored in another
        form, the file of its main storage table."""
        if self._stored(name):
            return self.path / schema.table_spec(schema.STORED_AS[name][0]).file_name
        return self.path / schema.table_spec(name).file_name

    def table_files(self, name: str) -> list[Path]:
        """The existing files table ``name`` is read from."""
        names = schema.STORED_AS[name] if self._stored(name) else (name,)
        return [p for p in (self.path / schema.table_spec(n).file_name for n in names) if p.exists()]

    def batches(self, name: str) -> Iterator[pa.RecordBatch]:
        """Stream the record batches of table ``name`` (nothing if the table is absent).

        A damaged tail ends the iteration with one TruncatedTraceWarning.
        """
        if self._stored(name):
            yield from self._expanded_packets()
            return
        yield from self._file_batches(schema.table_spec(name))

    def _expanded_packets(self) -> Iterator[pa.RecordBatch]:
        """DmaPacket batches expanded from DmaTransfer and DmaPacketLayout (see :mod:`tracer.packets`)."""
        layout_spec = schema.DMA_PACKET_LAYOUT
        layouts = list(self._file_batches(layout_spec))
        try:
            expander = PacketExpander(pa.Table.from_batches(layouts, schema=layout_spec.arrow_schema()))
        except ValueError as exc:
            raise TraceFormatError(f"{self.path / layout_spec.file_name}: {exc}") from None
        warned = False
        for stored in self._file_batches(schema.DMA_TRANSFER):
            layout = np.asarray(stored.column("packet_layout"), np.int64)
            rotation = np.asarray(stored.column("rotation"), np.int64)
            ok = expander.known(layout, rotation)
            batch = stored
            if not ok.all():
                if not warned:
                    warnings.warn(f"{self.path / layout_spec.file_name}: packet layouts of some DMA transfers are "
                                  "missing (the recording was interrupted); their packets are left out",
                                  TruncatedTraceWarning, stacklevel=3)
                    warned = True
                batch = batch.filter(pa.array(ok))
            if batch.num_rows:
                yield from expander.expand(batch)

    def _file_batches(self, spec: schema.TableSpec) -> Iterator[pa.RecordBatch]:
        """The record batches of ``spec``'s own file (nothing if absent), validated; a damaged tail ends the
        iteration with one TruncatedTraceWarning."""
        path = self.path / spec.file_name
        if not path.exists():
            return
        if not path.is_file():
            raise TraceFormatError(f"{path}: is not a file (a trace keeps each table in one Arrow file); the trace "
                                   "directory is damaged: record or export it again")
        source = pa.memory_map(str(path), "r")
        try:
            try:
                stream = ipc.open_stream(source)
            except _ARROW_ERRORS as exc:
                if source.size() == 0 or _schema_prefix(spec).startswith(_read_all(path)):
                    warnings.warn(f"{path}: truncated before its first batch; the recording was interrupted, "
                                  "table read as empty", TruncatedTraceWarning, stacklevel=3)
                    return
                raise TraceFormatError(f"{path}: not a valid Arrow IPC stream ({_first_line(exc)})") from None
            _check_schema(path, spec, stream.schema)
            count = 0
            while True:
                try:
                    batch = stream.read_next_batch()
                except StopIteration:
                    return
                except _ARROW_ERRORS as exc:
                    warnings.warn(f"{path}: damaged tail after {count} complete batch(es) ({_first_line(exc)}); "
                                  "the recording was interrupted, the complete batches are kept",
                                  TruncatedTraceWarning, stacklevel=3)
                    return
                count += 1
                yield batch
        finally:
            source.close()

    def read_table(self, name: str) -> pa.Table:
        """Table ``name`` as one pyarrow Table (an empty table of the right schema when absent)."""
        spec = schema.table_spec(name)
        batches = list(self.batches(name))
        if not batches:
            return spec.arrow_schema().empty_table()
        return pa.Table.from_batches(batches)

    def num_rows(self, name: str) -> int:
        """Rows of table ``name`` (reads the file; counts only complete batches)."""
        return sum(b.num_rows for b in self.batches(name))

    def __repr__(self) -> str:
        return f"TraceReader({str(self.path)!r})"


def _read_all(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(1 << 16)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_trace(path: str | os.PathLike[str]) -> TraceReader:
    """Open a trace directory for reading (see :class:`TraceReader`)."""
    return TraceReader(path)


def read_trace(path: str | os.PathLike[str]) -> dict[str, pa.Table]:
    """Every table present in a trace directory, by name."""
    reader = TraceReader(path)
    return {name: reader.read_table(name) for name in reader.table_names()}
