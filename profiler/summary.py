"""The trace summary (``trnprof summary``, ``Trace.summary``): engine active time, HFU/MFU and DMA figures.

Definitions (Neuron Explorer's Summary, see ``docs/database.md``):

* ``total_time_ns``: the summarised range, by default the trace's first start to last end.
* engine ``active_time_ns``: the union of the engine's instruction intervals within the range, summed over cores.
  An instruction is busy over ``[start_ts, end_ts)``; its semaphore wait (``evt_wait_time_ns``) lies *before*
  ``start_ts`` in trnprof traces, so waits are excluded.  ``utilization_pct`` = active / (total x cores).
  ``instruction_count``: instructions starting in the range.
* ``hfu_pct`` = hardware FLOPs / (TE peak x total x cores), with TE peak = 2 x rows x cols x Tensor clock and
  hardware FLOPs the BF16-equivalent ``adjusted_flops`` (``raw_flops`` where that is missing) of Tensor
  instructions starting in the range; ``mfu_pct`` = model FLOPs / the same, model FLOPs being the ``raw_flops``
  (1 MAC = 2) of those that are not transposes, as Neuron defines MFU: an FP32 matmul (4x the hardware work) is
  high HFU and low MFU, and FP8 matmuls (twice BF16's rate on Trn2) can reach an MFU over 100% of the BF16 peak.
* ``dma``: ``active_time_ns`` the union of all DMA packets per core (clipped, summed over cores),
  ``transfer_bytes`` of packets starting in the range, ``throughput_gbps`` = bytes / the ns any core's DMA was
  active (= GB/s; one core: its active time),
  ``utilization_pct`` = active / (total x cores with DMA queues), like the engines'; ``cores``: how many
  cores have DMA queues.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler import db_schema as dbs
from profiler.db.ranges import track_totals
from profiler.db.sqlutil import fetch_one, quote
from profiler.errors import QueryError
from tracer import schema as ts

if TYPE_CHECKING:
    from profiler.trace import Trace

#: Tensor engine clock (GHz) by architecture preset when the Metadata does not say.
TENSOR_CLOCK_GHZ = {"trn1": 2.8, "inf2": 2.8, "trn2": 2.4, "trn3": 2.4}
DEFAULT_PE_ROWS = 128
DEFAULT_PE_COLS = 128
TRANSPOSE = "TRANSPOSE"
TENSOR = "Tensor"


def tensor_peak_flops_per_ns(metadata: dict[str, Any]) -> float | None:
    """Tensor engine peak FLOP/ns of one core (2 x rows x cols x clock GHz), or None when the clock is unknown."""
    rows = metadata.get("tensor_engine_num_rows") or DEFAULT_PE_ROWS
    cols = metadata.get("tensor_engine_num_cols") or DEFAULT_PE_COLS
    clock = metadata.get("tensor_engine_clock_freq") or TENSOR_CLOCK_GHZ.get(str(metadata.get("arch")).lower())
    if not clock:
        return None
    return 2.0 * float(rows) * float(cols) * float(clock)


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 4) if whole > 0 else None


def summarize(trace: Trace, start_ns: int | None = None, end_ns: int | None = None) -> dict[str, Any]:
    """The summary dict (keys exactly as ``trnprof summary --json`` prints them; see ``docs/database.md``)."""
    from profiler.trace import check_time

    first, last = trace.time_range
    start = first if start_ns is None else check_time(start_ns, "start_ns")
    end = last if end_ns is None else check_time(end_ns, "end_ns")
    if end < start or (end == start and (start_ns is not None or end_ns is not None)):
        raise QueryError(f"empty time range: end ({end}) must be after start ({start})")
    total = end - start
    # counts take events *starting* in [start, end): over the whole trace (no end given), one starting at its very
    # end (a zero-length event at the last timestamp) counts too; busy time is the same either way
    count_end = end + 1 if end_ns is None else end
    cur = trace._cursor()
    tracks = sorted(trace.tracks().to_pylist(), key=lambda t: t[dbs.SORT_ORDER])

    engines: dict[str, dict[str, Any]] = {}
    cores_of: dict[str, set[object]] = {}
    tensor_tracks: list[int] = []
    for t in (t for t in tracks if t[dbs.KIND] == "engine"):
        name = t[ts.NAME]
        busy, count = track_totals(cur, trace.track_info(t[dbs.TRACK_ID]), start, count_end)
        entry = engines.setdefault(name, {"active_time_ns": 0, "utilization_pct": None, "instruction_count": 0})
        entry["active_time_ns"] += busy
        entry["instruction_count"] += count
        cores_of.setdefault(name, set()).add(t[dbs.CORE])
        if name == TENSOR:
            tensor_tracks.append(t[dbs.TRACK_ID])
    for name, entry in engines.items():
        entry["utilization_pct"] = _pct(entry["active_time_ns"], total * len(cores_of[name]))

    flops = _tensor_flops(cur, tensor_tracks, start, count_end) if total else (0.0, 0.0)
    peak = tensor_peak_flops_per_ns(trace.metadata)
    tensor_cores = max(1, len(cores_of.get(TENSOR, set())))
    capacity = peak * total * tensor_cores if peak else 0.0

    queues_by_core: dict[object, list[int]] = {}
    for t in (t for t in tracks if t[dbs.KIND] == "dma_queue"):
        queues_by_core.setdefault(t[dbs.CORE], []).append(t[dbs.TRACK_ID])
    dma_active = sum(trace.busy_ns(ids, start, end) for ids in queues_by_core.values()) if total else 0
    # the throughput while DMA is active: over the time any core's queues moved data (one core: the same time)
    dma_any = (dma_active if len(queues_by_core) <= 1 else
               trace.busy_ns([i for ids in queues_by_core.values() for i in ids], start, end)) if total else 0
    dma_bytes = 0
    if queues_by_core and total:
        row = fetch_one(
            cur, f"SELECT coalesce(sum({quote(ts.TRANSFER_BYTES)}), 0)::BIGINT FROM {quote(ts.DMA_PACKET.name)} "
            f"WHERE {quote(ts.START_TS)} >= $a AND {quote(ts.START_TS)} < $b", {"a": start, "b": count_end})
        dma_bytes = int(row[0]) if row else 0
    return {
        "total_time_ns": total,
        "engines": engines,
        "hfu_pct": _pct(flops[0], capacity) if capacity and flops[0] is not None else None,
        "mfu_pct": _pct(flops[1], capacity) if capacity and flops[1] is not None else None,
        "dma": {
            "active_time_ns": int(dma_active),
            "transfer_bytes": dma_bytes,
            "throughput_gbps": round(dma_bytes / dma_any, 4) if dma_any else None,
            "utilization_pct": _pct(dma_active, total * len(queues_by_core)) if queues_by_core else None,
            "cores": len(queues_by_core),
        },
    }


def _tensor_flops(cur: Any, tensor_tracks: list[int], start: int, end: int) -> tuple[float | None, float | None]:
    """(hardware, model) FLOPs of the Tensor instructions of these tracks starting in [start, end); None for both
    when there are such instructions and none has a FLOP count (a profile without the FLOP fields: unknown, not
    zero)."""
    if not tensor_tracks:
        return 0.0, 0.0
    flop = f"coalesce({quote(ts.ADJUSTED_FLOPS)}, {quote(ts.RAW_FLOPS)})"
    model = f"coalesce({quote(ts.RAW_FLOPS)}, {quote(ts.ADJUSTED_FLOPS)})"
    row = fetch_one(
        cur, f"SELECT coalesce(sum({flop}), 0)::DOUBLE, coalesce(sum({model}) FILTER "
        f"(WHERE coalesce({quote(ts.TENSOR_INSTRUCTION_TYPE)}, '') <> '{TRANSPOSE}'), 0)::DOUBLE, "
        f"count(*), count({flop}) "
        f"FROM {quote(ts.INSTRUCTION.name)} WHERE {quote(dbs.TRACK_ID)} IN "
        f"({', '.join(str(int(i)) for i in tensor_tracks)}) "
        f"AND {quote(ts.START_TS)} >= $a AND {quote(ts.START_TS)} < $b", {"a": start, "b": end})
    if not row:
        return 0.0, 0.0
    if row[2] and not row[3]:
        return None, None
    return float(row[0]), float(row[1])


def tensor_flops(trace: Trace, start_ns: int, end_ns: int) -> tuple[float | None, float | None]:
    """(hardware, model) FLOPs of the Tensor instructions starting in [start_ns, end_ns): the numerators of
    ``hfu_pct`` and ``mfu_pct`` (hardware: BF16-equivalent ``adjusted_flops``, ``raw_flops`` where missing;
    model: ``raw_flops`` of the instructions that are not transposes; None when none has a FLOP count)."""
    from profiler.trace import check_time

    start_ns, end_ns = check_time(start_ns, "start_ns"), check_time(end_ns, "end_ns")  # (None, "0", 1.5: raw)
    with trace._call():
        ids = [t[dbs.TRACK_ID] for t in trace.tracks().to_pylist()
               if t[dbs.KIND] == "engine" and t[ts.NAME] == TENSOR]
        return _tensor_flops(trace._cursor(), ids, start_ns, end_ns)


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as aligned text for the terminal."""
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}%"

    lines = [f"total time        {summary['total_time_ns'] / 1e3:,.3f} us"]
    lines.append(f"{'engine':<10} {'active (us)':>14} {'utilization':>12} {'instructions':>14}")
    for name, e in summary["engines"].items():
        lines.append(f"{name:<10} {e['active_time_ns'] / 1e3:>14,.3f} {pct(e['utilization_pct']):>12} "
                     f"{e['instruction_count']:>14,}")
    lines.append(f"HFU {pct(summary['hfu_pct'])}   MFU {pct(summary['mfu_pct'])}")
    d = summary["dma"]
    tp = "n/a" if d["throughput_gbps"] is None else f"{d['throughput_gbps']:.2f} GB/s"
    cores = d.get("cores") or 1
    summed = f" (summed over {cores} cores)" if cores > 1 else ""
    lines.append(f"DMA active {d['active_time_ns'] / 1e3:,.3f} us{summed}, {d['transfer_bytes']:,} bytes, {tp}")
    return "\n".join(lines)
