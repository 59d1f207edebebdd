"""Idle gaps: the stretches of the window in which an engine (or every DMA queue) did nothing, and why.

An engine's idle gaps are the complement, within the window, of the union of its instructions' intervals
(wait-only opcodes left out).  The cause of a gap is what the engine's *next* instruction — the one starting when
the gap ends — waited for:

* ``dependency``: its last-finishing ``Flow`` predecessor ended inside the gap (``cause_*`` name that instruction or
  DMA packet, its engine or queue), or it waited on a semaphore the trace does not resolve (``cause_kind`` unknown);
* ``no_wait``: it did not wait, so nothing had been issued to the engine (its instruction stream was behind);
* ``end_of_work``: the engine had no further instruction in the window.

For ``DMA`` (all queues together) the next event is a DMA transfer and the cause is ``trigger``: the instruction
that started it, when the trace says which (see :mod:`profiler.analyses.dma_transfers`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from profiler.analyses import intervals
from profiler.analyses import schema as rs
from profiler.analyses.dma_transfers import FIRST_START, transfers
from profiler.analyses.inputs import (
    INSTRUCTION,
    WAIT_OPCODES,
    Scope,
    column,
    dma_intervals,
    event_range,
    fetch,
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


def _causes(trace: Trace, ids: list[int]) -> dict[int, dict[str, object]]:
    if not ids:
        return {}
    rows = fetch(trace, f"WITH d AS (SELECT unnest($ids) AS id) {binding_predecessors_sql('d')}",
                 params={"ids": ids})
    return {r["id"]: r for r in rows.to_pylist()}


def _engine_gaps(trace: Trace, scope: Scope, rows: pa.Table, engine: str) -> list[dict[str, object]]:
    mask = np.asarray([e == engine for e in rows.column("engine").to_pylist()], dtype=bool)
    ids, starts, ends, waits = (column(rows, c)[mask] for c in ("id", "s", "e", "wt"))
    opcodes = np.asarray(rows.column("opcode").to_pylist(), dtype=object)[mask]
    gs, ge = intervals.gaps(starts, ends, scope.start_ns, scope.end_ns)
    nxt = np.searchsorted(starts, ge, side="left")
    has_next = (nxt < len(starts)) & (ge < scope.end_ns)
    causes = _causes(trace, [int(ids[k]) for k in nxt[has_next].tolist()])
    out = []
    for g0, g1, k, ok in zip(gs.tolist(), ge.tolist(), nxt.tolist(), has_next.tolist(), strict=True):
        row: dict[str, object] = {rs.ENGINE: engine, rs.START_NS: g0, rs.END_NS: g1, rs.DUR_NS: g1 - g0}
        if not ok:
            row[rs.CAUSE] = rs.CAUSE_END
            out.append(row)
            continue
        ident = int(ids[k])
        row[rs.NEXT_ID] = ident
        row[rs.NEXT_OPCODE] = opcodes[k]
        pred = causes.get(ident)
        if pred is not None and pred["pred_end"] is not None and pred["pred_end"] > g0:
            row.update({rs.CAUSE: rs.CAUSE_DEPENDENCY, rs.CAUSE_KIND: pred["kind"], rs.CAUSE_RESOURCE: pred["resource"],
                        rs.CAUSE_TABLE: pred["out_table"], rs.CAUSE_ID: pred["out_id"],
                        rs.CAUSE_NAME: pred["pred_name"]})
        elif waits[k] > 0:
            row.update({rs.CAUSE: rs.CAUSE_DEPENDENCY, rs.CAUSE_KIND: rs.WAIT_KIND_UNKNOWN})
        else:
            row[rs.CAUSE] = rs.CAUSE_NO_WAIT
        out.append(row)
    return out


def _dma_gaps(trace: Trace, scope: Scope) -> list[dict[str, object]]:
    starts, ends = dma_intervals(trace, scope)
    gs, ge = intervals.gaps(starts, ends, scope.start_ns, scope.end_ns)
    moved = transfers(trace, scope)
    first = moved.col(FIRST_START)
    order = np.argsort(first, kind="stable")
    first_sorted = first[order]
    trig_rows = {}
    known = moved.trigger[moved.trigger >= 0]
    if len(known):
        info = fetch(trace, f"SELECT {q(ts.ID)} AS id, {q(ts.ENGINE)} AS engine, {q(ts.OPCODE)} AS opcode "
                            f"FROM {INSTRUCTION} WHERE {q(ts.ID)} IN (SELECT unnest($ids))",
                     params={"ids": known.tolist()})
        trig_rows = {r["id"]: r for r in info.to_pylist()}
    out = []
    for g0, g1 in zip(gs.tolist(), ge.tolist(), strict=True):
        row: dict[str, object] = {rs.ENGINE: rs.DMA, rs.START_NS: g0, rs.END_NS: g1, rs.DUR_NS: g1 - g0}
        k = int(np.searchsorted(first_sorted, g1, side="left"))
        if g1 >= scope.end_ns or k >= len(first_sorted):
            row[rs.CAUSE] = rs.CAUSE_END
            out.append(row)
            continue
        t = int(order[k])
        trig = int(moved.trigger[t])
        row[rs.CAUSE] = rs.CAUSE_TRIGGER
        if trig >= 0 and trig in trig_rows:
            r = trig_rows[trig]
            row.update({rs.CAUSE_KIND: rs.WAIT_KIND_ENGINE, rs.CAUSE_RESOURCE: r["engine"],
                        rs.CAUSE_TABLE: ts.INSTRUCTION.name, rs.CAUSE_ID: trig, rs.CAUSE_NAME: r["opcode"]})
        else:
            row[rs.CAUSE_KIND] = rs.WAIT_KIND_UNKNOWN
        out.append(row)
    return out


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
        :data:`~profiler.analyses.schema.IDLE_GAPS`, ranked by length (ties: earlier first).
    """
    scope = resolve_scope(trace, start_ns, end_ns, core)
    rows = _engine_rows(trace, scope)
    if engines is None:  # the engines that worked in the window, and DMA
        present = set(rows.column("engine").to_pylist())
        wanted = [e for e in ts.ENGINES if e in present] + sorted(str(e) for e in present - set(ts.ENGINES) - {None})
        if event_range(trace, scope.core, dma_only=True) is not None:
            wanted.append(rs.DMA)
    else:
        wanted = list(engines)
        known = _trace_engines(trace)
        unknown = [e for e in wanted if e not in known and e not in ts.ENGINES]  # an idle engine: one whole gap
        if unknown:
            raise QueryError(f"{trace.path}: no engine {unknown[0]!r}; engines: {', '.join(ts.ENGINES)} and "
                             f"{rs.DMA}, or one this trace names ({', '.join(known)}); names are case-sensitive")
    gaps: list[dict[str, object]] = []
    for engine in wanted:
        gaps.extend(_dma_gaps(trace, scope) if engine == rs.DMA else _engine_gaps(trace, scope, rows, engine))
    gaps = [g for g in gaps if int(g[rs.DUR_NS]) >= min_ns]  # type: ignore[call-overload]
    gaps.sort(key=lambda g: (-int(g[rs.DUR_NS]), int(g[rs.START_NS]), str(g[rs.ENGINE])))  # type: ignore[call-overload]
    if limit is not None:
        gaps = gaps[:max(0, limit)]
    for rank, g in enumerate(gaps, start=1):
        g[rs.RANK] = rank
    return pa.Table.from_pylist(gaps, schema=rs.IDLE_GAPS)
