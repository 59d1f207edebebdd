"""Idle gaps: the stretches of the window in which an engine (or every DMA queue) did nothing, and why.

An engine's idle gaps are the complement, within the window, of the union of its instructions' intervals
(wait-only opcodes left out).  The cause of a gap is what the engine's *next* instruction — the one starting when
the gap ends — waited for:

* ``dependency``: its last-finishing ``Flow`` predecessor ended inside the gap (``cause_*`` name that instruction or
  DMA packet, its engine or queue), or it waited on a semaphore the trace does not resolve (``cause_kind`` unknown);
* ``access``: with NeuronCore-v2 access conflicts (a trnprof trn1 recording), it started when an instruction of
  the engine it takes turns with on a memory ended, after its own semaphore waits (``cause_*`` name that
  instruction);
* ``no_wait``: it did not wait, so nothing had been issued to the engine (its instruction stream was behind);
* ``end_of_work``: the engine had no further instruction in the window.

For ``DMA`` (all queues together) the next event is a DMA transfer and the cause is ``trigger``: the instruction
that started it, when the trace says which (see :mod:`profiler.analyses.dma_transfers`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler.analyses import intervals
from profiler.analyses import schema as rs
from profiler.analyses.dma_transfers import FIRST_START, Transfers, transfers
from profiler.analyses.inputs import (
    INSTRUCTION,
    WAIT_OPCODES,
    Scope,
    check_count,
    check_names,
    check_unique_ids,
    column,
    conflict_sql,
    dma_intervals,
    event_range,
    fetch,
    find_sorted,
    has_access_conflicts,
    q,
    resolve_scope,
)
from profiler.analyses.waits import binding_predecessors_sql
from profiler.errors import QueryError
from profiler.trace import Trace
from tracer import schema as ts


def _engine_rows(trace: Trace, scope: Scope) -> pa.Table:
    waits = ", ".join(repr(o) for o in WAIT_OPCODES)
    return fetch(trace, f"""
        SELECT {q(ts.ID)} AS id, {q(ts.ENGINE)} AS engine, {q(ts.OPCODE)} AS opcode, {q(ts.START_TS)} AS s,
               {q(ts.END_TS)} AS e, coalesce({q(ts.EVT_WAIT_TIME_NS)}, 0) AS wt
        FROM {INSTRUCTION}
        WHERE {q(ts.START_TS)} < {int(scope.end_ns)} AND {q(ts.END_TS)} >= {int(scope.start_ns)}
          AND {scope.core_sql()} AND {q(ts.OPCODE)} NOT IN ({waits})
        ORDER BY engine, s, id""")


def _trace_engines(trace: Trace) -> list[str]:
    """Every engine with instructions anywhere in the trace (in display order), and ``DMA`` when it has DMA
    packets."""
    rows = fetch(trace, f"SELECT DISTINCT {q(ts.ENGINE)} AS engine FROM {INSTRUCTION} WHERE {q(ts.ENGINE)} IS NOT NULL")
    present = {str(e) for e in rows.column("engine").to_pylist()}
    out = [e for e in ts.ENGINES if e in present] + sorted(present - set(ts.ENGINES))
    if event_range(trace, None, dma_only=True) is not None:
        out.append(rs.DMA)
    return out


def _causes(trace: Trace, ids: np.ndarray) -> pa.Table:
    """The binding predecessor of each instruction id (``binding_predecessors_sql``), sorted by id."""
    if not len(ids):
        return pa.table({"id": pa.array([], pa.int64())})
    rows = fetch(trace, f"WITH d AS (SELECT unnest($ids) AS id) {binding_predecessors_sql('d')} ORDER BY id",
                 params={"ids": ids.tolist()})
    return rows


def _lookup(keys: np.ndarray, table: pa.Table, key: str) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``keys``: the row of ``table`` (sorted by unique ``key``) holding it, and whether there is one."""
    return find_sorted(column(table, key) if table.num_rows else np.zeros(0, np.int64), keys)


def _strings(values: np.ndarray) -> pa.Array:
    """An object array of str / None as an Arrow string array."""
    return pa.array(values, pa.string())


