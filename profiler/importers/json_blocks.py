"""Reading a file as blocks of (decompressed) bytes on a background thread: plain or gzip, faults kept for the
caller.

:class:`BlockReader` yields ``(bytes, raw bytes consumed)`` blocks of about ``block_bytes``; reading and
decompression run on a thread of their own (zlib releases the GIL) with a small queue between it and the consumer.
Gzip input (one or more members) is decompressed incrementally, so everything before a corrupt or truncated point
is handed on; the fault itself is left in :attr:`BlockReader.error` for the caller to report.
"""

from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
#: Compressed bytes fed to the decompressor at a time.
_GZIP_CHUNK = 1 << 18


class BlockReader:
    """Reads (decompressed bytes, raw bytes consumed) blocks on a background thread."""

    _END = object()

    def __init__(self, path: Path, block_bytes: int) -> None:
        self.path = path
        self.block_bytes = block_bytes
        self.error: BaseException | None = None
        self._queue: queue.Queue[object] = queue.Queue(maxsize=3)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trnprof-json-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with open(self.path, "rb") as raw:
                gz = raw.read(2) == GZIP_MAGIC
                raw.seek(0)
                if gz:
                    self._run_gzip(raw)
                    return
                last = 0
                while not self._stop.is_set():
                    data = raw.read(self.block_bytes)
                    if not data:
                        break
                    pos = raw.tell()
                    self._put((data, pos - last))
                    last = pos
        except (OSError, EOFError, zlib.error) as exc:
            self.error = exc
        finally:
            self._put(self._END)

    def _run_gzip(self, raw: BinaryIO) -> None:
        """Decompress ``raw`` (one or more gzip members) incrementally, so that everything before a corrupt or
        truncated point is handed on (``GzipFile.read`` drops the block it was decompressing when it fails)."""
        d = zlib.decompressobj(wbits=31)
        out: list[bytes] = []
        n_out = consumed = 0
        try:
            while not self._stop.is_set():
                chunk = raw.read(_GZIP_CHUNK)
                if not chunk:
                    if not d.eof:
                        raise EOFError("Compressed file ended before the end-of-stream marker was reached")
                    break
                consumed += len(chunk)
                while chunk:
                    piece = d.decompress(chunk)
                    if piece:
                        out.append(piece)
                        n_out += len(piece)
                    chunk = b""
                    if d.eof and d.unused_data:  # another member follows
                        chunk = d.unused_data
                        d = zlib.decompressobj(wbits=31)
                if n_out >= self.block_bytes:
                    self._put((b"".join(out), consumed))
                    out, n_out, consumed = [], 0, 0
        finally:
            if out:
                self._put((b"".join(out), consumed))

    def _put(self, item: object) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            yield item  # type: ignore[misc]

    def close(self) -> None:
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=0.05)
            except queue.Empty:
                continue
        self._thread.join()
