"""Dependency waits: for every semaphore wait, what the instruction waited for, and the totals per engine.

An instruction waited when ``evt_wait_time_ns > 0``: from the moment it was ready to issue until its semaphore
waits were met, i.e. ``[start_ts - evt_wait_time_ns, start_ts)``.  What it waited *for* is the predecessor from
``Flow`` that finished last (the one whose semaphore release let it go): an instruction on an engine, or a DMA
packet on a queue.  A wait whose instruction has no Flow edges is attributed to ``unknown``.

:func:`dependency_waits` gives one row per wait; :func:`wait_summary` aggregates them into "Tensor spent 41% of its
time waiting on DMA queue qSyncIO2" (:func:`wait_sentences`).
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from profiler.analyses import intervals
from profiler.analyses import schema as rs
from profiler.analyses.inputs import FLOW, INSTRUCTION, Scope, check_unique_ids, column, fetch, q, resolve_scope
from profiler.trace import Trace
from tracer import schema as ts
from tracer.sim.records import END_BARRIER

_QUEUE_NUMBER = re.compile(r"\d+$")


def binding_predecessors_sql(dependents: str) -> str:
    """SQL: for each instruction id in the relation ``dependents`` (column ``id``), its last-finishing Flow
    predecessor: ``id, out_table, out_id, dependency_type, pred_end, kind, resource, pred_name``."""
    i, p = q(ts.INSTRUCTION.name), q(ts.DMA_PACKET.name)
    return f"""
        SELECT f.{q(ts.IN_ID)} AS id, f.{q(ts.OUT_TABLE)} AS out_table, f.{q(ts.OUT_ID)} AS out_id,
               f.{q(ts.DEPENDENCY_TYPE)} AS dependency_type,
               coalesce(pi.{q(ts.END_TS)}, pp.{q(ts.END_TS)}) AS pred_end,
               CASE WHEN pi.{q(ts.ID)} IS NOT NULL THEN '{rs.WAIT_KIND_ENGINE}'
                    WHEN pp.{q(ts.ID)} IS NOT NULL THEN '{rs.WAIT_KIND_DMA}'
                    ELSE '{rs.WAIT_KIND_UNKNOWN}' END AS kind,
               coalesce(pi.{q(ts.ENGINE)}, pp.{q(ts.QUEUE_NAME)}, f.{q(ts.OUT_TABLE)}) AS resource,
               coalesce(pi.{q(ts.OPCODE)}, pp.{q(ts.VARIABLE)}) AS pred_name
        FROM {FLOW} f
        JOIN {dependents} d ON d.id = f.{q(ts.IN_ID)}
        LEFT JOIN {i} pi ON f.{q(ts.OUT_TABLE)} = '{ts.INSTRUCTION.name}' AND pi.{q(ts.ID)} = f.{q(ts.OUT_ID)}
        LEFT JOIN {p} pp ON f.{q(ts.OUT_TABLE)} = '{ts.DMA_PACKET.name}' AND pp.{q(ts.ID)} = f.{q(ts.OUT_ID)}
        WHERE f.{q(ts.IN_TABLE)} = '{ts.INSTRUCTION.name}'
        QUALIFY row_number() OVER (PARTITION BY f.{q(ts.IN_ID)}
                                   ORDER BY coalesce(pi.{q(ts.END_TS)}, pp.{q(ts.END_TS)}) DESC NULLS LAST,
                                            f.{q(ts.OUT_ID)} DESC) = 1"""


def _waits(trace: Trace, scope: Scope, *, end_barrier: bool = True) -> pa.Table:
    check_unique_ids(trace, scope=scope)
    wait = q(ts.EVT_WAIT_TIME_NS)
    start = q(ts.START_TS)
    t0, t1 = int(scope.start_ns), int(scope.end_ns)
    barrier = "" if end_barrier else f" AND coalesce({q(ts.OPERANDS)}, '') NOT LIKE '%{END_BARRIER}%'"
    return fetch(trace, f"""
        WITH w AS (
            SELECT {q(ts.ID)} AS id, {q(ts.ENGINE)} AS engine, {q(ts.OPCODE)} AS opcode, {start} AS s, {wait} AS wt
            FROM {INSTRUCTION}
            WHERE {wait} > 0 AND {start} - {wait} < {t1} AND {start} > {t0} AND {scope.core_sql()}{barrier}
        ), b AS ({binding_predecessors_sql('w')})
        SELECT w.id AS {q(rs.ID)}, w.engine AS {q(rs.ENGINE)}, w.opcode AS {q(rs.OPCODE)}, w.s AS {q(rs.START_NS)},
               (least(w.s, {t1}) - greatest(w.s - w.wt, {t0}))::BIGINT AS {q(rs.WAIT_NS)},
               coalesce(b.kind, '{rs.WAIT_KIND_UNKNOWN}') AS {q(rs.WAITED_ON_KIND)},
               coalesce(b.resource, '{rs.WAIT_KIND_UNKNOWN}') AS {q(rs.WAITED_ON)},
               b.out_table AS {q(rs.WAITED_ON_TABLE)}, b.out_id AS {q(rs.WAITED_ON_ID)},
               b.pred_name AS {q(rs.WAITED_ON_NAME)}, b.dependency_type AS {q(rs.DEPENDENCY_TYPE)}
        FROM w LEFT JOIN b ON b.id = w.id
        ORDER BY {q(rs.START_NS)}, {q(rs.ID)}""")


def dependency_waits(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                     core: int | None = None) -> pa.Table:
    """Every semaphore wait overlapping ``[start_ns, end_ns)`` and what it waited for (:data:`~profiler.analyses.
    schema.WAITS`); ``wait_ns`` is the part of the wait inside the window."""
    scope = resolve_scope(trace, start_ns, end_ns, core)
    return _waits(trace, scope).cast(rs.WAITS)


def _queue_group(name: str | None) -> str | None:
    return None if name is None else _QUEUE_NUMBER.sub("", name) or name


def wait_summary(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, core: int | None = None,
                 *, queue_groups: bool = False) -> pa.Table:
    """Waits per (waiting engine, what it waited on), longest total first (:data:`~profiler.analyses.schema.
    WAIT_SUMMARY`).  ``wait_ns`` is the union of the waits' intervals (waits of two streams of one engine at the
    same time count once) and ``fraction`` is that over the window's length.

    Args:
        trace: the trace.
        start_ns: window start (default: the first event).
        end_ns: window end (default: the last event).
        core: physical core (default: every core).
        queue_groups: count DMA queues ``qSyncIO0`` .. ``qSyncIO15`` as one ``qSyncIO``.

    The simulator's kernel-end barrier (Sync waiting for everything to finish, by design) is left out: it made
    "Sync spent 99.8% of its time waiting on DMA queue qGpSimdIO15" the first sentence of every kernel's summary;
    :func:`dependency_waits` lists it.
    """
    scope = resolve_scope(trace, start_ns, end_ns, core)
    waits = _waits(trace, scope, end_barrier=False)
    if queue_groups and waits.num_rows:
        kinds = waits.column(rs.WAITED_ON_KIND).to_pylist()
        names = waits.column(rs.WAITED_ON).to_pylist()
        grouped = [_queue_group(n) if k == rs.WAIT_KIND_DMA else n for k, n in zip(kinds, names, strict=True)]
        waits = waits.set_column(waits.schema.get_field_index(rs.WAITED_ON), rs.WAITED_ON, pa.array(grouped))
    if waits.num_rows == 0:
        return rs.WAIT_SUMMARY.empty_table()
    # waits of one engine's streams can overlap (LoadStationary and MultiplyMoving both wait): count time once
    # each wait's part in the window: wait_ns long, ending where the wait does or at the window's end (taking
    # the instruction's start as its end put a wait cut by the window's end after the window: counted as 0)
    ends = np.minimum(column(waits, rs.START_NS), scope.end_ns)
    starts = ends - column(waits, rs.WAIT_NS)
    keys = list(zip(*(waits.column(k).to_pylist() for k in (rs.ENGINE, rs.WAITED_ON_KIND, rs.WAITED_ON)),
                    strict=True))
    groups = np.empty(len(keys), dtype=object)
    groups[:] = keys
    busy = intervals.union_ns_by(groups, starts, ends, scope.start_ns, scope.end_ns)
    counts: dict[tuple[str, str, str], int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    length = max(scope.length_ns, 1)
    rows = [{rs.ENGINE: k[0], rs.WAITED_ON_KIND: k[1], rs.WAITED_ON: k[2], rs.COUNT: n, rs.WAIT_NS: busy[k],
             rs.FRACTION: busy[k] / length} for k, n in counts.items()]
    rows.sort(key=lambda r: (-r[rs.WAIT_NS], str(r[rs.ENGINE]), r[rs.WAITED_ON]))
    return pa.Table.from_pylist(rows, schema=rs.WAIT_SUMMARY)


def wait_sentences(summary: pa.Table, limit: int = 5) -> list[str]:
    """The largest rows of :func:`wait_summary` as sentences ("Tensor spent 41% of its time waiting on ...")."""
    out = []
    for row in summary.slice(0, max(0, limit)).to_pylist():
        what = {rs.WAIT_KIND_DMA: "DMA queue ", rs.WAIT_KIND_ENGINE: "the "}.get(row[rs.WAITED_ON_KIND], "")
        suffix = " engine" if row[rs.WAITED_ON_KIND] == rs.WAIT_KIND_ENGINE else ""
        out.append(f"{row[rs.ENGINE]} spent {100 * row[rs.FRACTION]:.1f}% of its time waiting on "
                   f"{what}{row[rs.WAITED_ON]}{suffix} ({row[rs.COUNT]:,} waits)")
    return out
