"""DMA efficiency: packet sizes, traffic per queue, reloads per tensor, and the regions of small transfers.

Over the DMA packets starting in the window:

* :func:`size_histogram` — packets per power-of-two size bin ``[2**k, 2**(k+1))`` (bytes, summed durations);
* :func:`queue_table` — per queue: packets, bytes, busy time (union), busy fraction, achieved throughput;
* :func:`tensor_table` — per tensor (``variable``): bytes loaded from HBM, stored to HBM, the distinct bytes loaded
  (from the HBM regions the DMA triggers name, see :mod:`profiler.analyses.hbm_regions`) and the reload factor
  loaded / distinct (1 = every byte loaded once; null when the trace does not say which region moved);
* :func:`small_transfer_regions` — stretches where packets under ``small_bytes`` (default 2 KiB per partition row,
  where a DMA falls below ~90% of its peak rate) take most of the DMA time, like Neuron Explorer's
  "Small DMA transfers" band: packets are binned by start time into buckets, a bucket is flagged when small
  packets take more than ``min_fraction`` of its packets' time, and adjacent flagged buckets merge into one region
  spanning their packets (first start to last end).

:func:`dma_efficiency` returns all four plus headline numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from profiler.analyses import hbm_regions, intervals
from profiler.analyses import schema as rs
from profiler.analyses.inputs import DMA_PACKET, Scope, column, dma_intervals, fetch, hardware, q, resolve_scope
from profiler.errors import QueryError
from profiler.sort_keys import natural_key
from profiler.trace import Trace
from tracer import schema as ts

#: Packets below this many bytes count as small (per partition row: below it a DMA runs under ~90% of peak).
SMALL_BYTES = 2048
#: A bucket is in a small-transfer region when small packets take more than this share of its packet time.
MIN_SMALL_FRACTION = 0.5
#: Default number of buckets the window is cut into when looking for small-transfer regions.
REGION_BUCKETS = 200

HBM = "HBM"


def size_histogram(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                   core: int | None = None) -> pa.Table:
    """Packets per power-of-two size bin (:data:`~profiler.analyses.schema.DMA_SIZE_HISTOGRAM`), small first."""
    return _size_histogram(trace, resolve_scope(trace, start_ns, end_ns, core))


def _size_histogram(trace: Trace, scope: Scope) -> pa.Table:
    b = q(ts.TRANSFER_BYTES)
    table = fetch(trace, f"""
        WITH p AS (SELECT CASE WHEN coalesce({b}, 0) <= 0 THEN -1
                               ELSE floor(log2({b}))::BIGINT END AS k,
                          coalesce({b}, 0) AS nbytes, {q(ts.DURATION_NS)} AS d
                   FROM {DMA_PACKET} WHERE {scope.starts_sql()})
        SELECT k, count(*) AS n, sum(nbytes)::BIGINT AS nbytes, sum(d)::BIGINT AS d FROM p GROUP BY k ORDER BY k""")
    k = column(table, "k")
    n = column(table, "n")
    total = max(int(n.sum()), 1)
    lo = np.where(k < 0, 0, np.left_shift(1, np.maximum(k, 0)))
    hi = np.where(k < 0, 1, np.left_shift(1, np.maximum(k, 0) + 1))
    return pa.table({rs.SIZE_LO: lo, rs.SIZE_HI: hi, rs.PACKETS: n, rs.BYTES: column(table, "nbytes"),
                     rs.TOTAL_NS: column(table, "d"), rs.FRACTION: n / total}, schema=rs.DMA_SIZE_HISTOGRAM)


def queue_table(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                core: int | None = None) -> pa.Table:
    """Traffic per DMA queue (:data:`~profiler.analyses.schema.DMA_QUEUES`), busiest first; with several cores in
    scope each core's queues are rows of their own, named ``NC<core> <queue>``."""
    return _queue_table(trace, resolve_scope(trace, start_ns, end_ns, core))


