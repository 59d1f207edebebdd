"""The shared-memory ring that carries column buffers to the trace-writing process (tracer.sim.emit_ring)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_sim_emit import _tables
from tracer.sim import emit_ring, run_kernel
from tracer.sim.emit_ring import ALIGN, RingReader, RingWriter, plan_spans

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="the ring needs memfd_create (Linux)")


def _pair(size: int) -> tuple[RingWriter, RingReader]:
    writer = RingWriter(size)
    return writer, RingReader(os.dup(writer.fd), size)


def test_a_buffer_that_would_pass_the_end_of_the_ring_starts_the_next_lap():
    spans, head = plan_spans(0, [10, 20, 30], 64)
    assert spans == [(0, 10), (16, 20), (64, 30)]  # 8-byte aligned starts; 40 + 30 > 64: the next lap
    assert head == 96
    assert plan_spans(56, [8, 1], 64) == ([(56, 8), (64, 1)], 72)  # ending exactly at the end of the ring: stays


def test_buffers_travel_through_the_ring_and_are_refused_when_it_is_full():
    writer, reader = _pair(64)
    spans = writer.put([b"abc", bytearray(b"defgh")])
    assert spans == [(0, 3), (8, 5)]
    assert [bytes(reader.view(s)) for s in spans] == [b"abc", b"defgh"]
    assert writer.put([b"x" * 56]) is None  # 16 + 56 > 64: nothing copied, nothing moved
    assert writer.head == 16
    writer.release(RingReader.end(spans))
    again = writer.put([b"y" * 56])  # the ring is empty: it starts again at its beginning
    assert again == [(64, 56)] and bytes(reader.view(again[0])) == b"y" * 56
    assert writer.put([b"w" * 9]) is None  # 56 + 9 > 64 (the ring is not empty: no new start)
    assert writer.put([b"z" * 65]) is None  # larger than the ring: never fits
    writer.close()


@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from([64, 200, 1024]),
       steps=st.lists(st.tuples(st.lists(st.integers(0, 300), min_size=1, max_size=4), st.integers(0, 3)),
                      min_size=1, max_size=40),
       seed=st.integers(0, 255))
def test_ring_never_overwrites_what_the_reader_has_not_released(size, steps, seed):
    """Oracle, a brute-force map of the ring's bytes: a put reserves the bytes from the position it started at to
    the end of its last buffer (a buffer moved to the next lap leaves the end of the ring unused); a put is taken
    exactly when its reservation overlaps no unreleased one, its buffers then lie inside it, and every unreleased
    buffer still reads back as written."""
    writer, reader = _pair(size)
    pending: list[tuple[int, list[tuple[int, int]], list[bytes]]] = []  # (reserved from, spans, buffers)
    counter = seed
    for sizes, releases in steps:
        bufs = []
        for n in sizes:
            bufs.append(bytes((counter + i) % 256 for i in range(n)))
            counter += 1
        taken = [False] * size
        for first, spans, _bufs in pending:
            for b in range(first, RingReader.end(spans)):
                taken[b % size] = True
        first = writer.head
        if not pending and first % size:  # an empty ring starts again at its beginning
            first += size - first % size
        planned, head = plan_spans(first, sizes, size)
        fits = head - first <= size and not any(taken[b % size] for b in range(first, head))
        spans = writer.put(bufs)
        assert (spans is not None) == fits
        if spans is not None:
            assert spans == planned and writer.head == head
            for (start, n), buf in zip(spans, bufs, strict=True):
                assert n == len(buf) and start % ALIGN == 0 and start % size + n <= size and start >= first
            pending.append((first, spans, bufs))
        else:
            assert writer.head == first or not pending
        for _first, old_spans, old_bufs in pending:
            assert [bytes(reader.view(s)) for s in old_spans] == old_bufs
        for _ in range(min(releases, len(pending))):
            _first, done, _bufs = pending.pop(0)
            writer.release(RingReader.end(done))
    writer.close()


def test_recordings_through_a_small_ring_write_the_same_trace(tmp_path, monkeypatch):
    """A recording cut into many chunks, with a ring too small for the large ones (they go through the pipe) and
    wrapping around for the others, writes exactly the trace of inline emission; so does one with no ring."""
    import time

    import tracer.sim.core as core_module
    from tracer.sim.emit_process import ProcessEmitter

    params = {"seq": 2048, "head_dim": 64}  # ~5,000 instructions: ~25 chunks
    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 200)
    monkeypatch.setattr(core_module, "HANDOFF_INTERVAL_S", 0.002)
    run_kernel("attention", params, trace_path=tmp_path / "inline", emit="inline")
    expected = _tables(tmp_path / "inline")

    outcomes: list[bool] = []
    heads: list[int] = []
    put = RingWriter.put

    def counting(self, buffers):
        spans = put(self, buffers)
        outcomes.append(spans is not None)
        heads.append(self.head)
        return spans

    take_acks = ProcessEmitter._take_acks

    def patient(self):
        time.sleep(0.02)  # the run lasts less than the writer process's start-up: let it catch up
        take_acks(self)

    monkeypatch.setattr(RingWriter, "put", counting)
    monkeypatch.setattr(ProcessEmitter, "_take_acks", patient)
    ring = 24 << 10  # chunks are 4-33 KB
    monkeypatch.setattr(emit_ring, "RING_BYTES", ring)
    run_kernel("attention", params, trace_path=tmp_path / "ring", emit="process")
    assert any(outcomes) and not all(outcomes), outcomes  # both ways were taken
    assert max(heads) > 2 * ring  # the ring went round more than twice
    got = _tables(tmp_path / "ring")
    assert got.keys() == expected.keys()
    for name, table in expected.items():
        assert got[name].equals(table), f"table {name} differs"

    monkeypatch.setattr(emit_ring, "create_writer", lambda size: None)
    outcomes.clear()
    run_kernel("attention", params, trace_path=tmp_path / "pipe", emit="process")
    assert outcomes == []
    got = _tables(tmp_path / "pipe")
    for name, table in expected.items():
        assert got[name].equals(table), f"table {name} differs (no ring)"
