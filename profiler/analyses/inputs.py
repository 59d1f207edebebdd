"""What the analyses read from a :class:`~profiler.Trace`: windows, cores, hardware peaks and typed row fetches.

Every analysis reads the trace through this module, and this module reads only through the public ``Trace`` API
(``Trace.sql`` — read-only — and ``Trace.metadata``), so no analysis opens a database or spells SQL against the
layout on its own.  A window is half-open, ``[start_ns, end_ns)``; an interval belongs to a window when it overlaps
it, a count (bytes, FLOPs) when its row *starts* in it.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db.sqlutil import quote
from profiler.errors import QueryError
from profiler.trace import Trace, check_time
from tracer import schema as ts
from tracer.argcheck import sequence_of

INSTRUCTION = quote(ts.INSTRUCTION.name)
DMA_PACKET = quote(ts.DMA_PACKET.name)
FLOW = quote(ts.FLOW.name)

#: Opcodes that only wait on semaphores or events: not engine work (performance-bounds.md excludes waits).
WAIT_OPCODES: tuple[str, ...] = ("EVENT_SEMAPHORE", "EVENT_SEMAPHORE_RANGE_CLEAR", "SEMAPHORE_WAIT", "WAIT")
#: Opcode of the instruction that starts a DMA transfer in trnprof's simulator.
DMA_TRIGGER_OPCODE = "DMA_TRIGGER"
#: ``DmaPacket.queue_type`` of instruction fetches, which the bounds leave out of the transferred bytes.
INSTRUCTION_QUEUE_TYPE = "instruction"
#: Packets of at most this many bytes are descriptors/semaphore writes, left out of the transferred bytes.
TINY_PACKET_BYTES = 4


def q(name: str) -> str:
    """A column name as a quoted SQL identifier."""
    return quote(name)


#: Time limit of one analysis query (internal queries over whole traces; user SQL keeps Trace.sql's default).
ANALYSIS_SQL_TIMEOUT_S = 600.0


def fetch(trace: Trace, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
    """Run read-only ``sql`` on ``trace``; the result as an Arrow table."""
    if not callable(getattr(trace, "sql", None)):
        raise QueryError(f"the analyses take a trace opened with profiler.open(path), not {repr(trace)[:60]}")
    rel = trace.sql(sql, timeout_s=ANALYSIS_SQL_TIMEOUT_S, params=params)
    return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()


def find_sorted(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``keys``: its position in ``sorted_keys`` (ascending, unique) and whether it is there (the
    position is 0 where it is not)."""
    pos = np.searchsorted(sorted_keys, keys)
    found = pos < len(sorted_keys)
    found[found] = sorted_keys[pos[found]] == keys[found]
    return np.where(found, pos, 0), found


def column(table: pa.Table, name: str, dtype: Any = np.int64, fill: Any = 0) -> np.ndarray:
    """Column ``name`` of ``table`` as a numpy array, nulls replaced by ``fill``."""
    col = table.column(name)
    if col.null_count:
        col = col.fill_null(fill)
    return np.asarray(col.to_numpy(), dtype=dtype)


@dataclass(frozen=True)
class Scope:
    """Where an analysis looks: one window ``[start_ns, end_ns)`` on one core (``None``: every core)."""

    start_ns: int
    end_ns: int
    core: int | None

    @property
    def length_ns(self) -> int:
        """Length of the window."""
        return self.end_ns - self.start_ns

    def core_sql(self, alias: str = "") -> str:
        """SQL condition selecting this core's rows (true when every core is in scope)."""
        if self.core is None:
            return "TRUE"
        prefix = f"{alias}." if alias else ""
        return f"coalesce({prefix}{q(ts.PCORE_IDX)}, 0) = {int(self.core)}"

    def overlap_sql(self, alias: str = "") -> str:
        """SQL condition: the row's interval overlaps the window (and is on the core)."""
        p = f"{alias}." if alias else ""
        return (f"{p}{q(ts.START_TS)} < {int(self.end_ns)} AND {p}{q(ts.END_TS)} > {int(self.start_ns)} "
                f"AND {self.core_sql(alias)}")

    def starts_sql(self, alias: str = "") -> str:
        """SQL condition: the row starts in the window (and is on the core)."""
        p = f"{alias}." if alias else ""
        return (f"{p}{q(ts.START_TS)} >= {int(self.start_ns)} AND {p}{q(ts.START_TS)} < {int(self.end_ns)} "
                f"AND {self.core_sql(alias)}")


def union_sql(keys: list[str], where: str) -> str:
    """SQL over a ``rows`` relation (columns ``k0``, ``k1``, ... and ``s``, ``e``): per group, the union length of
    the rows' [s, e) intervals (each row adds what extends the reach)."""
    part = ", ".join(f"k{i}" for i in range(len(keys)))
    return f"""
        SELECT {part}, sum(greatest(0, e - greatest(s, coalesce(reach, s))))::BIGINT AS u FROM (
            SELECT {part}, s, e, max(e) OVER (PARTITION BY {part} ORDER BY s, e
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
            FROM rows WHERE {where}) GROUP BY {part}"""