def _queue_table(trace: Trace, scope: Scope) -> pa.Table:
    t0, t1 = int(scope.start_ns), int(scope.end_ns)
    # per core and queue: every core has its own qSyncIO0 ... (a queue's busy time is its own core's union)
    table = fetch(trace, f"""
        WITH p AS (SELECT coalesce({q(ts.PCORE_IDX)}, 0) AS core, {q(ts.QUEUE_NAME)} AS queue, {q(ts.START_TS)} AS s0,
                          greatest({q(ts.START_TS)}, {t0}) AS s, least({q(ts.END_TS)}, {t1}) AS e,
                          coalesce({q(ts.TRANSFER_BYTES)}, 0) AS nbytes
                   FROM {DMA_PACKET} WHERE {scope.overlap_sql()}),
             r AS (SELECT *, max(e) OVER (PARTITION BY core, queue ORDER BY s, e
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM p)
        SELECT core, queue, count(*) FILTER (WHERE s0 >= {t0}) AS n,
               coalesce(sum(nbytes) FILTER (WHERE s0 >= {t0}), 0)::BIGINT AS nbytes,
               sum(greatest(0, e - greatest(s, coalesce(reach, s))))::BIGINT AS busy
        FROM r GROUP BY core, queue""")
    queues = table.column("queue").to_pylist()
    core_of = table.column("core").to_pylist()
    if len(set(core_of)) > 1:   # several cores: each queue named with its core, as the timeline's groups are
        queues = [None if name is None else f"NC{c} {name}" for c, name in zip(core_of, queues, strict=True)]
    busy = column(table, "busy")
    nbytes = column(table, "nbytes")
    n = column(table, "n")
    with np.errstate(divide="ignore", invalid="ignore"):
        throughput = np.where(busy > 0, nbytes / np.maximum(busy, 1), np.nan)
        mean = np.where(n > 0, nbytes / np.maximum(n, 1), np.nan)
    out = pa.table({
        rs.QUEUE: pa.array(queues, pa.string()), rs.PACKETS: n, rs.BYTES: nbytes, rs.BUSY_NS: busy,
        rs.BUSY_FRACTION: busy / max(scope.length_ns, 1),
        rs.THROUGHPUT_GBPS: pa.array(throughput, mask=np.isnan(throughput)),
        rs.MEAN_BYTES: pa.array(mean, mask=np.isnan(mean)),
    }, schema=rs.DMA_QUEUES)
    # busiest first; ties by name with its number as a number (qSyncIO2 before qSyncIO10)
    names = out.column(rs.QUEUE).to_pylist()
    order = sorted(range(out.num_rows),
                   key=lambda i: (-int(busy[i]), names[i] is not None, natural_key(names[i] or "")))
    return out.take(pa.array(order, pa.int64()))


def tensor_table(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                 core: int | None = None) -> pa.Table:
    """Bytes loaded, stored and reloaded per tensor (:data:`~profiler.analyses.schema.DMA_TENSORS`)."""
    return _tensor_table(trace, resolve_scope(trace, start_ns, end_ns, core))


def load_sql() -> str:
    """SQL: a DmaPacket row is a load from HBM (its source, else an ``input`` queue when the source is unknown)."""
    return f"({q(rs.T_DMA_SOURCE)} = '{HBM}' OR ({q(rs.T_DMA_SOURCE)} IS NULL AND {q(ts.QUEUE_TYPE)} = 'input'))"


