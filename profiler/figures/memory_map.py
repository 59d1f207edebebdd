"""The memory map figure: SBUF or PSUM addresses over time, and the bytes held live (a pure figure builder).

Drawn from :func:`profiler.analyses.memory_map.memory_map`: the upper panel is the raster (x: time since the trace
start, y: byte address in a partition, one colour per cell state: live, read, written, read and written), the
lower one the most bytes live in each column against the same scale (the capacity, or the map's top when the
kernel uses less), the peak marked.  The dashboard's memory
page and ``Trace.memory_figure`` in notebooks draw this same figure.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from profiler.analyses.memory_map import FREE, LIVE, READ, READ_WRITTEN, STATE_NAMES, WRITTEN, MemoryMap
from profiler.figures.timefmt import TIME_AXIS, format_duration, format_time, ns_to_axis

#: Colour of each cell state (index = state): free is the background.
STATE_COLOURS = {FREE: "#ffffff", LIVE: "#c6dbef", READ: "#31a354", WRITTEN: "#e6550d", READ_WRITTEN: "#756bb1"}
#: Legend entry of each drawn state (the hover names them in full: ``STATE_NAMES``).
LEGEND_NAMES = {LIVE: "live", READ: "read", WRITTEN: "written", READ_WRITTEN: "read and written"}
#: Colour of the PSUM bank boundaries and labels.
BANK_COLOUR = "#bdbdbd"
#: Colour of the live-bytes line and of the capacity line.
LIVE_COLOUR = "#3182bd"
CAPACITY_COLOUR = "#969696"
KIB = 1024


def _colourscale() -> list[list[object]]:
    """A discrete plotly colour scale for z = 0..4 (each state a flat band)."""
    n = len(STATE_COLOURS)
    scale: list[list[object]] = []
    for k in range(n):
        scale += [[k / n, STATE_COLOURS[k]], [(k + 1) / n, STATE_COLOURS[k]]]
    return scale


def kib(nbytes: float) -> str:
    """Bytes as KiB text, e.g. ``12.0 KiB``."""
    return f"{nbytes / KIB:,.1f} KiB"


def headline(mm: MemoryMap, origin_ns: int, sep: str = "; ") -> str:
    """One line: the peak of live bytes, its share of the capacity and when; distinct bytes accessed (``sep``
    between the two: ``<br>`` in a figure title)."""
    if mm.peak_at_ns is None:
        return f"{mm.mem}: nothing live or accessed in this window ({mm.accesses:,} accesses)"
    return (f"{mm.mem} peak live {kib(mm.peak_live_bytes)} per partition of {kib(mm.capacity)} "
            f"({100 * mm.peak_live_bytes / mm.capacity:.1f}%) at {format_time(mm.peak_at_ns, origin_ns)}{sep}"
            f"{kib(mm.accessed_bytes)} accessed by {mm.accesses:,} operand accesses")


def address_title(mm: MemoryMap) -> str:
    """The address axis' title; when the rows stop below the capacity (:func:`profiler.analyses.memory_map.map_top`)
    it says how far they go of how much."""
    if mm.top == mm.capacity:
        return f"{mm.mem} address (KiB per partition)"
    return f"{mm.mem} address (KiB, lowest {mm.top / 1024:,.4g} of {mm.capacity / 1024:,.4g})"


def memory_map_figure(mm: MemoryMap, origin_ns: int = 0, *, height: int = 640, title: str | None = None) -> go.Figure:
    """The memory map of ``mm`` as a two-panel figure (see the module docstring); x is seconds since
    ``origin_ns`` (the trace's start, as on the timeline); ``title`` defaults to :func:`headline` (``""``: none,
    where the page shows the headline itself)."""
    w, h = mm.width, mm.height
    span = mm.end_ns - mm.start_ns
    col_ns = mm.start_ns + (np.arange(w, dtype=np.float64) + 0.5) * span / w
    x = ns_to_axis(col_ns, origin_ns)
    row_kib = (np.arange(h, dtype=np.float64) + 0.5) * mm.row_bytes / KIB
    names = np.array(STATE_NAMES, dtype=object)
    fig = go.Figure()
    fig.add_trace(go.Heatmap(
        z=mm.state, x=x, y=row_kib, zmin=-0.5, zmax=len(STATE_COLOURS) - 0.5, colorscale=_colourscale(),
        showscale=False, customdata=names[mm.state], name=mm.mem, xaxis="x", yaxis="y2",
        hovertemplate="+%{x:.4~s}s · %{y:.1f} KiB: %{customdata}<extra></extra>"))
    for state in (LIVE, READ, WRITTEN, READ_WRITTEN):  # a legend of the colours (markers only, never drawn)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=LEGEND_NAMES[state], xaxis="x", yaxis="y2",
                                 marker={"symbol": "square", "size": 12, "color": STATE_COLOURS[state]},
                                 hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=mm.live_bytes / KIB, mode="lines", line={"shape": "hv", "color": LIVE_COLOUR},
                             name="live bytes", xaxis="x", yaxis="y",
                             hovertemplate="+%{x:.4~s}s: %{y:,.1f} KiB live<extra></extra>"))
    x0, x1 = ns_to_axis(mm.start_ns, origin_ns), ns_to_axis(mm.end_ns, origin_ns)
    # the live panel's scale is the map's (the capacity's only when the map covers all of it)
    top = max(mm.top, mm.peak_live_bytes) / KIB
    fig.add_trace(go.Scatter(x=[x0, x1], y=[mm.top / KIB] * 2, mode="lines",
                             name="capacity" if mm.top == mm.capacity else f"map top ({kib(mm.top)})",
                             line={"color": CAPACITY_COLOUR, "dash": "dash"}, xaxis="x", yaxis="y",
                             hovertemplate=f"{kib(mm.top)} of {kib(mm.capacity)}<extra></extra>"))
    if mm.peak_at_ns is not None:
        fig.add_trace(go.Scatter(x=[ns_to_axis(mm.peak_at_ns, origin_ns)], y=[mm.peak_live_bytes / KIB],
                                 mode="markers", name="peak", marker={"color": LIVE_COLOUR, "size": 9},
                                 xaxis="x", yaxis="y",
                                 hovertemplate=f"peak {kib(mm.peak_live_bytes)}<extra></extra>"))
    if mm.bank_bytes:  # PSUM: a line at each bank's start (matmuls accumulate within one bank)
        for k, addr in enumerate(range(0, mm.top, mm.bank_bytes)):
            fig.add_shape(type="line", xref="paper", x0=0, x1=1, yref="y2", y0=addr / KIB, y1=addr / KIB,
                          line={"color": BANK_COLOUR, "width": 1, "dash": "dot"}, layer="below")
            fig.add_annotation(xref="paper", x=1, xanchor="left", yref="y2", y=(addr + mm.bank_bytes / 2) / KIB,
                               text=f"bank {k}", showarrow=False, font={"size": 9, "color": BANK_COLOUR})
    context = "" if mm.whole_trace else (f" · live ranges from {format_duration(mm.context_ns[1] - mm.context_ns[0])}"
                                         " around the view")
    fig.update_layout(
        title={"text": title if title is not None else headline(mm, origin_ns, "<br>"), "font": {"size": 13},
               "y": 0.98, "yanchor": "top"},
        height=height, margin={"l": 70, "r": 50 if mm.bank_bytes else 20, "t": 60 if title != "" else 20, "b": 90},
        plot_bgcolor="#ffffff",
        legend={"orientation": "h", "x": 0, "y": -0.09, "yanchor": "top"}, hovermode="closest",
        uirevision=mm.mem,
        xaxis={**TIME_AXIS, "range": [x0, x1], "title": {"text": f"time ({format_duration(span)} in view{context})"}},
        yaxis={"domain": [0.0, 0.22], "title": {"text": "live KiB"}, "range": [0, top * 1.05], "fixedrange": True},
        yaxis2={"domain": [0.28, 1.0], "title": {"text": address_title(mm)}, "range": [0, mm.top / KIB],
                "fixedrange": True},
    )
    return fig


__all__ = ["STATE_COLOURS", "headline", "kib", "memory_map_figure"]
