"""Dashboard views of the analyses (:mod:`profiler.analyses`): the bounds of a selection, the recommendations of
a trace, and the critical-path overlay of the timeline.

Plain functions returning Dash components or plotly traces, tested without a browser; the analyses and figures they
show are the ones the CLI and notebooks use.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from dash import dcc, html

from dashboard.computed import same_trace
from dashboard.errors import public_message
from dashboard.graph_config import graph_config
from dashboard.links import QUERY_PARAM, TRACE_PARAM
from profiler.analyses import critical_path, performance_bounds, recommendations
from profiler.analyses import schema as rs
from profiler.analyses.host_recommendations import host_recommendations
from profiler.analyses.recommendations import stake_text
from profiler.figures.analyses import bounds_figure, critical_path_overlay
from profiler.figures.raster import TimelineRow
from profiler.figures.timefmt import format_duration
from profiler.overview import has_device_events
from tracer.errors import TrnprofError


def _unavailable(what: str, exc: BaseException) -> html.Div:
    return html.Div(f"{what} unavailable: {public_message(exc)}", className="muted")


def bounds_table(bounds: dict[str, Any]) -> html.Div:
    """The bounds as a compact table: bound, value, the gap to the one before (what it means), speedup."""
    from profiler.analyses.bounds import bounds_table as rows_of

    rows = []
    for r in rows_of(bounds).to_pylist():
        value = r[rs.VALUE_NS]
        speedup = r[rs.SPEEDUP]
        rows.append(html.Tr([
            html.Td(r[rs.BOUND].removesuffix("_ns")),
            html.Td("unknown" if value is None else format_duration(value), className="num"),
            html.Td("–" if r[rs.GAP_NS] is None else format_duration(r[rs.GAP_NS]), className="num",
                    title=r[rs.GAP_MEANING] or ""),
            html.Td("–" if speedup is None else f"{speedup:.2f}x", className="num"),
        ]))
    active = bounds[rs.ENGINE_ACTIVE_NS].get(bounds[rs.BOTTLENECK], 0)
    total = max(int(bounds[rs.TOTAL_TIME_NS]), 1)
    return html.Div([
        html.Div([html.Strong("bottleneck: "), html.Span(bounds[rs.BOTTLENECK] or "none (nothing was active)",
                                                         id="bounds-bottleneck"),
                  html.Span(f" (active {100 * active / total:.1f}% of {format_duration(total)})",
                            className="muted")]),
        html.Table([html.Thead(html.Tr([html.Th("bound"), html.Th("time"), html.Th("gap"), html.Th("speedup")])),
                    html.Tbody(rows)], className="mini-table", id="bounds-table"),
        *[html.Div(n, className="muted") for n in bounds[rs.NOTES]],
    ], className="bounds-view")


def bounds_section(trace: Any, start_ns: int, end_ns: int) -> html.Div:
    """The performance bounds of ``[start_ns, end_ns)`` under a heading (a short message when they cannot be had)."""
    try:
        bounds = performance_bounds(trace, start_ns, end_ns)
    except TrnprofError as exc:
        return html.Div([html.H4("Performance bounds"), _unavailable("bounds", exc)], id="selection-bounds")
    return html.Div([html.H4("Performance bounds"), bounds_table(bounds)], id="selection-bounds")


#: Sentences of the waits section (the largest waits of the range).
MAX_WAIT_SENTENCES = 5


def waits_section(trace: Any, start_ns: int, end_ns: int) -> html.Div:
    """What the engines waited on in ``[start_ns, end_ns)`` (``trnprof waits`` as sentences, DMA queues of a group
    counted as one; a short message when there are none or they cannot be had)."""
    from profiler.analyses.waits import wait_sentences, wait_summary

    try:
        sentences = wait_sentences(wait_summary(trace, start_ns, end_ns, queue_groups=True), MAX_WAIT_SENTENCES)
    except TrnprofError as exc:
        return html.Div([html.H4("Waits"), _unavailable("waits", exc)], id="selection-waits")
    body: Any = html.Ul([html.Li(text) for text in sentences]) if sentences else \
        html.Div("No semaphore waits in the range.", className="muted")
    return html.Div([html.H4("Waits"), body], id="selection-waits")


#: Recommendations whose evidence the timeline can draw as rows: rule -> (link text, the example query it runs).
RULE_TIMELINE_QUERIES = {
    "small_dma": ("see where on the timeline", "Timeline rows: where small DMA transfers take most of the DMA time"),
}


def rule_timeline_href(rule: str, trace_id: str | None) -> str | None:
    """The timeline of ``trace_id`` with the rows that show a recommendation's evidence (``?query=``), or None."""
    from urllib.parse import urlencode

    from profiler.sql_examples import EXAMPLE_QUERIES

    if trace_id is None or rule not in RULE_TIMELINE_QUERIES:
        return None
    return "/?" + urlencode({TRACE_PARAM: trace_id, QUERY_PARAM: dict(EXAMPLE_QUERIES)[RULE_TIMELINE_QUERIES[rule][1]]})


