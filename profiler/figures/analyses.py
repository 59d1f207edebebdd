"""Figures of the analyses (:mod:`profiler.analyses`): bounds, waits, critical path, idle gaps, operators, DMA.

Pure builders: analysis results (dicts and Arrow tables) in, ``plotly.graph_objects.Figure`` (or traces) out; no
I/O.  :func:`critical_path_overlay` draws a critical path on top of the timeline figure of
:mod:`profiler.figures.timeline` (same rows, same time axis).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.figures.palette import CategoryPalette
from profiler.figures.raster import TimelineRow
from profiler.figures.timefmt import NS_PER_S, TIME_AXIS, format_duration, ns_to_axis

_HEIGHT = 340
_MARGIN = {"l": 200, "r": 24, "t": 44, "b": 44}
FAMILY_COLOURS = {"memory": "#4C78A8", "compute": "#F58518", "pipeline": "#54A24B"}
TOTAL_COLOUR = "#555555"
#: Near-black, a colour no category uses, so the path reads on any strip colour.
PATH_COLOUR = "rgba(17, 17, 17, 0.85)"
PATH_LINK_COLOUR = "rgba(17, 17, 17, 0.5)"


def _layout(fig: go.Figure, title: str, *, height: int = _HEIGHT, x_title: str = "",
            x_time: bool = False) -> go.Figure:
    """Title, size and axes of a bar chart; ``x_time``: x holds seconds, its ticks read ns, µs, ms or s."""
    xaxis: dict[str, Any] = {**TIME_AXIS, "showgrid": True} if x_time else {}
    xaxis["title"] = {"text": x_title}
    fig.update_layout(title={"text": title, "font": {"size": 14}}, height=height, margin=_MARGIN,
                      yaxis={"autorange": "reversed"}, xaxis=xaxis, showlegend=False, bargap=0.25)
    return fig


def bounds_figure(bounds: Mapping[str, Any]) -> go.Figure:
    """Horizontal bars of the seven bounds against the total time, coloured by family; hover shows each gap."""
    total = float(bounds[rs.TOTAL_TIME_NS])
    names = [rs.TOTAL_TIME_NS, *rs.BOUND_KEYS]
    values = [total] + [bounds.get(k) for k in rs.BOUND_KEYS]
    colours = [TOTAL_COLOUR] + [FAMILY_COLOURS[rs.BOUND_FAMILY[k]] for k in rs.BOUND_KEYS]
    gap_of = {lo: (g, meaning) for g, (_hi, lo, meaning) in rs.GAPS.items() if lo in rs.BOUND_KEYS}
    # (the summary's total time is the trace's whole span, which can be longer)
    hover = [f"total time: {format_duration(total)}<br>the window analysed (by default the first DMA transfer's "
             "start<br>to the last one's end)"]
    for key in rs.BOUND_KEYS:
        value = bounds.get(key)
        gap_key, meaning = gap_of[key]
        gap = bounds.get(gap_key)
        hover.append(f"{key}: {format_duration(value) if value is not None else 'unknown'}"
                     + (f"<br>gap {format_duration(gap)}: {meaning}" if gap is not None else ""))
    labels = [n.removesuffix("_ns") for n in names]
    fig = go.Figure(go.Bar(x=[0.0 if v is None else float(v) / NS_PER_S for v in values], y=labels, orientation="h",
                           marker={"color": colours}, hovertext=hover, hoverinfo="text"))
    fig.add_vline(x=total / NS_PER_S, line={"color": TOTAL_COLOUR, "dash": "dot", "width": 1})
    named = bounds[rs.BOTTLENECK] or "none (nothing was active)"
    return _layout(fig, f"Performance bounds — bottleneck: {named}", x_time=True)


def engine_active_figure(bounds: Mapping[str, Any]) -> go.Figure:
    """Active time of each engine and of the DMA queues, as a share of the window."""
    total = max(float(bounds[rs.TOTAL_TIME_NS]), 1.0)
    active = bounds[rs.ENGINE_ACTIVE_NS]
    pal = CategoryPalette.for_engines()
    names = list(active)
    fig = go.Figure(go.Bar(x=[100 * active[n] / total for n in names], y=names, orientation="h",
                           marker={"color": [pal.colour(n) for n in names]},
                           hovertext=[f"{n}: {format_duration(active[n])} active" for n in names],
                           hoverinfo="text"))
    fig.update_xaxes(range=[0, 100])
    return _layout(fig, "Active time per engine", height=260, x_title="% of the window")


def waits_figure(summary: pa.Table, top: int = 12) -> go.Figure:
    """Stacked bars: per waiting engine, the share of the window spent waiting on each resource."""
    rows = summary.slice(0, top).to_pylist()
    pal = CategoryPalette()
    fig = go.Figure()
    for what in dict.fromkeys(r[rs.WAITED_ON] for r in rows):
        mine = [r for r in rows if r[rs.WAITED_ON] == what]
        fig.add_trace(go.Bar(x=[100 * r[rs.FRACTION] for r in mine], y=[r[rs.ENGINE] for r in mine],
                             orientation="h", name=what, marker={"color": pal.colour(what)},
                             hovertemplate=f"%{{y}} waiting on {what}: %{{x:.1f}}%<extra></extra>"))
    fig.update_layout(barmode="stack")
    _layout(fig, "Time spent waiting, by what was waited for", height=280, x_title="% of the window")
    fig.update_layout(showlegend=True)
    return fig


def critical_path_figure(breakdown: pa.Table, top: int = 15) -> go.Figure:
    """Where the critical path's time goes: bars per (engine or queue, opcode or tensor), gaps in grey."""
    rows = breakdown.slice(0, top).to_pylist()
    pal = CategoryPalette.for_engines()
    labels, colours = [], []
    for r in rows:
        if r[rs.KIND] == rs.KIND_GAP:
            labels.append(f"gap ({r[rs.RESOURCE]} edges)")
            colours.append("#BBBBBB")
        else:
            labels.append(f"{r[rs.RESOURCE]} {r[rs.NAME]}")
            colours.append(pal.colour("DMA" if r[rs.KIND] == rs.NODE_DMA else str(r[rs.RESOURCE])))
    fig = go.Figure(go.Bar(x=[100 * r[rs.FRACTION] for r in rows], y=labels, orientation="h",
                           marker={"color": colours},
                           hovertext=[f"{lab}: {format_duration(r[rs.TOTAL_NS])} in {r[rs.COUNT]:,} steps"
                                      for lab, r in zip(labels, rows, strict=True)], hoverinfo="text"))
    return _layout(fig, "Critical path: time per engine and opcode", x_title="% of the path")


