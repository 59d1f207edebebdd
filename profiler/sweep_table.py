"""The result table of a parameter sweep (``trnprof sweep``): one row per point, and the one owner of its column
names.

:func:`sweep_table` turns the rows of :func:`tracer.sim.sweep.run_sweep` into an Arrow table: the values that vary,
the simulated time and how much slower than the fastest point it is, the Tensor engine's throughput and share of
its peak, each engine's busy share, DMA throughput against the cost model's DMA bandwidth, the busiest of those
(a first guess at the bottleneck: ``trnprof bounds`` on a recording gives the real one), DMA bytes, the SBUF peak,
instructions and the simulation's own wall time (and the point's ``trace`` when the sweep recorded them); a point
the kernel rejected has only its ``error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tracer.schema import ENGINES
from tracer.sim.sweep import SweepPoint, SweepRow

ARCH = "arch"
SIMULATED_US = "simulated_us"
#: The point's simulated time over the fastest point's (1.0 for the fastest).
VS_FASTEST = "vs_fastest"
TENSOR_TFLOPS = "tensor_tflops"
#: Tensor engine FLOPs as a share of its peak over the simulated time (%).
TENSOR_PEAK_PCT = "tensor_peak_pct"
#: Busy share of each engine (%), ``<engine>_busy_pct``.
ENGINE_BUSY_PCT = {engine: f"{engine.lower()}_busy_pct" for engine in ENGINES}
DMA_GBPS = "dma_gbps"
#: DMA throughput as a share of the cost model's ``dma_bandwidth_gbps`` (%).
DMA_PEAK_PCT = "dma_peak_pct"
#: The engine (or ``DMA``) with the largest of those shares.
BUSIEST = "busiest"
DMA_MIB = "dma_mib"
SBUF_PEAK_KIB = "sbuf_peak_kib"
INSTRUCTIONS = "instructions"
WALL_S = "wall_s"
#: The point's trace directory (only when the sweep recorded traces).
TRACE = "trace"
ERROR = "error"
#: Name of the DMA in :data:`BUSIEST`.
DMA = "DMA"

_MEASURES: list[tuple[str, pa.DataType]] = [
    (SIMULATED_US, pa.float64()), (VS_FASTEST, pa.float64()), (TENSOR_TFLOPS, pa.float64()),
    (TENSOR_PEAK_PCT, pa.float64()), *[(ENGINE_BUSY_PCT[e], pa.float64()) for e in ENGINES],
    (DMA_GBPS, pa.float64()), (DMA_PEAK_PCT, pa.float64()), (BUSIEST, pa.string()), (DMA_MIB, pa.float64()),
    (SBUF_PEAK_KIB, pa.float64()), (INSTRUCTIONS, pa.int64()), (WALL_S, pa.float64()), (ERROR, pa.string()),
]


def varied_names(points: Sequence[SweepPoint]) -> list[str]:
    """The names whose value differs between points (``arch``, parameters, constants), in the sweep's order; every
    name given when none varies (a sweep of one point)."""
    names: list[str] = [ARCH]
    for p in points:
        for name in [*p.params, *p.overrides]:
            if name not in names:
                names.append(name)

    def value(p: SweepPoint, name: str) -> Any:
        return p.arch if name == ARCH else {**p.params, **p.overrides}.get(name)

    varied = [n for n in names if len({str(value(p, n)) for p in points}) > 1]
    return varied or names


def measures(result: Any) -> dict[str, Any]:
    """The measure columns of one run (a :class:`tracer.sim.runner.RunResult`)."""
    t_ns = max(result.simulated_ns, 1)
    cm = result.cost
    out: dict[str, Any] = {SIMULATED_US: result.simulated_ns / 1e3}
    out[TENSOR_TFLOPS] = result.pe_flops / t_ns / 1e3
    out[TENSOR_PEAK_PCT] = 100 * result.pe_flops / (cm.pe_peak_flops * t_ns * 1e-9)
    shares: dict[str, float] = {}
    for engine in ENGINES:
        shares[engine] = 100 * result.engine_busy_ns.get(engine, 0) / t_ns
        out[ENGINE_BUSY_PCT[engine]] = shares[engine]
    out[DMA_GBPS] = result.dma_bytes / t_ns
    shares[DMA] = out[DMA_PEAK_PCT] = 100 * out[DMA_GBPS] / cm.dma_bandwidth_gbps
    out[BUSIEST] = max(shares, key=lambda k: shares[k]) if result.simulated_ns else None
    out[DMA_MIB] = result.dma_bytes / 2**20
    out[SBUF_PEAK_KIB] = result.sbuf_peak_bytes / 1024
    out[INSTRUCTIONS] = result.instructions
    out[WALL_S] = result.wall_s
    return out


def sweep_table(rows: Sequence[SweepRow], names: Sequence[str] | None = None) -> pa.Table:
    """One row per point, in the sweep's order (:attr:`~tracer.sim.sweep.SweepRow.index`: a parallel sweep's rows
    come as the points end): the values of ``names`` (default: :func:`varied_names`), then the measures (null where
    the point failed, whose :data:`ERROR` says why)."""
    rows = sorted(rows, key=lambda r: r.index)
    points = [r.point for r in rows]
    names = list(varied_names(points) if names is None else names)
    columns: dict[str, list[Any]] = {n: [] for n in names}
    for name, _ in _MEASURES:
        columns[name] = []
    fastest = min((r.result.simulated_ns for r in rows if r.result is not None and r.result.simulated_ns),
                  default=None)
    for row in rows:
        given = {ARCH: row.point.arch, **row.point.params, **row.point.overrides}
        for n in names:
            columns[n].append(None if given.get(n) is None else str(given[n]))
        values = measures(row.result) if row.result is not None else {ERROR: row.error}
        if row.result is not None and fastest:
            values[VS_FASTEST] = row.result.simulated_ns / fastest
        for name, _ in _MEASURES:
            columns[name].append(values.get(name))
    fields = [pa.field(n, pa.string()) for n in names] + [pa.field(n, t) for n, t in _MEASURES]
    if any(r.trace is not None for r in rows):   # before the error, the last column
        fields.insert(len(fields) - 1, pa.field(TRACE, pa.string()))
        columns[TRACE] = [None if r.trace is None else str(r.trace) for r in rows]
    return pa.table({f.name: columns[f.name] for f in fields}, schema=pa.schema(fields))


__all__ = ["BUSIEST", "DMA_PEAK_PCT", "ENGINE_BUSY_PCT", "ERROR", "SIMULATED_US", "VS_FASTEST", "measures",
           "sweep_table", "varied_names"]