def cores(trace: Trace) -> list[int]:
    """The physical cores (``pcore_idx``) with instructions or DMA packets: those of their tracks (one per core and
    engine or queue), not a scan of the events."""
    tables = (ts.INSTRUCTION.name, ts.DMA_PACKET.name)
    return sorted({int(t[dbs.CORE] or 0) for t in trace.tracks().to_pylist() if t[dbs.TABLE] in tables})


def resolve_core(trace: Trace, core: int | None) -> int | None:
    """``core`` checked against the trace; ``None`` means every core (fine when there is only one)."""
    if core is None:
        return None
    if isinstance(core, bool) or not isinstance(core, int | np.integer) or not 0 <= int(core) < 2**31:
        raise QueryError(f"core must be a core index (pcore_idx, 0 or more), not {core!r}")
    core = int(core)
    known = cores(trace)
    if known and core not in known:
        raise QueryError(f"{trace.path}: no core {core} (the trace has cores {', '.join(map(str, known))})")
    return core


def event_range(trace: Trace, core: int | None = None, *, dma_only: bool = False) -> tuple[int, int] | None:
    """(first start, last end) of the DMA packets (``dma_only``) or of instructions and packets; None if empty."""
    scope = Scope(0, 0, core)
    parts = [f"SELECT min({q(ts.START_TS)}) AS s, max({q(ts.END_TS)}) AS e FROM {DMA_PACKET} "
             f"WHERE {scope.core_sql()}"]
    if not dma_only:
        parts.append(f"SELECT min({q(ts.START_TS)}), max({q(ts.END_TS)}) FROM {INSTRUCTION} WHERE {scope.core_sql()}")
    row = fetch(trace, f"SELECT min(s), max(e) FROM ({' UNION ALL '.join(parts)})").to_pylist()[0]
    values = list(row.values())
    if values[0] is None:
        return None
    return int(values[0]), int(values[1])


def check_count(value: Any, name: str, *, allow_none: bool = True) -> int | None:
    """``value`` as a non-negative int (numpy's too), None when ``allow_none`` and it is None; QueryError naming
    ``name`` otherwise (floats, bools, strings, NaN, negatives)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise QueryError(f"{name} must be a whole number, 0 or more{' (or None)' if allow_none else ''}, not "
                         f"{str(value)[:40]!r}")
    return int(value)


def check_amount(value: Any, name: str) -> float:
    """``value`` as a finite number, 0 or more (numpy's too); QueryError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= float(value) < math.inf:
        raise QueryError(f"{name} must be a number, 0 or more, not {str(value)[:40]!r}")
    return float(value)


def check_names(value: Any, name: str) -> tuple[str, ...]:
    """``value`` as a tuple of names: one string is one name (not its characters), else an iterable of strings;
    QueryError naming ``name`` otherwise."""
    if isinstance(value, str):
        return (value,)
    names = sequence_of(value, str)
    if names is None:
        raise QueryError(f"{name} must be a name or a list of names, not {str(value)[:40]!r}")
    return tuple(names)


def check_unique_ids(trace: Trace, sorted_ids: np.ndarray | None = None, scope: Scope | None = None) -> None:
    """QueryError when two instructions share an id (the dependency analyses join Flow edges on ids, so a damaged
    trace would give wrong answers without a word): checks ``sorted_ids`` (ascending) when given, else the
    instructions starting in ``scope``'s window (SQL)."""
    if sorted_ids is not None:
        same = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1]) if len(sorted_ids) > 1 else []
        dup = int(sorted_ids[same[0]]) if len(same) else None
    else:
        assert scope is not None
        rows = fetch(trace, f"""SELECT {q(ts.ID)} AS id FROM {INSTRUCTION} WHERE {scope.starts_sql()}
            GROUP BY ALL HAVING count(*) > 1 LIMIT 1""").column("id").to_pylist()
        dup = rows[0] if rows else None
    if dup is not None:
        raise QueryError(f"{trace.path}: instruction id {dup} appears more than once (ids identify instructions in "
                         "Flow edges); the trace is damaged: record or export it again")


def resolve_scope(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, core: int | None = None,
                  *, kernel_window: bool = False) -> Scope:
    """The window an analysis covers: ``[start_ns, end_ns)``, each defaulting to the trace's extent.

    The default extent is the first instruction or DMA packet to the last one; with ``kernel_window`` it is the
    first DMA start to the last DMA end (the performance-bounds definition of a whole kernel), falling back to
    instructions when the trace has no DMA.

    Raises:
        QueryError: a bound that is not an integer, an empty window, or a trace with no events at all.
    """
    core = resolve_core(trace, core)
    t0 = None if start_ns is None else check_time(start_ns, "start_ns")
    t1 = None if end_ns is None else check_time(end_ns, "end_ns")
    if t0 is None or t1 is None:
        extent = (event_range(trace, core, dma_only=True) if kernel_window else None) or event_range(trace, core)
        if extent is None:
            raise QueryError(_no_device_events(trace))
        t0 = extent[0] if t0 is None else t0
        t1 = extent[1] if t1 is None else t1
    elif not cores(trace):
        # a window of a host trace (PyTorch, JAX) is refused like the whole of it, not analysed as idle hardware
        raise QueryError(_no_device_events(trace))
    if t1 <= t0:
        raise QueryError(f"empty window: end ({t1} ns) must be greater than start ({t0} ns)")
    return Scope(t0, t1, core)


