"""The compare page's logic as plain functions: which pair is compared, how a zoom on one timeline moves the other,
and the comparison shown under them (:func:`profiler.analyses.diff.diff`).

Both timelines put time on the axis as seconds since their own trace's start, so synchronising them is forwarding
one graph's x range to the other unchanged: the same offsets from each kernel's start.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from typing import Any

import dash
from dash import dcc, html

from dashboard import timeline_logic as tl
from dashboard import timeline_state as tls
from dashboard.calltree_view import LEVEL_LABELS, span_comparison
from dashboard.errors import public_message
from dashboard.graph_config import graph_config
from dashboard.links import source_href
from dashboard.registry import TraceRegistry
from profiler.analyses import diff
from profiler.analyses import schema as rs
from profiler.analyses.instruction_tree import instruction_tree
from profiler.analyses.source_lines import line_text, split_location
from profiler.db.sqlutil import quote
from profiler.figures import viewport as vp
from profiler.figures.call_tree import call_tree_diff_figure
from profiler.figures.compare import delta_figure, metrics_figure
from profiler.figures.memory_map import kib
from profiler.figures.timefmt import format_duration
from tracer import schema as ts
from tracer.errors import TrnprofError


def default_pair(registry: TraceRegistry, trace_id: str, query: dict[str, str]) -> tuple[str, str | None]:
    """(A, B) to show first: A is the page's trace, B the ``b`` query value or the next served trace."""
    ids = [e.id for e in registry.entries]
    b = query.get("b")
    if b not in registry or b == trace_id:
        others = [i for i in ids if i != trace_id]
        b = others[0] if others else None
    return trace_id, b


def check_pair(registry: TraceRegistry, a: Any, b: Any) -> str | None:
    """Why ``(a, b)`` cannot be compared (None when it can)."""
    if a not in registry or b not in registry:
        return "Choose two served traces."
    if a == b:
        return "Choose two different traces."
    return None


def sync_relayout(relayout: Any) -> dict[str, Any] | None:
    """The relayout to forward to the other timeline (its x range or an autorange), None when x did not move."""
    if not isinstance(relayout, dict):
        return None
    if relayout.get("xaxis.autorange"):
        return {"xaxis.autorange": True}
    view = vp.view_from_relayout(relayout, 0)
    if not isinstance(view, tuple):
        return None
    return {"xaxis.range[0]": view[0] / 1e9, "xaxis.range[1]": view[1] / 1e9}


#: Levels of the compare page's differential instruction tree: no source lines, so two versions of a kernel (in two
#: files) still line up by layer, operator, engine and opcode ...
COMPARE_LEVELS = ("layer", "operator", "engine", "opcode")
#: ... and with them when both traces run the same kernel files (a what-if), so each line's change shows.
SAME_SOURCE_LEVELS = ("layer", "operator", "source", "engine", "opcode")


def source_files_of(trace: Any) -> frozenset[str]:
    """The kernel source files a trace's instructions name (``file.py`` of ``file.py:LINE``)."""
    rows = trace.sql(f"SELECT DISTINCT regexp_extract({quote(ts.NKI_SOURCE_LOCATION)}, '^(.*):[0-9]+$', 1) "
                     f"FROM {quote(ts.INSTRUCTION.name)} WHERE {quote(ts.NKI_SOURCE_LOCATION)} IS NOT NULL").fetchall()
    return frozenset(f for (f,) in rows if f)


class DiffCache:
    """``diff(a, b)`` per pair of served traces, computed once (it reads both traces whole), and the pair's
    instruction trees."""

    def __init__(self) -> None:
        # by (a, b, version of a, version of b): TraceRegistry.version
        self._results: dict[tuple[str, str, int, int], dict[str, Any]] = {}
        self._trees: dict[tuple[str, str, int, int], Any] = {}
        self._lock = threading.Lock()

    def instruction_figure(self, registry: TraceRegistry, a: str, b: str) -> Any:
        """B's instruction tree coloured by each frame's change from A's, computed once per pair: by
        :data:`SAME_SOURCE_LEVELS` when both run the same kernel files (a what-if: the lines line up), else by
        :data:`COMPARE_LEVELS`."""
        key = (a, b, registry.version(a), registry.version(b))
        with self._lock:
            if key not in self._trees:
                self._forget(self._trees, a, b)
                ta_, tb_ = registry.open(a), registry.open(b)   # (without the traces' locks, as the diff)
                files = source_files_of(ta_)
                levels = SAME_SOURCE_LEVELS if files and files == source_files_of(tb_) else COMPARE_LEVELS
                ta, tb = (instruction_tree(t, levels=levels) for t in (ta_, tb_))
                fig = call_tree_diff_figure(ta, tb)
                fig.update_layout(title={"text": f"B's engine time by {' › '.join(LEVEL_LABELS[x] for x in levels)}, "
                                                 "coloured by the change from A (click a box to zoom)"})
                self._trees[key] = fig
            return self._trees[key]

    def get(self, registry: TraceRegistry, a: str, b: str) -> dict[str, Any]:
        """The comparison of ``b`` with ``a``."""
        key = (a, b, registry.version(a), registry.version(b))
        with self._lock:
            if key not in self._results:
                self._forget(self._results, a, b)
                # without the traces' locks (each thread has its own cursor): the diff of large traces takes a
                # minute, and both timelines of the page (and any tab of the two traces) waited for it
                self._results[key] = diff(registry.open(a), registry.open(b))
            return self._results[key]

    @staticmethod
    def _forget(kept: dict[Any, Any], a: str, b: str) -> None:
        """Drop the pair's results of older versions of its traces (a followed recording that grew)."""
        for key in [k for k in kept if k[:2] == (a, b)]:
            del kept[key]