def _tensor_table(trace: Trace, scope: Scope) -> pa.Table:
    dst, qt = q(rs.T_DMA_DEST), q(ts.QUEUE_TYPE)
    b = f"coalesce({q(ts.TRANSFER_BYTES)}, 0)"
    table = fetch(trace, f"""
        SELECT {q(ts.VARIABLE)} AS var, count(*) AS n,
               coalesce(sum({b}) FILTER (WHERE {load_sql()}), 0)::BIGINT AS loaded,
               coalesce(sum({b}) FILTER (WHERE {dst} = '{HBM}' OR ({dst} IS NULL AND {qt} = 'output')), 0)::BIGINT
                   AS stored
        FROM {DMA_PACKET} WHERE {scope.starts_sql()} GROUP BY 1""")
    found = hbm_regions.regions(trace, scope)
    distinct = hbm_regions.distinct_bytes(found, side=hbm_regions.LOAD) if found is not None else None
    # the factor's numerator and denominator from the same transfers (those starting in the window): loaded_bytes
    # counts packets starting in it, so a window cutting transfers gave factors under 1 or spurious ones over
    again = hbm_regions.moved_bytes(found, side=hbm_regions.LOAD) if found is not None else {}
    names = table.column("var").to_pylist()
    loaded = column(table, "loaded")
    dist = [None if distinct is None else distinct.get(str(n)) for n in names]
    dist = [d if d is None or d > 0 else None for d in dist]
    factor = [None if d is None or not again.get(str(n)) else again[str(n)] / d for d, n in zip(dist, names,
                                                                                            strict=True)]
    out = pa.table({rs.VARIABLE: table.column("var"), rs.PACKETS: table.column("n"), rs.LOADED_BYTES: loaded,
                    rs.STORED_BYTES: column(table, "stored"), rs.DISTINCT_BYTES: pa.array(dist, pa.int64()),
                    rs.RELOAD_FACTOR: pa.array(factor, pa.float64())}, schema=rs.DMA_TENSORS)
    return out.sort_by([(rs.LOADED_BYTES, "descending"), (rs.VARIABLE, "ascending")])


def small_transfer_regions(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                           core: int | None = None, *, small_bytes: int = SMALL_BYTES,
                           bucket_ns: int | None = None, min_fraction: float = MIN_SMALL_FRACTION) -> pa.Table:
    """Regions where packets under ``small_bytes`` take most of the DMA time (:data:`~profiler.analyses.schema.
    SMALL_DMA_REGIONS`), in time order.

    Args:
        trace: the trace.
        start_ns: window start (default: the first event).
        end_ns: window end (default: the last event).
        core: physical core (default: every core).
        small_bytes: packets with fewer bytes are small.
        bucket_ns: bucket width (default: the window over 200, at least 1 ns).
        min_fraction: a bucket is flagged when small packets take more than this share of its packet time.
    """
    scope = resolve_scope(trace, start_ns, end_ns, core)
    return _small_regions(trace, scope, small_bytes, bucket_ns, min_fraction)


def _check_small_bytes(small_bytes: object) -> int:
    if isinstance(small_bytes, bool) or not isinstance(small_bytes, int | np.integer) or small_bytes < 0 \
            or small_bytes > 2**62:
        raise QueryError(f"small_bytes must be a whole number of bytes, 0 or more, not {repr(small_bytes)[:40]}")
    return int(small_bytes)