def idle_gaps_figure(gaps: pa.Table, top: int = 20) -> go.Figure:
    """The longest idle gaps as bars (label: engine and start), coloured by cause."""
    rows = gaps.slice(0, top).to_pylist()
    pal = CategoryPalette()
    labels = [f"#{r[rs.RANK]} {r[rs.ENGINE]} @ {r[rs.START_NS]:,} ns" for r in rows]
    causes = [r[rs.CAUSE_RESOURCE] or r[rs.CAUSE] for r in rows]
    fig = go.Figure(go.Bar(x=[r[rs.DUR_NS] / NS_PER_S for r in rows], y=labels, orientation="h",
                           marker={"color": [pal.colour(c) for c in causes]},
                           hovertext=[f"{lab}: {format_duration(r[rs.DUR_NS])}, cause {r[rs.CAUSE]}"
                                      + (f" ({c})" if c != r[rs.CAUSE] else "")
                                      for lab, r, c in zip(labels, rows, causes, strict=True)], hoverinfo="text"))
    return _layout(fig, "Longest idle gaps", height=max(_HEIGHT, 22 * len(rows) + 90), x_time=True)


def operator_figure(table: pa.Table) -> go.Figure:
    """A treemap of busy time: layer -> operator (from ``time_by(trace, "operator")``)."""
    rows = table.to_pylist()
    ids, labels, parents, values, hover = [], [], [], [], []
    layers: dict[str, float] = {}
    for r in rows:
        layer = r.get(rs.LAYER) or "(no layer)"
        op = r.get(rs.OPERATOR) or "(no operator)"
        layers[layer] = layers.get(layer, 0.0) + r[rs.BUSY_NS]
        ids.append(f"{layer}/{op}")
        labels.append(op)
        parents.append(layer)
        values.append(r[rs.BUSY_NS])
        mfu = r.get(rs.MFU)
        flops = r[rs.FLOPS]
        hover.append(f"{op}: {format_duration(r[rs.BUSY_NS])} busy"
                     + (f", {flops:,} FLOPs" if flops is not None else ", FLOPs not recorded")
                     + (f", MFU {100 * mfu:.1f}%" if mfu is not None else ""))
    for layer, busy in layers.items():
        ids.append(layer)
        labels.append(layer)
        parents.append("")
        values.append(busy)
        hover.append(f"{layer}: {format_duration(busy)} busy")
    fig = go.Figure(go.Treemap(ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
                               hovertext=hover, hoverinfo="text"))
    fig.update_layout(title={"text": "Operators by busy time", "font": {"size": 14}}, height=_HEIGHT,
                      margin={"l": 10, "r": 10, "t": 44, "b": 10})
    return fig


