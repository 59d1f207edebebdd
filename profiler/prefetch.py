"""Runs a producer (an iterator) on a background thread a few items ahead of its consumer.

Used where producing and consuming can overlap on two cores.  The JSON import: the compiled kernel parses the next
blocks (without the GIL) while the current one is decoded.  The ingest: it hands DuckDB record batches through a
Python generator that DuckDB pulls while it stores; without prefetching, the Python work of the next batch
(reading, track ids, ordering; reading back and indexing) only starts when DuckDB asks for it, so the two alternate
on one core.  :func:`prefetched` moves the producer to a thread of its own; numpy, pyarrow and DuckDB release the
GIL in their heavy parts, so producing and consuming overlap on a second core.  Memory stays bounded: at most
``depth`` items wait between the two.

Errors of the producer are re-raised, unchanged, in the consumer; a consumer that stops early (DuckDB failing,
an interrupt) stops the producer at its next item.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

from profiler.db import ingest_warnings

T = TypeVar("T")

_ITEM, _END, _ERROR = 0, 1, 2
#: Seconds between checks of the stop flag while the queue is full.
_POLL_S = 0.05


class Prefetcher(Generic[T]):
    """Iterates ``source`` on a daemon thread; iterate this object to consume its items in order."""

    def __init__(self, source: Iterator[T], *, depth: int = 2, name: str = "trnprof-prefetch") -> None:
        self._queue: queue.Queue[tuple[int, object]] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._finished = False
        self._source = source
        # the warnings the producer shows belong to the work that started it (an ingest records its own)
        self._thread = threading.Thread(target=ingest_warnings.carrying(self._produce), args=(source,), name=name,
                                        daemon=True)
        self._thread.start()

    def _produce(self, source: Iterator[T]) -> None:
        try:
            for item in source:
                if not self._put(_ITEM, item):
                    return
            self._put(_END, None)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            self._put(_ERROR, exc)

    def _put(self, kind: int, value: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put((kind, value), timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == _ITEM:
            return value  # type: ignore[return-value]
        self._finished = True
        self._thread.join()
        if kind == _ERROR:
            raise value  # type: ignore[misc]
        raise StopIteration

    def close(self) -> None:
        """Stop the producer (at its next item), wait for its thread, and close the source if it can be closed (a
        generator stopped early runs its ``finally`` blocks: files closed, temporary files removed)."""
        self._finished = True
        self._stop.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=_POLL_S)
        self._thread.join()
        close = getattr(self._source, "close", None)
        if close is not None:
            close()


@contextlib.contextmanager
def prefetched(source: Iterator[T], *, depth: int = 2, name: str = "trnprof-prefetch") -> Iterator[Prefetcher[T]]:
    """``source`` iterated ``depth`` items ahead on a background thread, stopped when the block exits."""
    fetcher = Prefetcher(source, depth=depth, name=name)
    try:
        yield fetcher
    finally:
        fetcher.close()


__all__ = ["Prefetcher", "prefetched"]
