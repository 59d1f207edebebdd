"""A temporary on-disk queue of record batches, so importers can hold rows until the end of the input cheaply.

Importers of flat event formats learn some columns only at the end (a slice's depth needs every slice of its
track; an ``E`` event may close a ``B`` seen gigabytes earlier).  They park the bulky columns (names, argument
JSON) here as LZ4-compressed Arrow IPC and keep only compact numeric columns in memory, then read the batches
back in the order written.  Each parked item is a complete IPC stream, so it can be serialised (and compressed)
on another thread than the one that appends it (:meth:`Spill.write_stream`).  The file is deleted on
:meth:`Spill.close`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyarrow import ipc

OPTIONS = ipc.IpcWriteOptions(compression="lz4")


def serialize(batch: pa.RecordBatch) -> pa.Buffer:
    """``batch`` as a complete LZ4-compressed IPC stream, ready for :meth:`Spill.write_stream`."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, batch.schema, options=OPTIONS) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


class Spill:
    """Record batches written once and read back once, in order.

    Args:
        directory: where the temporary file goes (default: the system temporary directory).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = directory
        self.rows = 0
        self._path: Path | None = None
        self._file: pa.NativeFile | None = None
        self._extents: list[tuple[int, int]] = []   # (offset, length) of each parked stream
        self._size = 0

    def write(self, batch: pa.RecordBatch) -> None:
        """Park ``batch``."""
        self.write_stream(serialize(batch))
        self.rows += batch.num_rows

    def write_stream(self, stream: pa.Buffer | bytes) -> None:
        """Park one batch already serialised by :func:`serialize` (or any complete IPC stream of one batch)."""
        if self._file is None:
            fd, name = tempfile.mkstemp(prefix="trnprof-import-", suffix=".arrows", dir=self.directory)
            os.close(fd)
            self._path = Path(name)
            self._file = pa.OSFile(name, "wb")
        self._file.write(stream)
        self._extents.append((self._size, len(stream)))
        self._size += len(stream)

    def read(self) -> Iterator[pa.RecordBatch]:
        """Finish writing and yield the parked batches in the order written."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._path is None:
            return
        with pa.memory_map(str(self._path), "r") as f:
            for offset, length in self._extents:
                f.seek(offset)
                with ipc.open_stream(f.read_buffer(length)) as reader:
                    yield from reader

    def close(self) -> None:
        """Delete the temporary file.  Idempotent."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._path is not None:
            self._path.unlink(missing_ok=True)
            self._path = None
        self._extents.clear()

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