def dma_histogram_figure(histogram: pa.Table) -> go.Figure:
    """Packets per power-of-two size bin, with the bytes they carry in the hover."""
    rows = histogram.to_pylist()
    labels = [f"{r[rs.SIZE_LO]:,}–{r[rs.SIZE_HI]:,} B" for r in rows]
    fig = go.Figure(go.Bar(x=labels, y=[r[rs.PACKETS] for r in rows], marker={"color": FAMILY_COLOURS["memory"]},
                           hovertext=[f"{lab}: {r[rs.PACKETS]:,} packets, {r[rs.BYTES]:,} bytes"
                                      for lab, r in zip(labels, rows, strict=True)], hoverinfo="text"))
    fig.update_layout(title={"text": "DMA packet sizes", "font": {"size": 14}}, height=280,
                      margin={"l": 60, "r": 20, "t": 44, "b": 60}, yaxis={"title": {"text": "packets"}})
    return fig


#: A windowed overlay draws the dotted links between consecutive steps only when at most this many steps are in
#: view (more are a solid smear at that zoom, and cost the browser for nothing).
MAX_LINKED_STEPS = 2_000


def critical_path_overlay_data(path: pa.Table, rows: Sequence[TimelineRow], origin_ns: int,
                               window: tuple[int, int, int] | None = None, *,
                               name: str = "critical path") -> tuple[dict[str, Any], dict[str, Any]]:
    """``x``/``y`` (and the segments' ``text``) of the two overlay traces: (links, segments).

    With ``window = (start_ns, end_ns, width_px)`` only the steps overlapping the window are drawn, and the steps of
    one row closer than a pixel merge into one segment ("N steps"), so what is sent grows with the pixels, not with
    the path (a path of 10^6 steps at a whole-trace zoom is a few thousand segments).  Without a window every step
    is drawn as it is.
    """
    row_of = {tid: i for i, row in enumerate(rows) for tid in row.track_ids}
    tracks = path.column(rs.TRACK_ID).to_pylist()
    keep = np.array([t is not None and t in row_of for t in tracks], dtype=bool)
    y = np.array([row_of[t] for t, k in zip(tracks, keep, strict=True) if k], dtype=np.int64)
    starts = np.asarray(path.column(rs.START_NS).to_numpy(zero_copy_only=False), dtype=np.int64)[keep]
    ends = np.asarray(path.column(rs.END_NS).to_numpy(zero_copy_only=False), dtype=np.int64)[keep]
    names: list[Any] = [n for n, k in zip(path.column(rs.NAME).to_pylist(), keep, strict=True) if k]
    counts = np.ones(len(y), dtype=np.int64)
    busy = ends - starts
    if window is not None:
        w0, w1, width = window
        inside = (ends > w0) & (starts < w1)
        y, starts, ends, busy, counts = y[inside], starts[inside], ends[inside], busy[inside], counts[inside]
        names = [n for n, k in zip(names, inside, strict=True) if k]
    links_x: list[Any] = []
    links_y: list[Any] = []
    if len(y) > 1 and (window is None or len(y) <= MAX_LINKED_STEPS):
        for k in range(len(y) - 1):
            links_x += [ns_to_axis(int(ends[k]), origin_ns), ns_to_axis(int(starts[k + 1]), origin_ns), None]
            links_y += [int(y[k]), int(y[k + 1]), None]
    if window is not None and len(y):
        y, starts, ends, busy, counts, names = _merge_per_row(y, starts, ends, busy, names,
                                                              res=max((w1 - w0) / max(width, 1), 1.0))
    seg_x: list[Any] = []
    seg_y: list[Any] = []
    text: list[Any] = []
    for k in range(len(y)):
        label = (f"{name}: {names[k]} ({format_duration(int(busy[k]))})" if counts[k] == 1 else
                 f"{name}: {int(counts[k]):,} steps, {format_duration(int(busy[k]))} in "
                 f"{format_duration(int(ends[k] - starts[k]))}")
        seg_x += [ns_to_axis(int(starts[k]), origin_ns), ns_to_axis(int(ends[k]), origin_ns), None]
        seg_y += [int(y[k]), int(y[k]), None]
        text += [label, label, None]
    return {"x": links_x, "y": links_y}, {"x": seg_x, "y": seg_y, "text": text}


