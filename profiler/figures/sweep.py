"""The figure of a parameter sweep (:func:`profiler.sweep_table.sweep_table`): simulated time per point.

A pure builder: the sweep's Arrow table in, a ``plotly.graph_objects.Figure`` out.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import pyarrow as pa

from profiler import sweep_table as sw
from profiler.figures.palette import CategoryPalette

_BAR_PX = 22
_MARGIN = {"l": 24, "r": 24, "t": 56, "b": 44}


def point_labels(table: pa.Table, names: Sequence[str] | None = None) -> list[str]:
    """``block_m=4 row_n=1024`` per row: the values of ``names`` (default: the table's leading text columns, the
    values the sweep varied)."""
    if names is None:
        names = []
        for name in table.column_names:
            if name == sw.SIMULATED_US:
                break
            names.append(name)
    columns = {n: table.column(n).to_pylist() for n in names}
    return [" ".join(f"{n}={columns[n][i]}" for n in names) for i in range(table.num_rows)]


def sweep_figure(table: pa.Table, names: Sequence[str] | None = None, *,
                 keys: Sequence[str | None] | None = None) -> go.Figure:
    """Horizontal bars of each point's simulated time, in the table's order (sort it first for fastest on top),
    coloured by its bottleneck when the table has the bounds (``trnprof sweep --bounds``), else by its busiest
    engine (the timeline's engine colours); hover gives its throughputs.  Points that failed have no bar; the title
    counts them.  ``keys`` (one per table row) go into each bar's ``customdata[3]``: what a click on the bar names
    (the dashboard puts the point's trace id there)."""
    labels = point_labels(table, names)
    rows = table.to_pylist()
    keyed = list(keys) if keys is not None else [None] * len(rows)
    for row, key_ in zip(rows, keyed, strict=True):
        row["_key"] = key_
    ran = [(label, row) for label, row in zip(labels, rows, strict=True) if row[sw.SIMULATED_US] is not None]
    key = sw.BOTTLENECK if any(row.get(sw.BOTTLENECK) for _, row in ran) else sw.BUSIEST
    palette = CategoryPalette.for_engines()
    fig = go.Figure()
    for engine in dict.fromkeys(row.get(key) for _, row in ran):
        mine = [(label, row) for label, row in ran if row.get(key) == engine]
        fig.add_trace(go.Bar(
            orientation="h", name=f"{key}: {engine}", marker={"color": palette.colour(engine)},
            y=[label for label, _ in mine], x=[row[sw.SIMULATED_US] for _, row in mine],
            customdata=[[row[sw.VS_FASTEST], row[sw.TENSOR_PEAK_PCT], row[sw.DMA_PEAK_PCT], row["_key"] or ""]
                        for _, row in mine],
            hovertemplate="%{y}<br>%{x:,.3f} µs (%{customdata[0]:.3f}x the fastest)<br>Tensor %{customdata[1]:.1f}% "
                          "of peak · DMA %{customdata[2]:.1f}% of its bandwidth<extra>%{fullData.name}</extra>"))
    failed = len(rows) - len(ran)
    title = f"Sweep: simulated time of {len(ran)} points" + (f" ({failed} rejected by the kernel)" if failed else "")
    longest = max((len(label) for label in labels), default=10)
    fig.update_layout(
        title={"text": title, "font": {"size": 14}}, barmode="overlay",
        height=_MARGIN["t"] + _MARGIN["b"] + _BAR_PX * max(len(ran), 3),
        margin={**_MARGIN, "l": min(24 + 7 * longest, 420)},
        xaxis={"title": {"text": "simulated time (µs)"}, "rangemode": "tozero"},
        yaxis={"autorange": "reversed", "categoryorder": "array", "categoryarray": [label for label, _ in ran]},
        legend={"orientation": "h", "y": -0.25 if len(ran) > 6 else -0.5})
    return fig


__all__ = ["point_labels", "sweep_figure"]
