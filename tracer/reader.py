"""Reading trace directories written by :class:`tracer.writer.TraceWriter`.

The reader validates every file against :mod:`tracer.schema` (table tag, columns, types, format version) and
every record batch fully (offsets, dictionary codes, UTF-8, no nulls in required columns) before handing it on,
and raises :class:`~tracer.errors.TraceFormatError` naming the file and what is wrong.  Damage is told apart from
an interrupted recording by the trace's Metadata: in a trace whose recording did not complete, a file whose tail
is incomplete (the recording process was killed) yields every complete record batch and reports the damaged
tail as one :class:`~tracer.errors.TruncatedTraceWarning`, never as an exception or garbage rows; in a trace whose
recording completed, every file must hold whole batches up to its end-of-stream marker, and anything else is a
corrupt file (an error: rows would be lost).

A table may be stored in another form (:data:`tracer.schema.STORED_AS`): a simulator's ``DmaPacket`` rows are
stored as ``DmaTransfer`` + ``DmaPacketLayout`` and expanded here (:mod:`tracer.packets`), so callers always read
``DmaPacket``.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import ipc

from tracer import schema
from tracer.errors import TraceFormatError, TruncatedTraceWarning
from tracer.packets import PacketExpander, split_rows

#: What pyarrow raises on a damaged stream: any Arrow error (a garbage length field can ask for an absurd allocation,
#: ArrowMemoryError; a garbage dictionary id is an ArrowKeyError), or an I/O error.
_ARROW_ERRORS = (pa.ArrowException, OSError)


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
        if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes) or not str(path):
            raise TraceFormatError(f"TraceReader needs a trace directory path (str or pathlib.Path), not {path!r:.60}")
        self.path = Path(path)
        try:
            exists = self.path.exists()
        except OSError as exc:  # a name too long, ...
            raise TraceFormatError(f"{str(self.path)[:200]}: cannot open ({exc.strerror or exc})") from None
        if not exists:
            raise TraceFormatError(f"{self.path}: no such trace directory")
        if not self.path.is_dir():
            raise TraceFormatError(f"{self.path}: is a file, not a trace directory (a trace is a directory of "
                                   f"{schema.TABLE_FILE_SUFFIX} files)")
        meta_file = self.path / schema.METADATA.file_name
        if not meta_file.exists():
            if any((self.path / t.file_name).exists() for t in (*schema.TABLES, *schema.STORAGE_TABLES)):
                raise TraceFormatError(f"{self.path}: holds trace table files but no {schema.METADATA.file_name}: a "
                                       "damaged trnprof trace (its Metadata is missing); record or export it again")
            raise TraceFormatError(f"{self.path}: not a trnprof trace (no {schema.METADATA.file_name}); record one "
                                   "with `trnprof record` or import a profile with `trnprof ingest`")
        # Validates Metadata at once, so a wrong or newer-format trace fails on open.
        meta = self.metadata
        # trnprof's simulator (the one writer to fill cost_model) writes Instruction in every recording, even of a
        # kernel without operations: a completed one without it lost the file, and would read as "no instructions"
        if meta.get(schema.COST_MODEL) is not None and meta.get("recording_complete") \
                and not self.has_table(schema.INSTRUCTION.name):
            raise TraceFormatError(f"{self.path}: {schema.INSTRUCTION.file_name} is missing from a completed "
                                   "simulator recording (every recording writes it); the trace is damaged: record "
                                   "it again")
        for name, rows in self.written_rows.items():   # a completed recording's files, as its writer noted them
            spec = schema.TABLES_BY_NAME.get(name)
            if spec is not None and rows and not (self.path / spec.file_name).exists():
                raise TraceFormatError(f"{self.path / spec.file_name}: missing from a completed recording (its writer "
                                       f"wrote {rows:,} rows there); the trace is damaged: record or export it again")

    @cached_property
    def written_rows(self) -> dict[str, int]:
        """Rows of each table file, as the writer noted them when it finished (``Metadata.table_rows``); empty for
        a recording that did not complete, or was written before trace format 2.3."""
        meta = self.metadata
        text = meta.get(schema.TABLE_ROWS)
        if not meta.get("recording_complete") or not text:
            return {}
        try:
            rows = json.loads(text)
        except ValueError:
            raise TraceFormatError(f"{self.path / schema.METADATA.file_name}: table_rows is not JSON; the trace is "
                                   "damaged: record or export it again") from None
        if not isinstance(rows, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                 for v in rows.values()):
            raise TraceFormatError(f"{self.path / schema.METADATA.file_name}: table_rows is not an object of row "
                                   "counts; the trace is damaged: record or export it again")
        return {str(k): int(v) for k, v in rows.items()}

    @cached_property
    def metadata(self) -> dict[str, Any]:
        """The one Metadata row as a dict."""
        # a damaged Metadata is the error itself: its truncation notes come back here rather than as warnings
        # (not through warnings.catch_warnings, which changes process-wide state under other threads' feet)
        notes: list[str] = []
        batches = list(self._file_batches(schema.METADATA, notes))
        table = pa.Table.from_batches(batches) if batches else schema.METADATA.arrow_schema().empty_table()
        if table.num_rows != 1:
            why = "truncated, " if notes else ""
            raise TraceFormatError(f"{self.path / schema.METADATA.file_name}: {why}holds {table.num_rows} rows, "
                                   "expected 1; the trace cannot be read: record or export it again")
        for message in notes:
            warnings.warn(message, TruncatedTraceWarning, stacklevel=2)
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

    def batches(self, name: str, on_bytes: Callable[[int], None] | None = None) -> Iterator[pa.RecordBatch]:
        """Stream the record batches of table ``name`` (nothing if the table is absent), each fully validated.

        In a recording that did not complete, a damaged tail ends the iteration with one TruncatedTraceWarning;
        in a completed one, any damage raises TraceFormatError naming the file (see :meth:`_file_batches`).
        ``on_bytes(n)`` is told the file bytes each batch took as it is read (for a table stored in another form,
        the bytes of the batches it is expanded from), for progress.
        """
        if self._stored(name):
            yield from self._expanded_packets(on_bytes)
            return
        yield from self._file_batches(schema.table_spec(name), on_bytes=on_bytes)

    def _expanded_packets(self, on_bytes: Callable[[int], None] | None = None) -> Iterator[pa.RecordBatch]:
        """DmaPacket batches expanded from DmaTransfer and DmaPacketLayout (see :mod:`tracer.packets`)."""
        layout_spec = schema.DMA_PACKET_LAYOUT
        layout_path = self.path / layout_spec.file_name
        transfer_path = self.path / schema.DMA_TRANSFER.file_name
        layouts = pa.Table.from_batches(list(self._file_batches(layout_spec, on_bytes=on_bytes)),
                                        schema=layout_spec.arrow_schema())
        problem = _layout_problem(layouts)
        if problem is not None:
            raise TraceFormatError(f"{layout_path}: {problem}; the trace is damaged: record or export it again")
        try:
            expander = PacketExpander(layouts)
        except ValueError as exc:
            raise TraceFormatError(f"{layout_path}: {exc}") from None
        queues = _queues_needed(layouts, expander.rotations)
        warned = False
        took: list[int] = []   # a transfer batch's file bytes, told as its packets go out (a batch of transfers
        #                        expands to millions of packets: told at once, the progress stalled, then jumped)
        for stored in self._file_batches(schema.DMA_TRANSFER, on_bytes=took.append if on_bytes else None):
            nbytes = sum(took)
            took.clear()
            layout = np.asarray(stored.column("packet_layout"), np.int64)
            rotation = np.asarray(stored.column("rotation"), np.int64)
            ok = expander.known(layout, rotation)
            batch = stored
            if not ok.all():
                if not warned:
                    why = ("the trace is corrupt: its recording completed, so they were written" if
                           self.recording_complete else "the recording was interrupted")
                    warnings.warn(f"{layout_path}: packet layouts of some DMA transfers are missing ({why}); "
                                  "their packets are left out", TruncatedTraceWarning, stacklevel=3)
                    warned = True
                batch = batch.filter(pa.array(ok))
            if not batch.num_rows:
                if on_bytes is not None and nbytes:
                    on_bytes(nbytes)
                continue
            problem = _transfer_problem(batch, queues, expander)
            if problem is not None:
                raise TraceFormatError(f"{transfer_path}: {problem}; the trace is damaged: record or export it again")
            try:
                if on_bytes is None:
                    yield from expander.expand(batch)
                    continue
                packets = max(expander.packets(batch), 1)
                out = told = 0
                for chunk in expander.expand(batch):
                    out += chunk.num_rows
                    share = nbytes * out // packets - told
                    if share > 0:
                        told += share
                        on_bytes(share)
                    yield chunk
                if nbytes > told:
                    on_bytes(nbytes - told)
            except (IndexError, ValueError, OverflowError, pa.ArrowException) as exc:
                raise TraceFormatError(f"{transfer_path}: DMA transfers that do not fit their packet layouts "
                                       f"({_first_line(exc)[:160]}); the trace is damaged: record or export it "
                                       "again") from None

    def _file_batches(self, spec: schema.TableSpec, notes: list[str] | None = None, *,
                      on_bytes: Callable[[int], None] | None = None) -> Iterator[pa.RecordBatch]:
        """The record batches of ``spec``'s own file (nothing if absent), each fully validated.

        A damaged tail of a recording that did not complete ends the iteration with one TruncatedTraceWarning
        (its message appended to ``notes`` instead, when given);
        in a trace whose recording completed (Metadata says so) any damage is a TraceFormatError, and so is a
        damaged batch followed by intact ones (an interrupted recording only ever damages the tail).
        """
        path = self.path / spec.file_name
        if not path.exists():
            return
        if not path.is_file():
            raise TraceFormatError(f"{path}: is not a file (a trace keeps each table in one Arrow file); the trace "
                                   "directory is damaged: record or export it again")
        # Metadata is written atomically (write, rename): any damage to it is reported by `metadata` itself.
        complete = spec.name != schema.METADATA.name and self.recording_complete
        source = pa.memory_map(str(path), "r")
        try:
            try:
                stream = ipc.open_stream(source)
            except _ARROW_ERRORS as exc:
                if source.size() == 0 or _schema_prefix(spec).startswith(_read_all(path)):
                    if complete:
                        raise TraceFormatError(f"{path}: truncated before its first batch {_DAMAGED}; record or "
                                               "export the trace again") from None
                    _truncated(notes, f"{path}: truncated before its first batch; the recording was interrupted, "
                               "table read as empty")
                    return
                raise TraceFormatError(f"{path}: not a valid Arrow IPC stream ({_first_line(exc)})") from None
            try:
                _check_schema(path, spec, stream.schema)
            except UnicodeDecodeError:
                raise TraceFormatError(f"{path}: damaged schema (column names that are not UTF-8); the trace is "
                                       "damaged: record or export it again") from None
            count = 0
            rows = 0
            read_to = 0
            expected = self.written_rows.get(spec.name) if complete else None
            while True:
                try:
                    batch = stream.read_next_batch()
                except StopIteration:
                    if complete:
                        _check_stream_end(path, source, count)
                    if expected is not None and rows != expected:
                        raise TraceFormatError(f"{path}: holds {rows:,} rows where its writer wrote {expected:,}; "
                                               f"{_DAMAGED}; record or export the trace again") from None
                    return
                except _ARROW_ERRORS as exc:
                    if complete:
                        raise _corrupt(path, count, _first_line(exc), _DAMAGED) from None
                    # a batch that does not decode (its data damaged, its framing intact) followed by intact ones
                    # is damage too, not an interrupted recording's tail
                    if _another_batch(stream):
                        raise _corrupt(path, count, _first_line(exc), "intact batches follow it, so the file is "
                                       "damaged, not cut short by an interrupted recording") from None
                    _truncated(notes, f"{path}: damaged tail after {count} complete batch(es) "
                               f"({_first_line(exc)}); the recording was interrupted, the complete batches are kept")
                    return
                problem = batch_problem(spec, batch)
                if problem is not None:
                    if complete:
                        raise _corrupt(path, count, problem, _DAMAGED)
                    if _another_batch(stream):
                        raise _corrupt(path, count, problem, "intact batches follow it, so the file is damaged, "
                                       "not cut short by an interrupted recording")
                    _truncated(notes, f"{path}: damaged tail after {count} complete batch(es) ({problem}); "
                               "the recording was interrupted, the complete batches are kept")
                    return
                count += 1
                rows += batch.num_rows
                if on_bytes is not None:
                    position = source.tell()
                    on_bytes(position - read_to)
                    read_to = position
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


#: Why damage in a completed recording is an error (appended to the messages).
_DAMAGED = "in a completed recording (its Metadata says so: damage, not an interrupted recording)"
#: The end-of-stream marker a writer closing an Arrow IPC stream appends (continuation token, zero length).
_END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"
#: Packet layout keys (layout x rotations) allowed per DmaPacketLayout row: each key has at least one row, so a
#: denser key range than this holds garbage values (and would make the expander allocate for them).
_LAYOUT_KEYS_PER_ROW = 64


def _truncated(notes: list[str] | None, message: str) -> None:
    """Report a damaged tail: append ``message`` to ``notes``, or (None) warn with it, naming the caller of the
    reader's public method (batches, read_table, ...)."""
    if notes is not None:
        notes.append(message)
    else:
        warnings.warn(message, TruncatedTraceWarning, stacklevel=4)


