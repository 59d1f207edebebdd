"""One place of the memory map, explained: which instructions touched some bytes of SBUF or PSUM during some time,
and which wrote the data those bytes held then and which read it.

A memory-map cell (:mod:`profiler.analyses.memory_map`) says *that* bytes were read, written or live; this says *who*:

* **in this cell**: the accesses whose bytes and time overlap the cell;
* **wrote the data**: the last write to any of the bytes that started before the cell ends (the data they hold);
* **read the data**: the reads of those bytes from that write's start until the next write to them -- a cell is live
  because one of these is still to come.

Each row is an instruction (a DMA transfer is its trigger) with its opcode, engine, source line and when it ran,
so the dashboard links it to the timeline and the source page.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.inputs import INSTRUCTION, fetch, q, resolve_scope
from profiler.analyses.memory_map import Accesses, accesses, context_of
from profiler.errors import QueryError
from profiler.trace import Trace
from tracer import schema as ts

#: Rows of each role at most (the nearest in time to the cell first).
MAX_PER_ROLE = 12
IN_CELL = "in this cell"
WROTE = "wrote the data"
READ = "read the data"


def _rows(acc: Accesses, pick: np.ndarray, role: str) -> list[dict]:
    return [{rs.ROLE: role, rs.ID: int(acc.instruction[i]), rs.ACCESS: "write" if acc.write[i] else "read",
             rs.START_NS: int(acc.start[i]), rs.END_NS: int(acc.end[i]), rs.LO_BYTE: int(acc.lo[i]),
             rs.HI_BYTE: int(acc.hi[i])} for i in pick.tolist()]


def cell_accesses(trace: Trace, mem: str, window: tuple[int, int], byte_range: tuple[int, int], *,
                  core: int | None = None) -> pa.Table:
    """Who touched bytes ``byte_range`` (``[lo, hi)``) of ``mem`` during ``window`` (``[start_ns, end_ns)``), and who
    wrote and read the data they held (:data:`profiler.analyses.schema.MEMORY_CELL_SCHEMA`; see the module
    docstring), each role in time order.

    Raises:
        QueryError: a bad memory, window or byte range, a trace without on-chip operands, or too much to read.
    """
    if not isinstance(window, tuple | list) or len(window) != 2:
        raise QueryError(f"window must be (start_ns, end_ns), not {str(window)[:40]!r}")
    if not isinstance(byte_range, tuple | list) or len(byte_range) != 2:
        raise QueryError(f"a byte range must be two integers (lo, hi), not {str(byte_range)[:40]!r}")
    lo, hi = byte_range
    if any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in (lo, hi)) or not 0 <= lo < hi:
        raise QueryError(f"a byte range must be two integers 0 <= lo < hi, not {lo!r}, {hi!r}")
    scope = resolve_scope(trace, window[0], window[1], core)
    t0, t1 = scope.start_ns, scope.end_ns
    c0, c1, _whole = context_of(trace, scope)
    acc = accesses(trace, mem, c0, c1, scope.core)
    touch = np.flatnonzero((acc.lo < hi) & (acc.hi > lo))
    order = touch[np.lexsort((acc.write[touch], acc.start[touch]))]  # time order, reads first at the same start
    start, write = acc.start[order], acc.write[order]
    rows = _rows(acc, order[(start < t1) & (acc.end[order] > t0)][:MAX_PER_ROLE], IN_CELL)
    writes = np.flatnonzero(write & (start < t1))
    if len(writes):
        w = int(writes[-1])
        later = np.flatnonzero(write[w + 1:])
        stop = w + 1 + int(later[0]) if len(later) else len(order)
        rows += _rows(acc, order[w:w + 1], WROTE)
        reads = order[w + 1:stop][~write[w + 1:stop]]
        rows += _rows(acc, reads[:MAX_PER_ROLE], READ)
    table = pa.Table.from_pylist(rows, schema=rs.MEMORY_CELL_BASE_SCHEMA)
    return _with_instructions(trace, table)


def _with_instructions(trace: Trace, table: pa.Table) -> pa.Table:
    """``table`` with each row's instruction: opcode, engine and source line."""
    ids = sorted(set(table.column(rs.ID).to_pylist()))
    info = fetch(trace, f"SELECT {q(ts.ID)} AS id, {q(ts.OPCODE)} AS opcode, {q(ts.ENGINE)} AS engine, "
                        f"{q(ts.NKI_SOURCE_LOCATION)} AS source FROM {INSTRUCTION} WHERE {q(ts.ID)} IN "
                        f"(SELECT unnest($ids))", params={"ids": ids}) if ids else None
    found = {r["id"]: r for r in info.to_pylist()} if info is not None else {}
    extra = {rs.OPCODE: [], rs.ENGINE: [], rs.SOURCE: []}
    for ident in table.column(rs.ID).to_pylist():
        r = found.get(ident, {})
        extra[rs.OPCODE].append(r.get("opcode"))
        extra[rs.ENGINE].append(r.get("engine"))
        extra[rs.SOURCE].append(r.get("source"))
    for name in (rs.OPCODE, rs.ENGINE, rs.SOURCE):
        table = table.append_column(rs.MEMORY_CELL_SCHEMA.field(name), pa.array(extra[name], pa.string()))
    return table


__all__ = ["IN_CELL", "READ", "WROTE", "cell_accesses"]