def _gap_table(engine: str, gs: np.ndarray, ge: np.ndarray, cols: dict[str, np.ndarray]) -> pa.Table:
    """The gaps of one engine as a table of :data:`~profiler.analyses.schema.IDLE_GAPS`' columns (no rank)."""
    n = len(gs)

    def ints(name: str) -> pa.Array:
        v, ok = cols.get(name, (np.zeros(n, np.int64), np.zeros(n, bool)))
        return pa.array(v, pa.int64(), mask=~ok)

    def strs(name: str) -> pa.Array:
        return _strings(cols.get(name, np.full(n, None, dtype=object)))

    return pa.table({
        rs.ENGINE: pa.array(np.full(n, engine, dtype=object), pa.string()),
        rs.START_NS: pa.array(gs, pa.int64()), rs.END_NS: pa.array(ge, pa.int64()),
        rs.DUR_NS: pa.array(ge - gs, pa.int64()), rs.NEXT_ID: ints(rs.NEXT_ID), rs.NEXT_OPCODE: strs(rs.NEXT_OPCODE),
        rs.CAUSE: strs(rs.CAUSE), rs.CAUSE_KIND: strs(rs.CAUSE_KIND), rs.CAUSE_RESOURCE: strs(rs.CAUSE_RESOURCE),
        rs.CAUSE_TABLE: strs(rs.CAUSE_TABLE), rs.CAUSE_ID: ints(rs.CAUSE_ID), rs.CAUSE_NAME: strs(rs.CAUSE_NAME),
    })


def _engine_spans(scope: Scope, rows: pa.Table, engine: str) -> tuple[np.ndarray, np.ndarray, tuple[Any, ...]]:
    """The idle gaps of ``engine`` (starts, ends) and what finding their causes needs (its instructions)."""
    mask = np.asarray(pc.fill_null(pc.equal(rows.column("engine"), engine), False), dtype=bool)
    ids, starts, ends, waits = (column(rows, c)[mask] for c in ("id", "s", "e", "wt"))
    gs, ge = intervals.gaps(starts, ends, scope.start_ns, scope.end_ns)
    return gs, ge, (ids, starts, waits, rows.column("opcode").filter(pa.array(mask)))


def _engine_gaps(trace: Trace, scope: Scope, engine: str, gs: np.ndarray, ge: np.ndarray, *,
                 found_in: tuple[Any, ...]) -> pa.Table:
    """The gaps ``gs``/``ge`` of ``engine`` with the next instruction and its cause (:func:`_engine_spans`)."""
    ids, starts, waits, opcode_column = found_in
    n = len(gs)
    nxt = np.searchsorted(starts, ge, side="left")
    has_next = (nxt < len(starts)) & (ge < scope.end_ns)
    k = np.where(has_next, nxt, 0)
    next_id = ids[k] if len(ids) else np.zeros(n, np.int64)
    causes = _causes(trace, np.sort(next_id[has_next]))   # distinct: each gap ends where its next one starts
    at, found = _lookup(next_id, causes, "id")
    found &= has_next
    if causes.num_rows:
        pred_end = column(causes, "pred_end", fill=np.iinfo(np.int64).min)[at]
        pred_known = ~np.asarray(causes.column("pred_end").is_null(), dtype=bool)[at]
    else:
        pred_end = np.zeros(n, np.int64)
        pred_known = np.zeros(n, bool)
    dependency = found & pred_known & (pred_end > gs)
    unknown = has_next & ~dependency & (waits[k] > 0 if len(waits) else np.zeros(n, bool))
    cause = np.full(n, rs.CAUSE_NO_WAIT, dtype=object)
    cause[~has_next] = rs.CAUSE_END
    cause[dependency | unknown] = rs.CAUSE_DEPENDENCY

    def from_causes(name: str) -> np.ndarray:
        out = np.full(n, None, dtype=object)
        if causes.num_rows:
            out[dependency] = np.asarray(causes.column(name).to_pylist(), dtype=object)[at[dependency]]
        return out

    kind = from_causes("kind")
    kind[unknown] = rs.WAIT_KIND_UNKNOWN
    out_id = column(causes, "out_id")[at] if causes.num_rows else np.zeros(n, np.int64)
    resource, table, name = from_causes("resource"), from_causes("out_table"), from_causes("pred_name")
    has_cause = dependency.copy()
    if has_next.any() and has_access_conflicts(trace):
        # the engine it takes turns with left the memory last (a semaphore predecessor ending at the same time
        # stays the cause)
        turns = _access_causes(trace, np.sort(next_id[has_next]))
        t_at, t_found = _lookup(next_id, turns, "id")
        access = t_found & has_next & ~(dependency & (pred_end >= ge))
        if access.any():
            cause[access] = rs.CAUSE_ACCESS
            kind[access] = rs.WAIT_KIND_ENGINE
            resource[access] = np.asarray(turns.column("resource").to_pylist(), dtype=object)[t_at[access]]
            table[access] = ts.INSTRUCTION.name
            name[access] = np.asarray(turns.column("name").to_pylist(), dtype=object)[t_at[access]]
            out_id = np.where(access, column(turns, "out_id")[t_at], out_id)
            has_cause |= access
    opcodes = np.full(n, None, dtype=object)
    if has_next.any():
        opcodes[has_next] = np.asarray(opcode_column.take(pa.array(k[has_next])).to_pylist(), dtype=object)
    cols = {
        rs.NEXT_ID: (next_id, has_next), rs.NEXT_OPCODE: opcodes,
        rs.CAUSE: cause, rs.CAUSE_KIND: kind, rs.CAUSE_RESOURCE: resource,
        rs.CAUSE_TABLE: table, rs.CAUSE_ID: (out_id, has_cause),
        rs.CAUSE_NAME: name,
    }
    return _gap_table(engine, gs, ge, cols)