def batch_problem(spec: schema.TableSpec, batch: pa.RecordBatch) -> str | None:
    """Why record batch ``batch`` of table ``spec`` cannot be used, or None when it is sound.

    A full Arrow validation (offsets within their buffers, dictionary codes within their dictionary, valid
    UTF-8): a batch decoded from damaged bytes may otherwise crash the process in the first kernel that trusts
    it.  And no nulls in a required column (the writer never writes one).  Costs ~1% of reading the batch.
    """
    try:
        batch.validate(full=True)
    except _ARROW_ERRORS as exc:
        return _first_line(exc)[:200]
    names = batch.schema.names
    for col in spec.columns:
        if col.required and col.name in names:
            nulls = batch.column(col.name).null_count
            if nulls:
                return f"required column {col.name!r} holds {nulls:,} null value(s)"
    return None


def _another_batch(stream: ipc.RecordBatchStreamReader) -> bool:
    """True when ``stream`` still yields an intact record batch."""
    try:
        stream.read_next_batch()
    except StopIteration:
        return False
    except _ARROW_ERRORS:
        return False
    return True


def _corrupt(path: Path, count: int, problem: str, why: str) -> TraceFormatError:
    return TraceFormatError(f"{path}: corrupt record batch {count + 1} ({problem}) {why}; record or export the "
                            "trace again")


