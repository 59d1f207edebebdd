"""The result table of a parameter sweep (``trnprof sweep``): one row per point, the one owner of its column
names, and the sweep file (``sweep.json``) a sweep that records its traces leaves beside them.

:func:`sweep_table` turns the rows of :func:`tracer.sim.sweep.run_sweep` into an Arrow table: the values that vary,
the simulated time and how much slower than the fastest point it is, the Tensor engine's throughput and share of
its peak, each engine's busy share, DMA throughput against the cost model's DMA bandwidth, the busiest of those
(a first guess at the bottleneck: ``trnprof bounds`` on a recording gives the real one), DMA bytes, the SBUF peak,
instructions and the simulation's own wall time (and the point's ``trace`` when the sweep recorded them); a point
the kernel rejected has only its ``error``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from profiler.errors import CommandError
from tracer.errors import TraceFormatError
from tracer.schema import ENGINES
from tracer.sim.sweep import SweepRow, varied_names

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
#: With bounds (``trnprof sweep --bounds``: each point recorded and its performance bounds computed,
#: :func:`profiler.analyses.performance_bounds`): the bottleneck the bounds name, and the memory, compute and
#: perfect-pipeline bounds (us; the kernel cannot run faster than the largest of the first two).
BOTTLENECK = "bottleneck"
MEMORY_BOUND_US = "memory_bound_us"
COMPUTE_BOUND_US = "compute_bound_us"
PIPELINE_BOUND_US = "pipeline_bound_us"
BOUND_COLUMNS: list[tuple[str, pa.DataType]] = [
    (BOTTLENECK, pa.string()), (MEMORY_BOUND_US, pa.float64()), (COMPUTE_BOUND_US, pa.float64()),
    (PIPELINE_BOUND_US, pa.float64()),
]

_MEASURES: list[tuple[str, pa.DataType]] = [
    (SIMULATED_US, pa.float64()), (VS_FASTEST, pa.float64()), (TENSOR_TFLOPS, pa.float64()),
    (TENSOR_PEAK_PCT, pa.float64()), *[(ENGINE_BUSY_PCT[e], pa.float64()) for e in ENGINES],
    (DMA_GBPS, pa.float64()), (DMA_PEAK_PCT, pa.float64()), (BUSIEST, pa.string()), (DMA_MIB, pa.float64()),
    (SBUF_PEAK_KIB, pa.float64()), (INSTRUCTIONS, pa.int64()), (WALL_S, pa.float64()), (ERROR, pa.string()),
]


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


def fastest_first_order(table: pa.Table) -> list[int]:
    """``table``'s row positions by ascending simulated time, failed points (null) last, ties in the sweep's order
    (the first, when one point ran, is the fastest)."""
    values = table.column(SIMULATED_US).to_pylist()
    return sorted(range(len(values)), key=lambda i: (values[i] is None, values[i] or 0.0, i))


def point_bounds(trace: Any) -> dict[str, Any]:
    """The bound columns of one recorded point (an opened :class:`~profiler.trace.Trace`)."""
    from profiler.analyses import performance_bounds
    from profiler.analyses import schema as rs

    b = performance_bounds(trace)

    def us(key: str) -> float | None:
        return None if b.get(key) is None else b[key] / 1e3

    return {BOTTLENECK: b.get(rs.BOTTLENECK), MEMORY_BOUND_US: us(rs.MEMORY_BOUND_NS),
            COMPUTE_BOUND_US: us(rs.COMPUTE_BOUND_NS), PIPELINE_BOUND_US: us(rs.PERFECT_PIPELINE_NS)}


def sweep_table(rows: Sequence[SweepRow], names: Sequence[str] | None = None,
                bounds: dict[int, dict[str, Any]] | None = None) -> pa.Table:
    """One row per point, in the sweep's order (:attr:`~tracer.sim.sweep.SweepRow.index`: a parallel sweep's rows
    come as the points end): the values of ``names`` (default: :func:`varied_names`), then the measures (null where
    the point failed, whose :data:`ERROR` says why); with ``bounds`` (point index -> :func:`point_bounds`), the
    bound columns after the measures (null for a point without)."""
    rows = sorted(rows, key=lambda r: r.index)
    points = [r.point for r in rows]
    names = list(varied_names(points) if names is None else names)
    columns: dict[str, list[Any]] = {n: [] for n in names}
    for name, _ in _MEASURES:
        columns[name] = []
    fastest = min((r.result.simulated_ns for r in rows if r.result is not None and r.result.simulated_ns),
                  default=None)
    for row in rows:
        for n in names:
            value = row.point.value(n)
            columns[n].append(None if value is None else str(value))
        values = measures(row.result) if row.result is not None else {ERROR: row.error}
        if row.result is not None and fastest:
            values[VS_FASTEST] = row.result.simulated_ns / fastest
        for name, _ in _MEASURES:
            columns[name].append(values.get(name))
    fields = [pa.field(n, pa.string()) for n in names] + [pa.field(n, t) for n, t in _MEASURES]
    if bounds is not None:   # before the trace and the error, the last columns
        for name, kind in BOUND_COLUMNS:
            fields.insert(len(fields) - 1, pa.field(name, kind))
            columns[name] = [bounds.get(r.index, {}).get(name) for r in rows]
    if any(r.trace is not None for r in rows):
        fields.insert(len(fields) - 1, pa.field(TRACE, pa.string()))
        columns[TRACE] = [None if r.trace is None else str(r.trace) for r in rows]
    return pa.table({f.name: columns[f.name] for f in fields}, schema=pa.schema(fields))


#: The sweep file's name, in the directory of the sweep's traces (``trnprof sweep --trace-dir DIR``).
SWEEP_FILE = "sweep.json"
#: Its ``format`` value and version.
SWEEP_FORMAT = "trnprof-sweep"
SWEEP_VERSION = 1
#: Largest sweep file read (a sweep has at most 1,000 points: a few hundred KB).
MAX_SWEEP_FILE_BYTES = 16 << 20


@dataclass(frozen=True)
class SweepFile:
    """A sweep as its file holds it: the kernel, the names that varied, and the table (its ``trace`` column holds
    each point's trace directory name inside :attr:`folder`, null for a point that wrote none)."""

    folder: Path
    kernel: str
    names: list[str]
    table: pa.Table
    #: How many points the sweep had (more than the table's rows when it was interrupted).
    points: int

    def trace_path(self, row: int) -> Path | None:
        """Where point ``row``'s trace is (None when it wrote none)."""
        if TRACE not in self.table.column_names:
            return None
        name = self.table.column(TRACE)[row].as_py()
        return None if name is None else self.folder / name


def write_sweep_file(folder: str | os.PathLike[str], kernel: str, table: pa.Table, names: Sequence[str],
                     points: int) -> Path:
    """Write ``table`` (a :func:`sweep_table` of a sweep that recorded its traces into ``folder``) as ``folder``'s
    sweep file, its ``trace`` column as names inside ``folder``; atomically (a reader sees the old file or the
    new one).  Returns its path; CommandError (one line naming it) when it cannot be written."""
    folder = Path(folder)
    rows = table.to_pylist()
    for row in rows:
        if row.get(TRACE) is not None:
            row[TRACE] = Path(row[TRACE]).name
    doc = {"format": SWEEP_FORMAT, "version": SWEEP_VERSION, "kernel": str(kernel), "names": list(names),
           "points": int(points), "columns": table.column_names, "rows": rows}
    path = folder / SWEEP_FILE
    tmp = folder / f".{SWEEP_FILE}.tmp-{os.getpid()}"
    try:
        tmp.write_text(json.dumps(doc, indent=1, allow_nan=False))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise CommandError(f"{path}: cannot write the sweep file ({exc.strerror or exc}); the points' traces are in "
                           f"{folder}: free some space and run the sweep again, or compare them by hand") from None
    return path


def read_sweep_file(folder: str | os.PathLike[str]) -> SweepFile | None:
    """The sweep file of ``folder``; None when it has none; TraceFormatError naming the file when it is not one
    this version wrote (corrupt, truncated, another format or a newer version, a trace outside the folder)."""
    folder = Path(folder)
    path = folder / SWEEP_FILE
    if not path.is_file():
        return None
    try:
        if path.stat().st_size > MAX_SWEEP_FILE_BYTES:
            raise ValueError(f"larger than {MAX_SWEEP_FILE_BYTES >> 20} MB")
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("format") != SWEEP_FORMAT:
            raise ValueError("not a trnprof sweep file")
        if doc.get("version") != SWEEP_VERSION:
            raise ValueError(f"version {doc.get('version')!r}, this trnprof reads version {SWEEP_VERSION}")
        columns, rows, names = doc["columns"], doc["rows"], doc["names"]
        if not (isinstance(columns, list) and isinstance(rows, list) and isinstance(names, list)
                and all(isinstance(c, str) for c in columns) and all(isinstance(n, str) for n in names)
                and all(isinstance(r, dict) for r in rows)):
            raise ValueError("malformed columns, names or rows")
        types = {**dict(_MEASURES), **dict(BOUND_COLUMNS)}
        fields = [pa.field(c, types.get(c, pa.string())) for c in columns]
        table = pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in fields},
                         schema=pa.schema(fields))
        for name in table.column(TRACE).to_pylist() if TRACE in columns else []:
            if name is not None and (not isinstance(name, str) or Path(name).name != name or name in ("", ".", "..")):
                raise ValueError(f"trace {name!r} is not a name inside the sweep's folder")
        return SweepFile(folder, str(doc["kernel"]), names, table, int(doc.get("points", len(rows))))
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        raise TraceFormatError(f"{path}: not a readable sweep file ({exc}); run the sweep again with "
                               "--trace-dir into a new folder") from None


__all__ = [
    "BOTTLENECK",
    "BUSIEST",
    "COMPUTE_BOUND_US",
    "DMA_PEAK_PCT",
    "ENGINE_BUSY_PCT",
    "ERROR",
    "MEMORY_BOUND_US",
    "PIPELINE_BOUND_US",
    "SIMULATED_US",
    "SWEEP_FILE",
    "TRACE",
    "VS_FASTEST",
    "SweepFile",
    "fastest_first_order",
    "measures",
    "point_bounds",
    "read_sweep_file",
    "sweep_table",
    "write_sweep_file",
]