def _access_causes(trace: Trace, ids: np.ndarray) -> pa.Table:
    """For each instruction id: an instruction it takes turns with on a memory that ended when it started (id,
    out_id, resource, name), sorted by id; ids without one are left out."""
    return fetch(trace, f"""
        SELECT v.{q(ts.ID)} AS id, o.{q(ts.ID)} AS out_id, o.{q(ts.ENGINE)} AS resource, o.{q(ts.OPCODE)} AS name
        FROM {INSTRUCTION} v JOIN {INSTRUCTION} o
          ON o.{q(ts.END_TS)} = v.{q(ts.START_TS)} AND {conflict_sql('v', 'o')}
        WHERE v.{q(ts.ID)} IN (SELECT unnest($ids))
        QUALIFY row_number() OVER (PARTITION BY v.{q(ts.ID)} ORDER BY o.{q(ts.ENGINE)}, o.{q(ts.ID)}) = 1
        ORDER BY id""", params={"ids": ids.tolist()})


def _dma_spans(trace: Trace, scope: Scope) -> tuple[np.ndarray, np.ndarray]:
    """The gaps of the DMA queues taken together (starts, ends)."""
    starts, ends = dma_intervals(trace, scope)
    return intervals.gaps(starts, ends, scope.start_ns, scope.end_ns)


