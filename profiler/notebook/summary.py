"""Summary charts of a :class:`~profiler.Trace` for notebooks, drawn by :mod:`profiler.figures.summary`.

The chart builders read Neuron Explorer's Summary field names (``tensor_engine_active_time_percent``,
``hfu_estimated_percent``, ``dma_transfer_total_bytes``, ...) and breakdown tables; :func:`neuron_summary` puts
``Trace.summary()`` (trnprof's own keys, see ``docs/database.md``) and the per-opcode, per-operator and per-queue
tables of :mod:`profiler.analyses` under those names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

from profiler.analyses import schema as rs
from profiler.figures import summary as sfig
from tracer import schema as ts

if TYPE_CHECKING:
    from profiler.trace import Trace

#: Breakdown tables drawn as bar charts: (summary key, title, unit).
BREAKDOWNS: tuple[tuple[str, str, str], ...] = (
    ("top_opcodes", "Top opcodes by busy time", "ns"),
    ("top_operators", "Top operators by busy time", "ns"),
    ("dma_queues", "DMA bytes per queue", "B"),
)
#: Rows kept per breakdown table.
TOP_ROWS = 15


def neuron_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``Trace.summary()`` under Neuron Explorer's Summary names (what :mod:`profiler.figures.summary` reads)."""
    out: dict[str, Any] = {}
    if summary.get("total_time_ns") is not None:
        out["total_time_ns"] = summary["total_time_ns"]
    engines = summary.get("engines") or {}
    counts = [e.get("instruction_count") for e in engines.values() if e.get("instruction_count") is not None]
    if counts:
        out["instruction_count"] = sum(counts)
    for engine, values in engines.items():
        if values.get("utilization_pct") is not None:
            out[f"{engine.lower()}_engine_active_time_percent"] = values["utilization_pct"]
    for ours, neuron in (("hfu_pct", "hfu_estimated_percent"), ("mfu_pct", "mfu_estimated_percent")):
        if summary.get(ours) is not None:
            out[neuron] = summary[ours]
    dma = summary.get("dma") or {}
    if dma.get("transfer_bytes") is not None:
        out["dma_transfer_total_bytes"] = dma["transfer_bytes"]
    total = summary.get("total_time_ns")
    if dma.get("active_time_ns") is not None and total:
        out["dma_active_time_percent"] = 100.0 * dma["active_time_ns"] / total
    return out


def _rows(table: Any, name_of: Any, value_key: str) -> list[dict[str, Any]]:
    return [{ts.NAME: name_of(r), value_key: r[value_key]} for r in table.slice(0, TOP_ROWS).to_pylist()]


def summary_with_breakdowns(trace: Trace, start_ns: int | None = None, end_ns: int | None = None) -> dict[str, Any]:
    """:func:`neuron_summary` of the window plus its top opcodes, top operators and DMA queues."""
    from profiler.analyses import queue_table, time_by

    out = neuron_summary(trace.summary(start_ns, end_ns))
    out["top_opcodes"] = _rows(time_by(trace, "opcode", start_ns, end_ns),
                               lambda r: f"{r[rs.ENGINE]} {r[rs.OPCODE]}", rs.BUSY_NS)
    operators = time_by(trace, "operator", start_ns, end_ns)
    if any(r[rs.OPERATOR] for r in operators.slice(0, TOP_ROWS).to_pylist()):
        out["top_operators"] = _rows(operators, lambda r: f"{r[rs.LAYER] or '-'} / {r[rs.OPERATOR] or '-'}",
                                     rs.BUSY_NS)
    out["dma_queues"] = _rows(queue_table(trace, start_ns, end_ns), lambda r: r[rs.QUEUE], rs.BYTES)
    return out


def summary_figures(trace: Trace, start_ns: int | None = None, end_ns: int | None = None) -> list[go.Figure]:
    """Engine utilization, top opcodes, top operators and DMA bytes per queue, as the dashboard draws them."""
    summary = summary_with_breakdowns(trace, start_ns, end_ns)
    figs = [sfig.engine_utilization_figure(summary)]
    value_keys = {"top_opcodes": rs.BUSY_NS, "top_operators": rs.BUSY_NS, "dma_queues": rs.BYTES}
    for key, title, unit in BREAKDOWNS:
        figs.append(sfig.breakdown_figure(summary, key, title, name_field=ts.NAME, value_field=value_keys[key],
                                          unit=unit, top=TOP_ROWS))
    return [f for f in figs if f is not None]
