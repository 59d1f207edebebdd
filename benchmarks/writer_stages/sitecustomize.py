"""Benchmark-only hook (``bench_tracer.py --stages``): cut the trace writer process's work short at one stage.

Put this directory on ``PYTHONPATH`` with ``TRNPROF_BENCH_WRITER_STAGE`` set and every Python process started
with that environment (the recording's writer child among them) imports this first:

* ``noread``: the writer acknowledges each chunk without reading its columns out of the ring (no tables);
* ``receive``: the writer takes each chunk out of the shared-memory ring and does nothing with it (no tables);
* ``build``: it builds every table's columns but the four big tables (Instruction, Flow, SemaphoreUpdate,
  DmaTransfer) are not buffered, compressed or written.

The trace such a run leaves is incomplete by design; it only serves to split what tracing costs into its stages.
Nothing in trnprof itself reads the variable.
"""

from __future__ import annotations

import os

_STAGE = os.environ.get("TRNPROF_BENCH_WRITER_STAGE")
_BIG_TABLES = ("Instruction", "Flow", "SemaphoreUpdate", "DmaTransfer")

if _STAGE in ("receive", "noread"):
    from tracer.sim import emitter as _emitter

    def _discard(self: object, chunk: object) -> None:
        return None

    _emitter.Emitter.emit = _discard
if _STAGE == "noread":
    from array import array as _array

    from tracer.sim import emit_child as _child
    from tracer.sim import records as _records
    from tracer.sim.emit_ring import RingReader as _RingReader

    def _ack_only(header: tuple, spans: list | None, inbox: object, outbox: object, ring: object) -> object:
        if spans is None:  # (through the pipe: the buffers must be read to reach the next message)
            return _read_chunk(header, spans, inbox, outbox, ring)
        outbox.send(("ack", _RingReader.end(spans)))  # type: ignore[attr-defined]
        return _records.Chunk.from_parts(header, {n: _array(t) for n, t in _records.CHUNK_COLUMNS}, [])

    _read_chunk = _child._read_chunk
    _child._read_chunk = _ack_only
    _records.Chunk.absorb = lambda self, other: None  # empty chunks: nothing to merge
elif _STAGE == "build":
    from tracer import writer as _writer

    _append = _writer.TraceWriter.append

    def _append_small(self: object, table: str, columns: object) -> None:
        if table in _BIG_TABLES:
            return None
        _append(self, table, columns)  # type: ignore[arg-type]

    _writer.TraceWriter.append = _append_small
elif _STAGE not in (None, "receive", "noread"):
    raise SystemExit(f"TRNPROF_BENCH_WRITER_STAGE must be noread, receive or build, not {_STAGE!r}")
