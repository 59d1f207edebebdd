"""Time, FLOPs, bytes and FLOP utilisation per operator (layer -> operator), per opcode or per kernel source line.

Neuron Explorer's operator table, over the instructions starting in the window, grouped by

* ``operator``: (``layer``, ``hlo_name``) — the framework layer and the operator (HLO instruction);
* ``opcode``: (``engine``, ``opcode``);
* ``source``: ``nki_source_location`` (``file.py:LINE``).

Per group: ``time_ns`` is the span from its first instruction's start to its last one's end; ``busy_ns`` the union of
its instructions' intervals (any engine); ``instruction_ns`` their summed durations; ``tensor_ns`` the union of its
Tensor-engine intervals; ``mfu`` = model FLOPs (raw FLOPs of non-transpose matmuls) / (Tensor peak x ``time_ns``);
``hfu`` = BF16-equivalent FLOPs / (Tensor peak x ``time_ns``); ``share`` = ``time_ns`` / window.  HBM bytes are those
its instructions (DMA triggers) moved.  Intervals are clipped to the window's end.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from profiler.analyses import schema as rs
from profiler.analyses.inputs import INSTRUCTION, Scope, fetch, hardware, q, resolve_scope, union_sql
from profiler.errors import QueryError
from profiler.trace import Trace
from tracer import schema as ts

#: SQL expression of each grouping key column.
_KEY_SQL: dict[str, str] = {
    rs.LAYER: q(ts.LAYER),
    rs.OPERATOR: q(ts.HLO_NAME),
    rs.ENGINE: q(ts.ENGINE),
    rs.OPCODE: q(ts.OPCODE),
    rs.SOURCE: q(ts.NKI_SOURCE_LOCATION),
}


def time_by(trace: Trace, by: str = "operator", start_ns: int | None = None, end_ns: int | None = None,
            core: int | None = None) -> pa.Table:
    """Per-group statistics of the instructions starting in the window (:func:`profiler.analyses.schema.
    group_schema`), largest ``busy_ns`` first.

    Args:
        trace: the trace.
        by: ``operator`` (layer, operator), ``opcode`` (engine, opcode) or ``source`` (kernel source line).
        start_ns: window start (default: the first event).
        end_ns: window end (default: the last event).
        core: physical core (default: every core).
    """
    if by not in rs.GROUP_KEYS:
        raise QueryError(f"cannot group by {by!r}; choose one of {', '.join(rs.GROUP_KEYS)}")
    scope = resolve_scope(trace, start_ns, end_ns, core)
    return _time_by(trace, by, scope)


def _time_by(trace: Trace, by: str, scope: Scope) -> pa.Table:
    keys = list(rs.GROUP_KEYS[by])
    part = ", ".join(f"k{i}" for i in range(len(keys)))
    key_select = ", ".join(f"{_KEY_SQL[k]} AS k{i}" for i, k in enumerate(keys))
    join = " AND ".join(f"a.k{i} IS NOT DISTINCT FROM {{t}}.k{i}" for i in range(len(keys)))
    t1 = int(scope.end_ns)
    table = fetch(trace, f"""
        WITH rows AS (
            SELECT {key_select}, {q(ts.START_TS)} AS s, least({q(ts.END_TS)}, {t1}) AS e, {q(ts.ENGINE)} AS engine,
                   {q(ts.DURATION_NS)} AS d, coalesce({q(ts.RAW_FLOPS)}, 0) AS raw,
                   coalesce({q(ts.ADJUSTED_FLOPS)}, {q(ts.RAW_FLOPS)}, 0) AS adj,
                   CASE WHEN {q(ts.ENGINE)} = 'Tensor'
                             AND coalesce({q(ts.TENSOR_INSTRUCTION_TYPE)}, '') <> 'TRANSPOSE'
                        THEN coalesce({q(ts.RAW_FLOPS)}, 0) ELSE 0 END AS model,
                   coalesce({q(rs.T_HBM_READ_BYTES)}, 0) AS rb, coalesce({q(rs.T_HBM_WRITE_BYTES)}, 0) AS wb,
                   {q(ts.ENGINE)} = 'Tensor' AS is_tensor,
                   coalesce({q(ts.ADJUSTED_FLOPS)}, {q(ts.RAW_FLOPS)}) IS NOT NULL AS has_flops,
                   coalesce({q(rs.T_HBM_READ_BYTES)}, {q(rs.T_HBM_WRITE_BYTES)}) IS NOT NULL AS has_bytes
            FROM {INSTRUCTION} WHERE {scope.starts_sql()}
        ), a AS (
            SELECT {part}, count(*) AS n, min(s) AS s0, max(e) AS e1, sum(d)::BIGINT AS d, sum(raw)::BIGINT AS raw,
                   sum(adj)::BIGINT AS adj, sum(model)::BIGINT AS model, sum(rb)::BIGINT AS rb,
                   sum(wb)::BIGINT AS wb, count(*) FILTER (WHERE is_tensor) AS nt,
                   count(*) FILTER (WHERE is_tensor AND has_flops) AS nf, count(*) FILTER (WHERE has_bytes) AS nb
            FROM rows GROUP BY {part}
        ), busy AS ({union_sql(keys, 'TRUE')}), tensor AS ({union_sql(keys, "engine = 'Tensor'")})
        SELECT a.*, coalesce(busy.u, 0) AS busy, coalesce(tensor.u, 0) AS tensor
        FROM a LEFT JOIN busy ON {join.format(t='busy')} LEFT JOIN tensor ON {join.format(t='tensor')}""")
    peak = hardware(trace).te_peak_flops
    time_ns = pc.subtract(table.column("e1"), table.column("s0")) if table.num_rows else pa.array([], pa.int64())
    seconds = pc.multiply(pc.cast(time_ns, pa.float64()), 1e-9)

    def util(flops: pa.ChunkedArray) -> pa.Array:
        if peak is None or table.num_rows == 0:
            return pa.nulls(table.num_rows, pa.float64())
        denom = pc.multiply(seconds, peak)
        return pc.if_else(pc.greater(denom, 0), pc.divide(pc.cast(flops, pa.float64()), denom), None)

    columns = {k: table.column(f"k{i}") for i, k in enumerate(keys)}
    columns.update({
        rs.INSTRUCTIONS: table.column("n"), rs.START_NS: table.column("s0"), rs.END_NS: table.column("e1"),
        rs.TIME_NS: time_ns, rs.BUSY_NS: table.column("busy"), rs.INSTRUCTION_NS: table.column("d"),
        rs.TENSOR_NS: table.column("tensor"), rs.FLOPS: table.column("raw"), rs.ADJUSTED_FLOPS: table.column("adj"),
        rs.MODEL_FLOPS: table.column("model"), rs.HBM_READ_BYTES: table.column("rb"),
        rs.HBM_WRITE_BYTES: table.column("wb"), rs.MFU: util(table.column("model")),
        rs.HFU: util(table.column("adj")),
        rs.SHARE: pc.divide(pc.cast(time_ns, pa.float64()), float(scope.length_ns)),
    })
    # a profile without the FLOP (or HBM byte) fields: unknown, not zero (as the summary's HFU/MFU say n/a);
    # FLOPs are the Tensor instructions' (as the bounds count them): a trace without any has none, known
    def total(name: str) -> int:
        return int(pc.sum(table.column(name)).as_py() or 0)

    unknown = []
    if total("nt") and not total("nf"):
        unknown += [rs.FLOPS, rs.ADJUSTED_FLOPS, rs.MODEL_FLOPS, rs.MFU, rs.HFU]
    if total("n") and not total("nb"):
        unknown += [rs.HBM_READ_BYTES, rs.HBM_WRITE_BYTES]
    for name in unknown:
        columns[name] = pa.nulls(table.num_rows, pa.float64() if name in (rs.MFU, rs.HFU) else pa.int64())
    out = pa.table(columns).cast(rs.group_schema(by))
    return out.sort_by([(rs.BUSY_NS, "descending"), (rs.START_NS, "ascending")])


def operator_table(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                   core: int | None = None) -> pa.Table:
    """The operator table: layer -> operator -> time, FLOPs, bytes, MFU (``time_by(trace, "operator")``)."""
    return time_by(trace, "operator", start_ns, end_ns, core)
