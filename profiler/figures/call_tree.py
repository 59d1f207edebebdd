"""The call tree as an icicle (a flame graph drawn top down, as Perfetto draws one): a pure figure builder.

Drawn from :func:`profiler.analyses.call_tree.call_tree`: one box per frame, its width its time in the window
(children under their parent, widest first), colour by name (the timeline's stable palette, so a name keeps its
colour), rows' root frames grey.  Clicking a box zooms to it (plotly's own icicle behaviour); the hover gives the
frame's stack, count, total and self time.  The dashboard's call-tree page and ``Trace.call_tree_figure`` draw this
same figure.
"""

from __future__ import annotations

import numbers

import numpy as np
import plotly.graph_objects as go
import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.call_tree import INSTRUCTIONS, KERNELS, CallTree
from profiler.errors import QueryError
from profiler.figures.palette import OTHER_COLOUR, CategoryPalette
from profiler.figures.timefmt import format_duration

#: Most frames drawn (the widest; the others are left as gaps in their parent).
MAX_FRAMES = 3000
#: Frames narrower than this share of the widest root are left out.
MIN_SHARE = 0.0005
#: Longest label drawn in a box (the hover has the whole name).
MAX_LABEL = 60
#: Id and colour of the box drawn over several roots.
ALL_ID = "all"
ROOT_COLOUR = "#e0e0e0"
#: Levels shown at once (click a box to see deeper).
MAX_DEPTH_SHOWN = 16
#: Tallest figure drawn, in pixels.
MAX_HEIGHT_PX = 20_000


def kept_frames(tree: CallTree, max_frames: int = MAX_FRAMES, min_share: float = MIN_SHARE) -> np.ndarray:
    """Rows of ``tree.table`` the figure draws: at most ``max_frames``, the widest, none narrower than
    ``min_share`` of the widest root, each with its ancestors."""
    t = tree.table
    n = t.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    total = np.asarray(t.column(rs.TOTAL_NS).to_numpy(), dtype=np.int64)
    parent = np.asarray(t.column(rs.PARENT).fill_null(-1).to_numpy(), dtype=np.int64)
    widest = int(total[parent < 0].max())
    order = np.argsort(-total, kind="stable")
    order = order[total[order] >= min_share * widest][:max_frames]
    keep = np.zeros(n, dtype=bool)
    keep[order] = True
    row_of = {int(node): i for i, node in enumerate(t.column(rs.NODE).to_pylist())}
    for i in range(n):  # depth first order: a parent precedes its children
        if keep[i] and parent[i] >= 0:
            p = row_of.get(int(parent[i]))
            if p is not None and not keep[p]:
                keep[i] = False
    return np.flatnonzero(keep)


def call_tree_figure(tree: CallTree, *, height: int = 560, title: str | None = None,
                     max_frames: int = MAX_FRAMES) -> go.Figure:
    """The icicle of ``tree``: boxes as wide as their frames' time in the window, roots on top (QueryError for a
    ``height`` that is not a whole number of pixels from 10, plotly's least, to 20,000)."""
    if isinstance(height, bool) or not isinstance(height, numbers.Integral) or not 10 <= height <= MAX_HEIGHT_PX:
        raise QueryError(f"height must be a whole number of pixels from 10 to {MAX_HEIGHT_PX:,}, not "
                         f"{str(height)[:40]!r}")
    height = int(height)
    t = tree.table
    rows = kept_frames(tree, max_frames)
    kept = t.take(pa.array(rows, type=pa.int64()))
    node = kept.column(rs.NODE).to_numpy()
    parent = kept.column(rs.PARENT).fill_null(-1).to_numpy()
    names = kept.column(rs.NAME).to_pylist()
    kinds = kept.column(rs.FRAME_KIND).to_pylist()
    total = np.asarray(kept.column(rs.TOTAL_NS).to_numpy(), dtype=np.int64)
    own = kept.column(rs.SELF_NS).to_numpy()
    count = kept.column(rs.COUNT).to_numpy()
    depth = kept.column(rs.DEPTH).to_numpy()
    # a box is at least as wide as its children together (an imported child can stick out of its parent)
    width = total.copy()
    where = {int(n): k for k, n in enumerate(node)}
    kids = np.zeros(len(rows), dtype=np.int64)
    for k in range(len(rows) - 1, -1, -1):  # depth first order reversed: children before their parent
        width[k] = max(int(total[k]), int(kids[k]))
        p = where.get(int(parent[k]))
        if p is not None:
            kids[p] += width[k]
    span_ns = max(tree.span_ns, 1)
    palette = CategoryPalette.for_engines()   # engines in their timeline colours; other names by stable hash
    colours = [OTHER_COLOUR if kind == rs.FRAME_THREAD else palette.colour(name) for name, kind in zip(names, kinds,
                                                                                                        strict=True)]
    unit = tree.what[:-1]   # "span" / "instruction"
    of = {INSTRUCTIONS: "engine time", KERNELS: "GPU time"}.get(tree.what, "span time")
    hover = [f"<b>{_escape(name)}</b><br>{int(c):,} {unit}{'s' if c != 1 else ''}<br>total {format_duration(int(tot))}"
             f" ({100 * tot / span_ns:.1f}% of {of})<br>self {format_duration(int(o))}"
             for name, c, tot, o in zip(names, count, total, own, strict=True)]
    ids = [str(int(n)) for n in node]
    parents = ["" if p < 0 else str(int(p)) for p in parent]
    labels = [_label(name) for name in names]
    values = width.tolist()
    paths = kept.column(rs.PATH).to_pylist()
    # what a click on a box reports (the dashboard's frame panel): name, path, count, total, self
    custom = [[name, path, int(c), int(tot), int(o)] for name, path, c, tot, o in zip(names, paths, count, total, own,
                                                                                      strict=True)]
    if parents.count("") > 1:  # one box over the roots (plotly would draw an unlabelled one)
        top = int(sum(w for w, p in zip(values, parents, strict=True) if p == ""))
        parents = [ALL_ID if p == "" else p for p in parents]
        what = "rows" if tree.by_thread else "stacks"
        ids, parents, labels = [ALL_ID, *ids], ["", *parents], [f"all {what}", *labels]
        values, colours = [top, *values], [ROOT_COLOUR, *colours]
        custom = [[f"all {what}", "", int(tree.spans), top, 0], *custom]
        # the whole tree's time (what every box's share is of); the stacks too small to draw are left out of
        # the box's width, not of its hover
        hidden = int(tree.span_ns) - top
        hover = [f"<b>all {what}</b><br>{tree.spans:,} {tree.what}<br>{format_duration(int(tree.span_ns))} of {of}"
                 + (f"<br>({format_duration(hidden)} in stacks too small to draw)" if hidden > 0 else ""), *hover]
    fig = go.Figure(go.Icicle(
        ids=ids,
        parents=parents,
        labels=labels,
        values=values,
        branchvalues="total",
        marker={"colors": colours, "line": {"width": 0.5, "color": "#ffffff"}},
        hovertext=hover,
        hoverinfo="text",
        customdata=custom,
        tiling={"orientation": "v"},
        maxdepth=min(int(depth.max()) + 1, MAX_DEPTH_SHOWN) if len(rows) else -1,
        sort=False,
        textfont={"size": 11},
    ))
    shown = f"{len(rows):,} of {t.num_rows:,} frames" if len(rows) < t.num_rows else f"{t.num_rows:,} frames"
    fig.update_layout(
        title={"text": title or f"Call tree: {tree.spans:,} {tree.what}, {shown}", "x": 0.01, "font": {"size": 14}},
        height=height, margin={"l": 8, "r": 8, "t": 40, "b": 8},
    )
    return fig


