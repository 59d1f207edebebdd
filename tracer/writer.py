"""TraceWriter: streams trace tables to a directory of Arrow IPC stream files, crash-safely.

Rows are appended per table as columns (numpy arrays, Arrow arrays or lists) and buffered in memory.  A table's
buffer is written out as one compressed record batch when it holds ``batch_rows`` rows, and every buffer is
flushed at least once per ``flush_interval_s`` while recording (by the append path and by a background timer
thread), so a long recording is on disk as it runs and memory stays bounded whatever the trace length.

Crash safety comes from the format: an Arrow IPC stream is a sequence of self-delimiting messages written
append-only, so a process killed at any moment leaves a file whose complete batches read back intact; the reader
drops the incomplete tail with a warning.  The Metadata table is rewritten atomically (write, then rename) and
says ``recording_complete = false`` until :meth:`TraceWriter.close` finishes.

Dictionary-encoded columns share one dictionary per column for the whole file, emitted as delta dictionary
batches, so codes stay stable across batches and a repeated opcode costs a few bits on disk.
"""

from __future__ import annotations

import json
import numbers
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import ipc

from tracer import schema
from tracer._version import __version__
from tracer.argcheck import sequence_of
from tracer.errors import ConfigError, TraceFormatError
from tracer.trace_dir import prepare_trace_directory

#: Rows per record batch.  Large enough for good compression, small enough to bound memory.
DEFAULT_BATCH_ROWS = 65_536
#: Largest batch_rows (an Arrow record batch holds at most 2**31 - 1 rows).
MAX_BATCH_ROWS = 1 << 30
#: Maximum time buffered rows stay in memory while recording.
DEFAULT_FLUSH_INTERVAL_S = 1.0
COMPRESSIONS = ("zstd", "lz4", None)
#: Dictionaries per column whose mapping to the file's dictionary is kept (see ``_DictionaryState.encode``).
_MAPPINGS_KEPT = 16

ColumnData = Any  # numpy array, pyarrow Array/ChunkedArray, or a Python sequence


class _DictionaryState:
    """The file-wide dictionary of one dictionary-encoded column: value -> code, append-only."""

    __slots__ = ("_arrow", "_arrow_len", "_mappings", "codes", "values")

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.values: list[str] = []
        self._arrow: pa.Array = pa.array([], pa.string())
        self._arrow_len = 0
        #: Mappings of dictionaries seen before, by their buffers (each entry keeps its dictionary alive, so no
        #: other array can have those buffers while it is here).
        self._mappings: dict[tuple[int, ...], tuple[pa.Array, np.ndarray, bool]] = {}

    def encode(self, arr: pa.Array) -> pa.Array:
        """Int32 codes (with nulls preserved) of ``arr`` (strings or a DictionaryArray) in this dictionary."""
        key = None
        if pa.types.is_dictionary(arr.type):
            local_dict = arr.dictionary
            indices = arr.indices
            # a producer that sends the same dictionary array with every batch (the simulator's emitter) has it
            # mapped once
            key = (local_dict.offset, len(local_dict), *(b.address if b is not None else 0
                                                         for b in local_dict.buffers()))
        else:
            if pa.types.is_large_string(arr.type) or pa.types.is_null(arr.type):
                arr = arr.cast(pa.string())
            enc = pc.dictionary_encode(arr)
            local_dict = enc.dictionary
            indices = enc.indices
        hit = self._mappings.get(key) if key is not None else None
        if hit is not None:
            _dict, mapping, same = hit
        else:
            mapping = self._map(local_dict)
            same = bool((mapping == np.arange(len(mapping))).all())  # codes are already the file's
            if key is not None:
                if len(self._mappings) >= _MAPPINGS_KEPT:
                    del self._mappings[next(iter(self._mappings))]
                self._mappings[key] = (local_dict, mapping, same)
        if len(indices) == 0:
            return pa.array([], pa.int32())
        idx = indices if indices.type == pa.int32() else indices.cast(pa.int32())
        if same and not idx.null_count:
            return idx
        if idx.null_count:
            if idx.null_count == len(idx):  # all null (the dictionary may be empty)
                return pa.nulls(len(idx), pa.int32())
            filled = np.asarray(idx.fill_null(0))
            return pa.array(mapping[filled], pa.int32(), mask=np.asarray(idx.is_null()))
        return pa.array(mapping[np.asarray(idx)], pa.int32())

    def _map(self, local_dict: pa.Array) -> np.ndarray:
        """This dictionary's code of each value of ``local_dict`` (values new to it are added)."""
        mapping = np.empty(len(local_dict), dtype=np.int32)
        codes = self.codes
        for i, value in enumerate(local_dict.to_pylist()):
            code = codes.get(value)
            if code is None:
                code = len(self.values)
                codes[value] = code
                self.values.append(value)
            mapping[i] = code
        return mapping

    def dictionary(self) -> pa.Array:
        """The dictionary as an Arrow string array (cached; it only ever grows)."""
        if self._arrow_len != len(self.values):
            self._arrow = pa.array(self.values, pa.string())
            self._arrow_len = len(self.values)
        return self._arrow


