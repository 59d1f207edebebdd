"""Figures comparing two traces (:func:`profiler.analyses.diff.diff`): side-by-side metrics and per-identity deltas.

Pure builders; "a" is the baseline, "b" the trace compared with it, deltas are b - a (negative = faster).
"""

from __future__ import annotations

import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.compute as pc

from profiler.analyses import schema as rs
from profiler.figures.timefmt import NS_PER_S, TIME_AXIS, format_duration

A_COLOUR = "#4C78A8"
B_COLOUR = "#F58518"
FASTER_COLOUR = "#54A24B"
SLOWER_COLOUR = "#E45756"
SAME_COLOUR = "#9D9DA1"


def metrics_figure(metrics: pa.Table, title: str, labels: tuple[str, str] = ("A", "B")) -> go.Figure:
    """Grouped horizontal bars of each metric (ns) for both traces (a :data:`~profiler.analyses.schema.DIFF_METRICS`
    table, e.g. per-engine active time or the bounds)."""
    rows = [r for r in metrics.to_pylist() if r[rs.A] is not None or r[rs.B] is not None]
    names = [r[rs.METRIC].removesuffix("_ns") for r in rows]
    fig = go.Figure()
    for side, label, colour in ((rs.A, labels[0], A_COLOUR), (rs.B, labels[1], B_COLOUR)):
        values = [r[side] for r in rows]
        fig.add_trace(go.Bar(x=[None if v is None else v / NS_PER_S for v in values], y=names, orientation="h",
                             name=label, marker={"color": colour},
                             hovertext=[f"{label} {n}: {format_duration(v)}" for n, v in zip(names, values,
                                                                                             strict=True)],
                             hoverinfo="text"))
    fig.update_layout(title={"text": title, "font": {"size": 14}}, barmode="group",
                      height=max(260, 44 * len(rows) + 90), margin={"l": 220, "r": 24, "t": 44, "b": 44},
                      yaxis={"autorange": "reversed"}, xaxis=dict(TIME_AXIS), legend={"orientation": "h"})
    return fig


def delta_figure(deltas: pa.Table, by: str, top: int = 15) -> go.Figure:
    """Horizontal bars of the largest time changes per identity (a :func:`~profiler.analyses.schema.diff_schema`
    table): green where B is faster, red where it is slower, grey where it is the same; the title says when
    nothing changed."""
    keys = rs.GROUP_KEYS[by]
    rows = deltas.slice(0, top).to_pylist()
    labels = [" / ".join("-" if r[k] is None else str(r[k]) for k in keys) for r in rows]
    colours = [FASTER_COLOUR if r[rs.DELTA_NS] < 0 else SLOWER_COLOUR if r[rs.DELTA_NS] > 0 else SAME_COLOUR
               for r in rows]
    same = deltas.num_rows > 0 and not pc.max(pc.abs(deltas.column(rs.DELTA_NS))).as_py()
    fig = go.Figure(go.Bar(
        x=[r[rs.DELTA_NS] / NS_PER_S for r in rows], y=labels, orientation="h", marker={"color": colours},
        hovertext=[f"{lab}: {format_duration(r[rs.A_NS])} -> {format_duration(r[rs.B_NS])} ({r[rs.PRESENCE]})"
                   for lab, r in zip(labels, rows, strict=True)], hoverinfo="text"))
    title = f"No time change per {by}" if same else f"Time change per {by} (B - A)"
    fig.update_layout(title={"text": title, "font": {"size": 14}},
                      height=max(260, 24 * len(rows) + 90), margin={"l": 220, "r": 24, "t": 44, "b": 44},
                      yaxis={"autorange": "reversed"}, xaxis=dict(TIME_AXIS), showlegend=False)
    return fig