def _small_regions(trace: Trace, scope: Scope, small_bytes: int, bucket_ns: int | None,
                   min_fraction: float) -> pa.Table:
    small_bytes = _check_small_bytes(small_bytes)
    if isinstance(min_fraction, bool) or not isinstance(min_fraction, int | float | np.number) \
            or not 0 <= float(min_fraction) <= 1:
        raise QueryError(f"min_fraction must be a number from 0 to 1, not {repr(min_fraction)[:40]}")
    if bucket_ns is not None and (isinstance(bucket_ns, bool) or not isinstance(bucket_ns, int) or bucket_ns <= 0):
        raise QueryError(f"bucket_ns must be a positive number of nanoseconds, not {bucket_ns!r}")
    width = bucket_ns or max(1, -(-scope.length_ns // REGION_BUCKETS))
    small = f"coalesce({q(ts.TRANSFER_BYTES)}, 0) < {int(small_bytes)}"
    rows = fetch(trace, f"""
        SELECT ({q(ts.START_TS)} - {int(scope.start_ns)}) // {width} AS k, count(*) AS n,
               count(*) FILTER (WHERE {small}) AS n_small, sum({q(ts.DURATION_NS)})::BIGINT AS d,
               coalesce(sum({q(ts.DURATION_NS)}) FILTER (WHERE {small}), 0)::BIGINT AS d_small,
               coalesce(sum({q(ts.TRANSFER_BYTES)}), 0)::BIGINT AS b,
               min({q(ts.START_TS)}) AS s, max({q(ts.END_TS)}) AS e
        FROM {DMA_PACKET} WHERE {scope.starts_sql()} GROUP BY k ORDER BY k""")
    if rows.num_rows == 0:
        return rs.SMALL_DMA_REGIONS.empty_table()
    k_of = column(rows, "k")
    n, n_small = column(rows, "n"), column(rows, "n_small")
    d, d_small, nbytes = column(rows, "d"), column(rows, "d_small"), column(rows, "b")
    s, e = column(rows, "s"), column(rows, "e")
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(d > 0, d_small / np.maximum(d, 1), 0.0)
    flagged = (frac > min_fraction) & (n_small > 0)
    # runs of flagged buckets that are adjacent (k, k+1, ...) form one region spanning their packets
    out = []
    i = 0
    while i < len(k_of):
        if not flagged[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(k_of) and flagged[j + 1] and k_of[j + 1] == k_of[j] + 1:
            j += 1
        sl = slice(i, j + 1)
        packets = int(n[sl].sum())
        out.append({rs.START_NS: int(s[sl].min()), rs.END_NS: int(e[sl].max()),
                    rs.PACKETS: packets, rs.SMALL_PACKETS: int(n_small[sl].sum()),
                    rs.SMALL_FRACTION: float(d_small[sl].sum() / max(int(d[sl].sum()), 1)),
                    rs.MEAN_BYTES: float(nbytes[sl].sum() / max(packets, 1))})
        i = j + 1
    return pa.Table.from_pylist(out, schema=rs.SMALL_DMA_REGIONS)


def dma_efficiency(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, core: int | None = None,
                   *, small_bytes: int = SMALL_BYTES) -> dict[str, Any]:
    """All DMA-efficiency results for the window, with headline numbers.

    Returns:
        A dict with the keys ``rs.EFF_*`` of :mod:`profiler.analyses.schema`: packets, bytes, mean packet bytes,
        small packets and their share of the bytes, the DMA active time (union of all packets), the achieved
        throughput (bytes / active time, GB/s) and the Metadata peak; the tables ``histogram``, ``queues``,
        ``tensors`` and ``small_regions`` as returned by the functions above; ``start_ns`` and ``end_ns``.
    """
    small_bytes = _check_small_bytes(small_bytes)
    scope = resolve_scope(trace, start_ns, end_ns, core)
    hist = _size_histogram(trace, scope)
    packets = int(column(hist, rs.PACKETS).sum())
    nbytes = int(column(hist, rs.BYTES).sum())
    active = intervals.union_ns(*dma_intervals(trace, scope), scope.start_ns, scope.end_ns)
    peak = hardware(trace).dma_bw_peak
    small = fetch(trace, f"SELECT count(*) AS n, coalesce(sum({q(ts.TRANSFER_BYTES)}), 0)::BIGINT AS b "
                         f"FROM {DMA_PACKET} WHERE {scope.starts_sql()} AND "
                         f"coalesce({q(ts.TRANSFER_BYTES)}, 0) < {int(small_bytes)}").to_pylist()[0]
    return {
        rs.EFF_PACKETS: packets,
        rs.EFF_BYTES: nbytes,
        rs.EFF_MEAN_BYTES: nbytes / packets if packets else None,
        rs.EFF_SMALL_PACKETS: int(small["n"]),
        rs.EFF_SMALL_BYTES_FRACTION: int(small["b"]) / nbytes if nbytes else None,
        rs.EFF_ACTIVE_NS: active,
        rs.EFF_THROUGHPUT_GBPS: nbytes / active if active else None,
        rs.EFF_PEAK_GBPS: peak / 1e9 if peak else None,
        rs.EFF_HISTOGRAM: hist,
        rs.EFF_QUEUES: _queue_table(trace, scope),
        rs.EFF_TENSORS: _tensor_table(trace, scope),
        rs.EFF_SMALL_REGIONS: _small_regions(trace, scope, small_bytes, None, MIN_SMALL_FRACTION),
        rs.START_NS: scope.start_ns,
        rs.END_NS: scope.end_ns,
    }
