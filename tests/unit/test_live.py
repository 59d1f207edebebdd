"""Following a recording while it runs (profiler.live): a real TraceWriter appends rows between refreshes."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
from pathlib import Path

import pytest

import profiler
from dashboard import timeline_logic as tl
from dashboard.computed import ComputedCache
from dashboard.live_view import STOPPED_AFTER_S, live_line
from dashboard.registry import TraceRegistry
from profiler.errors import QueryError
from profiler.live import (
    LiveStatus,
    LiveTrace,
    close_generation,
    generation_path,
    input_signature,
    is_recording,
    remove_stale_generations,
)
from tracer import TraceWriter
from tracer import schema as ts
from tracer.errors import IncompleteTraceWarning, TraceFormatError

ENGINES = ("Tensor", "Vector", "Scalar")


def rows(a: int, b: int) -> dict[str, list]:
    """Instructions a..b-1, one every 100 ns round the three engines."""
    n = b - a
    return {ts.ID: list(range(a, b)), ts.START_TS: [i * 100 for i in range(a, b)],
            ts.END_TS: [i * 100 + 80 for i in range(a, b)], ts.DURATION_NS: [80] * n,
            ts.ENGINE: [ENGINES[i % 3] for i in range(a, b)], ts.OPCODE: ["MATMUL"] * n, ts.PCORE_IDX: [0] * n,
            ts.OPERANDS: [""] * n, ts.PC: list(range(a, b))}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def following(path: Path, **options):
    """A fake clock and a LiveTrace of ``path`` on it, closed at the end."""
    clock = Clock()
    live = LiveTrace(path, clock=clock, **options)
    try:
        yield clock, live
    finally:
        live.close()


@pytest.fixture
def recording(tmp_path: Path):
    """A trace directory being recorded: 100 instructions flushed, the writer still open."""
    path = tmp_path / "run.trace"
    writer = TraceWriter(path, background_flush=False, metadata={"is_simulation": True})
    writer.append(ts.INSTRUCTION.name, rows(0, 100))
    writer.flush()
    yield path, writer
    writer.close(complete=False)


def count(trace) -> int:
    return trace.sql("SELECT count(*) FROM Instruction").fetchall()[0][0]


def test_a_recording_is_followed_generation_by_generation_until_it_completes(recording):
    path, writer = recording
    assert is_recording(path)
    clock = Clock()
    live = LiveTrace(path, clock=clock, min_interval_s=2.0, backoff=3.0, retire_s=60.0)
    try:
        first = live.trace
        assert count(first) == 100 and live.generation == 0 and not live.complete
        assert not live.poll()                       # nothing new
        writer.append(ts.INSTRUCTION.name, rows(100, 250))
        writer.flush()
        assert not live.poll()                       # new rows, but too soon after the last read
        clock.now += 2.0
        assert live.poll()
        assert live.refresh()
        assert live.generation == 1 and count(live.trace) == 250 and live.trace is not first
        assert count(first) == 100                   # a reader of the old trace is not disturbed
        assert live.trace.db_path == generation_path(path, 1)
        status = live.status()
        assert status.instructions == 250 and status.time_range == (0, 249 * 100 + 80) and not status.complete
        assert not live.refresh()                    # unchanged since: nothing to do
        writer.close()
        clock.now += 10.0
        assert live.poll() and live.refresh()
        assert live.complete and live.status().complete and count(live.trace) == 250
        assert not live.poll()                       # complete: never again
    finally:
        live.close()


def test_refreshes_are_spaced_by_the_backoff_times_the_last_refresh(recording):
    path, writer = recording
    clock = Clock()

    def slow_open(p: Path, generation: int, progress=None):
        trace = profiler.live.open_generation(p, generation, progress)
        clock.now += 5.0 if generation else 0.1      # later reads "take" 5 s
        return trace

    live = LiveTrace(path, opener=slow_open, clock=clock, min_interval_s=2.0, backoff=3.0)
    try:
        writer.append(ts.INSTRUCTION.name, rows(100, 200))
        writer.flush()
        clock.now += 2.0
        assert live.poll() and live.refresh()
        assert live.status().last_refresh_s == pytest.approx(5.0)
        writer.append(ts.INSTRUCTION.name, rows(200, 300))
        writer.flush()
        clock.now += 14.9                            # 3 x 5 s after the read ended, less a little
        assert not live.poll()
        clock.now += 0.2
        assert live.poll()
    finally:
        live.close()


def test_a_replaced_trace_is_closed_after_the_retire_time_and_its_file_removed(recording):
    path, writer = recording
    clock = Clock()
    live = LiveTrace(path, clock=clock, min_interval_s=0.0, retire_s=30.0)
    try:
        for k in (1, 2):
            writer.append(ts.INSTRUCTION.name, rows(100 * k, 100 * k + 100))
            writer.flush()
            clock.now += 1.0
            assert live.refresh()
        gen1 = generation_path(path, 1)
        assert gen1.exists()
        old = [t for _at, t in live._retired]
        assert len(old) == 2
        clock.now += 29.0
        live.poll()
        assert count(old[1]) == 200                  # retired 29 s ago: still open
        clock.now += 2.0
        live.poll()
        with pytest.raises(QueryError):
            count(old[1])
        assert not gen1.exists()
    finally:
        live.close()
    assert not generation_path(path, 2).exists()     # close() removes the current generation's file too


def test_a_completed_recordings_last_generation_becomes_its_cache_entry(recording):
    path, writer = recording
    clock = Clock()
    live = LiveTrace(path, clock=clock, min_interval_s=0.0)
    writer.append(ts.INSTRUCTION.name, rows(100, 180))
    writer.close()
    clock.now += 1.0
    assert live.refresh() and live.complete
    last = live.trace.db_path
    live.close()
    entry = profiler.db.cache.cache_path(path)
    assert entry.exists() and not last.exists()
    before = entry.stat().st_ino
    with profiler.open(path) as again:                # the cache answers: no new ingest
        assert count(again) == 180
    assert entry.stat().st_ino == before


def test_a_recording_that_ended_before_the_first_read_becomes_the_cache_entry_too(recording):
    """Followed only once it had ended (a short recording under `record --serve`), no cache entry was made."""
    path, writer = recording
    writer.append(ts.INSTRUCTION.name, rows(100, 160))
    writer.close()
    live = LiveTrace(path, clock=Clock(), min_interval_s=0.0)
    assert live.complete and live.generation == 0
    live.close()
    entry = profiler.db.cache.cache_path(path)
    assert entry.exists()
    with profiler.open(path) as again:
        assert count(again) == 160


def test_refresh_does_not_print_the_expected_incomplete_warnings(recording):
    path, writer = recording
    live = LiveTrace(path, clock=Clock(), min_interval_s=0.0)
    try:
        writer.append(ts.INSTRUCTION.name, rows(100, 150))
        writer.flush()
        with warnings.catch_warnings(record=True) as shown:
            warnings.simplefilter("always")
            assert live.refresh()
        assert [str(w.message) for w in shown] == []
    finally:
        live.close()
    with pytest.warns(IncompleteTraceWarning, match="not complete"):
        profiler.open(path, force=True).close()     # outside a live refresh, it is shown as before


def test_a_failed_refresh_keeps_the_previous_trace_and_says_why(recording):
    path, writer = recording
    clock = Clock()
    live = LiveTrace(path, clock=clock, min_interval_s=1.0)
    try:
        writer.append(ts.INSTRUCTION.name, rows(100, 150))
        writer.flush()
        (path / ts.METADATA.file_name).write_bytes(b"not arrow")   # the directory got damaged
        clock.now += 1.0
        with pytest.raises(Exception, match="Metadata"):
            live.refresh()
        status = live.status()
        assert status.error and "Metadata" in status.error and not status.refreshing
        assert count(live.trace) == 100 and live.generation == 0
        assert not live.poll()                      # spaced like any read
        clock.now += 1.1
        assert live.poll()                          # and tried again later
    finally:
        live.close()


def test_is_recording_and_the_signature(tmp_path, recording):
    path, writer = recording
    assert not is_recording(tmp_path / "missing")
    assert not is_recording(tmp_path)              # a directory that is no trace
    (tmp_path / "x.duckdb").write_bytes(b"")
    assert not is_recording(tmp_path / "x.duckdb")
    before = input_signature(path)
    assert {name for name, _s, _m in before} >= {ts.METADATA.file_name, ts.INSTRUCTION.file_name}
    writer.append(ts.INSTRUCTION.name, rows(100, 101))
    writer.flush()
    assert input_signature(path) != before
    writer.close()
    assert not is_recording(path)


def test_generation_files_of_dead_processes_are_removed(recording):
    path, _writer = recording
    mine = generation_path(path, 3)
    dead = mine.with_name(mine.name.replace(f"-{os.getpid()}-", "-999999999-"))
    tmp = dead.with_name(f".{dead.name}.999999999.abcd1234.tmp")        # an ingest the dead process left
    spill = tmp.with_name(tmp.name + ".spill")
    spill.mkdir()
    (spill / "x").write_bytes(b"x")
    for f in (mine, dead, tmp):
        f.write_bytes(b"x")
    other = mine.with_name("other.trace.trnprof.live-999999999-1.duckdb")  # another trace's: not ours to remove
    other.write_bytes(b"x")
    remove_stale_generations(path)
    assert mine.exists() and not dead.exists() and not tmp.exists() and not spill.exists() and other.exists()
    mine.unlink()
    close_generation(object())                     # anything without a database: nothing to do


def status(**kw) -> LiveStatus:
    base = dict(generation=1, complete=False, refreshing=False, instructions=1234, dma_packets=0,
                time_range=(0, 2_000_000), age_s=3.0, idle_s=1.0, last_refresh_s=0.5, error=None)
    return LiveStatus(**{**base, **kw})


def text(parts) -> str:
    return "".join(p if isinstance(p, str) else p.children for p in parts)


def test_the_header_line_says_where_the_recording_stands():
    assert live_line(None) == ("", "live-none")
    line, css = live_line(status())
    assert css == "live-recording" and text(line) == ("● recording: 1,234 instructions, 2 ms of simulated time so "
                                                       "far · last read 3 s ago")
    line, css = live_line(status(dma_packets=5, refreshing=True))
    assert "5 DMA packets" in text(line) and "reading the new rows (the last read took 0.5 s)" in text(line)
    line, css = live_line(status(refreshing=True, progress=0.42))
    assert "reading the new rows 42% (the last read took 0.5 s)…" in text(line)
    line, css = live_line(status(idle_s=STOPPED_AFTER_S + 1))
    assert css == "live-stopped" and "no new rows for 31 s (stopped or killed?)" in text(line)
    line, css = live_line(status(complete=True, error="boom"))
    assert css == "live-complete" and text(line).startswith("✓ recording complete: 1,234 instructions")
    assert "the last read failed: boom" in text(line)
    # a page drawn from an older generation links to itself; the timeline (href None) redraws by itself
    line, css = live_line(status(readable=False, error="x.trace: bad Metadata", complete=True))
    assert css == "live-complete" and text(line) == ("● recording: ended without an event · the last read failed: "
                                                     "x.trace: bad Metadata")
    line, _ = live_line(status(generation=3), page_generation=2, href="/summary?trace=t0")
    link = [p for p in line if not isinstance(p, str)]
    assert link and link[0].href == "/summary?trace=t0"
    assert all(isinstance(p, str) for p in live_line(status(generation=3), 3, "/summary")[0])
    assert all(isinstance(p, str) for p in live_line(status(generation=3), True, "/summary")[0])


def test_the_registry_follows_a_recording_and_versions_it(recording):
    path, writer = recording
    clock = Clock()
    registry = TraceRegistry([path], live_options={"clock": clock, "min_interval_s": 0.0})
    try:
        assert registry.followed("t0")
        first = registry.open("t0")
        assert registry.version("t0") == 0 and registry.live_status("t0").instructions == 100
        writer.append(ts.INSTRUCTION.name, rows(100, 300))
        writer.flush()
        clock.now += 1.0
        assert registry.poll("t0") is not None       # starts the refresh in the background
        deadline = time.monotonic() + 30
        while registry.version("t0") == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert registry.version("t0") == 1 and registry.open("t0") is not first
        assert count(registry.open("t0")) == 300
    finally:
        registry.close()


def test_a_registry_told_not_to_follow_opens_the_rows_as_they_are(recording):
    path, _writer = recording
    registry = TraceRegistry([path], follow=False)
    try:
        assert not registry.followed("t0")
        with pytest.warns(IncompleteTraceWarning):
            assert count(registry.open("t0")) == 100
        assert registry.poll("t0") is None and registry.live_status("t0") is None and registry.version("t0") == 0
    finally:
        registry.close()


def test_computed_results_are_kept_per_trace_object():
    cache = ComputedCache()

    class T:
        pass

    a, b = T(), T()
    calls = []
    assert cache.get("t0", "k", lambda: calls.append("a") or "A", trace=a) == "A"
    assert cache.get("t0", "k", lambda: calls.append("a2") or "A2", trace=a) == "A"     # kept
    assert cache.get("t0", "k", lambda: calls.append("b") or "B", trace=b) == "B"      # a new trace: again
    assert calls == ["a", "b"]
    assert cache.get("t1", "k", lambda: "plain") == "plain" == cache.get("t1", "k", lambda: "other")


def test_a_read_that_ends_after_close_drops_its_trace(recording):
    path, writer = recording
    gate, opened = threading.Event(), []

    def opener(p: Path, generation: int, progress=None):
        if generation:
            gate.wait(10)
        trace = profiler.live.open_generation(p, generation, progress)
        opened.append(trace)
        return trace

    live = LiveTrace(path, opener=opener, clock=Clock(), min_interval_s=0.0)
    writer.append(ts.INSTRUCTION.name, rows(100, 120))
    writer.flush()
    result = []
    reader = threading.Thread(target=lambda: result.append(live.refresh()))
    reader.start()
    live.close()                                   # (the server stops while a read is under way)
    gate.set()
    reader.join(30)
    assert result == [False] and live.generation == 0
    with pytest.raises(QueryError):
        count(opened[-1])                          # closed, and its file removed
    assert not generation_path(path, 1).exists()


def test_concurrent_polls_start_one_refresh(recording):
    path, writer = recording
    clock = Clock()
    started = []
    gate = threading.Event()

    def opener(p: Path, generation: int, progress=None):
        started.append(generation)
        if generation:
            gate.wait(10)
        return profiler.live.open_generation(p, generation, progress)

    registry = TraceRegistry([path], live_options={"clock": clock, "min_interval_s": 0.0, "opener": opener})
    try:
        registry.open("t0")
        writer.append(ts.INSTRUCTION.name, rows(100, 120))
        writer.flush()
        clock.now += 1.0
        for _ in range(5):
            registry.poll("t0")
            time.sleep(0.02)
        assert registry.live_status("t0").refreshing
        gate.set()
        deadline = time.monotonic() + 30
        while registry.version("t0") == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started == [0, 1]
    finally:
        gate.set()
        registry.close()


def test_the_timeline_follows_the_end_of_a_growing_trace_unless_zoomed(recording):
    path, writer = recording
    with following(path, min_interval_s=0.0) as (clock, live):
        trace0 = live.trace
        first = tl.update_timeline(trace0, "t0", state=None, trigger="initial", width_px=800)
        assert first.state["view"] == [0, 99 * 100 + 80] and first.state["whole"]
        zoomed = tl.update_timeline(trace0, "t0", state=first.state, trigger="nav",
                                    nav={"start_ns": 1000, "end_ns": 2000})
        assert not zoomed.state["whole"]
        writer.append(ts.INSTRUCTION.name, rows(100, 400))
        writer.flush()
        clock.now += 1.0
        assert live.refresh()
        follow = tl.update_timeline(live.trace, "t0", state=first.state, trigger="live")
        assert follow.figure is not None                          # rebuilt
        assert follow.state["view"] == [0, 399 * 100 + 80] and follow.state["whole"]
        tail = tl.update_timeline(trace0, "t0", state=first.state, trigger="nav",
                                  nav={"start_ns": 9000, "end_ns": 9980})
        assert tail.state["view"][1] == 9980 and not tail.state["whole"]
        kept = tl.update_timeline(live.trace, "t0", state=zoomed.state, trigger="live")
        assert kept.figure is not None and kept.state["view"] == zoomed.state["view"]
        # a zoomed view reaching the end follows it (tail -f): the same width, at the new end
        moved = tl.update_timeline(live.trace, "t0", state=tail.state, trigger="live")
        width = tail.state["view"][1] - tail.state["view"][0]
        assert moved.state["view"] == [39980 - width, 39980]
        assert tl.update_timeline(live.trace, "t0", state={**tail.state, "end": "x"},
                                  trigger="live").state["view"] == tail.state["view"]   # (a malformed end: kept)


def test_a_recording_with_no_event_yet_has_no_trace_until_one_is_written(tmp_path):
    path = tmp_path / "early.trace"
    writer = TraceWriter(path, background_flush=False, metadata={"is_simulation": True})
    clock = Clock()
    try:
        live = LiveTrace(path, clock=clock, min_interval_s=0.0)
        with pytest.raises(TraceFormatError, match="no events to show yet .*holds no events"):
            _ = live.trace
        status = live.status()
        assert status.instructions == 0 and not status.complete and "holds no events" in status.error
        registry = TraceRegistry([path], live_options={"clock": clock, "min_interval_s": 0.0})
        try:
            with pytest.raises(TraceFormatError, match="no events to show yet"):
                registry.open("t0")                 # the pages say so in one line
            assert registry.live_status("t0").generation == 0
        finally:
            registry.close()
        writer.append(ts.INSTRUCTION.name, rows(0, 10))
        writer.flush()
        clock.now += 1.0
        assert live.poll() and live.refresh()
        assert live.generation == 1 and count(live.trace) == 10 and live.status().error is None
        live.close()
    finally:
        writer.close()


def test_an_ended_recording_without_events_is_not_read_again(tmp_path):
    path = tmp_path / "empty.trace"
    TraceWriter(path, background_flush=False).close(complete=False)   # killed before any event
    live = LiveTrace(path, clock=Clock(), min_interval_s=0.0)
    assert not live.complete and live.status().error
    TraceWriter(tmp_path / "done.trace", background_flush=False).close()
    done = LiveTrace(tmp_path / "done.trace", clock=Clock(), min_interval_s=0.0)
    assert done.complete and not done.poll()     # complete and empty: nothing will come
    with pytest.raises(TraceFormatError):
        _ = done.trace


def test_the_last_read_of_an_ended_recording_waits_for_no_spacing(recording):
    path, writer = recording
    clock = Clock()
    live = LiveTrace(path, clock=clock, min_interval_s=100.0, backoff=3.0)
    try:
        writer.append(ts.INSTRUCTION.name, rows(100, 200))
        writer.flush()
        clock.now += 1.0
        assert not live.poll()              # new rows while recording: spaced
        writer.close()
        assert live.poll()                  # the recording has ended: read its last rows now
        assert live.refresh() and live.complete and count(live.trace) == 200
    finally:
        live.close()


def test_the_traces_page_says_a_recording_is_followed(recording):
    from dashboard.pages.traces import trace_facts

    path, writer = recording
    registry = TraceRegistry([path], live_options={"clock": Clock(), "min_interval_s": 0.0})
    try:
        what, _duration, events = trace_facts(registry, registry.entry("t0"))
        assert what == "trnprof recording (simulated, recording, followed)" and "100" in events
        writer.close()
        registry.poll("t0")                          # the last read: complete
        deadline = time.monotonic() + 30
        while not registry.live_status("t0").complete and time.monotonic() < deadline:
            time.sleep(0.05)
        assert trace_facts(registry, registry.entry("t0"))[0] == "trnprof recording (simulated)"
    finally:
        registry.close()


def test_a_recording_this_process_opened_before_it_grew_is_followed_beside_that_trace(recording):
    path, writer = recording
    with pytest.warns(IncompleteTraceWarning):
        held = profiler.open(path)                 # (what `trnprof serve` or a notebook may have open)
    try:
        writer.append(ts.INSTRUCTION.name, rows(100, 300))
        writer.flush()
        live = LiveTrace(path, clock=Clock())      # the cache entry is stale and open here: read aside
        try:
            assert live.trace.db_path == generation_path(path, 0) and count(live.trace) == 300
            assert count(held) == 100
        finally:
            live.close()
        fresh = LiveTrace(path, clock=Clock())     # the cache entry answers when the files have not changed
        fresh.close()
    finally:
        held.close()


def test_polling_a_recording_with_no_event_yet_says_so_without_raising(tmp_path):
    path = tmp_path / "early.trace"
    writer = TraceWriter(path, background_flush=False)
    registry = TraceRegistry([path], live_options={"clock": Clock()})
    try:
        status = registry.poll("t0")
        assert status is not None and status.generation == 0 and "holds no events" in status.error
        assert not status.readable
        line, css = live_line(status)
        assert css == "live-recording" and text(line) == "● recording: no event written yet"
    finally:
        registry.close()
        writer.close(complete=False)


def test_changes_during_a_read_keep_the_recording_alive(recording):
    path, writer = recording
    clock = Clock()
    gate = threading.Event()

    def opener(p: Path, generation: int, progress=None):
        if generation:
            gate.wait(10)
        return profiler.live.open_generation(p, generation, progress)

    live = LiveTrace(path, opener=opener, clock=clock, min_interval_s=0.0)
    try:
        writer.append(ts.INSTRUCTION.name, rows(100, 120))
        writer.flush()
        reader = threading.Thread(target=live.refresh)
        reader.start()
        deadline = time.monotonic() + 10
        while not live.status().refreshing and time.monotonic() < deadline:
            time.sleep(0.01)
        clock.now += 100.0                       # a long read ...
        writer.append(ts.INSTRUCTION.name, rows(120, 130))
        writer.flush()
        assert not live.poll()                   # ... one read at a time, but the change is noted
        status = live.status()
        assert status.refreshing and status.idle_s == 0.0
        assert "stopped" not in text(live_line(status)[0])
        gate.set()
        reader.join(30)
        clock.now += 301.0                       # (3 x the 100 s read)
        assert live.poll() and live.refresh() and count(live.trace) == 130
    finally:
        gate.set()
        live.close()


def test_a_read_reports_its_progress(recording):
    path, writer = recording
    live = LiveTrace(path, clock=Clock(), min_interval_s=0.0)
    seen = []
    try:
        real = live._on_progress

        def spy(fraction: float) -> None:
            real(fraction)
            seen.append((fraction, live.status().progress))   # (what a poll sees meanwhile)

        live._on_progress = spy
        writer.append(ts.INSTRUCTION.name, rows(100, 5000))
        writer.flush()
        assert live.refresh()
        fractions = [f for f, _shown in seen]
        assert fractions and fractions == sorted(fractions) and fractions[0] >= 0 and fractions[-1] == 1.0
        assert any(f < profiler.live.READ_SHARE for f in fractions) and any(f > profiler.live.READ_SHARE
                                                                            for f in fractions)
        assert all(shown == f for f, shown in seen)
        assert live.status().progress is None          # no read under way
    finally:
        live.close()


def test_latest_reads_again_when_due(recording):
    path, writer = recording
    with following(path, min_interval_s=5.0) as (clock, live):
        first = live.latest()
        assert count(first) == 100 and live.latest() is first         # nothing new
        writer.append(ts.INSTRUCTION.name, rows(100, 150))
        writer.flush()
        assert live.latest() is first                                   # new rows, not due yet
        clock.now += 5.0
        assert count(live.latest()) == 150 and live.generation == 1


def test_a_recording_directory_removed_while_followed_keeps_the_last_trace(tmp_path):
    import shutil

    path = tmp_path / "gone.trace"
    writer = TraceWriter(path, background_flush=False)
    writer.append(ts.INSTRUCTION.name, rows(0, 40))
    writer.flush()
    clock = Clock()
    live = LiveTrace(path, clock=clock, min_interval_s=0.0)
    try:
        writer.close(complete=False)
        shutil.rmtree(path)                        # (deleted, or about to be replaced by another recording)
        clock.now += 1.0
        assert not live.poll()
        assert "cannot read the trace directory" in live.status().error
        assert count(live.trace) == 40             # what was read stays shown
    finally:
        live.close()


@pytest.mark.parametrize("generation", [0, 1])
def test_a_read_is_given_up_when_the_recording_ends_during_it(recording, monkeypatch, generation):
    """The last read of every row starts at once instead of after the read under way (docs/dashboard.md)."""
    path, writer = recording
    monkeypatch.setattr(profiler.live, "ENDED_CHECK_S", 0.0)
    clock = Clock()
    given_up = []

    def opener(p: Path, gen: int, progress=None):
        def ending(fraction: float) -> None:        # the recording ends while this read runs
            if gen == generation and not given_up and writer._closed is False:
                writer.close()
                given_up.append(gen)
            if progress is not None:
                progress(fraction)
        return profiler.live.open_generation(p, gen, ending)

    if generation == 1:
        live = LiveTrace(path, opener=opener, clock=clock, min_interval_s=100.0)
        writer.append(ts.INSTRUCTION.name, rows(100, 160))
        writer.flush()
        clock.now += 100.0
        assert live.refresh() is False              # given up: no error, no new generation
        status = live.status()
        assert given_up == [1] and status.error is None and not status.refreshing and live.generation == 0
        assert not list(path.parent.glob(".*.tmp")) and not generation_path(path, 1).exists()
        assert live.poll() and live.refresh()       # the last read at once, despite the 100 s spacing
        assert live.complete and count(live.trace) == 160
    else:
        live = LiveTrace(path, opener=opener, clock=clock)   # the first read: given up, then read whole
        assert given_up == [0] and live.complete and count(live.trace) == 100 and live.status().error is None
    live.close()
