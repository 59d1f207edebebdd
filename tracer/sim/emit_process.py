"""Trace emission in a child process, so building and compressing tables never competes for the GIL.

The parent (the simulation) hands each :class:`~tracer.sim.core.Chunk` — compact ``array`` columns — to the child
(:mod:`tracer.sim.emit_child`), which runs the :class:`~tracer.sim.emitter.Emitter` and owns the
:class:`~tracer.writer.TraceWriter`: the columns are copied into a shared-memory ring
(:mod:`tracer.sim.emit_ring`; through the pipe as raw buffers when the ring is full or missing), and a message
naming them, with the templates created since the previous chunk, goes through a pipe.  On a 2-core machine the
two run truly in parallel.  The parent never waits for the child and runs no thread of its own (a sender thread
would compete with the simulation for the GIL and for a core): the pipe is non-blocking, and what it cannot take
yet waits in :class:`FramedPipe`'s queue, pumped out whenever the core checks for a hand-over (every 256
instructions or loop segment).

The child is a fresh interpreter (``subprocess``), not a fork: a fork would share the simulation's memory
copy-on-write (measured: ~14,000 extra page faults, +3% system time on a 1.5 s recording) and inherit its
threads.  Start-up costs the simulation almost nothing: the parent checks and prepares the trace directory itself
(so a bad output path fails before any simulation), starts the child (:mod:`tracer.sim.emit_spawn`; or takes the
one ``trnprof record`` started before importing the simulator) and goes on simulating while the child imports its
modules on the other core; chunks wait in the queue meanwhile.  A failure in the child is
raised by the next :meth:`ProcessEmitter.submit` or by :meth:`ProcessEmitter.close`.

Crash behaviour: see :mod:`tracer.sim.emit_child` (a killed parent leaves a readable trace marked incomplete).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import marshal
import operator
import os
import select
import struct
import subprocess
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from tracer.errors import TraceFormatError, TrnprofError
from tracer.sim import emit_spawn
from tracer.sim.core import Core
from tracer.sim.records import CHUNK_COLUMNS, WIRE_FIELDS, Chunk, Template
from tracer.trace_dir import prepare_trace_directory

#: What a recording whose writer process died leaves (tracer.sim.runner removes a trace without events).
KEPT = ("the trace keeps the rows the writer had written (when it had written no instruction yet, the run leaves "
        "no trace)")

#: Seconds to wait for the writer process to finish writing once the simulation is done.
CLOSE_TIMEOUT_S = 900.0
#: Bytes queued for the child before the simulation waits for it: room for the child's start-up (~0.3 s of
#: imports while the simulation hands over ~30 MB/s) and for bursts; bounds memory.
MAX_BACKLOG_BYTES = 256 << 20
#: After the pipe was found full, seconds before :meth:`ProcessEmitter.pump` tries again (the child needs about a
#: millisecond to take in a full 1 MiB pipe; trying at every hand-off check would cost more than it moves).
PUMP_RETRY_S = 0.0005


_WIRE_GET = operator.attrgetter(*WIRE_FIELDS)

#: Writer processes that said "done" and are exiting (freeing their memory takes ~10 ms): nobody waits for them;
#: they are reaped when the next writer starts and at interpreter exit.
_EXITING: list[subprocess.Popen[bytes]] = []


def _reap(*, wait: bool = False) -> None:
    """Reap finished writer processes (``wait``: every one, waiting for those still exiting)."""
    for proc in list(_EXITING):
        if wait:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        if proc.poll() is not None:
            with contextlib.suppress(ValueError):  # (its reaper thread may have removed it meanwhile)
                _EXITING.remove(proc)


atexit.register(_reap, wait=True)


def _reap_when_exited(proc: subprocess.Popen[bytes]) -> None:
    """Reap ``proc`` once it has exited, on a daemon thread blocked in ``waitpid`` (no Python runs meanwhile), so a
    process that goes on after its recording (``record --serve`` serving the dashboard) keeps no zombie."""
    def wait() -> None:
        with contextlib.suppress(Exception):
            proc.wait()
        with contextlib.suppress(ValueError):
            _EXITING.remove(proc)

    threading.Thread(target=wait, name="trnprof-writer-reaper", daemon=True).start()


def encode_template(tpl: Template) -> tuple[Any, ...]:
    """The fields of a template the writer process's emitter needs, as a plain tuple (cheap to pickle: no named
    tuples)."""
    plan = tpl.dma
    dma = None if plan is None else (plan.rows, plan.chunk_bytes, plan.group, plan.prefix, plan.queue_type,
                                     plan.src_mem, plan.dst_mem, plan.variable,
                                     None if plan.hbm is None else tuple(plan.hbm), plan.rate_factor)
    return (*_WIRE_GET(tpl), dma)


def split_chunk(chunk: Chunk) -> tuple[list[Any], tuple[Any, ...]]:
    """A chunk as it travels: the buffers to send (its array columns in :data:`~tracer.sim.records.CHUNK_COLUMNS`
    order, then the segments' producers, marshalled per segment by the fast path (``Chunk.s_leaf``), as one
    marshalled list), and its :meth:`~tracer.sim.records.Chunk.header`, which is pickled."""
    buffers: list[Any] = [getattr(chunk, name) for name, _typecode in CHUNK_COLUMNS]
    buffers.append(marshal.dumps(chunk.s_leaf, 2))
    return buffers, chunk.header()


class FramedPipe:
    """The write end of the pipe to the child, written without blocking: messages in
    :class:`multiprocessing.connection.Connection` framing (a 4-byte big-endian length, then the bytes) wait in a
    queue until the pipe takes them.

    Args:
        fd: the pipe's write end (set non-blocking here; closed by :meth:`close`).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self._queue: collections.deque[memoryview] = collections.deque()
        #: Bytes queued and not yet written.
        self.backlog = 0

    def put(self, obj: Any) -> None:
        """Queue ``obj``, pickled (the child reads it with ``Connection.recv``)."""
        self.put_bytes(ForkingPickler.dumps(obj))

    def put_bytes(self, buf: Any) -> None:
        """Queue the raw bytes of ``buf`` (the child reads them with ``Connection.recv_bytes``); the buffer must
        not change until written."""
        view = memoryview(buf).cast("B")
        if view.nbytes > 0x7FFFFFFF:
            raise TraceFormatError(f"a trace chunk column of {view.nbytes} bytes is too large for the writer pipe")
        self._queue.append(memoryview(struct.pack("!i", view.nbytes)))
        self._queue.append(view)
        self.backlog += view.nbytes + 4

    def write(self, *, block: bool) -> None:
        """Write what the pipe takes now (``block``: everything, waiting for the child to read)."""
        queue, fd = self._queue, self.fd
        while queue:
            head = queue[0]
            try:
                n = os.write(fd, head)
            except BlockingIOError:
                if not block:
                    return
                select.select([], [fd], [])
                continue
            self.backlog -= n
            if n == len(head):
                queue.popleft()
            else:
                queue[0] = head[n:]

    def close(self) -> None:
        """Close the write end (the child sees the end of its input)."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


class ProcessEmitter:
    """Emits a recording's trace from a child process (same interface as :class:`Emitter`).

    Args:
        core: the simulated core whose chunks will be submitted.
        path: trace directory (created by the child's TraceWriter).
        overwrite: replace an existing trace.
        metadata: Metadata fields.

    Raises:
        TrnprofError: the trace directory cannot be prepared (raised here, before any simulation); a failure of
            the child to create its writer is raised by the next :meth:`submit` or :meth:`close`.
    """

    def __init__(self, core: Core, path: str | os.PathLike[str], *, overwrite: bool,
                 metadata: dict[str, Any], sources: list[dict[str, Any]] | None = None) -> None:
        self.core = core
        self.path = Path(path)
        prepare_trace_directory(self.path, overwrite=overwrite)
        _reap()
        spawned = emit_spawn.take()  # one started ahead of the recording (trnprof record), else a new one
        if spawned is None:
            try:
                spawned = emit_spawn.spawn()
            except OSError as exc:
                raise TraceFormatError(f"{self.path}: cannot start the trace writer process ({exc.strerror}); "
                                       "rerun with TRNPROF_EMIT=thread to write the trace from a thread "
                                       "instead") from None
        self._proc = spawned.proc
        #: The shared-memory ring the columns travel in (None: through the pipe).
        self._ring = spawned.ring
        self._pipe = FramedPipe(spawned.to_child)
        self._conn = Connection(spawned.from_child, writable=False)
        self._sent_templates = 0
        self._sent_variants = 0
        self._sent_names = 0
        self._closed = False
        self._retry_at = 0.0
        self._pipe.put(("setup", str(self.path), overwrite, metadata, core.cm, sources or []))
        self._flush(block=False)

    def _receive(self, timeout: float | None = None) -> tuple[Any, ...]:
        """The child's next answer (``("done",)``), taking the ring acknowledgements before it; raises what the
        child reported, or that it died or did not answer within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is not None and not self._conn.poll(max(0.0, deadline - time.monotonic())):
                self._proc.kill()
                self._wait()
                raise TraceFormatError(f"{self.path}: the trace writer process did not answer within "
                                       f"{timeout:.0f} s; rerun with TRNPROF_EMIT=thread to write the trace from a "
                                       "thread instead")
            msg = self._recv()
            if not self._take(msg):
                return msg

    def _recv(self) -> tuple[Any, ...]:
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            self._wait()
            raise TraceFormatError(f"{self.path}: the trace writer process died (exit code "
                                   f"{self._proc.returncode}); {KEPT}") from None

    def _take(self, msg: tuple[Any, ...]) -> bool:
        """Act on a message from the child: an acknowledgement frees ring space (True); an error is raised."""
        if msg[0] == "ack":
            if self._ring is not None:
                self._ring.release(msg[1])
            return True
        if msg[0] == "error":
            self._wait()
            exc = msg[1]
            if isinstance(exc, TrnprofError):
                raise exc
            raise TraceFormatError(f"{self.path}: writing the trace failed: {type(exc).__name__}: {exc}")
        return False

    def _take_acks(self) -> None:
        """Take the acknowledgements the child has sent (it sends one per chunk read from the ring)."""
        fd = self._conn.fileno()
        while select.select([fd], [], [], 0)[0]:  # Connection.poll builds a selector each time (~80 us)
            self._take(self._recv())

    def submit(self, chunk: Chunk) -> None:
        """Send ``chunk`` (and the templates it introduces) to the child without waiting for it: what the pipe
        cannot take now stays queued and goes out at the next hand-over; the simulation only waits when more than
        :data:`MAX_BACKLOG_BYTES` are queued."""
        if self._proc.poll() is not None:  # the child only ends early after reporting an error (or when killed)
            self._raise_child_error()
        new = [encode_template(t) for t in self.core.templates[self._sent_templates:chunk.n_templates]]
        self._sent_templates = max(self._sent_templates, chunk.n_templates)
        variants = [(v.uid, v.emit_table) for v in self.core.variants[self._sent_variants:chunk.n_variants]]
        self._sent_variants = max(self._sent_variants, chunk.n_variants)
        names = self.core.names[self._sent_names:chunk.n_names]
        self._sent_names = max(self._sent_names, chunk.n_names)
        # the buffers go into the ring, or when it has no room through the pipe straight from their arrays; the rest
        # is pickled
        buffers, header = split_chunk(chunk)
        spans = None
        if self._ring is not None:
            self._take_acks()
            spans = self._ring.put(buffers)
        self._pipe.put(("chunk", new, variants, names, header, spans))
        if spans is None:
            for buf in buffers:
                self._pipe.put_bytes(buf)
        self._flush(block=self._pipe.backlog > MAX_BACKLOG_BYTES)

    def pump(self) -> None:
        """Write more of the queued data if the pipe has room (called often by the core: cheap when idle, and
        after finding the pipe full it waits :data:`PUMP_RETRY_S` before trying again)."""
        if self._pipe.backlog and time.monotonic() >= self._retry_at:
            self._flush(block=False)
            if self._pipe.backlog:
                self._retry_at = time.monotonic() + PUMP_RETRY_S

    def _flush(self, *, block: bool) -> None:
        """Write queued messages to the child; a closed pipe means the child died."""
        try:
            self._pipe.write(block=block)
        except (BrokenPipeError, OSError):
            self._raise_child_error()

    def _raise_child_error(self) -> None:
        """Raise what the child reported, or that it died."""
        self._take_acks()  # raises the child's error, if it sent one
        self._wait()
        raise TraceFormatError(f"{self.path}: the trace writer process died (exit code {self._proc.returncode}); "
                               f"{KEPT}")

    def _wait(self, timeout: float = 5.0) -> None:
        """Reap the child (killing it when it does not exit within ``timeout`` seconds)."""
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def close(self, complete: bool = True, sources: list[dict[str, Any]] | None = None,
              metadata: dict[str, Any] | None = None) -> None:
        """Let the child write everything and close the trace (``complete=False`` marks it interrupted), with
        ``sources``' ``SourceFile`` rows and ``metadata``'s Metadata fields."""
        if self._closed:
            return
        self._closed = True
        done = False
        try:
            self._pipe.put(("close", complete, sources or [], metadata or {}))
            self._flush(block=True)
            self._receive(timeout=CLOSE_TIMEOUT_S)
            done = True
        finally:
            self._pipe.close()
            self._conn.close()
            if self._ring is not None:
                self._ring.close()
            if done:  # every file is closed: let it exit on its own time, reaped by a thread that waits for it
                _EXITING.append(self._proc)
                _reap_when_exited(self._proc)
            else:
                self._wait(timeout=30)