def recommendation_list(recs: Any, trace_id: str | None = None) -> html.Div:
    """Ranked recommendations: title, time at stake and speedup, the message citing its numbers, and for a rule
    whose evidence the timeline can draw (:data:`RULE_TIMELINE_QUERIES`) a link to it there."""
    items = []
    for r in recs.to_pylist():
        href = rule_timeline_href(r[rs.RULE], trace_id)
        items.append(html.Li([
            html.Strong(r[rs.TITLE]),
            html.Span(f" — {stake_text(r)}", className="muted"),
            html.Div(r[rs.MESSAGE], className="recommendation-message"),
            *([dcc.Link(RULE_TIMELINE_QUERIES[r[rs.RULE]][0], href=href, className="view-link",
                        id=f"rec-timeline-{r[rs.RULE]}")] if href else []),
        ], className="recommendation", **{"data-rule": r[rs.RULE]}))
    if not items:
        return html.Div("No rule fired: nothing stands out.", className="muted", id="recommendations")
    return html.Div(html.Ol(items), id="recommendations")


#: What the summary page says instead of the device analyses for a trace with no device events.
NO_DEVICE_EVENTS = ("Bounds, recommendations and the engine breakdowns analyse a device trace's instructions and "
                    "DMA packets (a simulator recording or a Neuron profile); this trace has none.")


def analysis_section(trace: Any, trace_id: str | None = None) -> html.Div:
    """Recommendations and the bounds chart of the whole trace, for the summary page (a one-line note for a trace
    without device events: a host trace of PyTorch or JAX); ``trace_id``: the served trace, which the
    recommendations' timeline links name."""
    if not has_device_events(trace):   # a host trace: its GPUs' rules, and why there are no bounds
        try:
            host = host_recommendations(trace)
        except TrnprofError as exc:
            host = None
            note = _unavailable("recommendations", exc)
        else:
            note = html.P(NO_DEVICE_EVENTS, className="muted", id="summary-no-device")
        return html.Div([html.H3("Recommendations"), *([recommendation_list(host)] if host is not None
                                                         and host.num_rows else []), note],
                        className="analysis-section")
    try:
        recs = recommendations(trace)
        bounds = performance_bounds(trace)
    except TrnprofError as exc:
        return html.Div([html.H3("Recommendations"), _unavailable("analyses", exc)], className="analysis-section")
    t0, t1 = trace.time_range
    window = int(bounds[rs.END_NS]) - int(bounds[rs.START_NS])
    # (the bounds' whole-kernel window: the first DMA start to the last DMA end, not the trace's first to last
    # event, so its times and speed-ups differ a little from a selection of the whole trace on the timeline)
    scope = html.P(f"Recommendations and bounds cover the kernel, {format_duration(window)} of the trace's "
                   f"{format_duration(t1 - t0)}: from the first DMA transfer's start to the last one's end (the "
                   "instructions' without DMA), as the performance bounds define it; a selection on the timeline "
                   "covers what it selects.", className="muted", id="summary-bounds-window")
    return html.Div([
        html.H3("Recommendations"),
        recommendation_list(recs, trace_id),
        scope,
        dcc.Graph(figure=bounds_figure(bounds), config=graph_config(), id="summary-bounds-chart"),
    ], className="analysis-section")


