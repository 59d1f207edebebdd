"""A temporary on-disk queue of record batches, so importers can hold rows until the end of the input cheaply.

Importers of flat event formats learn some columns only at the end (a slice's depth needs every slice of its
track; an ``E`` event may close a ``B`` seen gigabytes earlier).  They park the bulky columns (names, argument
JSON) here as LZ4-compressed Arrow IPC and keep only compact numeric columns in memory, then read the batches
back in the order written.  The file is deleted on :meth:`Spill.close`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyarrow import ipc


class Spill:
    """Record batches of one schema, written once and read back once, in order.

    Args:
        schema: schema of every batch.
        directory: where the temporary file goes (default: the system temporary directory).
    """

    def __init__(self, schema: pa.Schema, directory: str | os.PathLike[str] | None = None) -> None:
        self.schema = schema
        fd, name = tempfile.mkstemp(prefix="trnprof-import-", suffix=".arrows", dir=directory)
        os.close(fd)
        self.path = Path(name)
        self._sink: pa.NativeFile | None = pa.OSFile(str(self.path), "wb")
        self._writer: ipc.RecordBatchStreamWriter | None = ipc.new_stream(
            self._sink, schema, options=ipc.IpcWriteOptions(compression="lz4"))
        self.rows = 0
        self.batches = 0

    def write(self, batch: pa.RecordBatch) -> None:
        """Park ``batch`` (cast to the spill's schema)."""
        if self._writer is None:
            raise RuntimeError("spill already finished")
        if batch.schema != self.schema:
            batch = pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in self.schema],
                                               schema=self.schema)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows
        self.batches += 1

    def read(self) -> Iterator[pa.RecordBatch]:
        """Finish writing and yield the batches in the order written."""
        if self._writer is not None:
            self._writer.close()
            assert self._sink is not None
            self._sink.close()
            self._writer = self._sink = None
        with pa.OSFile(str(self.path), "rb") as f, ipc.open_stream(f) as reader:
            yield from reader

    def close(self) -> None:
        """Delete the temporary file.  Idempotent."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._sink is not None:
            self._sink.close()
            self._sink = None
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
