"""One open trace database shared by threads: a cursor per thread, a helper thread, and closing it safely.

:class:`CursorPool` is what makes a :class:`profiler.trace.Trace` usable from several threads at once.

- **A cursor per thread.** Every thread gets its own DuckDB cursor of the one read-only, locked-down instance
  (:mod:`profiler.db.connection`).  A cursor is closed once its thread has ended, whatever started the thread (the
  ``threading`` module, ``_thread``, C code): the thread's own thread-local slot holds the only strong reference to
  a marker object, which dies with the thread.  So a server running each request on a new thread keeps as many
  cursors as it has live threads.
- **A scratch cursor per user query** (:meth:`CursorPool.scratch_cursor`): what a query leaves in its connection
  dies with it.
- **A helper thread** (:meth:`CursorPool.submit`) runs one part of a query beside another (a window reads the
  index and the raw events at once).
- **Calls and closing.** Public calls run inside :meth:`CursorPool.call`.  :meth:`CursorPool.close` refuses new calls,
  interrupts the running queries, waits (up to :data:`CLOSE_WAIT_S`) for the calls under way to end, then closes
  every cursor, the helper thread and the database.  A call cut short by a close gets a
  :class:`~profiler.errors.QueryError` saying so, never a raw DuckDB error.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import duckdb

from profiler.db.connection import close_database
from profiler.errors import QueryError

T = TypeVar("T")

#: Seconds :meth:`CursorPool.close` waits for calls under way to end once their queries are interrupted (a call
#: blocked outside DuckDB, in a caller's callback, is not waited for longer: its cursor is then closed under it).
CLOSE_WAIT_S = 10.0


class _Owner:
    """Held only by its thread's thread-local slot: a weak reference to it dies when the thread ends."""

    __slots__ = ("__weakref__",)


class CursorPool:
    """The connection ``con`` to database ``db_path`` and the cursors handed out of it (see the module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, db_path: Path) -> None:
        self.db_path = db_path
        self._con: duckdb.DuckDBPyConnection | None = con
        self._local = threading.local()
        #: Every cursor handed out, with its thread's marker (cursors of ended threads are closed and dropped).
        self._cursors: list[tuple[weakref.ref[_Owner], duckdb.DuckDBPyConnection]] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._calls = 0
        self._closing = False
        self._worker: ThreadPoolExecutor | None = None

    def _closed_error(self, detail: str = "the trace is closed") -> QueryError:
        exc = QueryError(f"{self.db_path}: {detail}")
        exc.trace_closed = True  # type: ignore[attr-defined]
        return exc

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor; QueryError once the pool is closing or closed."""
        if self._closing:
            raise self._closed_error()
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            owner = _Owner()
            with self._lock:
                if self._closing or self._con is None:
                    raise self._closed_error()
                self._drop_ended_cursors()
                cur = self._con.cursor()
                self._cursors.append((weakref.ref(owner), cur))
            self._local.owner = owner
            self._local.cursor = cur
        return cur

    @contextlib.contextmanager
    def scratch_cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of its own for one user query, closed after it: whatever the query leaves in its connection
        (temporary objects, session state) goes with it and never reaches trnprof's own queries or another
        caller's.  :meth:`close` interrupts it like the others."""
        owner = _Owner()  # alive for the block: the cursor is not taken for an ended thread's meanwhile
        with self._lock:
            if self._closing or self._con is None:
                raise self._closed_error()
            cur = self._con.cursor()
            self._cursors.append((weakref.ref(owner), cur))
        try:
            yield cur
        finally:
            with self._lock:
                self._cursors = [(ref, c) for ref, c in self._cursors if c is not cur]
            with contextlib.suppress(duckdb.Error):
                cur.close()

    def _drop_ended_cursors(self) -> None:
        """Close the cursors of threads that have ended (called with the lock held, before adding one)."""
        live = []
        for ref, cur in self._cursors:
            if ref() is not None:
                live.append((ref, cur))
            else:
                with contextlib.suppress(duckdb.Error):
                    cur.close()
        self._cursors = live

    def cursor_count(self) -> int:
        """Cursors open now (those of ended threads are closed when the next thread asks for one)."""
        with self._lock:
            return len(self._cursors)

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Run a public call: refused (QueryError) once closing; a DuckDB or query error it meets because the pool
        was closed meanwhile becomes QueryError("... closed while this call ran")."""
        with self._lock:
            if self._closing or self._con is None:
                raise self._closed_error()
            self._calls += 1
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            yield
        except (duckdb.Error, QueryError) as exc:
            if self._closing and not getattr(exc, "trace_closed", False):
                raise self._closed_error("the trace was closed while this call ran") from None
            raise
        finally:
            self._local.depth = depth
            with self._lock:
                self._calls -= 1
                if not self._calls:
                    self._idle.notify_all()

    def submit(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> Future[T]:
        """Run ``fn(cursor)`` on the helper thread, with that thread's own cursor."""
        with self._lock:
            if self._closing or self._con is None:
                raise self._closed_error()
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trnprof-query")
            worker = self._worker
        return worker.submit(lambda: fn(self.cursor()))

    def close(self) -> None:
        """Refuse new calls, interrupt running queries, wait for calls under way, close everything (idempotent;
        from any thread, also from inside a call)."""
        with self._lock:
            if self._con is None:
                return
            self._closing = True
            cursors = [cur for _ref, cur in self._cursors]
        for cur in cursors:
            with contextlib.suppress(duckdb.Error):
                cur.interrupt()
        own = getattr(self._local, "depth", 0)  # a close from inside a call does not wait for itself
        with self._lock:
            self._idle.wait_for(lambda: self._calls <= own, timeout=CLOSE_WAIT_S)
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            if self._con is None:  # another thread's close finished meanwhile
                return
            cursors = [cur for _ref, cur in self._cursors]
            self._cursors.clear()
            con, self._con = self._con, None
        _close_when_idle(cursors, con)


def _close_when_idle(cursors: list[duckdb.DuckDBPyConnection], con: duckdb.DuckDBPyConnection) -> None:
    """Close ``cursors``, then ``con``.  A cursor still running a query started outside :meth:`CursorPool.call` (a
    relation fetched after its call returned) refuses to close while busy: it is interrupted again and closing is
    retried until :data:`CLOSE_WAIT_S` has passed, after which what is left is closed by the garbage collector."""
    deadline = time.monotonic() + CLOSE_WAIT_S
    left = [*cursors, con]
    while left:
        busy = []
        for obj in left:
            try:
                obj.close() if obj is not con else close_database(con)
            except duckdb.Error:
                busy.append(obj)
                with contextlib.suppress(duckdb.Error):
                    obj.interrupt()
        if not busy or time.monotonic() >= deadline:
            return
        left = busy
        time.sleep(0.02)


__all__ = ["CLOSE_WAIT_S", "CursorPool"]
