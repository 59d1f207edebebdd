"""What the memory map reads: every on-chip operand access of a trnprof recording, and its memories' sizes.

trnprof's simulator writes every on-chip operand of an instruction as ``dtype[N]@MEM[p0:p1]+0xADDR`` (trace format
2.2; ``docs/trace-format.md``).  :func:`accesses` turns them into *accesses* -- a byte range of one memory, read or
written over a time interval -- for :mod:`profiler.analyses.memory_map` (see its docstring for what counts as an
access: a DMA transfer's on-chip side from its first packet to its last, an accumulating matmul's destination read
as well as written).  The capacities come from the recording's cost model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler.analyses import dma_transfers as dtr
from profiler.analyses.inputs import DMA_PACKET, FLOW, INSTRUCTION, column, cost_model, fetch, q, resolve_scope
from profiler.errors import QueryError
from profiler.trace import Trace
from tracer import schema as ts
from tracer.sim.dtypes import DTYPES

#: Memories the map covers.
MEMORIES = ("SBUF", "PSUM")
#: One on-chip operand: what precedes it (``src=``, ``dst=``, ``reduce_dst=`` or a comma inside a source list),
#: dtype, elements per partition, memory, partitions and byte address (RE2, run by DuckDB).
VIEW_PATTERN = r"(src=|dst=|reduce_dst=|,)([a-z0-9_]+)\[([0-9]+)\]@(SBUF|PSUM)\[([0-9]+):([0-9]+)\]\+0x([0-9a-f]+)"
#: Capacities (bytes per partition) of the presets, used when a trace's Metadata gives none.
FALLBACK_CAPACITY = {"SBUF": 192 * 1024, "PSUM": 16 * 1024}


@dataclass(frozen=True)
class Accesses:
    """Parallel arrays, one entry per on-chip operand of an instruction: its time interval and byte range."""

    instruction: np.ndarray   # Instruction.id
    start: np.ndarray         # ns
    end: np.ndarray           # ns, > start
    lo: np.ndarray            # first byte (per partition)
    hi: np.ndarray            # one past the last byte
    write: np.ndarray         # bool: the operand is written (else read)

    def __len__(self) -> int:
        return len(self.start)


def _cost_model_int(trace: Trace, key: str) -> int | None:
    """A positive integer constant of the trace's cost model (Metadata), None when it does not say."""
    value = cost_model(trace).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def capacity(trace: Trace, mem: str) -> int:
    """Bytes per partition of ``mem`` from the trace's cost model (Metadata), else the presets' value."""
    value = _cost_model_int(trace, "sbuf_partition_bytes" if mem == "SBUF" else "psum_partition_bytes")
    return value if value is not None else FALLBACK_CAPACITY[mem]


def bank_bytes(trace: Trace, mem: str) -> int | None:
    """Bytes per partition of one PSUM bank (the capacity over the cost model's ``psum_banks``; matmuls accumulate
    within a bank), None for SBUF or when the trace does not say."""
    banks = _cost_model_int(trace, "psum_banks") if mem == "PSUM" else None
    return capacity(trace, mem) // banks if banks else None


def check_mem(mem: object) -> str:
    """``mem`` as one of :data:`MEMORIES` (case-insensitive); QueryError otherwise."""
    if not isinstance(mem, str) or mem.upper() not in MEMORIES:
        raise QueryError(f"mem must be one of {', '.join(MEMORIES)}, not {mem!r}")
    return mem.upper()


def accesses(trace: Trace, mem: str, start_ns: int, end_ns: int, core: int | None = None) -> Accesses:
    """The operand accesses of ``mem`` (``SBUF`` or ``PSUM``) whose time interval overlaps ``[start_ns, end_ns)``.

    Raises:
        QueryError: a bad memory name or window, or a trace whose operands name no on-chip views.
    """
    mem = check_mem(mem)
    return accesses_by_memory(trace, start_ns, end_ns, core, (mem,))[mem]