def _check_stream_end(path: Path, source: pa.MemoryMappedFile, count: int) -> None:
    """In a completed recording, raise TraceFormatError unless the stream ended at its end-of-stream marker, at
    the end of the file (a cut at a batch boundary would otherwise lose the rows after it silently)."""
    end, size = source.tell(), source.size()
    marker = b""
    if end >= len(_END_OF_STREAM):
        source.seek(end - len(_END_OF_STREAM))
        marker = source.read(len(_END_OF_STREAM))
    if marker != _END_OF_STREAM:
        raise TraceFormatError(f"{path}: ends after record batch {count} without its end-of-stream marker (the file "
                               f"was cut short) {_DAMAGED}; record or export the trace again")
    if end < size:
        raise TraceFormatError(f"{path}: {size - end:,} stray bytes after its end-of-stream marker {_DAMAGED}; "
                               "record or export the trace again")


def _layout_problem(layouts: pa.Table) -> str | None:
    """Why the DmaPacketLayout rows cannot be expanded from, or None."""
    if not layouts.num_rows:
        return None
    lid = pc.min_max(layouts.column("packet_layout")).as_py()
    rot = pc.min_max(layouts.column("rotation")).as_py()
    queue = pc.min(layouts.column(schema.QUEUE_IDX)).as_py()
    if min(lid["min"], rot["min"], queue) < 0:
        return "negative packet_layout, rotation or queue_idx values"
    if (lid["max"] + 1) * (rot["max"] + 1) > _LAYOUT_KEYS_PER_ROW * layouts.num_rows + 4096:
        return (f"implausible packet_layout/rotation values (up to {lid['max']:,} and {rot['max']:,} for "
                f"{layouts.num_rows:,} rows)")
    return None