class CriticalPathOverlays:
    """The critical path of each served trace, computed once (it reads the whole trace) and drawn on demand."""

    def __init__(self) -> None:
        self._paths: dict[str, Any] = {}
        self._lock = threading.Lock()                    # (held briefly: the table of per-trace locks)
        self._computing: dict[str, threading.Lock] = {}  # per trace, held while its path is computed

    def path(self, trace_id: str, trace: Any) -> Any:
        """The critical path table of ``trace`` (cached by trace id, for this ``Trace`` object: a followed
        recording's next one computes it again).  Computed under that trace's own lock: another trace's path, and
        this trace's other requests, do not wait for it (a request that needs this path does)."""
        with self._lock:
            mine = self._computing.setdefault(trace_id, threading.Lock())
        with mine:
            kept = self._paths.get(trace_id)
            if kept is None or not same_trace(kept[0], trace):
                found = critical_path(trace)
                with self._lock:
                    self._paths[trace_id] = (weakref.ref(trace), found)
                return found
            return kept[1]

    def builder(self, trace_id: str, trace: Any, chain: tuple[str, int] | None = None,
                chains: ChainGraphs | None = None) -> Any:
        """An ``overlay(rows, origin_ns, window)`` callable for :func:`dashboard.timeline_logic.update_timeline`:
        the path's two traces for the fetched window ``(start_ns, end_ns, width_px)``, at its resolution -- the
        critical path, or with ``chain`` (``(table, id)``) the dependency chain ending at that event (from
        ``chains``)."""
        def overlay(rows: list[TimelineRow], origin_ns: int, window: tuple[int, int, int]) -> list[Any]:
            try:
                if chain is not None and chains is not None:
                    path = chains.chain(trace_id, trace, *chain)[0]
                    return critical_path_overlay(path, rows, origin_ns, window, name=f"chain to {chain[0]} {chain[1]}")
                return critical_path_overlay(self.path(trace_id, trace), rows, origin_ns, window)
            except TrnprofError:
                return []
        return overlay


#: Steps of a dependency chain the details panel lists (the latest ones; the rest is counted).
CHAIN_STEPS_SHOWN = 12
#: Rows of a chain's breakdown the details panel lists.
CHAIN_BREAKDOWN_SHOWN = 4


#: Events (instructions and DMA packets) a chain's dependency graph may hold: beyond, the dashboard follows a chain
#: back only as far as the latest this many events before its end (the whole trace's graph of 1.15 M instructions
#: and 11 M packets takes 7.3 s and 2.3 GB to build: BENCHMARKS.md, "Dependency chain").
MAX_CHAIN_EVENTS = 2_000_000


class ChainGraphs:
    """The dependency graph of each served trace, built once (it reads the whole trace), for the chains that lead
    to the events the details panel shows (:func:`profiler.analyses.critical_path.chain_to`).  A trace of more than
    :data:`MAX_CHAIN_EVENTS` events gets a graph per chain instead, over the latest that many events before it."""

    def __init__(self, max_events: int = MAX_CHAIN_EVENTS) -> None:
        self._graphs: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.max_events = max_events

    def chain(self, trace_id: str, trace: Any, table: str, event_id: int) -> tuple[Any, int | None]:
        """The chain of dependent work ending at the event (:data:`profiler.analyses.schema.CRITICAL_PATH`), and
        the time it was followed back to when the trace is too large to follow it all (else None)."""
        from dashboard.details import CHAIN_TABLES
        from profiler.analyses.critical_path import chain_to
        from profiler.analyses.event_graph import build_graph
        from profiler.analyses.inputs import resolve_scope

        if table not in CHAIN_TABLES:   # (a one-line error before the graph of a trace without any is built)
            return chain_to(trace, table, event_id), None
        counts = trace.overview().get("events") or {}
        events = sum(int(counts.get(t, 0)) for t in CHAIN_TABLES)
        if events > self.max_events:
            start = int(trace.event(table, event_id)["start_ts"])
            cut = trace.sql(
                f"SELECT start_ts FROM (SELECT start_ts FROM Instruction WHERE start_ts <= {start} UNION ALL "
                f"SELECT start_ts FROM DmaPacket WHERE start_ts <= {start}) ORDER BY start_ts DESC LIMIT 1 "
                f"OFFSET {self.max_events}").fetchall()
            back = int(cut[0][0]) if cut else None
            return chain_to(trace, table, event_id, start_ns=back), back
        with self._lock:
            kept = self._graphs.get(trace_id)
            if kept is None or not same_trace(kept[0], trace):
                self._graphs[trace_id] = (weakref.ref(trace), build_graph(trace, resolve_scope(trace)))
            graph = self._graphs[trace_id][1]
        return chain_to(trace, table, event_id, graph=graph), None


