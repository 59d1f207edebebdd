"""Trace emission in a forked child process, so building and compressing tables never competes for the GIL.

The parent (the simulation) sends each :class:`~tracer.sim.core.Chunk` — compact ``array`` columns — and the
templates created since the previous chunk through a pipe; the child runs the :class:`~tracer.sim.emitter.Emitter`
and owns the :class:`~tracer.writer.TraceWriter`.  On a 2-core machine the two run truly in parallel.

Crash behaviour: if the parent dies (even by SIGKILL) the child sees the pipe close, writes what it has and
closes the trace as incomplete, so the trace stays readable.  The child ignores SIGINT; Ctrl-C is handled by the
parent, which then closes the child cleanly.  Where ``fork`` is unavailable the emitter runs on a thread instead.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from tracer.errors import TraceFormatError, TrnprofError
from tracer.sim.arch import CostModel
from tracer.sim.core import Core
from tracer.sim.emitter import Emitter
from tracer.sim.records import Chunk, DmaPlan, Template
from tracer.writer import TraceWriter

#: Seconds to wait for the writer process to start, and to finish writing once the simulation is done.
READY_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 900.0


def fork_available() -> bool:
    """True where a child process can be forked (Linux and other POSIX systems)."""
    return "fork" in mp.get_all_start_methods()


_WIRE_FIELDS = ("engine", "stream", "flops_raw", "flops_adj", "bytes", "opcode", "loc", "act_fn",
                "perf_mode", "tensor_type", "text_pre", "text_post")


def _wire(tpl: Template) -> tuple[Any, ...]:
    """The fields of a template the emitter needs, as a plain tuple (cheap to pickle)."""
    plan = tpl.dma
    dma = None if plan is None else (plan.rows, plan.chunk_bytes, plan.group, plan.prefix, plan.queue_type,
                                     plan.src_mem, plan.dst_mem, plan.variable, plan.hbm)
    return (*(getattr(tpl, name) for name in _WIRE_FIELDS), dma)


class _CoreView:
    """What the Emitter needs of the core, rebuilt in the child from what the parent sends."""

    def __init__(self, cm: CostModel) -> None:
        self.cm = cm
        self.templates: list[Template] = []
        self.stream_names: list[str] = []
        self.variants: list[Any] = []
        self.names: list[str] = []
        self._plans: dict[tuple[Any, ...], DmaPlan] = {}

    def add(self, wires: list[tuple[Any, ...]]) -> None:
        """Rebuild templates sent with :func:`_wire` (DMA plans shared by equal descriptions)."""
        for wire in wires:
            tpl = Template(**dict(zip(_WIRE_FIELDS, wire, strict=False)))
            dma = wire[-1]
            if dma is not None:
                plan = self._plans.get(dma)
                if plan is None:
                    rows, chunk, group, prefix, qtype, src, dst, var, hbm = dma
                    plan = self._plans[dma] = DmaPlan(self.cm, rows=rows, chunk_bytes=chunk, group=group,
                                                      prefix=prefix, queue_type=qtype, src_mem=src, dst_mem=dst,
                                                      variable=var, hbm=hbm)
                tpl.dma = plan
            tpl.id = len(self.templates)
            self.templates.append(tpl)


def _child_main(conn: Connection, parent_end: Connection, path: str, overwrite: bool,  # noqa: PLR0917
                metadata: dict[str, Any], cm: CostModel) -> None:
    parent_end.close()  # else our own copy of the parent's end would keep the pipe open after the parent died
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        writer = TraceWriter(path, overwrite=overwrite, metadata=metadata)
    except BaseException as exc:
        conn.send(("error", exc))
        return
    conn.send(("ready",))
    view = _CoreView(cm)
    emitter = Emitter(view, writer, threaded=False)  # type: ignore[arg-type]
    complete = False
    # A reader thread drains the pipe while the main thread emits, so the simulation hands a chunk over and
    # goes on instead of waiting for the previous chunk to be written (the small queue still bounds memory).
    inbox: queue.Queue[tuple[Any, ...] | None] = queue.Queue(maxsize=4)

    def read() -> None:
        while True:
            try:
                item = conn.recv()
            except (EOFError, OSError):
                inbox.put(None)  # the parent is gone
                return
            inbox.put(item)
            if item[0] == "close":
                return

    threading.Thread(target=read, name="trnprof-trace-reader", daemon=True).start()
    try:
        while True:
            msg = inbox.get()
            if msg is None:
                break  # the parent is gone: keep what we have, marked incomplete
            if msg[0] == "close":
                complete = bool(msg[1])
                break
            _tag, templates, variants, names, chunk = msg
            view.add(templates)
            view.names.extend(names)
            view.variants.extend(SimpleNamespace(uid=uid, emit_table=table) for uid, table in variants)
            view.stream_names = list(chunk.streams)
            emitter.emit(chunk)
    except BaseException as exc:
        writer.close(complete=False)
        with contextlib.suppress(OSError, ValueError):
            conn.send(("error", exc))
        return
    writer.close(complete=complete)
    with contextlib.suppress(OSError, ValueError):
        conn.send(("done",))


_warmed = False


def _warm_up() -> None:
    """Do pyarrow's one-time lazy initialisation (it imports pandas on first converting a list, ~0.2 s) once in
    this process, so each forked writer inherits it instead of paying it while the simulation waits."""
    global _warmed  # noqa: PLW0603 - once per process
    if not _warmed:
        pa.array([None])
        _warmed = True


class ProcessEmitter:
    """Emits a recording's trace from a forked child process (same interface as :class:`Emitter`).

    Args:
        core: the simulated core whose chunks will be submitted.
        path: trace directory (created by the child's TraceWriter).
        overwrite: replace an existing trace.
        metadata: Metadata fields.

    Raises:
        TrnprofError: the trace cannot be created (raised here, before any simulation).
    """

    def __init__(self, core: Core, path: str | os.PathLike[str], *, overwrite: bool,
                 metadata: dict[str, Any]) -> None:
        self.core = core
        self.path = Path(path)
        _warm_up()
        ctx = mp.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child_main, args=(child, self._conn, str(path), overwrite, metadata, core.cm),
                                 name="trnprof-trace-writer", daemon=True)
        self._proc.start()
        child.close()
        self._sent_templates = 0
        self._sent_variants = 0
        self._sent_names = 0
        self._closed = False
        reply = self._receive(timeout=READY_TIMEOUT_S)
        if reply[0] != "ready":  # pragma: no cover - _receive raises on errors
            raise TraceFormatError(f"{self.path}: trace writer did not start")

    def _receive(self, timeout: float | None = None) -> tuple[Any, ...]:
        if timeout is not None and not self._conn.poll(timeout):
            self._proc.kill()
            self._proc.join(timeout=5)
            raise TraceFormatError(f"{self.path}: the trace writer process did not answer within {timeout:.0f} s; "
                                   "rerun with TRNPROF_EMIT=thread to write the trace from a thread instead")
        try:
            msg = self._conn.recv()
        except (EOFError, OSError):
            self._proc.join(timeout=5)
            raise TraceFormatError(f"{self.path}: the trace writer process died (exit code "
                                   f"{self._proc.exitcode}); the trace keeps what was written") from None
        if msg[0] == "error":
            self._proc.join(timeout=5)
            exc = msg[1]
            if isinstance(exc, TrnprofError):
                raise exc
            raise TraceFormatError(f"{self.path}: writing the trace failed: {type(exc).__name__}: {exc}")
        return msg

    def submit(self, chunk: Chunk) -> None:
        """Send ``chunk`` (and the templates it introduces) to the child."""
        if self._conn.poll():  # the child only speaks up to report an error
            self._receive()
        new = [_wire(t) for t in self.core.templates[self._sent_templates:chunk.n_templates]]
        self._sent_templates = max(self._sent_templates, chunk.n_templates)
        variants = [(v.uid, v.emit_table) for v in self.core.variants[self._sent_variants:chunk.n_variants]]
        self._sent_variants = max(self._sent_variants, chunk.n_variants)
        names = self.core.names[self._sent_names:chunk.n_names]
        self._sent_names = max(self._sent_names, chunk.n_names)
        try:
            self._conn.send(("chunk", new, variants, names, chunk))
        except (BrokenPipeError, OSError):
            self._receive()
            raise

    def close(self, complete: bool = True) -> None:
        """Let the child write everything and close the trace (``complete=False`` marks it interrupted)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._conn.send(("close", complete))
            self._receive(timeout=CLOSE_TIMEOUT_S)
        finally:
            self._conn.close()
            self._proc.join(timeout=30)
