"""Trace emission in a child process, so building and compressing tables never competes for the GIL.

The parent (the simulation) queues each :class:`~tracer.sim.core.Chunk` — compact ``array`` columns — and the
templates created since the previous chunk; a sender thread pickles them into a pipe to the child
(:mod:`tracer.sim.emit_child`), which runs the :class:`~tracer.sim.emitter.Emitter` and owns the
:class:`~tracer.writer.TraceWriter`.  On a 2-core machine the two run truly in parallel.

The child is a fresh interpreter (``subprocess``), not a fork: a fork would share the simulation's memory
copy-on-write (measured: ~14,000 extra page faults, +3% system time on a 1.5 s recording) and inherit its
threads.  Start-up costs the simulation almost nothing: the parent checks and prepares the trace directory itself
(so a bad output path fails before any simulation), starts the child and goes on simulating while the child
imports its modules on the other core; chunks wait in a bounded queue meanwhile.  A failure in the child is
raised by the next :meth:`ProcessEmitter.submit` or by :meth:`ProcessEmitter.close`.

Crash behaviour: see :mod:`tracer.sim.emit_child` (a killed parent leaves a readable trace marked incomplete).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import queue
import subprocess
import sys
import threading
from array import array
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import tracer
from tracer.errors import TraceFormatError, TrnprofError
from tracer.sim.core import Core
from tracer.sim.emit_child import WIRE_FIELDS
from tracer.sim.records import Chunk, Template
from tracer.writer import prepare_trace_directory

#: Seconds to wait for the writer process to finish writing once the simulation is done.
CLOSE_TIMEOUT_S = 900.0
#: Chunks queued for the sender thread before the simulation waits: enough for the child's start-up (~0.4 s of
#: imports while the simulation hands over a chunk every 20-100 ms); bounds memory (a chunk is ~0.5-3 MB).
MAX_PENDING = 32


#: The child's command line program (``-m tracer.sim.emit_child`` would import the module twice).
_CHILD_MAIN = "import sys; from tracer.sim.emit_child import main; sys.exit(main(sys.argv[1:]))"


def process_available() -> bool:
    """True where the writer can run in a child process (POSIX: it is handed pipe file descriptors)."""
    return os.name == "posix"


def _widen_pipe(fd: int) -> None:
    """Give the pipe a 1 MiB buffer where Linux allows it (64 KiB by default): a chunk then goes out in a few
    writes instead of dozens, each of which would wake the sender thread and take the GIL from the simulation."""
    with contextlib.suppress(AttributeError, OSError):
        size = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(size, 1 << 20))


def _wire(tpl: Template) -> tuple[Any, ...]:
    """The fields of a template the emitter needs, as a plain tuple (cheap to pickle)."""
    plan = tpl.dma
    dma = None if plan is None else (plan.rows, plan.chunk_bytes, plan.group, plan.prefix, plan.queue_type,
                                     plan.src_mem, plan.dst_mem, plan.variable, plan.hbm)
    return (*(getattr(tpl, name) for name in WIRE_FIELDS), dma)


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
                 metadata: dict[str, Any]) -> None:
        self.core = core
        self.path = Path(path)
        prepare_trace_directory(self.path, overwrite=overwrite)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        _widen_pipe(to_child_w)
        env = dict(os.environ)
        # the child imports this very tracer package, wherever it was imported from
        env["PYTHONPATH"] = os.pathsep.join([str(Path(tracer.__file__).resolve().parents[1]),
                                             *filter(None, [env.get("PYTHONPATH")])])
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD_MAIN, str(to_child_r), str(from_child_w)],
                pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError as exc:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
                os.close(fd)
            raise TraceFormatError(f"{self.path}: cannot start the trace writer process ({exc.strerror}); rerun "
                                   "with TRNPROF_EMIT=thread to write the trace from a thread instead") from None
        os.close(to_child_r)
        os.close(from_child_w)
        self._out = Connection(to_child_w, readable=False)
        self._conn = Connection(from_child_r, writable=False)
        self._sent_templates = 0
        self._sent_variants = 0
        self._sent_names = 0
        self._closed = False
        self._send_error: BaseException | None = None
        self._outbox: queue.Queue[tuple[Any, ...] | None] = queue.Queue(maxsize=MAX_PENDING)
        self._sender = threading.Thread(target=self._send_loop, name="trnprof-trace-sender", daemon=True)
        self._sender.start()
        self._put(("setup", str(self.path), overwrite, metadata, core.cm))

    def _receive(self, timeout: float | None = None) -> tuple[Any, ...]:
        if timeout is not None and not self._conn.poll(timeout):
            self._proc.kill()
            self._wait()
            raise TraceFormatError(f"{self.path}: the trace writer process did not answer within {timeout:.0f} s; "
                                   "rerun with TRNPROF_EMIT=thread to write the trace from a thread instead")
        try:
            msg = self._conn.recv()
        except (EOFError, OSError):
            self._wait()
            raise TraceFormatError(f"{self.path}: the trace writer process died (exit code "
                                   f"{self._proc.returncode}); the trace keeps what was written") from None
        if msg[0] == "error":
            self._wait()
            exc = msg[1]
            if isinstance(exc, TrnprofError):
                raise exc
            raise TraceFormatError(f"{self.path}: writing the trace failed: {type(exc).__name__}: {exc}")
        return msg

    def submit(self, chunk: Chunk) -> None:
        """Queue ``chunk`` (and the templates it introduces) for the child; a sender thread writes it to the
        pipe, so the simulation only waits when :data:`MAX_PENDING` chunks are already on their way."""
        if self._send_error is not None or self._conn.poll():  # the child only speaks up to report an error
            self._raise_child_error()
        new = [_wire(t) for t in self.core.templates[self._sent_templates:chunk.n_templates]]
        self._sent_templates = max(self._sent_templates, chunk.n_templates)
        variants = [(v.uid, v.emit_table) for v in self.core.variants[self._sent_variants:chunk.n_variants]]
        self._sent_variants = max(self._sent_variants, chunk.n_variants)
        names = self.core.names[self._sent_names:chunk.n_names]
        self._sent_names = max(self._sent_names, chunk.n_names)
        self._put(("chunk", new, variants, names, chunk))

    def _send(self, msg: tuple[Any, ...]) -> None:
        """Write one message to the child.  A chunk's columns go out as raw buffers straight from their arrays
        (the pipe write releases the GIL, and nothing is copied on this side); the rest is pickled."""
        if msg[0] != "chunk":
            self._out.send(msg)
            return
        chunk = msg[-1]
        columns = {f.name: getattr(chunk, f.name) for f in dataclasses.fields(chunk)
                   if isinstance(getattr(chunk, f.name), array)}
        shell = dataclasses.replace(chunk, **{name: array(col.typecode) for name, col in columns.items()})
        self._out.send((*msg[:-1], shell, [(name, col.typecode) for name, col in columns.items()]))
        for col in columns.values():
            self._out.send_bytes(col)

    def _put(self, msg: tuple[Any, ...]) -> None:
        """Hand ``msg`` to the sender thread, waiting while the queue is full (unless the child is gone)."""
        while True:
            try:
                self._outbox.put(msg, timeout=0.5)
                return
            except queue.Full:
                if self._send_error is not None or self._proc.poll() is not None:
                    self._raise_child_error()

    def _send_loop(self) -> None:
        """The sender thread: pickles each queued message into the pipe, in order, until ``None``."""
        while True:
            msg = self._outbox.get()
            if msg is None:
                return
            try:
                self._send(msg)
            except (BrokenPipeError, OSError, ValueError) as exc:
                self._send_error = exc
                return

    def _raise_child_error(self) -> None:
        """Raise what the child reported, or that it died."""
        if self._conn.poll():
            self._receive()
        self._wait()
        raise TraceFormatError(f"{self.path}: the trace writer process died (exit code {self._proc.returncode}); "
                               "the trace keeps what was written")

    def _wait(self, timeout: float = 5.0) -> None:
        """Reap the child (killing it when it does not exit within ``timeout`` seconds)."""
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def close(self, complete: bool = True) -> None:
        """Let the child write everything and close the trace (``complete=False`` marks it interrupted)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._send_error is None and self._sender.is_alive():
                self._put(("close", complete))
            self._put(None)
            self._sender.join()
            if self._send_error is not None:
                self._raise_child_error()
            self._receive(timeout=CLOSE_TIMEOUT_S)
        finally:
            self._out.close()
            self._conn.close()
            self._wait(timeout=30)