def chain_panel(chain: Any, origin_ns: int, back_ns: int | None = None) -> html.Div:
    """What led to the selected event: the chain's span and busy share, where its time went (the top rows of
    :func:`profiler.analyses.critical_path.critical_path_breakdown`), and its latest steps, each a jump link with
    the edge that led to it and the wait before it; ``back_ns``: how far back it was followed, when not to the
    trace's start (:class:`ChainGraphs`)."""
    from dashboard.details import jump_link
    from profiler.analyses.critical_path import critical_path_breakdown
    from profiler.figures.timefmt import format_time

    rows = chain.to_pylist()
    if not rows:
        return html.Div("No chain: the event has no dependency graph.", className="muted")
    first, last = rows[0][rs.START_NS], rows[-1][rs.END_NS]
    busy = sum(r[rs.DUR_NS] for r in rows)
    head = (f"{len(rows):,} steps over {format_duration(last - first)} since {format_time(first, origin_ns)}, "
            f"{100 * busy / max(last - first, 1):.0f}% of it busy")
    if back_ns is not None:
        head += (f" (followed back to {format_time(back_ns, origin_ns)} only: the trace holds more than "
                 f"{MAX_CHAIN_EVENTS:,} events before it)")
    shares = []
    for r in critical_path_breakdown(chain).to_pylist()[:CHAIN_BREAKDOWN_SHOWN]:
        what = f"waiting ({r[rs.RESOURCE]} edges)" if r[rs.KIND] == rs.KIND_GAP else f"{r[rs.RESOURCE]} {r[rs.NAME]}"
        shares.append(html.Li(f"{100 * r[rs.FRACTION]:.0f}% {what} ({r[rs.COUNT]:,}×, "
                              f"{format_duration(r[rs.TOTAL_NS])})"))
    steps = []
    for r in reversed(rows[-CHAIN_STEPS_SHOWN:]):
        held = f" for its {r[rs.GAP_CAUSE]}" if r.get(rs.GAP_CAUSE) and r[rs.GAP_CAUSE] != r[rs.EDGE] else ""
        wait = f", waited {format_duration(r[rs.GAP_BEFORE_NS])}{held}" if r[rs.GAP_BEFORE_NS] else ""
        steps.append(html.Li([
            jump_link(f"{r[rs.RESOURCE]} {r[rs.NAME]}", r[rs.TABLE], r[rs.ID], r[rs.START_NS], r[rs.END_NS],
                      track_id=r[rs.TRACK_ID]),
            html.Span(f" {format_duration(r[rs.DUR_NS])} at {format_time(r[rs.START_NS], origin_ns)} · "
                      f"{r[rs.TABLE]} {r[rs.ID]} · after {r[rs.EDGE]}{wait}", className="muted")]))
    earlier = len(rows) - CHAIN_STEPS_SHOWN
    return html.Div([
        html.Div([head, " ", html.Button("draw / hide it on the timeline", id="details-chain-draw", n_clicks=0,
                                         className="btn btn-small",
                                         title="draw this chain over the timeline's rows instead of the critical "
                                               "path (again: hide it)")],
                 className="chain-head", id="details-chain-head"),
        html.Ul(shares, className="chain-breakdown"),
        html.Ol(steps, className="chain-steps"),
        *([html.Div(f"… and {earlier:,} earlier steps (trnprof critical-path --to {rows[-1][rs.TABLE]}:"
                    f"{rows[-1][rs.ID]} --steps)", className="muted")] if earlier > 0 else []),
    ], className="details-chain")