def headline(result: dict[str, Any], labels: tuple[str, str]) -> html.Div:
    """Total time A -> B with the speed-up, and the bottleneck of each."""
    total = result[rs.DIFF_TOTAL]
    ratio = total[rs.RATIO]
    if ratio is None or ratio == 0:
        change = ""
    elif ratio < 1:
        change = f" — B is {1 / ratio:.2f}x faster"
    elif ratio > 1:
        change = f" — B is {ratio:.2f}x slower"
    else:
        change = " — same time"
    neck = result[rs.DIFF_BOTTLENECK]
    return html.Div([
        html.Div([html.Strong("total time: "),
                  html.Span(f"{format_duration(total[rs.A])} → {format_duration(total[rs.B])}{change}",
                            id="cmp-total")]),
        html.Div([html.Strong("bottleneck: "), html.Span(f"{neck[rs.A]} → {neck[rs.B]}", id="cmp-bottleneck")]),
        *memory_lines(result),
        html.Div(f"A = {labels[0]}, B = {labels[1]}", className="muted"),
    ], className="cmp-headline")


def memory_lines(result: dict[str, Any]) -> list[Any]:
    """"SBUF peak live: 41.2 KiB → 12.0 KiB" per memory, when both traces have memory maps."""
    table = result.get(rs.DIFF_MEMORY)
    if table is None or not table.num_rows:
        return []
    names = {rs.SBUF_PEAK_LIVE_BYTES: "SBUF", rs.PSUM_PEAK_LIVE_BYTES: "PSUM"}
    return [html.Div([html.Strong(f"{names.get(r[rs.METRIC], r[rs.METRIC])} peak live: "),
                      html.Span(f"{kib(r[rs.A])} → {kib(r[rs.B])} per partition",
                                id=f"cmp-{names.get(r[rs.METRIC], 'mem').lower()}-peak")])
            for r in table.to_pylist()]


#: The charts' titles say their window: the bounds' (as ``trnprof diff`` does), not the headline's whole trace,
#: and that wait-only instructions are not active time (Sync's triggers issued before the first DMA are outside).
ENGINES_CHART_TITLE = "Active time per engine (first DMA start to last DMA end; waits excluded)"
BOUNDS_CHART_TITLE = "Performance bounds and gaps (same window)"


def charts(result: dict[str, Any], labels: tuple[str, str]) -> list[Any]:
    """Per-engine active time and the bounds of both traces, side by side."""
    return [
        dcc.Graph(figure=metrics_figure(result[rs.DIFF_ENGINES], ENGINES_CHART_TITLE, labels),
                  config=graph_config(), id="cmp-engines-chart"),
        dcc.Graph(figure=metrics_figure(result[rs.DIFF_BOUNDS], BOUNDS_CHART_TITLE, labels),
                  config=graph_config(), id="cmp-bounds-chart"),
    ]


def source_lines(registry: TraceRegistry, a: str, b: str, locations: list[Any]) -> dict[str, tuple[str, str]]:
    """Per ``file.py:LINE`` location: the link to that line on the source page (of trace A, else B: the one
    whose recording kept the file) and the line's text ("" when neither trace holds it)."""
    out: dict[str, tuple[str, str]] = {}
    traces = [(side, registry.open(side)) for side in (a, b)]
    for loc in locations:
        where = split_location(loc) if isinstance(loc, str) else None
        if where is None or where[1] is None:
            continue
        file, line = where
        out[loc] = (source_href(a, file, line), "")
        for side, trace in traces:
            text = line_text(trace, loc)
            if text is not None:
                out[loc] = (source_href(side, file, line), text)
                break
    return out


