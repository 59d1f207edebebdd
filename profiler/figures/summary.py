"""Charts of a trace summary (``Trace.summary()``): per-engine utilization, FLOPs, DMA breakdown, top opcodes and
operators by time — for the dashboard's summary page and for notebooks.

The summary is a dict following Neuron Explorer's ``Summary`` field names (``<engine>_engine_active_time_percent``,
``hardware_flops``, ``hfu_estimated_percent``, ``dma_transfer_total_bytes``, ...) plus breakdown tables (lists of
row dicts or Arrow tables) under keys such as ``top_opcodes``, ``top_operators``, ``dma_queues``.  Every builder
takes what it finds and skips what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go
import pyarrow as pa

from profiler.figures.palette import CategoryPalette
from tracer import schema as ts

_ENGINE_KEYS = {e: e.lower() for e in ts.ENGINES}
_CHART_HEIGHT = 320

#: ``(label, keys tried in order, unit)`` of the headline cards; unit ``ns`` values are durations.
HEADLINES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("total time", ("total_time_ns", "total_time"), "ns"),
    ("active time", ("total_active_time_ns", "total_active_time"), "ns"),
    ("instructions", ("instruction_count", "event_count"), ""),
    ("hardware FLOPs", ("hardware_flops", "adjusted_hardware_flops"), "FLOP"),
    ("HFU", ("hfu_estimated_percent", "hfu_percent"), "%"),
    ("MFU", ("mfu_estimated_percent", "mfu_percent"), "%"),
    ("DMA bytes", ("dma_transfer_total_bytes", "dma_bytes"), "B"),
    ("DMA active", ("dma_active_time_percent",), "%"),
)


def flatten(summary: Mapping[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> one level with dotted keys (tables and lists are kept as values)."""
    out: dict[str, Any] = {}
    for k, v in (summary or {}).items():
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _lookup_key(flat: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, Any] | None:
    for key in keys:
        for k, v in flat.items():
            if (k == key or k.endswith("." + key)) and isinstance(v, int | float) and not isinstance(v, bool):
                return key, v
    return None


def _lookup(flat: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    found = _lookup_key(flat, keys)
    return None if found is None else found[1]


def headline_numbers(summary: Mapping[str, Any] | None) -> list[tuple[str, float, str]]:
    """``(label, value, unit)`` of the headline figures the summary has (times in seconds are turned into ns)."""
    flat = flatten(summary)
    out = []
    for label, keys, unit in HEADLINES:
        found = _lookup_key(flat, keys)
        if found is None:
            continue
        key, value = found
        if unit == "ns" and not key.endswith("_ns"):
            value = float(value) * 1e9  # Neuron's Summary gives times in seconds
        out.append((label, value, unit))
    return out


def _rows(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, pa.Table):
        return value.to_pylist()
    if isinstance(value, list) and all(isinstance(r, Mapping) for r in value):
        return [dict(r) for r in value]
    if isinstance(value, Mapping) and value and all(isinstance(v, int | float) for v in value.values()):
        return [{"name": k, "value": v} for k, v in value.items()]
    return []


def _bar(title: str, names: list[str], values: list[float], unit: str, colours: list[str] | None = None) -> go.Figure:
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", marker={"color": colours},
                           hovertemplate=f"%{{y}}: %{{x:.4g}} {unit}<extra></extra>"))
    fig.update_layout(title={"text": title, "font": {"size": 14}}, height=_CHART_HEIGHT,
                      margin={"l": 140, "r": 20, "t": 40, "b": 40}, yaxis={"autorange": "reversed"},
                      xaxis={"title": {"text": unit}})
    return fig


def engine_utilization_figure(summary: Mapping[str, Any] | None) -> go.Figure | None:
    """Per-engine active time, % of the total time (Neuron's ``<engine>_engine_active_time_percent``)."""
    flat = flatten(summary)
    names, values = [], []
    for engine, key in _ENGINE_KEYS.items():
        v = _lookup(flat, (f"{key}_engine_active_time_percent", f"{key}.active_time_percent",
                           f"{key}.busy_percent"))
        if v is not None:
            names.append(engine)
            values.append(float(v))
    if not names:
        return None
    pal = CategoryPalette.for_engines()
    fig = _bar("Engine utilization", names, values, "%", [pal.colour(n) for n in names])
    fig.update_xaxes(range=[0, 100])
    return fig


def breakdown_figure(summary: Mapping[str, Any] | None, key: str, title: str, *, name_field: str | None = None,
                     value_field: str | None = None, unit: str = "", top: int = 15) -> go.Figure | None:
    """A horizontal bar chart of the breakdown table ``summary[key]`` (largest first, ``top`` rows)."""
    flat = flatten(summary)
    table = next((v for k, v in flat.items() if k == key or k.endswith("." + key)), None)
    rows = _rows(table)
    if not rows:
        return None
    cols = list(rows[0])
    nf = name_field if name_field in cols else next((c for c in cols if isinstance(rows[0][c], str)), cols[0])
    numeric = [c for c in cols if isinstance(rows[0][c], int | float) and not isinstance(rows[0][c], bool)]
    vf = value_field if value_field in cols else next(
        (c for c in numeric if any(w in c for w in ("time", "dur", "ns", "bytes", "flops", "value"))),
        numeric[0] if numeric else None)
    if vf is None:
        return None
    rows = sorted(rows, key=lambda r: -(r.get(vf) or 0))[:top]
    pal = CategoryPalette()
    names = [str(r.get(nf)) for r in rows]
    return _bar(title, names, [float(r.get(vf) or 0) for r in rows], unit or vf, [pal.colour(n) for n in names])


def summary_figures(summary: Mapping[str, Any] | None) -> list[go.Figure]:
    """Every chart the summary supports: engine utilization, top opcodes, top operators, DMA, FLOPs by engine."""
    figs = [
        engine_utilization_figure(summary),
        breakdown_figure(summary, "top_opcodes", "Top opcodes by time", unit="ns"),
        breakdown_figure(summary, "top_operators", "Top operators by time", unit="ns"),
        breakdown_figure(summary, "dma_queues", "DMA bytes per queue", unit="B"),
        breakdown_figure(summary, "flops_by_engine", "FLOPs by engine", unit="FLOP"),
    ]
    return [f for f in figs if f is not None]
