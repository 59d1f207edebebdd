"""Comparison of two traces: total time, per-engine active time, bounds, per-identity time deltas, memory peaks.

Everything is "b relative to a": ``delta = b - a`` and ``ratio = b / a``.  Per-identity tables align the two traces'
instructions by what they *are* rather than when they ran — operator (layer, operator), opcode (engine, opcode) and
kernel source line — with a full outer join, so work that exists in only one trace shows up as ``only_a`` or
``only_b``.  The time of a group is its busy time (the union of its instructions' intervals; see
:mod:`profiler.analyses.operators`).  Source lines align only between runs of the same kernel file (the what-if
workflow: ``trnprof record ... --set NAME=VALUE`` then ``trnprof diff``).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.bounds import performance_bounds
from profiler.analyses.inputs import check_names, resolve_scope
from profiler.analyses.memory_map import MEMORIES, memory_maps
from profiler.analyses.operators import time_by
from profiler.errors import QueryError
from profiler.trace import Trace
from tracer import schema as ts

BOTH = "both"
ONLY_A = "only_a"
ONLY_B = "only_b"


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return b / a


def _metric(name: str, a: float | None, b: float | None) -> dict[str, Any]:
    return {rs.METRIC: name, rs.A: a, rs.B: b, rs.DELTA: None if a is None or b is None else b - a,
            rs.RATIO: _ratio(a, b)}


def _describe(trace: Trace) -> dict[str, Any]:
    meta = trace.metadata
    overridden: list[str] = []
    values: dict[str, Any] = {}
    with contextlib.suppress(TypeError, ValueError, AttributeError):  # a cost model that is not a JSON object
        model = json.loads(meta.get(ts.COST_MODEL) or "{}")
        overridden = [str(n) for n in model.get("overridden", [])]
        values = {n: model.get(n) for n in overridden}
    return {"name": trace.name, "path": str(trace.path), "profile_name": meta.get("profile_name"),
            "arch": meta.get("arch"), "kernel_params": meta.get("kernel_params"), "overridden": overridden,
            "overrides": values}


def align(a: pa.Table, b: pa.Table, by: str) -> pa.Table:
    """Full outer join of two :func:`~profiler.analyses.operators.time_by` tables on their ``by`` keys
    (:func:`profiler.analyses.schema.diff_schema`), largest absolute delta first."""
    keys = rs.GROUP_KEYS[by]

    def index(table: pa.Table) -> dict[tuple[Any, ...], tuple[int, int]]:
        cols = [table.column(k).to_pylist() for k in keys]
        counts = table.column(rs.INSTRUCTIONS).to_pylist()
        busy = table.column(rs.BUSY_NS).to_pylist()
        return {tuple(c[i] for c in cols): (counts[i], busy[i]) for i in range(table.num_rows)}

    ia, ib = index(a), index(b)
    rows = []
    for key in list(ia) + [k for k in ib if k not in ia]:
        ca, ta = ia.get(key, (0, 0))
        cb, tb = ib.get(key, (0, 0))
        presence = BOTH if key in ia and key in ib else (ONLY_A if key in ia else ONLY_B)
        row = dict(zip(keys, key, strict=True))
        row.update({rs.PRESENCE: presence, rs.A_COUNT: ca, rs.B_COUNT: cb, rs.A_NS: ta, rs.B_NS: tb,
                    rs.DELTA_NS: tb - ta, rs.RATIO: _ratio(ta, tb)})
        rows.append(row)
    rows.sort(key=lambda r: (-abs(r[rs.DELTA_NS]), -(r[rs.A_NS] + r[rs.B_NS]),
                             tuple("" if r[k] is None else str(r[k]) for k in keys)))
    return pa.Table.from_pylist(rows, schema=rs.diff_schema(by))


def diff(a: Trace, b: Trace, *, core: int | None = None,
         by: tuple[str, ...] = tuple(rs.GROUP_KEYS)) -> dict[str, Any]:
    """Compare trace ``b`` with trace ``a`` (each over its whole extent).

    Returns:
        ``{"traces": {"a": ..., "b": ...}, "total_time": metric row, "engine_active": table, "bounds": table,
        "bottleneck": {"a": ..., "b": ...}, "by": {grouping: delta table}, "memory": table}`` ("memory": the
        SBUF and PSUM peaks of live bytes, :mod:`profiler.analyses.memory_map`; empty unless both traces have
        memory maps); the bounds table follows :data:`~profiler.analyses.schema.DIFF_METRICS`, the engine and
        memory tables :data:`~profiler.analyses.schema.DIFF_COUNTS` (whole numbers), delta tables
        :func:`~profiler.analyses.schema.diff_schema`.
    """
    by = check_names(by, "by")
    sa, sb = resolve_scope(a, None, None, core), resolve_scope(b, None, None, core)
    ba, bb = performance_bounds(a, core=core), performance_bounds(b, core=core)
    engines = list(dict.fromkeys([*ba[rs.ENGINE_ACTIVE_NS], *bb[rs.ENGINE_ACTIVE_NS]]))
    engine_rows = [_metric(e, ba[rs.ENGINE_ACTIVE_NS].get(e, 0), bb[rs.ENGINE_ACTIVE_NS].get(e, 0)) for e in engines]
    bound_keys = [rs.TOTAL_TIME_NS, *rs.BOUND_KEYS, *rs.GAPS]
    bound_rows = [_metric(k, ba.get(k), bb.get(k)) for k in bound_keys]
    return {
        rs.DIFF_TRACES: {rs.A: _describe(a), rs.B: _describe(b)},
        rs.DIFF_TOTAL: _metric(rs.TOTAL_TIME_NS, sa.length_ns, sb.length_ns),
        rs.DIFF_ENGINES: pa.Table.from_pylist(engine_rows, schema=rs.DIFF_COUNTS),
        rs.DIFF_BOUNDS: pa.Table.from_pylist(bound_rows, schema=rs.DIFF_METRICS),
        rs.DIFF_BOTTLENECK: {rs.A: ba[rs.BOTTLENECK], rs.B: bb[rs.BOTTLENECK]},
        rs.DIFF_BY: {g: align(time_by(a, g, core=core), time_by(b, g, core=core), g) for g in by},
        rs.DIFF_MEMORY: pa.Table.from_pylist(_memory_rows(a, b, core), schema=rs.DIFF_COUNTS),
    }


def _peaks(trace: Trace, core: int | None) -> dict[str, int] | None:
    """Peak live bytes per partition of SBUF and PSUM over the whole trace; None without a memory map (no on-chip
    operands, or too long to map at once)."""
    try:
        return {mm.mem: mm.peak_live_bytes for mm in memory_maps(trace, width=1, height=1, core=core)}
    except QueryError:
        return None


def _memory_rows(a: Trace, b: Trace, core: int | None) -> list[dict[str, Any]]:
    """SBUF and PSUM peaks of live bytes, A and B (none unless both traces have memory maps)."""
    pa_, pb = _peaks(a, core), _peaks(b, core)
    if pa_ is None or pb is None:
        return []
    names = {"SBUF": rs.SBUF_PEAK_LIVE_BYTES, "PSUM": rs.PSUM_PEAK_LIVE_BYTES}
    return [_metric(names[mem], pa_[mem], pb[mem]) for mem in MEMORIES]