def _key_cell(value: Any, link: tuple[str, str] | None) -> html.Td:
    if value is None:
        return html.Td("–")
    if link is None:
        return html.Td(str(value))
    href, text = link
    return html.Td([dcc.Link(str(value), href=href, title="this line on the source page"),
                    *([html.Code(text, className="cmp-line-text")] if text else [])])


#: Rows of the delta table.
DELTA_ROWS = 30


def delta_view(result: dict[str, Any], by: str, limit: int = DELTA_ROWS,
               lines: dict[str, tuple[str, str]] | None = None) -> html.Div:
    """The per-identity delta table (largest change first) and its chart, for grouping ``by``; with ``lines``
    (:func:`source_lines`), source locations link to the source page and show their text."""
    if by not in result[rs.DIFF_BY]:
        by = next(iter(result[rs.DIFF_BY]))
    table = result[rs.DIFF_BY][by]
    keys = rs.GROUP_KEYS[by]
    header = [*keys, "presence", "A count", "B count", "A busy", "B busy", "delta", "B / A"]
    body = []
    links = lines or {}
    for r in table.slice(0, limit).to_pylist():
        delta = r[rs.DELTA_NS]
        body.append(html.Tr([
            *[_key_cell(r[k], links.get(r[k]) if k == rs.SOURCE else None) for k in keys],
            html.Td(r[rs.PRESENCE]),
            html.Td(f"{r[rs.A_COUNT]:,}", className="num"), html.Td(f"{r[rs.B_COUNT]:,}", className="num"),
            html.Td(format_duration(r[rs.A_NS]), className="num"), html.Td(format_duration(r[rs.B_NS]),
                                                                          className="num"),
            html.Td(("+" if delta > 0 else "") + format_duration(delta), className="num " + (
                "faster" if delta < 0 else "slower" if delta > 0 else "")),
            html.Td("–" if r[rs.RATIO] is None else f"{r[rs.RATIO]:.3f}", className="num"),
        ]))
    more = (html.Div(f"{limit} of {table.num_rows} rows", className="muted") if table.num_rows > limit else None)
    return html.Div([
        html.Table([html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(body)],
                   className="mini-table", id="cmp-delta-table"),
        more,
        dcc.Graph(figure=delta_figure(table, by), config=graph_config(), id="cmp-delta-chart"),
    ])


def compare_outputs(registry: TraceRegistry, diffs: DiffCache, a: Any, b: Any, *, by: Any,
                    by_only: bool = False) -> tuple[Any, ...]:
    """What the page shows for the pair (A, B): the pair store (no_update when only the grouping changed), the
    headline, the charts, the delta view and the two timeline titles; an error panel instead when they cannot be
    compared.  Traces the analyses cannot compare (a host-only PyTorch trace) still get their timelines side by
    side, under the panel saying why there are no analyses."""
    problem = check_pair(registry, a, b)
    if problem is not None:
        return None, html.Div(problem, className="error-panel", id="cmp-error"), [], [], "A", "B"
    labels = (registry.entry(a).label, registry.entry(b).label)
    pair = dash.no_update if by_only else {"a": a, "b": b}
    try:
        result = diffs.get(registry, a, b)
    except TrnprofError as exc:
        spans = span_comparison(registry.open(a), registry.open(b), labels, public_message(exc))
        if spans is not None:   # host traces (PyTorch, JAX): their call trees compared instead
            return (pair, *spans, f"A: {labels[0]}", f"B: {labels[1]}")
        return (pair, html.Div(f"No comparison of the analyses: {public_message(exc)}", className="error-panel",
                               id="cmp-error"), [], [], f"A: {labels[0]}", f"B: {labels[1]}")
    lines = None
    if str(by) == "source" and "source" in result[rs.DIFF_BY]:
        shown = result[rs.DIFF_BY]["source"].slice(0, DELTA_ROWS).column(rs.SOURCE).to_pylist()
        try:
            lines = source_lines(registry, a, b, shown)
        except TrnprofError:
            lines = None   # the table without links rather than no table
    figures = charts(result, labels)
    # (the analyses compared them: both have instructions; a failure here leaves the other charts)
    with contextlib.suppress(TrnprofError):
        figures.append(dcc.Graph(figure=diffs.instruction_figure(registry, a, b), config=graph_config(),
                                 id="cmp-instruction-diff", style={"height": "560px", "gridColumn": "1 / -1"}))
    return (pair, headline(result, labels), figures, delta_view(result, str(by), DELTA_ROWS, lines),
            f"A: {labels[0]}", f"B: {labels[1]}")