def _next_triggers(moved: Transfers, ge: np.ndarray, end_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """For each gap end: whether a transfer starts at or after it (the gap ending before ``end_ns``), and that
    transfer's trigger (-1: unknown) -- the first such transfer, ties in transfer order."""
    first = moved.col(FIRST_START)
    order = np.argsort(first, kind="stable")
    first_sorted = first[order]
    k = np.searchsorted(first_sorted, ge, side="left")
    has_next = (ge < end_ns) & (k < len(first_sorted))
    trig = moved.trigger[order[np.where(has_next, k, 0)]] if len(first_sorted) else np.full(len(ge), -1, np.int64)
    return has_next, trig


def _dma_gaps(trace: Trace, scope: Scope, gs: np.ndarray, ge: np.ndarray) -> pa.Table:
    """The DMA gaps ``gs``/``ge`` with the transfer that ended each and the instruction that triggered it."""
    n = len(gs)
    # the transfers with a packet in the window hold every transfer starting in it, so a gap whose next transfer
    # (the first starting at or after its end) is among them has its answer there; only when one is not (it starts
    # after the window) are every transfer of the core grouped
    moved = transfers(trace, scope, window_only=True)
    has_next, trig = _next_triggers(moved, ge, scope.end_ns)
    if not moved.whole and bool((has_next != (ge < scope.end_ns)).any()):
        has_next, trig = _next_triggers(transfers(trace, scope), ge, scope.end_ns)
    known = np.unique(trig[has_next & (trig >= 0)])
    info = pa.table({"id": pa.array([], pa.int64())})
    if len(known):
        info = fetch(trace, f"SELECT {q(ts.ID)} AS id, {q(ts.ENGINE)} AS engine, {q(ts.OPCODE)} AS opcode "
                            f"FROM {INSTRUCTION} WHERE {q(ts.ID)} IN (SELECT unnest($ids)) ORDER BY id",
                     params={"ids": known.tolist()})
    at, found = _lookup(trig, info, "id")
    found &= has_next & (trig >= 0)
    cause = np.where(has_next, rs.CAUSE_TRIGGER, rs.CAUSE_END).astype(object)
    kind = np.where(has_next, rs.WAIT_KIND_UNKNOWN, None).astype(object)
    kind[found] = rs.WAIT_KIND_ENGINE

    def from_info(name: str) -> np.ndarray:
        out = np.full(n, None, dtype=object)
        if info.num_rows:
            out[found] = np.asarray(info.column(name).to_pylist(), dtype=object)[at[found]]
        return out

    table = np.full(n, None, dtype=object)
    table[found] = ts.INSTRUCTION.name
    cols = {rs.CAUSE: cause, rs.CAUSE_KIND: kind, rs.CAUSE_RESOURCE: from_info("engine"), rs.CAUSE_TABLE: table,
            rs.CAUSE_ID: (trig, found), rs.CAUSE_NAME: from_info("opcode")}
    return _gap_table(rs.DMA, gs, ge, cols)


#: Key of the table's schema metadata holding the gaps found before ``limit`` cut them.
GAPS_FOUND = "trnprof.gaps_found"


def idle_gaps(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, core: int | None = None,
              *, engines: list[str] | None = None, min_ns: int = 0, limit: int | None = None) -> pa.Table:
    """Idle gaps of each engine (and of the DMA queues together, as ``DMA``) in the window, longest first.

    Args:
        trace: the trace.
        start_ns: window start (default: the first event).
        end_ns: window end (default: the last event).
        core: physical core (default: every core).
        engines: engines to look at (default: every engine with instructions in the window, and ``DMA`` when the
            trace has DMA packets).
        min_ns: leave out gaps shorter than this.
        limit: at most this many gaps (the longest).

    Returns:
        :data:`~profiler.analyses.schema.IDLE_GAPS`, ranked by length (ties: earlier first); its schema metadata
        :data:`GAPS_FOUND` says how many gaps there were before ``limit``.
    """
    scope = resolve_scope(trace, start_ns, end_ns, core)
    min_ns = check_count(min_ns, "min_ns", allow_none=False)
    limit = check_count(limit, "limit")
    check_unique_ids(trace, scope=scope)
    rows = _engine_rows(trace, scope)
    if engines is None:  # the engines that worked in the window, and DMA
        present = set(rows.column("engine").to_pylist())
        wanted = [e for e in ts.ENGINES if e in present] + sorted(str(e) for e in present - set(ts.ENGINES) - {None})
        if event_range(trace, scope.core, dma_only=True) is not None:
            wanted.append(rs.DMA)
    else:
        wanted = list(check_names(engines, "engines"))
        known = _trace_engines(trace)
        unknown = [e for e in wanted if e not in known and e not in ts.ENGINES]  # an idle engine: one whole gap
        if unknown:
            raise QueryError(f"{trace.path}: no engine {unknown[0]!r}; engines: {', '.join(ts.ENGINES)} and "
                             f"{rs.DMA}, or one this trace names ({', '.join(known)}); names are case-sensitive")
    # every gap first (cheap), then the causes of those kept (min_ns, limit): causes read the Flow table
    spans = {e: (*_dma_spans(trace, scope), None) if e == rs.DMA else _engine_spans(scope, rows, e) for e in wanted}
    names = sorted(spans)
    dur = np.concatenate([ge - gs for gs, ge, _x in spans.values()] or [np.zeros(0, np.int64)])
    start = np.concatenate([gs for gs, _ge, _x in spans.values()] or [np.zeros(0, np.int64)])
    which = np.concatenate([np.full(len(gs), names.index(e)) for e, (gs, _ge, _x) in spans.items()]
                           or [np.zeros(0, np.int64)])
    keep = np.flatnonzero(dur >= min_ns)
    keep = keep[np.lexsort((which[keep], start[keep], -dur[keep]))]   # longest first, then earlier, then engine
    total = len(keep)
    if limit is not None:
        keep = keep[:limit]
    chosen = np.zeros(len(dur), dtype=bool)
    chosen[keep] = True
    parts, at = [], 0
    for engine, (gs, ge, found_in) in spans.items():
        mine = chosen[at:at + len(gs)]
        at += len(gs)
        parts.append(_dma_gaps(trace, scope, gs[mine], ge[mine]) if engine == rs.DMA
                     else _engine_gaps(trace, scope, engine, gs[mine], ge[mine], found_in=found_in))
    gaps = pa.concat_tables(parts) if parts else rs.IDLE_GAPS.empty_table().drop_columns([rs.RANK])
    gaps = gaps.sort_by([(rs.DUR_NS, "descending"), (rs.START_NS, "ascending"), (rs.ENGINE, "ascending")])
    ranked = gaps.add_column(0, rs.RANK, pa.array(np.arange(1, gaps.num_rows + 1), pa.int64()))
    # how many there were before ``limit`` (the CLI's "20 of N"), in the table's schema metadata
    return ranked.cast(rs.IDLE_GAPS).replace_schema_metadata({GAPS_FOUND: str(total)})
