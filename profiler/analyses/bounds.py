"""Performance bounds: how long the kernel (or a window) would take under idealising assumptions, and why not.

The method of Neuron kernel engineers (AWS's NKI profiling guidance, cited and documented in
``docs/analyses.md``): three families of bounds — memory, compute, pipeline — each a duration; the gap between
consecutive bounds of a family is the time lost to one kind of overhead; the largest engine active time is the
perfect-pipeline bound and names the bottleneck; removing one overhead gives a bottleneck-aware speedup
``total / max(bound, the largest active time among the engines that bound does not touch)``.

:func:`performance_bounds` returns a JSON-ready dict with the keys fixed by issue 7 (``total_time_ns``,
``memory_bound_ns``, ... ``bottleneck``) plus the gaps, per-engine active times, speedups and inputs.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from profiler import db_schema as dbs
from profiler.analyses import hbm_regions, intervals
from profiler.analyses import schema as rs
from profiler.analyses.inputs import (
    DMA_PACKET,
    INSTRUCTION,
    INSTRUCTION_QUEUE_TYPE,
    TINY_PACKET_BYTES,
    Scope,
    check_amount,
    column,
    cores,
    dma_intervals,
    fetch,
    hardware,
    instruction_intervals,
    q,
    resolve_scope,
)
from profiler.trace import Trace
from tracer import schema as ts

TENSOR = "Tensor"
_NS_PER_S = 1e9


def _engine_active(trace: Trace, scope: Scope) -> dict[str, int]:
    """Union busy time of each compute engine and of the DMA queues together, clipped to the window."""
    rows = instruction_intervals(trace, scope)
    engines = rows.column(ts.ENGINE).to_numpy(zero_copy_only=False)
    active = intervals.union_ns_by(engines, column(rows, ts.START_TS), column(rows, ts.END_TS),
                                   scope.start_ns, scope.end_ns)
    out = {e: int(active.get(e, 0)) for e in ts.ENGINES}
    out.update({str(e): int(v) for e, v in active.items() if e is not None and e not in out})
    starts, ends = dma_intervals(trace, scope)
    out[rs.DMA] = intervals.union_ns(starts, ends, scope.start_ns, scope.end_ns)
    return out


def _counts(trace: Trace, scope: Scope) -> dict[str, int]:
    dma = fetch(trace, f"SELECT coalesce(sum({q(ts.TRANSFER_BYTES)}), 0) AS b FROM {DMA_PACKET} "
                       f"WHERE {scope.starts_sql()} AND {q(ts.TRANSFER_BYTES)} > {TINY_PACKET_BYTES} "
                       f"AND {q(ts.QUEUE_TYPE)} IS DISTINCT FROM '{INSTRUCTION_QUEUE_TYPE}'").to_pylist()[0]
    # BF16-equivalent FLOPs (raw ones where a profile has no adjusted_flops, as the summary counts them), and the
    # model's: raw FLOPs of the matmuls that are not transposes (Neuron's MFU numerator)
    hw_flop = f"coalesce({q(ts.ADJUSTED_FLOPS)}, {q(ts.RAW_FLOPS)})"
    model_flop = f"coalesce({q(ts.RAW_FLOPS)}, {q(ts.ADJUSTED_FLOPS)})"
    transpose = f"{q(ts.TENSOR_INSTRUCTION_TYPE)} = 'TRANSPOSE'"
    flops = fetch(trace, f"SELECT coalesce(sum({hw_flop}), 0) AS hw, "
                         f"coalesce(sum({hw_flop}) FILTER (WHERE {transpose}), 0) AS tr, "
                         f"coalesce(sum({model_flop}) FILTER (WHERE {transpose} IS NOT TRUE), 0) AS model, "
                         f"count(*) AS n, count({hw_flop}) AS known "
                         f"FROM {INSTRUCTION} "
                         f"WHERE {scope.starts_sql()} AND {q(ts.ENGINE)} = '{TENSOR}'").to_pylist()[0]
    if flops["n"] and not flops["known"]:   # a profile without FLOP fields: unknown, not zero
        return {rs.DMA_TRANSFER_BYTES: int(dma["b"]), rs.HW_FLOPS: None, rs.TRANSPOSE_FLOPS: None,
                rs.MODEL_FLOPS: None}
    return {rs.DMA_TRANSFER_BYTES: int(dma["b"]), rs.HW_FLOPS: int(flops["hw"]), rs.TRANSPOSE_FLOPS: int(flops["tr"]),
            rs.MODEL_FLOPS: int(flops["model"])}


def _has_dma(trace: Trace) -> bool:
    """Whether the trace has DMA packets at all (a track of them)."""
    return any(t[dbs.TABLE] == ts.DMA_PACKET.name for t in trace.tracks().to_pylist())


def _ns(amount: float | None, rate_per_s: float | None) -> float | None:
    if amount is None or rate_per_s is None:
        return None
    return amount / rate_per_s * _NS_PER_S


def _speedup(total: float, bound: float | None, others: list[int]) -> float | None:
    if bound is None:
        return None
    floor = max([bound, *others])
    return total / floor if floor > 0 else None


def performance_bounds(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                       core: int | None = None, *, necessary_bytes: int | None = None) -> dict[str, Any]:
    """The performance bounds of ``trace`` in ``[start_ns, end_ns)`` (default: first DMA start to last DMA end).

    Args:
        trace: the trace.
        start_ns: window start (default: the first DMA packet's start).
        end_ns: window end (default: the last DMA packet's end).
        core: physical core (``pcore_idx``); default every core, which is right for one-core traces.
        necessary_bytes: bytes the window must move at least (every input/output tensor once); by default derived
            from the HBM regions in the DMA triggers' operands, unknown (null bounds) when the trace has none.

    Returns:
        A dict with ``total_time_ns``, the seven bounds (``*_bound*_ns``, ``perfect_pipeline_ns``; float ns,
        ``None`` when an input is unknown), ``bottleneck`` (an engine name or ``DMA``; None when nothing was
        active), the seven gaps
        (:data:`profiler.analyses.schema.GAPS`), ``engine_active_ns``, ``speedups`` (per bound),
        ``inputs`` and ``notes``, plus ``start_ns``, ``end_ns`` and ``core``.
    """
    scope = resolve_scope(trace, start_ns, end_ns, core, kernel_window=True)
    hw = hardware(trace)
    active = _engine_active(trace, scope)
    counts = _counts(trace, scope)
    notes: list[str] = []
    if necessary_bytes is not None:  # (a negative or NaN one made a negative or NaN bound)
        necessary_bytes = check_amount(necessary_bytes, "necessary_bytes")
    if necessary_bytes is None:
        necessary_bytes = hbm_regions.necessary_bytes(trace, scope)
        if necessary_bytes is not None:  # (placed by transfer: a window cutting transfers holds only part of them)
            necessary_bytes = min(necessary_bytes, counts[rs.DMA_TRANSFER_BYTES])
        elif not counts[rs.DMA_TRANSFER_BYTES]:
            necessary_bytes = 0  # no transfer in the window: nothing was necessary
        else:
            notes.append("memory_bound_no_reloads_ns is unknown: the trace does not say which HBM regions its DMAs "
                         "moved (pass necessary_bytes / --necessary-bytes)")
    if scope.core is None:
        every = cores(trace)
        if len(every) > 1:  # the method is a NeuronCore's: merged, one core's idle time hides behind another's work
            notes.append(f"the window covers {len(every)} cores: their work is counted as one core's, against one "
                         "core's peaks (pass core= / --core for one core's bounds)")
    for field in hw.missing:
        notes.append(f"Metadata.{field} is missing, so the bounds that need it are unknown")
    flops_known = counts[rs.HW_FLOPS] is not None
    if not flops_known:
        notes.append("the trace records no FLOPs for its Tensor instructions (raw_flops / adjusted_flops), so the "
                     "ideal compute bounds are unknown")
    has_dma = _has_dma(trace)
    if not has_dma:   # (a legacy neuron-profile JSON records instructions only: "DMA idle" would be about no data)
        necessary_bytes = None
        notes.append("the trace has no DMA packets (a legacy neuron-profile JSON records instructions only), so the "
                     "memory bounds are unknown")
    total = scope.length_ns
    values: dict[str, float | None] = {
        rs.MEMORY_BOUND_NS: float(active[rs.DMA]) if has_dma else None,
        rs.MEMORY_BOUND_IDEAL_NS: _ns(counts[rs.DMA_TRANSFER_BYTES], hw.dma_bw_peak) if has_dma else None,
        rs.MEMORY_BOUND_NO_RELOADS_NS: _ns(necessary_bytes, hw.dma_bw_peak),
        rs.COMPUTE_BOUND_NS: float(active[TENSOR]),
        rs.COMPUTE_BOUND_IDEAL_NS: _ns(counts[rs.HW_FLOPS], hw.te_peak_flops),
        rs.COMPUTE_BOUND_IDEAL_USEFUL_NS: _ns(counts[rs.HW_FLOPS] - counts[rs.TRANSPOSE_FLOPS], hw.te_peak_flops)
        if flops_known else None,
    }
    busiest = max(active, key=lambda e: (active[e], e == rs.DMA))
    values[rs.PERFECT_PIPELINE_NS] = float(active[busiest])
    bottleneck: str | None = busiest
    if active[busiest] == 0:  # nothing to name: an idle window has no bottleneck
        bottleneck = None
        notes.append("no engine or DMA queue was active in the window, so it has no bottleneck")
    result: dict[str, Any] = {rs.TOTAL_TIME_NS: total, **values, rs.BOTTLENECK: bottleneck}
    full = {rs.TOTAL_TIME_NS: float(total), **values}
    for key, (upper, lower, _meaning) in rs.GAPS.items():
        hi, lo = full[upper], full[lower]
        result[key] = None if hi is None or lo is None else hi - lo
    not_dma = [v for e, v in active.items() if e != rs.DMA]
    not_tensor = [v for e, v in active.items() if e != TENSOR]
    result[rs.SPEEDUPS] = {
        rs.MEMORY_BOUND_NS: _speedup(total, values[rs.MEMORY_BOUND_NS], not_dma),
        rs.MEMORY_BOUND_IDEAL_NS: _speedup(total, values[rs.MEMORY_BOUND_IDEAL_NS], not_dma),
        rs.MEMORY_BOUND_NO_RELOADS_NS: _speedup(total, values[rs.MEMORY_BOUND_NO_RELOADS_NS], not_dma),
        rs.COMPUTE_BOUND_NS: _speedup(total, values[rs.COMPUTE_BOUND_NS], not_tensor),
        rs.COMPUTE_BOUND_IDEAL_NS: _speedup(total, values[rs.COMPUTE_BOUND_IDEAL_NS], not_tensor),
        rs.COMPUTE_BOUND_IDEAL_USEFUL_NS: _speedup(total, values[rs.COMPUTE_BOUND_IDEAL_USEFUL_NS], not_tensor),
        rs.PERFECT_PIPELINE_NS: _speedup(total, values[rs.PERFECT_PIPELINE_NS], []),
    }
    result[rs.ENGINE_ACTIVE_NS] = active
    result[rs.INPUTS] = {
        rs.DMA_ACTIVE_NS: active[rs.DMA],
        rs.DMA_TRANSFER_BYTES: counts[rs.DMA_TRANSFER_BYTES],
        rs.NECESSARY_BYTES: necessary_bytes,
        rs.HW_FLOPS: counts[rs.HW_FLOPS],
        rs.TRANSPOSE_FLOPS: counts[rs.TRANSPOSE_FLOPS],
        rs.MODEL_FLOPS: counts[rs.MODEL_FLOPS],
        rs.DMA_BW_PEAK: hw.dma_bw_peak,
        rs.TE_PEAK_FLOPS: hw.te_peak_flops,
    }
    result[rs.NOTES] = notes
    result[rs.START_NS] = scope.start_ns
    result[rs.END_NS] = scope.end_ns
    result[rs.CORE] = scope.core
    return result


def bounds_table(bounds: dict[str, Any]) -> pa.Table:
    """The bounds of :func:`performance_bounds` as rows (family, bound, value, gap to the one before, speedup)."""
    rows = []
    previous: dict[str, str] = {}
    for key in rs.BOUND_KEYS:
        family = rs.BOUND_FAMILY[key]
        upper = previous.get(family, rs.TOTAL_TIME_NS)
        gap_key = next((g for g, (hi, lo, _m) in rs.GAPS.items() if hi == upper and lo == key), None)
        value = bounds.get(key)
        rows.append({
            rs.FAMILY: family,
            rs.BOUND: key,
            rs.VALUE_NS: None if value is None else float(value),
            rs.GAP_NS: None if gap_key is None or bounds.get(gap_key) is None else float(bounds[gap_key]),
            rs.GAP_MEANING: rs.GAPS[gap_key][2] if gap_key else None,
            rs.SPEEDUP: bounds.get(rs.SPEEDUPS, {}).get(key),
        })
        previous[family] = key
    return pa.Table.from_pylist(rows, schema=rs.BOUNDS_TABLE)
