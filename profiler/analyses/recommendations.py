"""Recommendations: rule-based, ranked advice, each citing the numbers that triggered it.

The rules follow Neuron Explorer's summary-page triggers and the performance-bounds gaps:

==================  =================================================================  ===========================
rule                fires when                                                         time at stake
==================  =================================================================  ===========================
``low_mfu``         model FLOPs / (Tensor peak x total time) < 50%                     total - ideal useful compute
``low_active_flops`` hardware FLOPs / (Tensor peak x Tensor active time) < 50%         Tensor under-utilisation gap
``transposes``      transpose FLOPs > 10% of hardware FLOPs                            transpose gap
``spill_reloads``   spill reload bytes > 25% of HBM read bytes                         reload bytes at DMA peak
``small_dma``       packets under 2 KiB carry > 25% of DMA bytes, and DMA efficiency   DMA inefficiency gap
                    (ideal / active DMA time) < 90%
``reloads``         excess traffic > 20% of the ideal memory bound, or excess loads     the excess loads' share
                    > 10% of the DMA's active time (saying so when SBUF's peak of      of the DMA's time
                    live bytes leaves room for resident tiles)
``bottleneck_idle`` the bottleneck engine is idle > 10% of the time                    serialisation gap
``fp8_double_row``  FP8 matmuls without the double-row mode take > 10% of the Tensor   the time double row saves
                    engine's active time, on a core that has the mode (trnprof's
                    recordings: their cost model says ``pe_double_row``)
``engine_bound``    the bottleneck is Vector, GpSimd or Scalar, active > 50% of the run    the work another engine
                    (names its top opcode and line)                                    can run, handed to the
                                                                                       least busy such engine
``access_conflicts`` instructions waited > 5% of the run for another engine to leave a     the longest-waiting
                    memory (NeuronCore-v2: Vector and GpSimd take turns on SBUF, Vector   engine's wait
                    and Scalar on PSUM; trnprof's recordings whose cost model says
                    ``access_conflicts``)
==================  =================================================================  ===========================

Each recommendation carries the time at stake (``impact_ns``: the overhead itself), the bottleneck-aware
``speedup`` of removing it and nothing else (where one applies: ``total / max(total - impact, every other engine's
active time)``, so the two never disagree; ``low_mfu`` and ``bottleneck_idle`` remove their whole gap, the bounds'
speedups) and the ``saving_ns`` that speedup means (``total - total / speedup``).  ``reloads`` prices the excess
loads at the rate the DMA moved them (their share of its active time), not at peak.  They are ranked by saving,
then by time at stake: an overhead on an engine that is not the bottleneck saves nothing until the bottleneck
moves, so it comes last even when large.  Thresholds are module constants.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.bounds import performance_bounds
from profiler.analyses.dma import SMALL_BYTES, dma_efficiency, load_sql
from profiler.analyses.idle_gaps import idle_gaps
from profiler.analyses.inputs import (
    ACCESS_CONFLICTS,
    DMA_PACKET,
    DMA_TRIGGER_OPCODE,
    INSTRUCTION,
    Scope,
    conflict_sql,
    cost_model,
    fetch,
    has_access_conflicts,
    q,
    resolve_scope,
)
from profiler.analyses.memory_map import MemoryMap, memory_map
from profiler.analyses.waits import wait_summary
from profiler.errors import QueryError
from profiler.figures.timefmt import format_duration
from profiler.trace import Trace
from tracer import schema as ts

MFU_MIN = 0.5
ACTIVE_FLOPS_MIN = 0.5
TRANSPOSE_MAX = 0.10
SPILL_RELOAD_MAX = 0.25
SMALL_DMA_BYTES_MAX = 0.25
DMA_EFFICIENCY_MIN = 0.9
RELOAD_GAP_MAX = 0.20
#: ... or when the excess loads took more than this share of the DMA's active time.
RELOAD_TIME_MIN = 0.10
BOTTLENECK_IDLE_MAX = 0.10
#: ``reloads`` adds that SBUF has room for resident tiles when its peak of live bytes stays under this share.
SBUF_ROOM_MAX = 0.5
#: ``fp8_double_row`` fires when FP8 matmuls run without the double-row mode for more than this share of the Tensor
#: engine's active time.
FP8_SINGLE_ROW_MIN = 0.10
#: ``access_conflicts`` fires when instructions waited for another engine to leave a memory for more than this
#: share of the run (all engines together).
ACCESS_WAIT_MIN = 0.05
#: ``engine_bound`` fires when the bottleneck is Vector, GpSimd or Scalar and active more than this share of the run.
ENGINE_BOUND_MIN = 0.5


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _us(ns: float) -> str:
    return format_duration(ns)


def _rec(rule: str, title: str, message: str, *, evidence: dict[str, Any], impact_ns: float,
         speedup: float | None) -> dict[str, Any]:
    return {rs.RULE: rule, rs.TITLE: title, rs.MESSAGE: message,
            rs.EVIDENCE: json.dumps(evidence, sort_keys=True, default=float),
            rs.IMPACT_NS: max(0.0, float(impact_ns)), rs.SPEEDUP: speedup}


def _removal_speedup(b: dict[str, Any], gap_ns: float | None, resource: str) -> float | None:
    """Up to how much faster the window runs with ``gap_ns`` of ``resource``'s time removed and nothing else: it
    shortens by at most that much, and never below another engine's active time (the time at stake and the
    speedup then agree: 19 us of 48.7 us is at most 1.66x)."""
    total = b[rs.TOTAL_TIME_NS]
    if gap_ns is None or not total:
        return None
    others = [v for e, v in b[rs.ENGINE_ACTIVE_NS].items() if e != resource]
    return total / max(total - gap_ns, *others, 1.0)


def _flop_rules(b: dict[str, Any], *, default_window: bool = False) -> list[dict[str, Any]]:
    out = []
    window_note = (" (the bounds' window, first DMA start to last DMA end; the summary's MFU divides by the whole "
                   "span)" if default_window else "")
    inputs = b[rs.INPUTS]
    peak = inputs[rs.TE_PEAK_FLOPS]
    hw = inputs[rs.HW_FLOPS]
    total = b[rs.TOTAL_TIME_NS]
    if not peak or not hw or not total:
        return out
    useful = inputs[rs.MODEL_FLOPS]  # raw FLOPs of non-transpose matmuls: an FP32 matmul's 4x cost is not model work
    mfu = useful / (peak * total * 1e-9)
    ideal_useful = b[rs.COMPUTE_BOUND_IDEAL_USEFUL_NS] or 0.0
    if mfu < MFU_MIN:
        out.append(_rec(
            "low_mfu", "Low model FLOPs utilisation",
            f"Model FLOPs utilisation is {_pct(mfu)} (below {_pct(MFU_MIN)}): {useful / total / 1e3:.3g} of "
            f"{peak / 1e12:.3g} TFLOPS over {_us(total)}{window_note}. The bottleneck is {b[rs.BOTTLENECK]} "
            f"({_us(b[rs.PERFECT_PIPELINE_NS])} active); work on it first.",
            evidence={"mfu": mfu, "model_flops": useful, "te_peak_flops_per_s": peak, "total_time_ns": total,
                      "bottleneck": b[rs.BOTTLENECK]},
            impact_ns=total - ideal_useful, speedup=b[rs.SPEEDUPS].get(rs.COMPUTE_BOUND_IDEAL_USEFUL_NS)))
    active = b[rs.COMPUTE_BOUND_NS]
    if active:
        active_flops = hw / (peak * active * 1e-9)
        if active_flops < ACTIVE_FLOPS_MIN:
            out.append(_rec(
                "low_active_flops", "Tensor engine under-utilised while busy",
                f"While active ({_us(active)}), the Tensor engine reaches {_pct(active_flops)} of its peak (below "
                f"{_pct(ACTIVE_FLOPS_MIN)}): use full 128x128 stationary tiles and 512-column moving tiles, and keep "
                "matmuls back to back so the clock throttle does not restart.",
                evidence={"active_flops_fraction": active_flops, "hw_flops": hw, "compute_bound_ns": active},
                impact_ns=b[rs.TENSOR_UNDERUSE_GAP_NS] or 0.0,
                speedup=_removal_speedup(b, b[rs.TENSOR_UNDERUSE_GAP_NS], "Tensor")))
    transposes = inputs[rs.TRANSPOSE_FLOPS] / hw
    if transposes > TRANSPOSE_MAX:
        out.append(_rec(
            "transposes", "Transposes on the Tensor engine",
            f"Transposes are {_pct(transposes)} of the Tensor engine's FLOPs (above {_pct(TRANSPOSE_MAX)}): store "
            "operands in the layout the matmul needs, or transpose with DMA.",
            evidence={"transpose_fraction": transposes, "transpose_flops": inputs[rs.TRANSPOSE_FLOPS], "hw_flops": hw},
            impact_ns=b[rs.TRANSPOSE_GAP_NS] or 0.0, speedup=_removal_speedup(b, b[rs.TRANSPOSE_GAP_NS], "Tensor")))
    return out


def _spill_rule(trace: Trace, scope: Scope, b: dict[str, Any]) -> list[dict[str, Any]]:
    row = fetch(trace, f"SELECT coalesce(sum({q(rs.T_SPILL_RELOAD_BYTES)}), 0)::BIGINT AS spill, "
                       f"coalesce(sum({q(rs.T_HBM_READ_BYTES)}), 0)::BIGINT AS hbm FROM {INSTRUCTION} "
                       f"WHERE {scope.starts_sql()}").to_pylist()[0]
    spill, hbm = int(row["spill"]), int(row["hbm"])
    if not hbm or spill / hbm <= SPILL_RELOAD_MAX:
        return []
    peak = b[rs.INPUTS][rs.DMA_BW_PEAK]
    return [_rec(
        "spill_reloads", "SBUF spills reloaded from HBM",
        f"Spill reloads are {_pct(spill / hbm)} of HBM reads ({spill:,} of {hbm:,} bytes, above "
        f"{_pct(SPILL_RELOAD_MAX)}): keep the working set within SBUF (smaller tiles, fewer live tensors).",
        evidence={"spill_reload_bytes": spill, "hbm_read_bytes": hbm},
        impact_ns=spill / peak * 1e9 if peak else 0.0, speedup=None)]


def _excess_load_ns(trace: Trace, scope: Scope, factors: dict[str, float], memory: float) -> float:
    """The DMA's active time the excess loads took: each reloaded tensor's share of the packets' summed time (its
    loads'), times the part of it that was excess (1 - 1 / reload factor), of the DMA's active time ``memory``.
    Small, inefficient reloads take more of the time than of the bytes."""
    reloaded = {v: f for v, f in factors.items() if f and f > 1.0}
    if not reloaded or not memory:
        return 0.0
    dur = f"({q(ts.END_TS)} - {q(ts.START_TS)})"
    rows = fetch(trace, f"""
        SELECT {q(ts.VARIABLE)} AS var, coalesce(sum({dur}) FILTER (WHERE {load_sql()}), 0)::BIGINT AS load_ns,
               sum({dur})::BIGINT AS ns
        FROM {DMA_PACKET} WHERE {scope.starts_sql()} GROUP BY 1""").to_pylist()
    total = sum(int(r["ns"] or 0) for r in rows)
    if not total:
        return 0.0
    excess = sum(int(r["load_ns"]) * (1 - 1 / reloaded[r["var"]]) for r in rows if r["var"] in reloaded)
    return memory * excess / total


def _dma_rules(trace: Trace, scope: Scope, b: dict[str, Any], eff: dict[str, Any],
               sbuf_map: Callable[[], MemoryMap | None]) -> list[dict[str, Any]]:
    out = []
    memory = b[rs.MEMORY_BOUND_NS]
    ideal = b[rs.MEMORY_BOUND_IDEAL_NS]
    small_share = eff[rs.EFF_SMALL_BYTES_FRACTION]
    efficiency = ideal / memory if ideal is not None and memory else None
    if small_share is not None and small_share > SMALL_DMA_BYTES_MAX and efficiency is not None \
            and efficiency < DMA_EFFICIENCY_MIN:
        # the rate of the bytes the efficiency counts (data, not instruction fetches): the two agree
        peak_gbps = (b[rs.INPUTS][rs.DMA_BW_PEAK] or 0) / 1e9
        rate = efficiency * peak_gbps
        out.append(_rec(
            "small_dma", "Small DMA transfers",
            f"{_pct(small_share)} of DMA bytes move in packets under {SMALL_BYTES:,} bytes (mean "
            f"{eff[rs.EFF_MEAN_BYTES]:,.0f} B); DMA runs at {_pct(efficiency)} of its peak rate while active "
            f"({rate:.3g} of {peak_gbps:.3g} GB/s). Load whole rows: at "
            f"least {SMALL_BYTES:,} contiguous bytes per partition, 4 KiB to saturate.",
            evidence={"small_bytes_fraction": small_share, "mean_packet_bytes": eff[rs.EFF_MEAN_BYTES],
                      "dma_efficiency": efficiency, "throughput_gbps": rate},
            impact_ns=b[rs.DMA_INEFFICIENCY_GAP_NS] or 0.0,
            speedup=_removal_speedup(b, b[rs.DMA_INEFFICIENCY_GAP_NS], rs.DMA)))
    gap = b[rs.EXCESS_TRAFFIC_GAP_NS]
    tensors = [t for t in eff[rs.EFF_TENSORS].to_pylist() if t[rs.RELOAD_FACTOR]]
    # the excess loads' share of the DMA's active time: what they took at the rate the DMA moved them (at peak
    # they would take only gap; small, inefficient reloads take several times that: 64x reloads of a small tensor
    # were 11% of the bytes, under the byte rule's 20%, and 17% of the run)
    known = gap is not None and bool(ideal)
    as_moved = _excess_load_ns(trace, scope, {t[rs.VARIABLE]: t[rs.RELOAD_FACTOR] for t in tensors}, memory or 0.0) \
        if known else 0.0
    if known and (gap / ideal > RELOAD_GAP_MAX or (memory and as_moved / memory > RELOAD_TIME_MIN)):
        moved = b[rs.INPUTS][rs.DMA_TRANSFER_BYTES]
        excess_share = 1 - b[rs.INPUTS][rs.NECESSARY_BYTES] / moved if moved else 0.0
        stake = max(gap, as_moved)
        tensors.sort(key=lambda t: -(t[rs.LOADED_BYTES] - (t[rs.DISTINCT_BYTES] or 0)))
        worst = ", ".join(f"{t[rs.VARIABLE]} {t[rs.RELOAD_FACTOR]:.1f}x" for t in tensors[:3]
                          if t[rs.RELOAD_FACTOR] > 1.0)
        necessary = b[rs.INPUTS][rs.NECESSARY_BYTES]
        evidence = {"dma_transfer_bytes": b[rs.INPUTS][rs.DMA_TRANSFER_BYTES], "necessary_bytes": necessary,
                    "reload_factors": {t[rs.VARIABLE]: t[rs.RELOAD_FACTOR] for t in tensors[:5]},
                    "excess_ns_at_peak": gap, "excess_ns_as_moved": stake}
        room = ""
        sbuf = sbuf_map()  # (only now: a whole-trace memory map takes seconds on a long recording)
        if sbuf is not None and sbuf.peak_live_bytes < SBUF_ROOM_MAX * sbuf.capacity:
            room = (f" SBUF never holds more than {_pct(sbuf.peak_live_bytes / sbuf.capacity)} of its "
                    f"{sbuf.capacity // 1024:,} KiB per partition in live data, so there is room for them.")
            evidence.update(sbuf_peak_live_bytes=sbuf.peak_live_bytes, sbuf_capacity_bytes=sbuf.capacity)
        out.append(_rec(
            "reloads", "Data loaded more than once",
            f"The kernel moves {b[rs.INPUTS][rs.DMA_TRANSFER_BYTES]:,} bytes where {necessary:,} would do "
            f"({_pct(excess_share)} of them excess: {_us(stake)} of the DMA's active time at the rate it moved "
            f"them, {_us(gap)} at peak){'; reloaded: ' + worst if worst else ''}. Keep reused tiles "
            f"resident in SBUF (blocking) so each is loaded once.{room}",
            evidence=evidence, impact_ns=stake, speedup=_removal_speedup(b, stake, rs.DMA)))
    return out


def _sbuf_map(trace: Trace, scope: Scope) -> MemoryMap | None:
    """The SBUF memory map of the window (its peak of live bytes), None when the trace has none (no on-chip
    operands: not a trnprof recording) or the window holds too much to map."""
    try:
        return memory_map(trace, "SBUF", scope.start_ns, scope.end_ns, width=1, height=1, core=scope.core)
    except QueryError:
        return None


def _cause_text(gap: dict[str, Any]) -> str:
    cause = gap[rs.CAUSE]
    if cause == rs.CAUSE_END:
        return "after its last instruction"
    if cause == rs.CAUSE_NO_WAIT:
        return "with nothing issued to it"
    if cause == rs.CAUSE_ACCESS:
        return f"waiting for {gap[rs.CAUSE_RESOURCE]} to leave a memory they take turns on"
    if cause == rs.CAUSE_TRIGGER:
        return f"waiting for transfers triggered by {gap[rs.CAUSE_RESOURCE] or 'an unknown instruction'}"
    return f"waiting on {gap[rs.CAUSE_RESOURCE] or 'an unresolved semaphore'}"


#: ``bottleneck_idle`` names a dependency chain or late DMA triggers when they explain more than this share of the
#: bottleneck's idle time.
IDLE_CAUSE_MIN = 0.5
#: ... and come back in at least this many gaps (a pattern, not the first load's latency or the last store's wait).
IDLE_CAUSE_GAPS = 4


def _holding_in_line(trace: Trace, ids: list[int]) -> set[int]:
    """Of the instructions ``ids`` (DMA triggers the bottleneck's gaps waited for), those that waited themselves
    and held up the trigger after them in their engine's in-order stream: it did not wait, and started the moment
    they ended (a store's trigger waiting for its data, with a load's trigger behind it)."""
    if not ids:
        return set()
    core, idq, eng = f"coalesce({q(ts.PCORE_IDX)}, 0)", q(ts.ID), q(ts.ENGINE)
    wait = f"coalesce({q(ts.EVT_WAIT_TIME_NS)}, 0)"
    rows = fetch(trace, f"""
        WITH e AS (SELECT DISTINCT {eng} AS engine FROM {INSTRUCTION} WHERE {idq} IN (SELECT unnest($ids))),
        ins AS (
            SELECT {idq} AS id, {wait} AS wt, {q(ts.END_TS)} AS e,
                   lead({q(ts.START_TS)}) OVER w AS next_s, lead({wait}) OVER w AS next_wt,
                   lead({q(ts.OPCODE)}) OVER w AS next_op
            FROM {INSTRUCTION} WHERE {eng} IN (SELECT engine FROM e)
            WINDOW w AS (PARTITION BY {core}, {eng} ORDER BY {idq}))
        SELECT id FROM ins WHERE id IN (SELECT unnest($ids)) AND wt > 0 AND next_wt = 0 AND next_s = e
          AND next_op = '{DMA_TRIGGER_OPCODE}'""", params={"ids": [int(i) for i in ids]})
    return {int(i) for i in rows.column("id").to_pylist()}


def _idle_advice(trace: Trace, engine: str, gaps: list[dict[str, Any]], idle: float) -> str:
    """What to do about the bottleneck's idle time, from what its gaps waited for: another compute engine's results
    (a dependency chain: prefetching cannot hide it), DMA triggers held up behind others in an engine's in-order
    stream, or else its inputs."""
    on_engine: dict[str, list[int]] = {}
    late_triggers: dict[str, list[int]] = {}
    held = _holding_in_line(trace, [g[rs.CAUSE_ID] for g in gaps if g[rs.CAUSE] == rs.CAUSE_TRIGGER
                                    and g[rs.CAUSE_ID] is not None])
    for g in gaps:
        who = g[rs.CAUSE_RESOURCE]
        if not who:
            continue
        if g[rs.CAUSE] == rs.CAUSE_DEPENDENCY and g[rs.CAUSE_KIND] == rs.WAIT_KIND_ENGINE:
            on_engine.setdefault(who, []).append(g[rs.DUR_NS])
        elif g[rs.CAUSE] == rs.CAUSE_TRIGGER and g[rs.CAUSE_ID] in held:
            late_triggers.setdefault(who, []).append(g[rs.DUR_NS])
    # a pattern, not the start-up's first load or the tail's last store: at least IDLE_CAUSE_GAPS gaps
    on_engine = {k: v for k, v in on_engine.items() if len(v) >= IDLE_CAUSE_GAPS}
    late_triggers = {k: v for k, v in late_triggers.items() if len(v) >= IDLE_CAUSE_GAPS}
    chain = _dominant(on_engine, idle)
    if chain is not None:
        other, ns = chain
        return (f"Most of it ({_us(ns)}) waits for {other}'s results: a chain of dependent work between "
                f"{other} and {engine}, which prefetching cannot hide; give {engine} independent work to "
                f"interleave (another tile in flight, more buffers for what {other} produces), or shorten "
                f"{other}'s part of the chain.")
    in_line = _dominant(late_triggers, idle)
    if in_line is not None:
        issuer, ns = in_line
        return (f"Most of it ({_us(ns)}) waits for transfers whose triggers on {issuer} waited for compute "
                f"and held up the triggers behind them ({issuer}'s instructions run in order: a store waiting "
                f"for its result holds up the loads behind it); trigger loads and stores from different engines"
                f"{' (stores from GpSimd)' if issuer == 'Sync' else ''}.")
    return "Overlap its inputs with its work (prefetch, double-buffer) so it never waits."


def _dominant(groups: dict[str, list[int]], idle: float) -> tuple[str, int] | None:
    """The group of gaps holding the most time, when it is more than IDLE_CAUSE_MIN of ``idle``."""
    if idle <= 0 or not groups:
        return None
    name, ns = max(((k, sum(v)) for k, v in groups.items()), key=lambda kv: (kv[1], kv[0]))
    return (name, ns) if ns > IDLE_CAUSE_MIN * idle else None


def _bottleneck_rule(trace: Trace, scope: Scope, b: dict[str, Any]) -> list[dict[str, Any]]:
    total = b[rs.TOTAL_TIME_NS]
    engine = b[rs.BOTTLENECK]
    idle = total - b[rs.PERFECT_PIPELINE_NS]
    if not total or idle / total <= BOTTLENECK_IDLE_MAX:
        return []
    gaps = idle_gaps(trace, scope.start_ns, scope.end_ns, scope.core, engines=[engine])
    causes: dict[str, int] = {}
    for g in gaps.to_pylist():
        what = _cause_text(g)
        causes[what] = causes.get(what, 0) + g[rs.DUR_NS]
    top = sorted(causes.items(), key=lambda kv: -kv[1])[:3]
    longest = gaps.slice(0, 1).to_pylist()
    waits = wait_summary(trace, scope.start_ns, scope.end_ns, scope.core, queue_groups=True).to_pylist()
    waits = [w for w in waits if w[rs.ENGINE] == engine][:1] if engine != rs.DMA else []
    detail = "; ".join(f"{_us(ns)} {what}" for what, ns in top)
    advice = _idle_advice(trace, engine, gaps.to_pylist(), idle)
    wait_text = (f" {engine} spent {_pct(waits[0][rs.FRACTION])} of the time waiting on {waits[0][rs.WAITED_ON]}."
                 if waits else "")
    long_text = (f" Longest gap: {_us(longest[0][rs.DUR_NS])} at {longest[0][rs.START_NS]:,} ns."
                 if longest else "")
    return [_rec(
        "bottleneck_idle", f"Bottleneck {engine} is idle",
        f"The bottleneck, {engine}, is idle {_pct(idle / total)} of the time ({_us(idle)}; {detail}).{wait_text}"
        f"{long_text} {advice}",
        evidence={"bottleneck": engine, "idle_ns": idle, "total_time_ns": total, "idle_by_cause_ns": dict(top),
                  "gaps": gaps.num_rows},
        impact_ns=b[rs.SERIALIZATION_GAP_NS] or 0.0, speedup=b[rs.SPEEDUPS].get(rs.PERFECT_PIPELINE_NS))]


#: The engines that share element-wise work (tensor_tensor / tensor_scalar / copies: Vector and GpSimd; Scalar
#: for activations and copies).
ELEMENTWISE_ENGINES = ("Vector", "GpSimd", "Scalar")


#: Work an element-wise engine can hand to another: opcode -> the engines that run it too (nki.isa: tensor_tensor and
#: tensor_scalar on Vector or GpSimd, copies on any of the three, memset on Vector or GpSimd), except work on PSUM
#: for GpSimd (it cannot access PSUM).  Activations, reductions, iota and partition reductions stay where they are.
MOVABLE: dict[str, dict[str, tuple[str, ...]]] = {
    "Vector": {"TENSOR_TENSOR": ("GpSimd",), "TENSOR_SCALAR": ("GpSimd",), "TENSOR_COPY": ("GpSimd", "Scalar"),
               "MEMSET": ("GpSimd",)},
    "GpSimd": {"TENSOR_TENSOR": ("Vector",), "TENSOR_SCALAR": ("Vector",), "TENSOR_COPY": ("Vector", "Scalar"),
               "MEMSET": ("Vector",)},
    "Scalar": {},   # (its copies can carry a scale, a bias or a fused row sum: not counted as movable)
}
#: ``engine_bound`` needs at least this many of the bottleneck's instructions in the window.
ENGINE_BOUND_MIN_INSTRUCTIONS = 8


def _engine_bound_rule(trace: Trace, scope: Scope, b: dict[str, Any]) -> list[dict[str, Any]]:
    """A kernel whose bottleneck is a busy element-wise engine: without this the advice was "no rule fired" for a
    Vector-bound kernel, which reads as a clean bill of health.  Its time at stake is what handing the work another
    engine can run (:data:`MOVABLE`) to the least busy such engine could save, both then ending together; on a
    NeuronCore-v2 core Vector and GpSimd take turns on SBUF, so neither is the other's partner there."""
    total = b[rs.TOTAL_TIME_NS]
    engine = b[rs.BOTTLENECK]
    active = b[rs.ENGINE_ACTIVE_NS]
    if engine not in ELEMENTWISE_ENGINES or not total or active[engine] / total <= ENGINE_BOUND_MIN:
        return []
    busy = active[engine]
    rows = fetch(trace, f"""
        SELECT {q(ts.OPCODE)} AS opcode, coalesce({q(ts.OPERANDS)}, '') LIKE '%@PSUM%' AS psum,
               {q(ts.NKI_SOURCE_LOCATION)} AS loc, count(*) AS n, sum({q(ts.END_TS)} - {q(ts.START_TS)})::BIGINT AS ns
        FROM {INSTRUCTION} WHERE {scope.starts_sql()} AND {q(ts.ENGINE)} = '{engine}' GROUP BY 1, 2, 3
        ORDER BY ns DESC, opcode, loc""").to_pylist()
    if sum(int(r["n"]) for r in rows) < ENGINE_BOUND_MIN_INSTRUCTIONS:
        return []
    conflicts = has_access_conflicts(trace)
    summed = sum(int(r["ns"]) for r in rows) or 1
    # (durations summed over the window's instructions, of every core: scaled to the engine's active time)
    movable: dict[str, float] = {}
    for r in rows:
        for other in MOVABLE.get(engine, {}).get(r["opcode"], ()):
            if conflicts and {engine, other} == {"Vector", "GpSimd"}:
                continue   # (NeuronCore-v2: they take turns on SBUF)
            if r["psum"] and (other == "GpSimd" or (conflicts and {engine, other} == {"Vector", "Scalar"})):
                continue   # (GpSimd cannot access PSUM; on NeuronCore-v2 Vector and Scalar take turns on it)
            movable[other] = movable.get(other, 0.0) + int(r["ns"]) * busy / summed
    stake, partner = 0.0, None
    for other, can in sorted(movable.items()):
        # hand over x of it: engine busy - x, other + x; best when they end together, at most what can move
        x = min(can, max(0.0, (busy - active.get(other, 0)) / 2))
        if x > stake:
            stake, partner = x, other
    top = rows[0] if rows and rows[0]["ns"] else None
    where = ""
    if top is not None:
        line = f" at {top['loc']}" if top["loc"] else ""
        where = f"; most of it {top['opcode']}{line} ({_us(min(int(top['ns']), busy))})"
    if partner is not None:
        advice = (f"{_us(movable[partner])} of it is work {partner} can run too (it is active "
                  f"{_pct(active.get(partner, 0) / total)}): hand it some so they run side by side")
        if conflicts and engine in ("Vector", "GpSimd"):
            advice += " (on this core Vector and GpSimd take turns on SBUF, so not to the other of the two)"
    else:
        advice = "none of its work can run on another engine beside it here" + (
            " (on this core Vector and GpSimd take turns on SBUF)" if conflicts and engine in ("Vector", "GpSimd")
            else "")
        stake = 0.0
    return [_rec(
        "engine_bound", f"{engine}-bound",
        f"The kernel is {engine}-bound: {engine} is active {_pct(busy / total)} of the window ({_us(busy)}"
        f"{where}). {advice[0].upper()}{advice[1:]}; keep operands in 16-bit types where the engine has a faster "
        f"mode (trn2's Vector engine runs 16-bit copies and tensor_scalar up to 4x), and avoid chains of "
        f"dependent instructions on it (each waits for the one before).",
        evidence={"engine": engine, "active_ns": busy, "total_time_ns": total, "partner": partner,
                  "movable_ns": movable, "top": top},
        impact_ns=stake, speedup=_removal_speedup(b, stake, engine) if partner is not None else None)]


def _fp8_rule(trace: Trace, scope: Scope, b: dict[str, Any]) -> list[dict[str, Any]]:
    cm = cost_model(trace)
    speed = cm.get("pe_double_row_speedup")
    if cm.get("pe_double_row") is not True or type(speed) not in (int, float) or not speed > 1:
        return []
    row = fetch(trace, f"SELECT count(*) AS n, coalesce(sum({q(ts.END_TS)} - {q(ts.START_TS)}), 0)::BIGINT AS ns "
                       f"FROM {INSTRUCTION} WHERE {scope.starts_sql()} AND {q(ts.OPCODE)} = 'MATMUL' "
                       f"AND {q(ts.OPERANDS)} LIKE '%src=fp8\\_%' ESCAPE '\\' "
                       f"AND coalesce({q(ts.PERFORMANCE_MODE)}, '') <> 'double_row'").to_pylist()[0]
    n, ns = int(row["n"]), int(row["ns"])
    active = b[rs.ENGINE_ACTIVE_NS]
    tensor = active.get("Tensor", 0)
    if not n or not tensor or ns / tensor <= FP8_SINGLE_ROW_MIN:
        return []
    saved = ns * (1 - 1 / speed)
    return [_rec(
        "fp8_double_row", "FP8 matmuls without double row",
        f"{n:,} FP8 MATMULs ({_us(ns)}, {_pct(ns / tensor)} of the Tensor engine's active time) ran without the "
        f"double-row mode, at BF16 speed: matmul(..., perf_mode=\"double_row\") runs them {speed:g}x as fast on "
        f"this core ({_us(saved)} less).",
        evidence={"fp8_matmuls": n, "fp8_matmul_ns": ns, "tensor_active_ns": tensor, "double_row_speedup": speed},
        impact_ns=saved, speedup=_removal_speedup(b, saved, "Tensor"))]


def _access_rule(trace: Trace, scope: Scope, b: dict[str, Any]) -> list[dict[str, Any]]:
    """Instructions that started late because the conflicting engine was using the memory: on one engine's
    in-order stream an instruction could start once the previous one ended and its semaphore wait was over
    (``evt_wait_time_ns``); any later start, at the end of a conflicting instruction, is the conflict's."""
    if not has_access_conflicts(trace):
        return []
    total = b[rs.TOTAL_TIME_NS]
    if not total:
        return []
    core = f"coalesce({q(ts.PCORE_IDX)}, 0)"
    engines = ", ".join(sorted({f"'{e}'" for a, o, _m in ACCESS_CONFLICTS for e in (a, o)}))
    engine_pair = f"list_sort([v.{q(ts.ENGINE)}, o.{q(ts.ENGINE)}])"
    memory = "CASE " + " ".join(f"WHEN {engine_pair} = {sorted((a, o))} THEN '{m}'"
                                for a, o, m in ACCESS_CONFLICTS) + " END"
    rows = fetch(trace, f"""
        WITH ins AS (
            SELECT *, lag({q(ts.END_TS)}, 1, 0) OVER (PARTITION BY {core}, {q(ts.ENGINE)} ORDER BY {q(ts.ID)}) AS prev
            FROM {INSTRUCTION} WHERE {q(ts.ENGINE)} IN ({engines})),
        late AS (
            SELECT v.{q(ts.ID)} AS id, v.{q(ts.ENGINE)} AS engine, o.{q(ts.ENGINE)} AS other,
                   {memory} AS memory,
                   v.{q(ts.START_TS)} - (v.prev + coalesce(v.{q(ts.EVT_WAIT_TIME_NS)}, 0)) AS late_ns
            FROM ins v JOIN ins o ON o.{q(ts.END_TS)} = v.{q(ts.START_TS)} AND {conflict_sql('v', 'o')}
            WHERE late_ns > 0 AND {scope.starts_sql('v')}
            QUALIFY row_number() OVER (PARTITION BY v.{q(ts.ID)} ORDER BY o.{q(ts.ENGINE)}) = 1)
        SELECT engine, other, memory, count(*) AS n, sum(late_ns)::BIGINT AS ns FROM late
        GROUP BY 1, 2, 3 ORDER BY ns DESC, engine, other""").to_pylist()
    waited = sum(r["ns"] for r in rows)
    if not rows or waited / total <= ACCESS_WAIT_MIN:
        return []
    parts = "; ".join(f"{r['engine']} {_us(r['ns'])} in {r['n']:,} instructions for {r['other']} to leave "
                      f"{r['memory']}" for r in rows)
    per_engine: dict[str, int] = {}
    for r in rows:
        per_engine[r["engine"]] = per_engine.get(r["engine"], 0) + r["ns"]
    return [_rec(
        "access_conflicts", "Engines taking turns on a memory",
        f"Instructions waited {_us(waited)} ({_pct(waited / total)} of the run) for another engine to leave a "
        f"memory: {parts}. On NeuronCore-v2 Vector and GpSimd cannot access SBUF at the same time, nor Vector and "
        "Scalar PSUM: give the work to an engine without the conflict (Scalar may share SBUF with Vector), or let "
        "the two engines' work on that memory run at different times.",
        evidence={"waited_ns": waited, "total_time_ns": total,
                  "by_engine": [{k: r[k] for k in ("engine", "other", "memory", "n", "ns")} for r in rows]},
        impact_ns=max(per_engine.values()), speedup=None)]


def _point_to_fp8(recs: list[dict[str, Any]]) -> None:
    """An FP8 matmul without double row reaches half the BF16 peak whatever its tiles: the under-utilisation rules
    then say so instead of leaving only their advice on tile sizes."""
    fp8 = next((r for r in recs if r[rs.RULE] == "fp8_double_row"), None)
    if fp8 is None:
        return
    evidence = json.loads(fp8[rs.EVIDENCE])
    share = evidence["fp8_matmul_ns"] / evidence["tensor_active_ns"]
    for r in recs:
        if r[rs.RULE] in ("low_active_flops", "low_mfu"):
            r[rs.MESSAGE] += (f" FP8 matmuls without double row ({_pct(share)} of the Tensor engine's active time) "
                              "reach at most half the peak: see fp8_double_row.")


def recommendations(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                    core: int | None = None) -> pa.Table:
    """Ranked recommendations for the window (:data:`~profiler.analyses.schema.RECOMMENDATIONS`), largest
    bottleneck-aware saving first; empty when no rule fires."""
    b = performance_bounds(trace, start_ns, end_ns, core)
    if b[rs.BOTTLENECK] is None:  # nothing ran in the window: nothing to advise
        return rs.RECOMMENDATIONS.empty_table()
    scope = resolve_scope(trace, b[rs.START_NS], b[rs.END_NS], core)
    eff = dma_efficiency(trace, scope.start_ns, scope.end_ns, core)
    recs = [*_flop_rules(b, default_window=start_ns is None and end_ns is None), *_spill_rule(trace, scope, b),
            *_dma_rules(trace, scope, b, eff, lambda: _sbuf_map(trace, scope)),
            *_bottleneck_rule(trace, scope, b), *_engine_bound_rule(trace, scope, b), *_fp8_rule(trace, scope, b),
            *_access_rule(trace, scope, b)]
    _point_to_fp8(recs)
    total = b[rs.TOTAL_TIME_NS]
    for r in recs:
        speedup = r[rs.SPEEDUP]
        r[rs.SAVING_NS] = max(0.0, total - total / speedup) if speedup else min(r[rs.IMPACT_NS], float(total))
    recs.sort(key=lambda r: (-round(r[rs.SAVING_NS], 6), -r[rs.IMPACT_NS], r[rs.RULE]))
    for rank, r in enumerate(recs, start=1):
        r[rs.RANK] = rank
    return pa.Table.from_pylist(recs, schema=rs.RECOMMENDATIONS)


#: A speedup within this of 1 is no speedup (the overhead is off the bottleneck's path).
NO_SPEEDUP = 1.005


def stake_text(rec: dict[str, Any]) -> str:
    """What one recommendation row stands to gain, for people: ``"23.16 ms at stake, up to 1.25x faster"``, or, when
    removing the overhead would not shorten the run while another engine bounds it, ``"... at stake, no faster
    until the bottleneck moves"`` (the dashboard and ``trnprof recommend`` print this)."""
    text = f"{format_duration(rec[rs.IMPACT_NS])} at stake"
    speedup = rec.get(rs.SPEEDUP)
    if speedup is None:
        return text
    if speedup < NO_SPEEDUP:
        return f"{text}, no faster until the bottleneck moves"
    return f"{text}, up to {speedup:.2f}x faster"
