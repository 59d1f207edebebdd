"""Benchmark-only hook (``bench_tracer.py --stages``): cut the trace writer process's work short at one stage.

Put this directory on ``PYTHONPATH`` with ``TRNPROF_BENCH_WRITER_STAGE`` set and every Python process started
with that environment (the recording's writer child among them) imports this first:

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

if _STAGE == "receive":
    from tracer.sim import emitter as _emitter

    def _discard(self: object, chunk: object) -> None:
        return None

    _emitter.Emitter.emit = _discard
elif _STAGE == "build":
    from tracer import writer as _writer

    _append = _writer.TraceWriter.append

    def _append_small(self: object, table: str, columns: object) -> None:
        if table in _BIG_TABLES:
            return None
        _append(self, table, columns)  # type: ignore[arg-type]

    _writer.TraceWriter.append = _append_small
elif _STAGE is not None:
    raise SystemExit(f"TRNPROF_BENCH_WRITER_STAGE must be receive or build, not {_STAGE!r}")
