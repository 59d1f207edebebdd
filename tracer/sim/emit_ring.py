"""A shared-memory ring that carries a recording's column buffers to its trace-writing process.

Sending a chunk's columns through the pipe cost the simulation ~2 GB/s of ``write`` calls (~60 MB for a
1.15 M-instruction matmul_rowload: ~30 ms, ~1.5% of its run, spread over the hand-over and the pumping between
instructions).  Copying them into memory the writer process maps costs a ``memcpy``; only a small message naming
where they are goes through the pipe.

The parent (:class:`RingWriter`) creates an anonymous shared file (``memfd_create``), maps it and passes its
descriptor to the child (:class:`RingReader`).  Positions are byte counts since the start (never wrapped); a
buffer lives at ``position % size``, and one that would run past the end of the ring starts at the beginning of
the next lap instead.  The child copies a chunk's buffers out, then acknowledges the position up to which it has
read (on its pipe to the parent, whose system calls also order the two processes' memory accesses); space is
reused only once acknowledged (an empty ring starts again at its beginning).  A chunk that does not fit in the
free space goes through the pipe as before, so the simulation never waits for the ring.

Where ``memfd_create`` is missing (not Linux), :func:`create_writer` returns None and everything goes through the
pipe.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Sequence
from typing import Any

#: Bytes of the ring: ~5 chunks of a compute-heavy kernel (a chunk's columns are ~1.5 MB; the writer process reads
#: each within ~20 ms, well before the next comes), and its pages cost little to make on first use (2048 faults,
#: ~1.5 ms; making 16 MiB at once with MAP_POPULATE took 12 ms).
RING_BYTES = 8 << 20
#: Buffers start at multiples of this many bytes (every column type's alignment).
ALIGN = 8

#: A buffer's place in the ring: (position, bytes).
Span = tuple[int, int]


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_spans(head: int, sizes: Sequence[int], size: int) -> tuple[list[Span], int]:
    """Where buffers of ``sizes`` bytes go in a ring of ``size`` bytes when the next free position is ``head``:
    (their spans, the position after the last).  A buffer that would run past the end of the ring starts at the
    next lap."""
    spans = []
    for n in sizes:
        start = head
        offset = start % size
        if offset + n > size:
            start += size - offset
        spans.append((start, n))
        head = start + _aligned(n)
    return spans, head


class RingWriter:
    """The simulation's end of the ring.

    Args:
        size: bytes of the ring.

    Raises:
        OSError: the shared file cannot be created or mapped.
    """

    def __init__(self, size: int = RING_BYTES) -> None:
        self.size = size
        self.fd = os.memfd_create("trnprof-trace-ring", 0)  # type: ignore[attr-defined]  # Linux only
        try:
            os.ftruncate(self.fd, size)
            self._map = mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED)
        except BaseException:
            os.close(self.fd)
            raise
        #: The next free position, and the position up to which the reader has taken everything.
        self.head = 0
        self.tail = 0

    def put(self, buffers: Sequence[Any]) -> list[Span] | None:
        """Copy ``buffers`` (byte-like objects) into the ring and return their spans, or None (nothing copied) when
        they do not all fit in the space the reader has released."""
        views = [memoryview(b).cast("B") for b in buffers]
        if self.head == self.tail and self.head % self.size:  # empty: start again at the beginning
            self.head = self.tail = self.head + self.size - self.head % self.size
        spans, head = plan_spans(self.head, [v.nbytes for v in views], self.size)
        if head - self.tail > self.size:
            return None
        ring, size = self._map, self.size
        for (start, n), view in zip(spans, views, strict=True):
            offset = start % size
            ring[offset:offset + n] = view
        self.head = head
        return spans

    def close_fd(self) -> None:
        """Close the shared file's descriptor once the reader has its own (the mapping stays)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def release(self, position: int) -> None:
        """The reader has taken everything before ``position``."""
        self.tail = max(self.tail, position)

    def close(self) -> None:
        """Unmap the ring and close its file (the reader keeps its own mapping)."""
        with contextlib.suppress(BufferError, ValueError):
            self._map.close()
        self.close_fd()


class RingReader:
    """The writer process's end of the ring: the descriptor ``fd`` the parent passed, of ``size`` bytes."""

    def __init__(self, fd: int, size: int) -> None:
        self.size = size
        self._map = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        os.close(fd)
        self._view = memoryview(self._map)

    def view(self, span: Span) -> memoryview:
        """The bytes at ``span`` (valid until their position is acknowledged to the writer)."""
        start, n = span
        offset = start % self.size
        return self._view[offset:offset + n]

    @staticmethod
    def end(spans: Sequence[Span]) -> int:
        """The position after the last of ``spans`` (what to acknowledge once they are read)."""
        start, n = spans[-1]
        return start + _aligned(n)


def create_writer(size: int = RING_BYTES) -> RingWriter | None:
    """A ring of ``size`` bytes, or None where shared files cannot be made (not Linux, or the system refused)."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        return RingWriter(size)
    except (OSError, ValueError):
        return None