def accesses_by_memory(trace: Trace, start_ns: int, end_ns: int, core: int | None = None,
                       mems: tuple[str, ...] = MEMORIES) -> dict[str, Accesses]:
    """:func:`accesses` of each of ``mems``, the operands read once."""
    mems = tuple(check_mem(m) for m in mems)
    scope = resolve_scope(trace, start_ns, end_ns, core)
    t0, t1 = scope.start_ns, scope.end_ns
    agg = dtr.agg_expr()
    # DMA triggers: their transfers' packets (all of them, for those with a packet in the window) give the time
    table = fetch(trace, f"""
        WITH pk AS (SELECT {q(ts.ID)} AS id, {q(ts.START_TS)} AS s, {q(ts.END_TS)} AS e, {agg} AS agg
                    FROM {DMA_PACKET} WHERE {scope.core_sql()}),
             hit AS (SELECT DISTINCT agg FROM pk WHERE s < {t1} AND e > {t0}),
             hitp AS (SELECT id, s, e, agg FROM pk WHERE agg IN (SELECT agg FROM hit)),
             xfer AS (SELECT agg, min(s) AS s, max(e) AS e FROM hitp GROUP BY agg),
             trig AS (SELECT f.{q(ts.OUT_ID)} AS iid, min(x.s) AS s, max(x.e) AS e
                      FROM {FLOW} f JOIN hitp ON hitp.id = f.{q(ts.IN_ID)} JOIN xfer x ON x.agg = hitp.agg
                      WHERE f.{q(ts.IN_TABLE)} = '{ts.DMA_PACKET.name}'
                        AND f.{q(ts.OUT_TABLE)} = '{ts.INSTRUCTION.name}' GROUP BY 1),
             flows AS (SELECT f.{q(ts.OUT_ID)} AS iid FROM {FLOW} f
                       WHERE f.{q(ts.IN_TABLE)} = '{ts.DMA_PACKET.name}'
                         AND f.{q(ts.OUT_TABLE)} = '{ts.INSTRUCTION.name}'),
             -- instructions running in the window, but for DMA triggers whose packets the Flow edges name
             cand AS (SELECT {q(ts.ID)} AS id, {q(ts.START_TS)} AS s, {q(ts.END_TS)} AS e, {q(ts.OPERANDS)} AS op
                      FROM {INSTRUCTION} WHERE {q(ts.START_TS)} < {t1} AND {q(ts.END_TS)} > {t0}
                        AND {scope.core_sql()} AND regexp_matches({q(ts.OPERANDS)}, $pattern)),
             moved AS (SELECT DISTINCT iid FROM flows WHERE iid IN (SELECT id FROM cand)),
             -- and DMA triggers whose transfers run in the window, from their first packet's start to the last's end
             ins AS (SELECT id, s, e, op FROM cand WHERE id NOT IN (SELECT iid FROM moved)
                     UNION ALL
                     SELECT i.{q(ts.ID)}, t.s, t.e, i.{q(ts.OPERANDS)} FROM trig t JOIN {INSTRUCTION} i
                       ON i.{q(ts.ID)} = t.iid
                     WHERE t.s < {t1} AND t.e > {t0} AND {scope.core_sql('i')}
                       AND regexp_matches(i.{q(ts.OPERANDS)}, $pattern))
        SELECT id, s, e, acc, x.side AS side, x.dtype AS dtype, x.n::BIGINT AS n, x.mem AS mem,
               ('0x' || x.addr)::BIGINT AS addr
        FROM (SELECT id, s, e, acc, regexp_extract(v, $pattern, $fields) AS x
              FROM (SELECT id, s, e, contains(op, 'acc_flags=accumulate') AS acc,
                           unnest(regexp_extract_all(op, $pattern)) AS v FROM ins))""",
                  params={"pattern": VIEW_PATTERN, "fields": ["side", "dtype", "n", "mem", "p0", "p1", "addr"]})
    if table.num_rows == 0:
        require_views(trace)
    return {mem: _accesses_of(trace, table.filter(pc.equal(table.column("mem"), mem))) for mem in mems}


def _accesses_of(trace: Trace, table: pa.Table) -> Accesses:
    """The rows of one memory's views (the query's columns) as accesses."""
    if table.num_rows == 0:
        return _empty_accesses()
    names = sorted(DTYPES)
    code = pc.index_in(table.column("dtype"), value_set=pa.array(names))  # each view's dtype, by its name
    if code.null_count:
        unknown = sorted(set(pc.filter(table.column("dtype"), pc.is_null(code)).to_pylist()))
        raise QueryError(f"{trace.path}: operands name unknown dtypes {', '.join(unknown)}; this trnprof reads "
                         f"{', '.join(names)}")
    size = np.array([DTYPES[d].itemsize for d in names], np.int64)[np.asarray(code.to_numpy(), np.int64)]
    n, addr = column(table, "n"), column(table, "addr")
    start, end = column(table, "s"), column(table, "e")
    end = np.maximum(end, start + 1)  # a zero-length instruction still touched its operands
    side = table.column("side")
    write = np.asarray(pc.is_in(side, pa.array(["dst=", "reduce_dst="])).to_numpy(zero_copy_only=False), bool)
    ids, lo, hi = column(table, "id"), addr, addr + n * size
    # an accumulating matmul reads the partial sums it adds to: its destination is read as well as written
    acc = write & np.asarray(table.column("acc").to_numpy(zero_copy_only=False), bool)
    if acc.any():
        ids, start, end, lo, hi = (np.concatenate([a, a[acc]]) for a in (ids, start, end, lo, hi))
        write = np.concatenate([write, np.zeros(int(acc.sum()), bool)])
    return Accesses(ids, start, end, lo, hi, write)


def _empty_accesses() -> Accesses:
    e = np.zeros(0, np.int64)
    return Accesses(e, e, e, e, e, np.zeros(0, bool))


def require_views(trace: Trace) -> None:
    """QueryError unless some instruction's operands name an on-chip view (the trace can have a memory map)."""
    found = fetch(trace, f"SELECT 1 FROM {INSTRUCTION} WHERE regexp_matches({q(ts.OPERANDS)}, $pattern) LIMIT 1",
                  params={"pattern": VIEW_PATTERN})
    if found.num_rows == 0:
        raise QueryError(f"{trace.path}: no instruction names an on-chip operand as dtype[N]@SBUF[p0:p1]+0xADDR, so "
                         "the trace has no memory map: it needs the operands' addresses, which trnprof simulator "
                         "recordings of trace format 2.2 or later have and hardware profiles do not record (an "
                         "older recording: record it again with `trnprof record`)")


__all__ = ["FALLBACK_CAPACITY", "MEMORIES", "VIEW_PATTERN", "Accesses", "accesses", "accesses_by_memory", "bank_bytes",
           "capacity", "check_mem", "require_views"]
