"""The trace-writing child process of a recording: :func:`main` with the descriptors ``IN_FD OUT_FD RING_FD
RING_BYTES``.

Started by :class:`tracer.sim.emit_process.ProcessEmitter` as a fresh interpreter (not a fork of the simulation,
whose memory it would otherwise share copy-on-write and whose threads it would inherit).  It reads messages from
the pipe ``IN_FD``: first ``("setup", path, overwrite, metadata, cost model)``, then ``("chunk", templates,
variants, names, chunk header, spans)`` per :class:`~tracer.sim.records.Chunk` (each new template as its
fields, or as ``(id, tensor)``: a copy of DMA template ``id`` for another HBM tensor).  The chunk's columns and its
``s_leaf`` (each segment's producers, marshalled, as a marshalled list) are in the shared-memory ring ``RING_FD``
at ``spans`` (:mod:`tracer.sim.emit_ring`; acknowledged with ``("ack", position)`` on ``OUT_FD`` once copied out),
or, when ``spans`` is None, follow on the pipe as raw buffers.  Last comes ``("close", complete)``.  It runs the
:class:`~tracer.sim.emitter.Emitter` into its own :class:`~tracer.writer.TraceWriter` and answers on ``OUT_FD`` with
``("done",)`` or ``("error", exception)``.  Chunks that are already waiting when it takes one (it fell behind: at
its start, or near the end of a run, where chunks are small) are merged into one (:meth:`Chunk.absorb
<tracer.sim.records.Chunk.absorb>`, up to :data:`MERGE_ROWS` instructions), so its fixed work per chunk is paid
once.

Crash behaviour: if the parent dies (even by SIGKILL) the pipe closes; the child writes what it has and closes the
trace as incomplete, so it stays readable.  The child runs in its own session and ignores SIGINT, so Ctrl-C reaches
only the parent, which then closes the child cleanly.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import sys
from array import array
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

from tracer import schema
from tracer.sim.arch import CostModel
from tracer.sim.emit_ring import RingReader, Span
from tracer.sim.emitter import Emitter
from tracer.sim.records import CHUNK_COLUMNS, WIRE_FIELDS, Chunk, DmaPlan, Template
from tracer.writer import TraceWriter

#: While waiting for the next chunk, tables with at least this many buffered rows are written out.
IDLE_FLUSH_ROWS = 16_384
#: Chunks waiting to be written are merged into one of up to this many instructions (at least one chunk).
MERGE_ROWS = 65_536


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
        """Rebuild templates sent with :func:`tracer.sim.emit_process.encode_template` (DMA plans shared by equal
        descriptions)."""
        for wire in wires:
            tpl = Template(**dict(zip(WIRE_FIELDS, wire, strict=False)))
            if wire[-1] is not None:
                tpl.dma = self._plan(wire[-1])
            tpl.id = len(self.templates)
            self.templates.append(tpl)

    def _plan(self, dma: tuple[Any, ...]) -> DmaPlan:
        """The DMA plan of a description as ``encode_template`` sends it (one per distinct description)."""
        plan = self._plans.get(dma)
        if plan is None:
            rows, chunk, group, prefix, qtype, src, dst, var, hbm, factor = dma
            plan = self._plans[dma] = DmaPlan(self.cm, rows=rows, chunk_bytes=chunk, group=group, prefix=prefix,
                                              queue_type=qtype, src_mem=src, dst_mem=dst, variable=var, hbm=hbm,
                                              rate_factor=factor)
        return plan


def _read_chunk(header: tuple[Any, ...], spans: list[Span] | None, inbox: Connection, outbox: Connection,
                ring: RingReader | None) -> Chunk:
    """The chunk of ``header``: its columns (:data:`~tracer.sim.records.CHUNK_COLUMNS`) and its ``s_leaf`` (the
    segments' marshalled producers, as a marshalled list) read from the ring at ``spans``, then acknowledged; or,
    when ``spans`` is None, from the raw buffers that follow on ``inbox``."""
    columns: dict[str, array] = {}
    if spans is None:
        for name, typecode in CHUNK_COLUMNS:
            col = columns[name] = array(typecode)
            col.frombytes(inbox.recv_bytes())
        return Chunk.from_parts(header, columns, marshal.loads(inbox.recv_bytes()))
    assert ring is not None, "the parent used a ring it did not pass"
    if len(spans) != len(CHUNK_COLUMNS) + 1:
        raise ValueError(f"a trace chunk of {len(spans)} buffers, expected {len(CHUNK_COLUMNS) + 1}")
    for (name, typecode), span in zip(CHUNK_COLUMNS, spans, strict=False):
        col = columns[name] = array(typecode)
        col.frombytes(ring.view(span))
    s_leaf = marshal.loads(ring.view(spans[-1]))
    with contextlib.suppress(OSError, ValueError):  # a parent that is gone needs no acknowledgement
        outbox.send(("ack", RingReader.end(spans)))
    return Chunk.from_parts(header, columns, s_leaf)


def serve(inbox: Connection, outbox: Connection, ring: RingReader | None = None) -> int:
    """Write the trace the parent describes on ``inbox`` (columns in ``ring`` where the parent put them there);
    returns the exit status."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        tag, path, overwrite, metadata, cm, sources = inbox.recv()
        assert tag == "setup", tag
        # no background flush thread: the loop below flushes while waiting (one thread less competing for a core)
        writer = TraceWriter(path, overwrite=overwrite, metadata=metadata, background_flush=False,
                             compression_threads=False)  # the simulation has the other CPU
        if sources:
            writer.append_rows(schema.SOURCE_FILE.name, sources)
    except (EOFError, OSError):
        return 1  # the parent is gone before it said anything
    except BaseException as exc:
        with contextlib.suppress(OSError, ValueError):
            outbox.send(("error", exc))
        return 1
    view = _CoreView(cm)
    emitter = Emitter(view, writer, threaded=False)  # type: ignore[arg-type]

    def take(msg: tuple[Any, ...]) -> Any:
        """The chunk of a chunk message, its columns read and its templates, variants and names taken in."""
        _tag, templates, variants, names, header, spans = msg
        chunk = _read_chunk(header, spans, inbox, outbox, ring)
        view.add(templates)
        view.names.extend(names)
        view.variants.extend(SimpleNamespace(uid=uid, emit_table=table) for uid, table in variants)
        view.stream_names = list(chunk.streams)
        return chunk

    complete = False
    ending = False
    closing: tuple[Any, ...] | None = None
    try:
        while closing is None:
            try:
                if not inbox.poll():
                    # idle until the next chunk: compress and write big buffers now rather than at close (near the
                    # predicted end of the run, every buffer: little is left for the end), and everything at least
                    # once per flush interval (a slow simulation's rows reach the disk)
                    writer.flush(min_rows=1 if ending else IDLE_FLUSH_ROWS)
                    while not inbox.poll(writer.flush_interval_s):
                        writer.flush()
                msg = inbox.recv()
            except (EOFError, OSError):
                break  # the parent is gone: keep what we have, marked incomplete
            if msg[0] == "close":
                closing = msg
                break
            chunk = take(msg)
            # chunks already waiting are written as one (up to MERGE_ROWS instructions): each costs ~1.5 ms of
            # fixed work, which a writer that fell behind (at its start, or near the end of a run, where chunks
            # are small) need not pay for each
            try:
                while len(chunk) < MERGE_ROWS and inbox.poll():
                    msg = inbox.recv()
                    if msg[0] == "close":
                        closing = msg
                        break
                    chunk.absorb(take(msg))
            except (EOFError, OSError):
                closing = ("gone",)
            except BaseException:
                with contextlib.suppress(Exception):  # keep the chunks read before the one that failed
                    emitter.emit(chunk)
                raise
            emitter.emit(chunk)
            ending = chunk.ending
        if closing is not None and closing[0] == "close":
            complete = bool(closing[1])
            if closing[2]:
                writer.append_rows(schema.SOURCE_FILE.name, closing[2])
            if len(closing) > 3 and closing[3]:
                writer.update_metadata(**closing[3])
    except BaseException as exc:
        if not _close_quietly(writer, False):
            return 1
        with contextlib.suppress(OSError, ValueError):
            outbox.send(("error", exc))
        return 1
    if not _close_quietly(writer, complete):
        return 1
    with contextlib.suppress(OSError, ValueError):
        outbox.send(("done",))
    return 0


def _close_quietly(writer: TraceWriter, complete: bool) -> bool:
    """Close the trace; False when its directory went away meanwhile (a stopped sweep removes the traces of the
    points under way while their writers still close them): nothing is left to write to, and nobody to tell."""
    try:
        writer.close(complete=complete)
    except FileNotFoundError:
        if writer.path.exists():
            raise
        return False
    return True


class _NoPandas:
    """Import hook of the child: ``import pandas`` fails.  The writer never needs pandas, but pyarrow imports it on
    its first conversion when it is installed (~0.1 s of the child's start-up, which a short recording waits for)."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("the trace writer process does not use pandas")


def main(argv: list[str]) -> int:
    """Serve the parent on the pipe descriptors ``argv = [IN_FD, OUT_FD, RING_FD, RING_BYTES]`` (``RING_FD`` -1: no
    ring), then exit the process at once.

    Every trace file is closed by then, so the interpreter's tear-down (~50 ms of freeing modules) is skipped.
    The parent does not wait for the exit (only for ``("done",)``); it reaps this process later.
    """
    sys.meta_path.insert(0, _NoPandas)  # type: ignore[arg-type]
    in_fd, out_fd = int(argv[0]), int(argv[1])
    ring_fd, ring_size = int(argv[2]), int(argv[3])
    ring = RingReader(ring_fd, ring_size) if ring_fd >= 0 else None
    status = serve(Connection(in_fd, writable=False), Connection(out_fd, readable=False), ring)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)

