"""profiler.prefetch: items in order from a background producer, its errors re-raised, early exits stop it."""

from __future__ import annotations

import threading
import time

import pytest

from profiler.prefetch import Prefetcher, prefetched


def test_items_arrive_in_order_from_another_thread():
    threads = set()

    def produce():
        for i in range(50):
            threads.add(threading.current_thread().name)
            yield i

    with prefetched(produce(), depth=3) as ahead:
        assert list(ahead) == list(range(50))
        assert next(ahead, "end") == "end"
    assert threads == {"trnprof-prefetch"}


def test_producer_errors_are_reraised_unchanged_after_the_items_before_them():
    class Boom(ValueError):
        pass

    def produce():
        yield 1
        yield 2
        raise Boom("bad batch")

    got = []
    with pytest.raises(Boom, match="bad batch"), prefetched(produce()) as ahead:
        got.extend(ahead)
    assert got == [1, 2]


def test_a_consumer_that_stops_early_stops_the_producer():
    made = []

    def produce():
        for i in range(10_000):
            made.append(i)
            yield i

    fetcher = Prefetcher(produce(), depth=2)
    assert next(fetcher) == 0
    fetcher.close()
    stopped_at = len(made)
    time.sleep(0.1)
    assert len(made) == stopped_at <= 5          # depth + the item in hand, no more
    assert not fetcher._thread.is_alive()
    with pytest.raises(StopIteration):
        next(fetcher)


def test_stopping_early_closes_the_source_so_its_cleanup_runs():
    cleaned = []

    def produce():
        try:
            yield from range(10_000)
        finally:
            cleaned.append(True)          # e.g. a file closed, a spill file removed

    with prefetched(produce(), depth=2) as ahead:
        assert next(ahead) == 0
    assert cleaned == [True]