def _queues_needed(layouts: pa.Table, rotations: int) -> np.ndarray:
    """Per layout key (``packet_layout * rotations + rotation``): 1 + the highest queue its packets run on."""
    if not layouts.num_rows:
        return np.zeros(0, np.int64)
    key = (np.asarray(layouts.column("packet_layout"), np.int64) * rotations
           + np.asarray(layouts.column("rotation"), np.int64))
    need = np.zeros(int(key.max()) + 1, np.int64)
    np.maximum.at(need, key, np.asarray(layouts.column(schema.QUEUE_IDX), np.int64) + 1)
    return need


def _transfer_problem(batch: pa.RecordBatch, queues: np.ndarray, expander: PacketExpander) -> str | None:
    """Why DmaTransfer rows (of known layouts) cannot be expanded (beyond what :func:`batch_problem` checks)."""
    starts = batch.column("queue_start_ts")
    lengths = np.asarray(pc.list_value_length(starts).fill_null(0), np.int64)
    if starts.null_count or not lengths.all():
        return "DMA transfers without queue start times"
    if starts.values.null_count:
        return "null queue start times"
    key = (np.asarray(batch.column("packet_layout"), np.int64) * expander.rotations
           + np.asarray(batch.column("rotation"), np.int64))
    if np.any((lengths > 1) & (lengths < queues[key])):
        return "DMA transfers with fewer queue start times than their packets' queues"
    try:
        split = split_rows(batch)
    except ValueError as exc:
        return str(exc)
    if split is not None:
        rows, packets, delays = split
        if np.any((packets < 0) | (packets >= expander.count[key][rows])):
            return "split_packet values that are not packets of their transfer"
        if np.any(delays < 0):
            return "negative or null split_delay_ns values"
    return None


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