class _TableSink:
    """Buffered writer of one table's stream file."""

    def __init__(self, spec: schema.TableSpec, path: Path, options: ipc.IpcWriteOptions) -> None:
        self.spec = spec
        self.path = path
        self.options = options
        self.arrow_schema = spec.arrow_schema()
        self.dicts = {c.name: _DictionaryState() for c in spec.columns if c.is_dictionary}
        self.pending: list[dict[str, pa.Array]] = []
        self.pending_rows = 0
        self.rows_written = 0
        self.batches_written = 0
        self._file: pa.NativeFile | None = None
        self._stream: ipc.RecordBatchStreamWriter | None = None

    def add(self, chunk: dict[str, pa.Array], n: int) -> None:
        self.pending.append(chunk)
        self.pending_rows += n

    def flush(self, batch_rows: int) -> None:
        if not self.pending_rows:
            return
        if self._stream is None:
            self._file = pa.OSFile(str(self.path), "wb")
            self._stream = ipc.new_stream(self._file, self.arrow_schema, options=self.options)
        columns = []
        for col in self.spec.columns:
            parts = [chunk[col.name] for chunk in self.pending]
            arr = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
            if col.is_dictionary:
                arr = pa.DictionaryArray.from_arrays(arr, self.dicts[col.name].dictionary())
            columns.append(arr)
        batch = pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)
        self.pending.clear()
        self.pending_rows = 0
        for offset in range(0, batch.num_rows, batch_rows):
            self._stream.write_batch(batch.slice(offset, batch_rows))
            self.batches_written += 1
        self.rows_written += batch.num_rows
        assert self._file is not None
        self._file.flush()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()  # writes the end-of-stream marker
            self._stream = None
        if self._file is not None:
            self._file.close()
            self._file = None


def _to_arrow(spec: schema.TableSpec, col: schema.Column, value: ColumnData, n: int | None) -> pa.Array:
    where = f"{spec.name}.{col.name}"
    if isinstance(value, str | bytes):  # pyarrow would store its characters as values, one a row
        raise TraceFormatError(f"{where}: expected a sequence of values (one a row), not a single "
                               f"{type(value).__name__} {value[:40]!r}")
    try:
        if isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        if isinstance(value, pa.Array):
            arr = value
        elif isinstance(value, np.ndarray) and value.dtype.kind in "iufb":
            arr = pa.array(value)
        elif not col.is_dictionary and pa.types.is_integer(col.type):
            # a list of floats: pyarrow would truncate 1.5 to 1 (a numpy array of them is refused below, as this is)
            arr = pa.array(value)
        else:
            target = pa.string() if col.is_dictionary else col.type
            arr = pa.array(value, type=target)
        if col.is_dictionary:
            t = arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type
            if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)):
                raise TypeError(f"expected strings, got {arr.type}")
        elif arr.type != col.type:
            arr = arr.cast(col.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError) as exc:
        raise TraceFormatError(f"{where}: cannot store values as {col.type}: {exc}".splitlines()[0]) from None
    if n is not None and len(arr) != n:
        raise TraceFormatError(f"{spec.name}: column {col.name} has {len(arr)} rows, expected {n}")
    if col.required and arr.null_count:
        raise TraceFormatError(f"{where}: required column holds {arr.null_count} null value(s)")
    return arr


#: Longest ``flush_interval_s`` (a day): rows are on disk at least this often while recording.
MAX_FLUSH_INTERVAL_S = 86_400.0

