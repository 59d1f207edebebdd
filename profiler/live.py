"""Following a recording while it runs: a trace directory re-ingested as its writer flushes more rows.

``trnprof record`` flushes its trace at least once a second (:mod:`tracer.writer`), and the trace's Metadata says
``recording_complete = false`` until the writer closes it.  :class:`LiveTrace` holds the latest :class:`Trace` of
such a directory and makes a new one when the files have grown: :meth:`LiveTrace.poll` looks at the directory
(file names, sizes and modification times: no file is read) and says whether a refresh is due;
:meth:`LiveTrace.refresh` ingests the directory again into a database file of its own (:func:`open_generation`: a
reader of the old one is not disturbed) and swaps the new ``Trace`` in.  The swap is one attribute assignment, so a
reader holds either trace, never a mixture; each swap increments :attr:`LiveTrace.generation`.

A refresh re-ingests the whole trace, which costs time in proportion to its size, so refreshes are spaced: the next
may start :data:`BACKOFF` times the last one's duration after it ended, and never sooner than
:data:`MIN_INTERVAL_S` (a follower then spends at most about a quarter of one CPU on ingesting, however large the
recording grows).  Once the Metadata says the recording is complete, one last refresh reads every row at once (no
spacing: there is no recording left to share the machine with; a read under way is given up at its next step,
:class:`Superseded`) and the trace stops changing.  A recording that
stopped without completing (killed) stays incomplete: :attr:`LiveStatus.idle_s` says how long its files have not
changed.

The warnings an incomplete trace gives on every ingest (the recording is not complete, a table's last batch is
still being written) are expected here and are not printed.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from profiler.db import ingest_warnings
from profiler.db.cache import cache_key, cache_path, stored_cache_key
from profiler.errors import QueryError
from profiler.leftovers import remove_left_by_dead
from profiler.sources import open_source
from tracer import schema as ts
from tracer.errors import TraceFormatError, TrnprofError
from tracer.reader import TraceReader

#: A refresh never starts sooner than this many seconds after the previous one ended.
MIN_INTERVAL_S = 2.0
#: ... nor sooner than this many times the previous refresh's duration after it ended.
BACKOFF = 3.0

#: A replaced trace is closed this many seconds after the swap (requests that began on it finish first).
RETIRE_S = 60.0
#: Generation files are named ``<trace>.trnprof.live-<pid>-<generation>.duckdb`` (beside the cache entry).
LIVE_INFIX = ".live-"

#: What :func:`input_signature` returns: (file name, size, mtime in ns) of every file, sorted.
Signature = tuple[tuple[str, int, int], ...]


def input_signature(path: str | os.PathLike[str]) -> Signature:
    """The names, sizes and modification times of the files of trace directory ``path`` (nothing is read); a
    writer appending rows changes it."""
    found = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name.endswith(ts.TABLE_FILE_SUFFIX) and entry.is_file():
                    st = entry.stat()
                    found.append((entry.name, st.st_size, st.st_mtime_ns))
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read the trace directory ({exc.strerror or exc})") from None
    return tuple(sorted(found))


def is_recording(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a trnprof trace directory whose recording has not completed (still running, or
    stopped without finishing); False for anything else (a complete trace, a database, another format)."""
    p = Path(path)
    return p.is_dir() and (p / ts.METADATA.file_name).exists() and _recording_complete(p) is False


class NothingToShowYet(TraceFormatError):
    """A followed recording has no trace yet: no read has succeeded (it has not written any event yet)."""


@dataclass(frozen=True)
class LiveStatus:
    """Where a followed recording stands (:meth:`LiveTrace.status`)."""

    #: Increments each time a new trace is swapped in (0: the one opened first).
    generation: int
    #: The recording has completed and its every row is in the current trace.
    complete: bool
    #: A refresh is running.
    refreshing: bool
    #: Instructions and DMA packets in the current trace.
    instructions: int
    dma_packets: int
    #: First start and last end of the current trace's events (ns).
    time_range: tuple[int, int]
    #: Seconds since the current trace was swapped in, and since the directory's files last changed.
    age_s: float
    idle_s: float
    #: How long the last refresh took (s), None before the first.
    last_refresh_s: float | None
    #: The last refresh's error (one line), if it failed; the previous trace stays in use.
    error: str | None
    #: A read has succeeded: there is a trace to show (False: the recording has written no event yet).
    readable: bool = True
    #: How far the read under way has got (0-1), when one is.
    progress: float | None = None