def _merge_per_row(y: np.ndarray, starts: np.ndarray, ends: np.ndarray, busy: np.ndarray, names: list[Any], *,
                   res: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[Any]]:
    """Per row, steps less than ``res`` ns apart merged into one (start, end, summed busy time, count)."""
    out: list[tuple[int, int, int, int, int, Any]] = []
    for row in np.unique(y).tolist():
        idx = np.flatnonzero(y == row)
        idx = idx[np.argsort(starts[idx], kind="stable")]
        s, e, b = starts[idx], ends[idx], busy[idx]
        reach = np.maximum.accumulate(e)
        first = np.flatnonzero(np.r_[True, s[1:] > reach[:-1] + res])
        last_end = np.maximum.reduceat(e, first)
        sums = np.add.reduceat(b, first)
        sizes = np.diff(np.r_[first, len(idx)])
        for g, at in enumerate(first.tolist()):
            out.append((row, int(s[at]), int(last_end[g]), int(sums[g]), int(sizes[g]), names[idx[at]]))
    out.sort(key=lambda r: (r[1], r[0]))
    cols = list(zip(*out, strict=True))
    return (np.array(cols[0]), np.array(cols[1]), np.array(cols[2]), np.array(cols[3]), np.array(cols[4]),
            list(cols[5]))


def critical_path_overlay(path: pa.Table, rows: Sequence[TimelineRow], origin_ns: int,
                          window: tuple[int, int, int] | None = None, *,
                          name: str = "critical path") -> list[go.Scattergl]:
    """Traces that highlight ``path`` on a timeline figure with these ``rows``: a thick dark segment over every step
    on its row, and thin dotted links between consecutive steps.  Steps on tracks without a row are left out; with
    ``window`` only what that window shows, at its resolution (:func:`critical_path_overlay_data`).  Without a
    window, a path with no step on these rows gives no traces.  ``name``: what the path is (the traces' names,
    in their hover: a dependency chain is drawn the same way)."""
    links, segments = critical_path_overlay_data(path, rows, origin_ns, window, name=name)
    if window is None and not segments["x"]:
        return []
    return [
        go.Scattergl(**links, mode="lines", line={"color": PATH_LINK_COLOUR, "width": 1, "dash": "dot"},
                     hoverinfo="skip", name=f"{name} links", showlegend=False),
        go.Scattergl(**segments, mode="lines", line={"color": PATH_COLOUR, "width": 4},
                     hoverinfo="text", name=name, showlegend=False),
    ]