def _no_device_events(trace: Trace) -> str:
    return (f"{trace.path}: the trace has no instructions or DMA packets to analyse (the analyses need a device "
            "trace: a simulator recording or a Neuron profile)")


@dataclass(frozen=True)
class Hardware:
    """Peak rates from the trace's Metadata (``None`` when the trace does not say)."""

    dma_bw_peak: float | None        # bytes/s, all DMA queues of one core
    te_peak_flops: float | None      # FLOP/s of the PE array: rows * cols * 2 * clock

    @property
    def missing(self) -> list[str]:
        """Metadata fields that were missing or unusable."""
        out = []
        if self.dma_bw_peak is None:
            out.append("dma_ddr_bandwidth")
        if self.te_peak_flops is None:
            out.append("tensor_engine_num_rows/num_cols/clock_freq")
        return out


def _positive(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


#: NeuronCore-v2 access conflicts (trnprof's cost model, ``access_conflicts``): pairs of engines that cannot access
#: one memory at the same time, and the memory as an instruction's operand text names it (``...@SBUF[...]``).
ACCESS_CONFLICTS = (("Vector", "GpSimd", "SBUF"), ("Vector", "Scalar", "PSUM"))


def has_access_conflicts(trace: Trace) -> bool:
    """Whether the recording's cost model makes engines take turns on a memory (trnprof's trn1 preset)."""
    return cost_model(trace).get("access_conflicts") is True


def touches_sql(memory: str, alias: str = "") -> str:
    """SQL: the instruction (not a DMA trigger, which moves no data itself) has an operand in ``memory``."""
    p = f"{alias}." if alias else ""
    return (f"({p}{q(ts.OPCODE)} <> 'DMA_TRIGGER' AND "
            f"coalesce(contains({p}{q(ts.OPERANDS)}, '@{memory}'), false))")


def conflict_sql(v: str, o: str) -> str:
    """SQL: instruction ``o`` (an alias of Instruction) and ``v`` are on one core and cannot access a memory they
    both touch at the same time (:data:`ACCESS_CONFLICTS`)."""
    pairs = " OR ".join(
        f"({v}.{q(ts.ENGINE)} = '{x}' AND {o}.{q(ts.ENGINE)} = '{y}' AND {touches_sql(m, v)} AND {touches_sql(m, o)})"
        for a, b, m in ACCESS_CONFLICTS for x, y in ((a, b), (b, a)))
    return f"coalesce({v}.{q(ts.PCORE_IDX)}, 0) = coalesce({o}.{q(ts.PCORE_IDX)}, 0) AND ({pairs})"


def cost_model(trace: Trace) -> dict[str, Any]:
    """The simulator's cost model a recording keeps in its Metadata (``cost_model``, JSON), {} when the trace has
    none or it cannot be read."""
    raw = trace.metadata.get(ts.COST_MODEL)
    try:
        data = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def hardware(trace: Trace) -> Hardware:
    """Peak DMA bandwidth and Tensor-engine FLOP rate of ``trace`` (from ``Metadata``)."""
    meta = trace.metadata
    bw = _positive(meta.get("dma_ddr_bandwidth"))
    rows = _positive(meta.get("tensor_engine_num_rows"))
    cols = _positive(meta.get("tensor_engine_num_cols"))
    clock = _positive(meta.get("tensor_engine_clock_freq"))
    peak = rows * cols * 2 * clock * 1e9 if rows and cols and clock else None
    return Hardware(bw, peak)


def instruction_intervals(trace: Trace, scope: Scope, *, include_waits: bool = False) -> pa.Table:
    """``engine, start_ts, end_ts`` of the instructions overlapping the window (wait-only opcodes left out)."""
    waits = "" if include_waits else \
        f" AND {q(ts.OPCODE)} NOT IN ({', '.join(repr(o) for o in WAIT_OPCODES)})"
    return fetch(trace, f"SELECT {q(ts.ENGINE)}, {q(ts.START_TS)}, {q(ts.END_TS)} FROM {INSTRUCTION} "
                        f"WHERE {scope.overlap_sql()}{waits}")


def dma_intervals(trace: Trace, scope: Scope) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the DMA packets overlapping the window."""
    t = fetch(trace, f"SELECT {q(ts.START_TS)}, {q(ts.END_TS)} FROM {DMA_PACKET} WHERE {scope.overlap_sql()}")
    return column(t, ts.START_TS), column(t, ts.END_TS)
