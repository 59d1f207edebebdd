"""A temporary on-disk queue of record batches, so importers can hold rows until the end of the input cheaply.

Importers of flat event formats learn some columns only at the end (a slice's depth needs every slice of its
track; an ``E`` event may close a ``B`` seen gigabytes earlier).  They park the bulky columns (names, argument
JSON) here as LZ4-compressed Arrow IPC and keep only compact numeric columns in memory, then read the batches
back in the order written.  The files are deleted on :meth:`Spill.close`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyarrow import ipc

_OPTIONS = ipc.IpcWriteOptions(compression="lz4")


class Spill:
    """Record batches written once and read back once, in order.

    Args:
        schema: the schema of every batch (batches are cast to it); ``None`` accepts any schema, starting a new
            segment whenever it changes.
        directory: where the temporary files go (default: the system temporary directory).
    """

    def __init__(self, schema: pa.Schema | None = None, directory: str | os.PathLike[str] | None = None) -> None:
        self.schema = schema
        self.directory = directory
        self.rows = 0
        self._paths: list[Path] = []
        self._sink: pa.NativeFile | None = None
        self._writer: ipc.RecordBatchStreamWriter | None = None
        self._current: pa.Schema | None = None

    def _open_segment(self, schema: pa.Schema) -> None:
        self._finish_segment()
        fd, name = tempfile.mkstemp(prefix="trnprof-import-", suffix=".arrows", dir=self.directory)
        os.close(fd)
        self._paths.append(Path(name))
        self._sink = pa.OSFile(name, "wb")
        self._writer = ipc.new_stream(self._sink, schema, options=_OPTIONS)
        self._current = schema

    def _finish_segment(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._sink is not None:
            self._sink.close()
            self._sink = None

    def write(self, batch: pa.RecordBatch) -> None:
        """Park ``batch``."""
        if self.schema is not None and batch.schema != self.schema:
            batch = pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in self.schema],
                                               schema=self.schema)
        if self._writer is None or batch.schema != self._current:
            self._open_segment(batch.schema)
        assert self._writer is not None
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def read(self) -> Iterator[pa.RecordBatch]:
        """Finish writing and yield the batches in the order written."""
        self._finish_segment()
        for path in self._paths:
            with pa.OSFile(str(path), "rb") as f, ipc.open_stream(f) as reader:
                yield from reader

    def close(self) -> None:
        """Delete the temporary files.  Idempotent."""
        self._finish_segment()
        for path in self._paths:
            path.unlink(missing_ok=True)
        self._paths.clear()

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