class TraceWriter:
    """Writes a trace directory, one Arrow IPC stream file per table.

    Use it as a context manager; it finalizes on exit, also when the body raises (then the trace keeps
    everything appended so far and its Metadata says ``recording_complete = false``)::

        with TraceWriter("out.trace", metadata={"arch": "trn2", "is_simulation": True}) as w:
            w.append("Instruction", {"id": ids, "start_ts": starts, ...})

    Args:
        path: directory to create.
        metadata: fields of the one-row Metadata table (see :data:`tracer.schema.METADATA`).  The writer fills
            the version fields, ``recording_complete`` and, unless given, the first/last timestamps.
        overwrite: replace an existing trace at ``path``; without it an existing trace is an error.
        compression: ``"zstd"`` (default), ``"lz4"`` or ``None`` (Arrow IPC buffer compression).
        batch_rows: rows per record batch.
        flush_interval_s: buffered rows are written within this many seconds while recording.
        background_flush: run a timer thread so rows are flushed on time even if appends stop.
        compression_threads: compress each batch's buffers on pyarrow's thread pool (faster alone).  A writer
            working beside a busy process on a small machine should not: the threads take CPU time from it (the
            simulator's writers pass False; BENCHMARKS.md, "Tracer", round 11).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        metadata: Mapping[str, Any] | None = None,
        overwrite: bool = False,
        compression: str | None = "zstd",
        batch_rows: int = DEFAULT_BATCH_ROWS,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        background_flush: bool = True,
        compression_threads: bool = True,
    ) -> None:
        if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes) or not str(path):
            raise TraceFormatError(f"TraceWriter needs a trace directory path (str or pathlib.Path), not {path!r:.60}")
        if compression not in COMPRESSIONS:
            raise ConfigError(f"compression must be one of {COMPRESSIONS}, not {compression!r:.40}")
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, (int, np.integer)) \
                or not 0 < batch_rows <= MAX_BATCH_ROWS:
            raise ConfigError(f"batch_rows must be a whole number of rows from 1 to {MAX_BATCH_ROWS}, "
                              f"not {batch_rows!r:.40}")
        if isinstance(flush_interval_s, bool) or not isinstance(flush_interval_s, numbers.Real) \
                or not 0 < flush_interval_s <= MAX_FLUSH_INTERVAL_S:  # (nan and inf too: the flush thread died)
            raise ConfigError(f"flush_interval_s must be a number of seconds above 0 and at most "
                              f"{MAX_FLUSH_INTERVAL_S:g}, not {flush_interval_s!r:.40}")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TraceFormatError(f"metadata must be a dict of Metadata fields (see tracer.schema.METADATA), "
                                   f"not {metadata!r:.40}")
        batch_rows = int(batch_rows)
        self.path = Path(path)
        self.batch_rows = batch_rows
        self.flush_interval_s = float(flush_interval_s)
        self._options = ipc.IpcWriteOptions(compression=compression, emit_dictionary_deltas=True,
                                            use_threads=compression_threads)
        self._sinks: dict[str, _TableSink] = {}
        self._lock = threading.RLock()
        self._last_flush = time.monotonic()
        self._closed = False
        self._first_ts: int | None = None
        self._last_ts: int | None = None
        self._metadata: dict[str, Any] = {}
        prepare_trace_directory(self.path, overwrite=overwrite)
        self._metadata = self._initial_metadata(metadata or {})
        self._write_metadata()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if background_flush:
            self._thread = threading.Thread(target=self._flush_loop, name="trnprof-trace-flush", daemon=True)
            self._thread.start()

    # -- set-up ------------------------------------------------------------------------------------------
    def _initial_metadata(self, given: Mapping[str, Any]) -> dict[str, Any]:
        for key in given:
            if key not in schema.METADATA:
                raise TraceFormatError(f"Metadata has no field {key!r}; see tracer.schema.METADATA")
            if key == schema.TABLE_ROWS:
                raise TraceFormatError(f"Metadata field {key!r} is set by the writer when it finishes")
        meta: dict[str, Any] = {
            "profile_schema_version": schema.NEURON_PROFILE_SCHEMA_VERSION,
            "tool_version": f"trnprof {__version__}",
            "is_simulation": False,
        }
        meta.update(given)
        meta["trace_format_version"] = schema.TRACE_FORMAT_VERSION
        meta["recording_complete"] = False
        return meta

    # -- appending ---------------------------------------------------------------------------------------
    def append(self, table: str, columns: Mapping[str, ColumnData] | pa.RecordBatch | pa.Table) -> None:
        """Append rows to ``table`` given as columns of equal length.

        Missing optional columns are stored as nulls; an unknown or missing required column, a wrong type or a
        length mismatch raises :class:`TraceFormatError`.  Dictionary columns accept strings or Arrow
        DictionaryArrays (whose dictionary is merged into the file's).
        """
        spec = schema.table_spec(table)
        if self._closed:  # checked again under the lock below; here so a closed writer is the error reported
            raise TraceFormatError(f"{self.path}: trace writer is closed")
        if isinstance(columns, (pa.RecordBatch, pa.Table)):
            columns = {name: columns.column(name) for name in columns.schema.names}
        if not isinstance(columns, Mapping):
            raise TraceFormatError(f"{spec.name}: columns must be a dict of column name to values, an Arrow "
                                   f"RecordBatch or Table, not {columns!r:.40}")
        unknown = [k for k in columns if k not in spec]
        if unknown:
            raise TraceFormatError(
                f"{spec.name} has no column(s) {', '.join(map(repr, unknown))}; columns are: {', '.join(spec.names)}"
            )
        missing = [k for k in spec.required if k not in columns]
        if missing:
            raise TraceFormatError(f"{spec.name}: missing required column(s) {', '.join(missing)}")
        n: int | None = None
        arrays: dict[str, pa.Array] = {}
        for col in spec.columns:
            if col.name in columns:
                arr = _to_arrow(spec, col, columns[col.name], n)
                n = len(arr)
                arrays[col.name] = arr
        assert n is not None
        if n == 0:
            return
        with self._lock:
            if self._closed:
                raise TraceFormatError(f"{self.path}: trace writer is closed")
            sink = self._sink(spec)
            chunk: dict[str, pa.Array] = {}
            for col in spec.columns:
                arr = arrays.get(col.name)
                if col.is_dictionary:
                    chunk[col.name] = sink.dicts[col.name].encode(arr) if arr is not None else pa.nulls(n, pa.int32())
                else:
                    chunk[col.name] = arr if arr is not None else pa.nulls(n, col.type)
            self._track_time_range(spec, chunk)
            sink.add(chunk, n)
            if sink.pending_rows >= self.batch_rows:
                sink.flush(self.batch_rows)
            if time.monotonic() - self._last_flush >= self.flush_interval_s:
                self._flush_all()

    def append_rows(self, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append rows given as mappings (convenient for small tables; use :meth:`append` for bulk data)."""
        rows = sequence_of(rows, Mapping)
        if rows is None:
            raise TraceFormatError(f"{table}: append_rows takes a list of rows, each a dict of column -> value")
        if not rows:
            return
        names: list[str] = []
        for row in rows:
            for key in row:
                if key not in names:
                    names.append(key)
        self.append(table, {name: [row.get(name) for row in rows] for name in names})

    def _sink(self, spec: schema.TableSpec) -> _TableSink:
        sink = self._sinks.get(spec.name)
        if sink is None:
            if spec.name == schema.METADATA.name:
                raise TraceFormatError("Metadata is written with update_metadata(), not append()")
            sink = _TableSink(spec, self.path / spec.file_name, self._options)
            self._sinks[spec.name] = sink
        return sink

    def _track_time_range(self, spec: schema.TableSpec, chunk: Mapping[str, pa.Array]) -> None:
        if spec.kind == "interval":
            lo, hi = chunk[schema.START_TS], chunk[schema.END_TS]
        elif spec.kind == "event":
            lo = hi = chunk[schema.TIMESTAMP]
        else:
            return
        lo_v = pc.min(lo).as_py()
        hi_v = pc.max(hi).as_py()
        if lo_v is not None and (self._first_ts is None or lo_v < self._first_ts):
            self._first_ts = lo_v
        if hi_v is not None and (self._last_ts is None or hi_v > self._last_ts):
            self._last_ts = hi_v

    # -- metadata ----------------------------------------------------------------------------------------
    def update_metadata(self, **fields: Any) -> None:
        """Set Metadata fields; the Metadata file is rewritten atomically at once."""
        for key in fields:
            if key not in schema.METADATA or key in ("trace_format_version", "recording_complete", schema.TABLE_ROWS):
                raise TraceFormatError(f"Metadata field {key!r} cannot be set; see tracer.schema.METADATA")
        with self._lock:
            if self._closed:  # the finished trace's Metadata stays as it was closed
                raise TraceFormatError(f"{self.path}: trace writer is closed")
            before = dict(self._metadata)
            self._metadata.update(fields)
            try:
                self._write_metadata()
            except TraceFormatError:  # a value that cannot be stored is not kept: the writer stays usable
                self._metadata = before
                raise

    @property
    def metadata(self) -> dict[str, Any]:
        """The Metadata row as it stands."""
        with self._lock:
            return dict(self._metadata)

    def _write_metadata(self) -> None:
        spec = schema.METADATA
        row = {c.name: [self._metadata.get(c.name)] for c in spec.columns}
        table = pa.table({c.name: _to_arrow(spec, c, row[c.name], 1) for c in spec.columns}, schema=spec.arrow_schema())
        final = self.path / spec.file_name
        tmp = final.with_name(final.name + ".tmp")
        with pa.OSFile(str(tmp), "wb") as f, ipc.new_stream(f, table.schema, options=self._options) as w:
            w.write_table(table)
        os.replace(tmp, final)

    # -- flushing and closing ----------------------------------------------------------------------------
    def flush(self, table: str | None = None, *, min_rows: int = 0) -> None:
        """Write the buffered rows of ``table`` (default: every table) to disk now; with ``min_rows``, only
        tables holding at least that many buffered rows (a producer with idle time can compress big buffers
        early without writing many tiny batches)."""
        with self._lock:
            if table is None and not min_rows:
                self._flush_all()
                return
            for name, sink in self._sinks.items():
                if (table is None or name == table) and sink.pending_rows >= max(min_rows, 1):
                    sink.flush(self.batch_rows)

    def _flush_all(self) -> None:
        for sink in self._sinks.values():
            sink.flush(self.batch_rows)
        self._last_flush = time.monotonic()

    def _flush_loop(self) -> None:
        period = max(self.flush_interval_s / 4, 0.01)
        while not self._stop.wait(period):
            with self._lock:
                if self._closed:
                    return
                if time.monotonic() - self._last_flush >= self.flush_interval_s:
                    self._flush_all()

    @property
    def rows_written(self) -> dict[str, int]:
        """Rows on disk per table so far (buffered rows not included)."""
        with self._lock:  # another thread's append may be adding a table's sink
            return {name: sink.rows_written for name, sink in self._sinks.items()}

    def close(self, *, complete: bool = True) -> None:
        """Flush, end every stream and finalize Metadata.  Idempotent.

        ``complete=False`` keeps ``recording_complete = false`` (the recording was cut short).
        """
        with self._lock:
            if self._closed:
                return
            self._stop.set()
            try:
                self._flush_all()
            finally:
                for sink in self._sinks.values():
                    sink.close()
                self._closed = True
            if self._metadata.get("first_hw_timestamp") is None and self._first_ts is not None:
                self._metadata["first_hw_timestamp"] = self._first_ts
            if self._metadata.get("last_hw_timestamp") is None and self._last_ts is not None:
                self._metadata["last_hw_timestamp"] = self._last_ts
            self._metadata["recording_complete"] = complete
            # what a reader checks a completed recording against: a table file lost, or rows lost from one
            self._metadata[schema.TABLE_ROWS] = json.dumps(
                {name: sink.rows_written for name, sink in sorted(self._sinks.items())}, separators=(",", ":"))
            self._write_metadata()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close(complete=exc_type is None)

    def __del__(self) -> None:  # a writer dropped without close() still ends its streams
        try:
            if not self._closed:
                self.close(complete=False)
        except Exception:
            pass


def write_trace(path: str | os.PathLike[str], tables: Mapping[str, Mapping[str, ColumnData] | pa.Table],
                *, metadata: Mapping[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write a whole trace in one call (tests, importers, exporters); returns the trace directory."""
    if not isinstance(tables, Mapping):  # (checked before anything is written)
        raise TraceFormatError(f"write_trace takes a dict of table name -> columns, not {str(tables)[:40]!r}")
    with TraceWriter(path, metadata=metadata, overwrite=overwrite, background_flush=False) as w:
        for name, cols in tables.items():
            w.append(name, cols)
    return Path(path)
