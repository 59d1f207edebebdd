"""Recommendations for a host trace of a GPU run (PyTorch/Kineto): the GPU left idle, communication not hidden
behind computation, and kernels too short for their launches -- HTA's temporal breakdown, communication overlap
and kernel-launch statistics, as ranked advice citing their numbers.

Per GPU (a row group of GPU events, e.g. ``pyper:trainer:0:0 (GPU 0)``; the GPU events are the slices whose
category is one of :data:`profiler.analyses.kernel_tree.GPU_CATEGORIES`), in the window:

==================  ========================================================================  =========================
rule                fires when                                                                time at stake
==================  ========================================================================  =========================
``gpu_idle``        no kernel, copy or memset runs for more than half of the window          the GPU's idle time
``communication``   communication kernels (``nccl`` in the name) take more than 25% of the    communication time not
                    GPU's busy time                                                           overlapped by computation
``short_kernels``   at least 100 kernels, more than half of them under 10 us                 their launches' CPU time
==================  ========================================================================  =========================

The result has the schema of :func:`profiler.analyses.recommendations.recommendations` (no ``speedup``: a host
trace has no bounds), ranked by time at stake.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.analyses import intervals
from profiler.analyses import schema as rs
from profiler.analyses.call_tree import window_of
from profiler.analyses.inputs import fetch, q
from profiler.analyses.kernel_tree import CORRELATION_SQL, categories_sql
from profiler.figures.timefmt import format_duration
from profiler.trace import Trace
from tracer import schema as ts

GPU_BUSY_MIN = 0.5
COMM_SHARE_MAX = 0.25
SHORT_KERNEL_NS = 10_000
SHORT_KERNEL_SHARE_MAX = 0.5
SHORT_KERNEL_MIN_COUNT = 100
#: Kernel categories (compared lower-case) among the GPU events: the ones launched by ``cudaLaunchKernel``.
KERNEL_CATEGORIES = ("kernel",)
#: What a communication kernel's name contains (compared lower-case).
COMM_MARK = "nccl"


def _rec(rule: str, title: str, message: str, evidence: dict[str, Any], impact_ns: float) -> dict[str, Any]:
    return {rs.RULE: rule, rs.TITLE: title, rs.MESSAGE: message,
            rs.EVIDENCE: json.dumps(evidence, sort_keys=True, default=float),
            rs.IMPACT_NS: max(0.0, float(impact_ns)), rs.SPEEDUP: None}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def host_recommendations(trace: Trace, start_ns: int | None = None, end_ns: int | None = None) -> pa.Table:
    """Ranked recommendations for the GPUs of a host trace in ``[start_ns, end_ns)`` (default: the whole trace);
    empty when no rule fires or the trace has no GPU events.

    Raises:
        QueryError: an empty or malformed window.
    """
    t0, t1, _closed = window_of(trace, start_ns, end_ns)
    gpu, kernel = categories_sql(), categories_sql(KERNEL_CATEGORIES)
    rows = fetch(trace, f"""
        SELECT coalesce(k.{q(dbs.GROUP_NAME)}, k.{q(ts.NAME)}) AS device, s.{q(ts.START_TS)} AS s,
               s.{q(ts.END_TS)} AS e, lower(s.{q(ts.CATEGORY)}) IN ({kernel}) AS is_kernel,
               contains(lower(s.{q(ts.NAME)}), '{COMM_MARK}') AS is_comm, s.{q(ts.ID)} AS id
        FROM {q(dbs.SLICE_TABLE)} s JOIN {q(dbs.TRACK_TABLE)} k USING ({q(dbs.TRACK_ID)})
        WHERE lower(s.{q(ts.CATEGORY)}) IN ({gpu}) AND s.{q(ts.START_TS)} < $t1 AND s.{q(ts.END_TS)} > $t0""",
                 {"t0": t0, "t1": t1})
    recs: list[dict[str, Any]] = []
    if rows.num_rows:
        devices = np.asarray(rows.column("device").to_pylist(), dtype=object)
        for device in sorted(set(devices.tolist()), key=str):
            m = devices == device
            recs += _device_rules(trace, str(device), rows.filter(pa.array(m)), (t0, t1))
    window = t1 - t0
    for r in recs:
        r[rs.SAVING_NS] = min(r[rs.IMPACT_NS], float(window))
    recs.sort(key=lambda r: (-round(r[rs.SAVING_NS], 6), r[rs.RULE], r[rs.TITLE]))
    for rank, r in enumerate(recs, start=1):
        r[rs.RANK] = rank
    return pa.Table.from_pylist(recs, schema=rs.RECOMMENDATIONS)


def _device_rules(trace: Trace, device: str, rows: pa.Table, window: tuple[int, int]) -> list[dict[str, Any]]:
    t0, t1 = window
    s = np.asarray(rows.column("s").to_numpy(), dtype=np.int64)
    e = np.asarray(rows.column("e").to_numpy(), dtype=np.int64)
    is_kernel = np.asarray(rows.column("is_kernel").fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    is_comm = np.asarray(rows.column("is_comm").fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    busy = intervals.union_ns(s, e, t0, t1)
    length = t1 - t0
    out = []
    if busy < GPU_BUSY_MIN * length:
        out.append(_rec(
            "gpu_idle", f"{device} is idle {_pct(1 - busy / length)} of the time",
            f"{device} runs a kernel, copy or memset during {format_duration(busy)} of {format_duration(length)} "
            f"({_pct(busy / length)}); the rest of the time it waits for the CPU side (Python, data loading, "
            "launches) or a synchronisation. The call tree of the CPU threads in the gaps shows what they do then; "
            "larger batches, asynchronous data loading and fewer synchronisations (.item(), .cpu()) keep it fed.",
            {"device": device, "busy_ns": busy, "window_ns": length}, length - busy))
    comm = intervals.union_ns(s[is_comm], e[is_comm], t0, t1)
    compute = intervals.union_ns(s[~is_comm], e[~is_comm], t0, t1)
    if busy and comm > COMM_SHARE_MAX * busy:
        overlap = comm + compute - busy
        exposed = comm - overlap
        out.append(_rec(
            "communication", f"communication takes {_pct(comm / busy)} of {device}'s busy time",
            f"Communication kernels (NCCL) run for {format_duration(comm)} of {device}'s {format_duration(busy)} of "
            f"GPU work, and {_pct(overlap / comm)} of that overlaps computation: {format_duration(exposed)} "
            "of communication holds the GPU up on its own. Overlap it with computation (DDP's gradient buckets, "
            "asynchronous collectives on their own stream), or move less data (smaller dtypes, sharding).",
            {"device": device, "communication_ns": comm, "overlapped_ns": overlap, "busy_ns": busy}, exposed))
    kernels = is_kernel & (e > s)
    n = int(kernels.sum())
    short = kernels & ((e - s) < SHORT_KERNEL_NS)
    n_short = int(short.sum())
    if n >= SHORT_KERNEL_MIN_COUNT and n_short > SHORT_KERNEL_SHARE_MAX * n:
        launch_ns = _launch_time(trace, rows.column("id").filter(pa.array(short)).to_pylist())
        median = float(np.median(e[short] - s[short]))
        out.append(_rec(
            "short_kernels", f"{n_short:,} of {device}'s {n:,} kernels run under {format_duration(SHORT_KERNEL_NS)}",
            f"{_pct(n_short / n)} of the kernels on {device} run for less than {format_duration(SHORT_KERNEL_NS)} "
            f"(median {format_duration(median)}), and launching them took the CPU {format_duration(launch_ns)}: "
            "the launches, not the GPU, set the pace of such work. Fuse the small operators (torch.compile) or "
            "capture the step in a CUDA graph.",
            {"device": device, "kernels": n, "short_kernels": n_short, "median_short_ns": median,
             "launch_ns": launch_ns}, launch_ns))
    return out


def _launch_time(trace: Trace, gpu_ids: list[int]) -> int:
    """CPU time of the launches of the GPU events ``gpu_ids`` (their runtime calls, found by correlation)."""
    if not gpu_ids:
        return 0
    corr, gpu = CORRELATION_SQL, categories_sql()
    row = fetch(trace, f"""
        WITH g AS (SELECT DISTINCT {corr} AS c FROM {q(dbs.SLICE_TABLE)}
                   WHERE {q(ts.ID)} IN (SELECT unnest($ids::BIGINT[])) AND {q(ts.ARGS)} LIKE '%correlation%')
        SELECT coalesce(sum({q(ts.END_TS)} - {q(ts.START_TS)}), 0)::BIGINT AS ns FROM {q(dbs.SLICE_TABLE)}
        WHERE {q(ts.ARGS)} LIKE '%correlation%' AND {corr} IN (SELECT c FROM g)
          AND ({q(ts.CATEGORY)} IS NULL OR lower({q(ts.CATEGORY)}) NOT IN ({gpu}))""", {"ids": gpu_ids})
    return int(row.column(0)[0].as_py() or 0)