#: What a compare timeline shows while the pickers name no pair it can draw.
NO_PAIR = "choose two different served traces"


class SideUpdater:
    """The level-of-detail loop of one compare timeline, plus what it forwards to the other one."""

    def __init__(self, registry: TraceRegistry, palette_for: Callable[[tuple[str, str]], Any]) -> None:
        self.registry = registry
        self.palette_for = palette_for
        self._seq = itertools.count(1)
        self._layouts: dict[str, tl.TraceLayout] = {}

    def _layout(self, trace_id: str, trace: Any) -> tl.TraceLayout:
        """The served trace's timeline layout (rows per row filter), made on first use (lock held)."""
        if trace_id not in self._layouts or self._layouts[trace_id].trace is not trace:
            self._layouts[trace_id] = tl.TraceLayout(trace, self.registry.sql_slots)
        return self._layouts[trace_id]

    def update(self, side: str, triggered: set[str], *, pair: Any, size: Any, relayout: Any, synced: Any,
               state: Any, row_filter: Any = None) -> tuple[Any, Any, Any, Any, Any] | None:
        """``(figure, state, sync for the other side, status, legend)`` after ``triggered`` (component ids); None when
        nothing changes.  Only a zoom the user made on this side is forwarded, and only when it moved the view
        (an echo of a forwarded zoom moves nothing, so the two graphs never ping-pong).  ``row_filter``: the rows
        both timelines draw (:mod:`profiler.figures.row_filter`; its box is ``cmp-rows``)."""
        if not isinstance(pair, dict) or check_pair(self.registry, pair.get("a"), pair.get("b")) is not None:
            if "cmp-pair" in triggered:  # no pair to draw: say so rather than keep "loading…"
                return tl.empty_figure(NO_PAIR), None, dash.no_update, "", []
            return None
        trace_id = pair[side]
        own_zoom, synced_zoom = False, False
        if "cmp-pair" in triggered:
            trigger = "trace"
        elif "cmp-rows" in triggered:
            trigger = "options"
        elif "cmp-size" in triggered:
            trigger = "size"
        elif f"cmp-sync-{side}" in triggered and isinstance(synced, dict):
            trigger, relayout, synced_zoom = "relayout", synced.get("relayout"), True
        else:
            trigger, own_zoom = "relayout", True
        width = size.get("width") if isinstance(size, dict) else None
        trace = self.registry.open(trace_id)
        with self.registry.lock(trace_id):
            update = tl.update_timeline(trace, trace_id, state=state, trigger=trigger, relayout=relayout,
                                        width_px=width, palette=self.palette_for((pair["a"], pair["b"])),
                                        lanes=False, set_range=synced_zoom, range_select=False,
                                        options=tls.TimelineOptions.parse("opcode", False, row_filter=row_filter),
                                        layout=self._layout(trace_id, trace))
        if update is None:
            return None
        forward: Any = dash.no_update
        before = state.get("view") if isinstance(state, dict) else None
        if own_zoom and update.state.get("view") != before:
            moved = sync_relayout(relayout)
            if moved is not None:
                forward = {"relayout": moved, "seq": next(self._seq)}
        status = update.status
        if synced_zoom and clamped(relayout, update.state):
            detail = update.state.get("status_detail")
            line = tl.status_line(tuple(update.state["view"]), detail) if isinstance(detail, str) else ""
            status = f"{line} · {CLAMPED_NOTE}" if line else CLAMPED_NOTE
        legend = dash.no_update if update.legend is dash.no_update else tl.legend_children(update.legend)
        return update.graph_output(), update.state, forward, status, legend


#: Said under a graph that could not show the range the other graph asked for (this trace is shorter).
CLAMPED_NOTE = "this trace is shorter: it shows the nearest range it has, not the other side's offsets"


def clamped(relayout: Any, state: dict[str, Any]) -> bool:
    """True when the view ``state`` shows differs from the range a forwarded zoom ``relayout`` asked for (by more
    than a nanosecond): the trace is too short for it and the view was moved into it."""
    asked = vp.view_from_relayout(relayout, int(state.get("origin") or 0))
    view = state.get("view")
    if not isinstance(asked, tuple) or not isinstance(view, list) or len(view) != 2:
        return False  # (nothing asked, or a reset: "reset", which the other side follows as a reset)
    return abs(int(view[0]) - asked[0]) > 1 or abs(int(view[1]) - asked[1]) > 1