class LiveTrace:
    """The latest :class:`~profiler.trace.Trace` of a trace directory that is still being recorded (see the module
    docstring).

    Args:
        path: the trace directory.
        opener: ``opener(path, generation, progress)`` opens the trace as its files are now, reporting how far it
            has got to ``progress(fraction)`` (default :func:`open_generation`).
        clock: monotonic seconds (tests pass their own).
        min_interval_s, backoff: refresh spacing (:data:`MIN_INTERVAL_S`, :data:`BACKOFF`).
        retire_s: a replaced trace is closed this many seconds after it was replaced (requests that began on it
            finish first; one still running then gets a one-line "the trace was closed" error).
    """

    def __init__(self, path: str | os.PathLike[str], *,
                 opener: Callable[[Path, int, Callable[[float], None]], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic, min_interval_s: float = MIN_INTERVAL_S,
                 backoff: float = BACKOFF, retire_s: float = RETIRE_S) -> None:
        if not isinstance(path, str | os.PathLike) or not str(path):
            raise QueryError(f"LiveTrace needs a trace directory path (str or pathlib.Path), not {str(path)[:60]!r}")
        self.path = Path(path)
        self._opener = opener if opener is not None else open_generation
        self._clock = clock
        for name, value in (("min_interval_s", min_interval_s), ("backoff", backoff), ("retire_s", retire_s)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < math.inf:
                raise QueryError(f"{name} must be a number of seconds, 0 or more, not {str(value)[:40]!r}")
        self.min_interval_s = float(min_interval_s)
        self.backoff = float(backoff)
        self.retire_s = float(retire_s)
        self._lock = threading.Lock()        # guards the fields below; never held while ingesting
        self._refresh_lock = threading.Lock()  # one refresh at a time
        self.generation = 0
        self._refreshing = False
        self._error: str | None = None
        self._last_refresh_s: float | None = None
        self._retired: list[tuple[float, Any]] = []
        self._closed = False
        self._progress: float | None = None
        if opener is None:
            remove_stale_generations(self.path)
        self._seen_signature = input_signature(self.path)
        self._changed_at = started = clock()
        self._trace: Any = None
        self._signature: Signature = ()
        self._complete = False
        self._facts: tuple[int, int, tuple[int, int]] = (0, 0, (0, 0))
        try:
            try:
                self._trace, self._signature, self._complete = self._ingest(0)
            except Superseded:   # the recording ended while read: read it whole (it cannot end twice)
                self._trace, self._signature, self._complete = self._ingest(0)
            self._facts = _facts(self._trace)
            if self._complete and self._opener is open_generation:  # ended before the first read: as a refresh
                keep_as_cache_entry(self._trace)
        except TrnprofError as exc:
            # Nothing readable yet (a recording that has not issued an instruction holds no events): no trace
            # until a later read succeeds; a recording that has ended will not change, so it is not read again.
            self._error = _one_line(exc)
            self._complete = not is_recording(self.path)
        self._swapped_at = clock()
        self._schedule(started)

    @property
    def trace(self) -> Any:
        """The current trace (the latest ingested); :class:`NothingToShowYet` while there is none (no read has
        succeeded: a recording that has not written any event yet)."""
        trace = self._trace
        if trace is None:
            why = self._error or "nothing has been read yet"
            raise NothingToShowYet(f"{self.path}: no events to show yet ({why}); the page draws them once the "
                                   "recording has written some")
        return trace

    @property
    def complete(self) -> bool:
        """True once the recording completed and the current trace holds all of it."""
        return self._complete

    def _ingest(self, generation: int) -> tuple[Any, Signature, bool]:
        """A new trace of the directory as it is now: (trace, the files' signature before reading them, whether
        the recording had completed before reading them)."""
        signature = input_signature(self.path)
        complete = not is_recording(self.path)   # read first: rows flushed before completion are all in
        with ingest_warnings.collecting(quiet=True):
            trace = self._opener(self.path, generation, self._on_progress)
        return trace, signature, complete

    def latest(self) -> Any:
        """The newest trace: read again first when a read is due (:meth:`poll`), in this thread.  What a notebook
        calls before drawing: ``live.latest().timeline()``."""
        if self.poll():
            self.refresh()
        return self.trace

    def _on_progress(self, fraction: float) -> None:
        self._progress = fraction

    def poll(self) -> bool:
        """True when a refresh is due: the recording is not complete in the current trace, its files changed since
        it was read, and the spacing since the last refresh has passed.  Reads only the directory listing; closes
        the replaced traces whose time is up."""
        self._close_retired()
        with self._lock:
            if self._complete:
                return False
            now = self._clock()
            try:
                signature = input_signature(self.path)
            except TraceFormatError as exc:
                self._error = str(exc)
                return False
            if signature != self._seen_signature:   # (noted during a read too: the recording is still alive)
                self._seen_signature = signature
                self._changed_at = now
            if self._refreshing or signature == self._signature:
                return False
            if now >= self._next_at:
                return True
            # the recording has ended (its Metadata rewritten, and it says so): its last read waits for nothing
            return _metadata_entry(signature) != _metadata_entry(self._signature) and _ended(self.path)

    def refresh(self) -> bool:
        """Ingest the directory again and swap the new trace in when its files changed; True when a new trace was
        swapped in.  A failure keeps the current trace, is reported by :meth:`status` and raised."""
        with self._refresh_lock:
            if self._complete or input_signature(self.path) == self._signature:
                return False
            with self._lock:
                self._refreshing = True
                self._progress = 0.0
            started = self._clock()
            try:
                trace, signature, complete = self._ingest(self.generation + 1)
                facts = _facts(trace)
            except Superseded:   # the recording ended: no error, and the last read is due at once
                with self._lock:
                    self._refreshing = False
                    self._last_refresh_s = self._clock() - started
                    self._next_at = self._clock()
                return False
            except Exception as exc:   # (any failure: the next poll may try again)
                with self._lock:
                    self._error = _one_line(exc)
                    self._refreshing = False
                    self._schedule(started)
                raise
            with self._lock:
                if self._closed:   # closed while reading: the new trace is nobody's
                    self._refreshing = False
                    close_generation(trace)
                    return False
                old = self._trace
                self._trace, self._signature, self._complete = trace, signature, complete
                self._facts = facts
                self.generation += 1
                self._error = None
                self._refreshing = False
                self._swapped_at = self._clock()
                if old is not None:
                    self._retired.append((self._swapped_at, old))
                self._schedule(started)
            if complete and self._opener is open_generation:
                keep_as_cache_entry(trace)
            return True

    def _schedule(self, started: float) -> None:
        ended = self._clock()
        self._last_refresh_s = ended - started
        self._next_at = ended + max(self.min_interval_s, self.backoff * self._last_refresh_s)

    def _close_retired(self, *, everything: bool = False) -> None:
        with self._lock:
            now = self._clock()
            due = [t for at, t in self._retired if everything or now - at >= self.retire_s]
            self._retired = [(at, t) for at, t in self._retired if not (everything or now - at >= self.retire_s)]
        for trace in due:
            close_generation(trace)

    def status(self) -> LiveStatus:
        """Where the recording stands (no file is read)."""
        with self._lock:
            now = self._clock()
            instructions, packets, t_range = self._facts
            return LiveStatus(self.generation, self._complete, self._refreshing, instructions, packets, t_range,
                              now - self._swapped_at, now - self._changed_at, self._last_refresh_s, self._error,
                              self._trace is not None, self._progress if self._refreshing else None)

    def close(self) -> None:
        """Close the current trace and every replaced one (and remove their generation files); a read under way
        then drops what it reads."""
        with self._lock:
            self._closed = True
        self._close_retired(everything=True)
        if self._trace is not None:
            close_generation(self._trace)


def generation_path(path: Path, generation: int) -> Path:
    """The database file of generation ``generation`` of a followed trace directory, beside its ingest cache entry
    and named by this process (``<trace>.trnprof.live-<pid>-<generation>.duckdb``)."""
    entry = cache_path(path)
    return entry.with_name(f"{_stem(entry)}{os.getpid()}-{generation}.duckdb")


#: The share of a read's time its phases take (reading the files, then building the index), to report its progress.
READ_SHARE = 0.55
#: A read of a running recording looks this often (s) whether the recording has ended (then it gives up).
ENDED_CHECK_S = 0.5


class Superseded(TrnprofError):
    """A read of a running recording given up because the recording ended meanwhile (its last read follows)."""


def open_generation(path: Path, generation: int, progress: Callable[[float], None] | None = None) -> Any:
    """The trace of ``path`` as its files are now: the ingest cache entry when it answers for them (generation 0 of
    a recording that has not changed since it was last ingested: no cost), else ingested into the generation's own
    file (:func:`generation_path`; the cache entry is never replaced while followed: DuckDB cannot open a file
    replaced under a connection this process still has), with one DuckDB thread while the recording runs (beside
    it) and every core once it has ended."""
    from profiler.db.ingest import ingest
    from profiler.trace import Trace
    from profiler.trace import open as open_trace

    source = open_source(path)
    key = cache_key(source)
    if generation == 0 and stored_cache_key(cache_path(path)) == key:
        return open_trace(path)   # the cache entry answers for the files as they are: no ingest
    running = is_recording(path)
    threads = 1 if running else None   # once the recording has ended, every core reads its last rows
    looked = [time.monotonic()]

    def phase(name: str, done: int, total: int) -> None:
        if progress is not None and total > 0:
            share = min(1.0, done / total)
            progress(READ_SHARE * share if name == "read" else READ_SHARE + (1 - READ_SHARE) * share)
        # a read of a running recording is given up when the recording ends meanwhile: the last read, of every
        # row with every core, starts at once instead (ingest reports each table read and each track indexed)
        now = time.monotonic()
        if running and now - looked[0] >= ENDED_CHECK_S:
            looked[0] = now
            if _ended(path):
                raise Superseded(f"{path}: the recording ended during this read")

    db = ingest(source, generation_path(path, generation), cache_key=key, threads=threads, progress=phase)
    return Trace(path, db)


def close_generation(trace: Any) -> None:
    """Close a followed trace's database, and remove it when it is a generation file."""
    close = getattr(trace, "close", None)
    if callable(close):
        close()
    db = getattr(trace, "db_path", None)
    if isinstance(db, Path) and LIVE_INFIX in db.name:
        with contextlib.suppress(OSError):
            db.unlink()


def keep_as_cache_entry(trace: Any) -> None:
    """Make a completed recording's last generation its ingest cache entry too (a hard link: the next ``trnprof
    serve`` of the trace opens it without ingesting again).  Best effort: where links are not possible the next
    open ingests once."""
    db = getattr(trace, "db_path", None)
    if not isinstance(db, Path):
        return
    entry = cache_path(trace.path)
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.link")
    try:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        os.link(db, tmp)
        os.replace(tmp, entry)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def remove_stale_generations(path: Path) -> None:
    """Remove the generation files that processes no longer running left beside ``path``'s cache entry."""
    entry = cache_path(path)
    stem = _stem(entry)

    def pid_of(name: str) -> int | None:
        # a generation's database, or what an ingest into one left when its process died (".<name>.<pid>.*.tmp",
        # and the ".spill" directory beside it)
        base = name[1:] if name.startswith(".") else name
        if not base.startswith(stem):
            return None
        pid = base[len(stem):].split("-")[0]
        return int(pid) if pid.isdigit() else None

    remove_left_by_dead(entry.parent, pid_of)


def _stem(entry: Path) -> str:
    """``<trace>.trnprof.live-`` for cache entry ``<trace>.trnprof.duckdb``."""
    return entry.name[: -len(".duckdb")] + LIVE_INFIX


def _recording_complete(path: Path) -> bool | None:
    """What the trace's Metadata says of its recording (None when it cannot be read)."""
    try:
        return TraceReader(path).recording_complete
    except TrnprofError:
        return None


def _ended(path: Path) -> bool:
    """True when the trace's Metadata is readable and says the recording completed."""
    return _recording_complete(path) is True


def _metadata_entry(signature: Signature) -> tuple[str, int, int] | None:
    return next((e for e in signature if e[0] == ts.METADATA.file_name), None)


def _one_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _facts(trace: Any) -> tuple[int, int, tuple[int, int]]:
    """(instructions, DMA packets, time range) of a trace, from its overview and track table (no scan of the
    events).  The time range is the instructions' and DMA packets' when it has any: the simulation's progress (a
    recording's cheaper rows -- spans, counters -- reach the files ahead of its instructions, which the writer
    builds last), else every track's."""
    overview = trace.overview()
    events = overview.get("events") or {}
    engines = trace.tracks().filter(pc.is_in(pc.field("table_name"), pa.array([ts.INSTRUCTION.name,
                                                                                 ts.DMA_PACKET.name])))
    if engines.num_rows:
        t_range = (int(pc.min(engines["start_ts"]).as_py()), int(pc.max(engines["end_ts"]).as_py()))
    else:
        t_range = tuple(int(x) for x in trace.time_range)  # type: ignore[assignment]
    return (int(events.get(ts.INSTRUCTION.name, 0) or 0), int(events.get(ts.DMA_PACKET.name, 0) or 0), t_range)


__all__ = ["BACKOFF", "ENDED_CHECK_S", "MIN_INTERVAL_S", "READ_SHARE", "RETIRE_S", "LiveStatus", "LiveTrace",
           "NothingToShowYet", "Superseded",
           "close_generation", "generation_path", "input_signature", "is_recording", "keep_as_cache_entry",
           "open_generation", "remove_stale_generations"]