def _label(name: str) -> str:
    short = name if len(name) <= MAX_LABEL else name[:MAX_LABEL - 1] + "…"
    return _escape(short)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


#: Colour scale of :func:`call_tree_diff_figure`: blue where B spends less time than A, red where more.
DIFF_COLOURSCALE = [[0.0, "#2166ac"], [0.35, "#92c5de"], [0.5, "#f7f7f7"], [0.65, "#f4a582"], [1.0, "#b2182b"]]


def call_tree_diff_figure(a: CallTree, b: CallTree, *, labels: tuple[str, str] = ("A", "B"), height: int = 560,
                          max_frames: int = MAX_FRAMES) -> go.Figure:
    """B's icicle, each box coloured by how its stack's time changed from A (a differential flame graph): the
    change over the larger of the two times, from -1 (blue: gone or much faster) through 0 (white) to +1 (red: new
    or much slower); stacks are matched by their path of names (build both trees with ``by_thread=False`` for runs
    whose thread ids differ).  Stacks only in A cannot be drawn in B's boxes: the title counts them."""
    t = b.table
    rows = kept_frames(b, max_frames)
    a_total = dict(zip(a.table.column(rs.PATH).to_pylist(), a.table.column(rs.TOTAL_NS).to_pylist(), strict=True))
    paths = t.column(rs.PATH).to_pylist()
    fig = call_tree_figure(b, height=height, max_frames=max_frames)
    change, hover = [], []
    totals, names = t.column(rs.TOTAL_NS).to_pylist(), t.column(rs.NAME).to_pylist()
    for i in rows.tolist():
        path, bt, name = paths[i], totals[i], names[i]
        at = a_total.get(path)
        if at is None:
            change.append(1.0)
            hover.append(f"<b>{_escape(name)}</b><br>only in {_escape(labels[1])}: {format_duration(bt)}")
            continue
        change.append((bt - at) / max(at, bt, 1))
        hover.append(f"<b>{_escape(name)}</b><br>{_escape(labels[0])} {format_duration(at)} → {_escape(labels[1])} "
                     f"{format_duration(bt)} ({'+' if bt >= at else '−'}{format_duration(abs(bt - at))})")
    if fig.data[0].ids and fig.data[0].ids[0] == ALL_ID:  # the box over the roots: neutral
        change, hover = [0.0, *change], [fig.data[0].hovertext[0], *hover]
    only_a = len(set(a_total) - set(paths))
    fig.update_traces(marker={"colors": change, "colorscale": DIFF_COLOURSCALE, "cmin": -1, "cmid": 0, "cmax": 1,
                              "showscale": True, "colorbar": {"title": {"text": "B vs A"}, "thickness": 12,
                                                              "tickvals": [-1, 0, 1],
                                                              "ticktext": ["faster / gone", "same", "slower / new"]}},
                      hovertext=hover)
    gone = f"; {only_a:,} stack{'s' if only_a != 1 else ''} only in {labels[0]} (not drawn)" if only_a else ""
    fig.update_layout(title={"text": f"{labels[1]}'s call tree coloured by the change from {labels[0]}{gone}"})
    return fig
