"""The summary page: the ``trnprof summary`` metrics of a trace as cards and charts, its recommendations and bounds,
and its spans (rows and the names with the most self time).

The figures come from :mod:`profiler.figures.summary` and :mod:`dashboard.analysis_views`; this page lays them out.
The page appears at once with a spinner per part; each part is computed by its own callback, once per served trace
(:class:`dashboard.computed.ComputedCache`) — the breakdown tables read every event, which takes minutes at 10^8
events — and without holding the trace's lock, so the timeline of the same trace stays responsive meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dash import Dash, Input, Output, dcc, html

from dashboard.analysis_views import analysis_section, has_device_events
from dashboard.app import resolve_trace_id
from dashboard.calltree_view import spans_section
from dashboard.computed import ComputedCache
from dashboard.errors import public_message
from dashboard.graph_config import graph_config
from dashboard.memory_view import memory_section
from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry, UnknownTraceError
from dashboard.selection_view import _card, _si
from dashboard.source_view import hottest_lines_section
from profiler.figures import summary as sfig
from profiler.figures.timefmt import format_duration
from tracer.errors import TrnprofError


def layout(ctx: PageContext) -> Any:
    """The title and the placeholders (cards, analyses, source lines, memory, spans, charts) filled by the page's
    callbacks."""
    def part(ident: str, class_name: str, what: str) -> Any:
        # what is being computed, not only dots: on a trace of 10^8 events the first visit takes a while
        spinner = html.Div([html.Span(className="busy-dot"), f" computing {what}: the first visit reads the whole "
                            "trace (the result is kept for later visits)"], className="muted computing")
        return dcc.Loading(html.Div(id=ident, className=class_name), custom_spinner=spinner, delay_show=300,
                           parent_style={"minHeight": "2.4rem"})   # (each message on a line of its own)

    return html.Div([
        html.H2(f"Summary of {ctx.registry.entry(ctx.trace_id).label}"),
        part("summary-cards", "cards", "the headline figures"),
        part("summary-analyses", "analysis-section", "the bounds and recommendations"),
        part("summary-source", "analysis-section", "the hottest source lines"),
        part("summary-memory", "analysis-section", "the peaks of SBUF and PSUM"),
        part("summary-spans", "analysis-section", "the spans"),
        part("summary-charts", "charts", "the breakdowns"),
    ], className="summary-page")


def headline_text(value: float, unit: str) -> str:
    """A headline figure as its card shows it (``1.25 ms``, ``41.5 %``, ``3.2 GB``, ``12,345``)."""
    if unit == "ns":
        return format_duration(value)
    if unit == "%":
        return f"{value:.1f} %"
    if not unit:
        return f"{int(value):,}"
    return _si(value, unit)


def summary_cards(summary: dict[str, Any]) -> list[Any]:
    """One card per headline number of a ``Trace.summary()`` dict."""
    return [_card(label, headline_text(value, unit)) for label, value, unit in sfig.headline_numbers(summary)]


def summary_charts(inputs: sfig.SummaryInputs) -> list[Any]:
    """One graph per chart the summary supports (``summary-chart-0``, ...)."""
    return [dcc.Graph(figure=fig, config=graph_config(), id=f"summary-chart-{i}")
            for i, fig in enumerate(sfig.summary_figures(inputs))]


def _unavailable(exc: BaseException) -> Any:
    return html.Div(f"no summary for this trace: {public_message(exc)}", className="error-panel")


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """The parts of the page, each computed once per trace."""
    cache = ComputedCache()

    def computed(search: str | None, part: str, build: Callable[[Any], Any]) -> Any:
        try:
            trace_id = resolve_trace_id(registry, search)
            trace = registry.open(trace_id)
            # No trace lock: these are read-only queries on this thread's own cursor of the trace.
            return cache.get(trace_id, part, lambda: build(trace), trace=trace)
        except (UnknownTraceError, TrnprofError, ImportError) as exc:
            return _unavailable(exc)

    @app.callback(Output("summary-cards", "children"), Input("url", "search"))
    def _cards(search: str | None) -> Any:
        return computed(search, "cards", lambda trace: summary_cards(trace.summary()))

    @app.callback(Output("summary-charts", "children"), Input("url", "search"))
    def _charts(search: str | None) -> Any:
        # a host trace has no engine breakdowns to chart: the analyses part says so once
        return computed(search, "charts", lambda trace: summary_charts(sfig.summary_inputs(trace))
                        if has_device_events(trace) else [])

    def computed_with_id(search: str | None, part: str, build: Callable[[Any, str], Any]) -> Any:
        """:func:`computed` of a part that also names the trace (in its links)."""
        try:
            trace_id = resolve_trace_id(registry, search)
        except UnknownTraceError as exc:
            return _unavailable(exc)
        return computed(search, part, lambda trace: build(trace, trace_id))

    @app.callback(Output("summary-analyses", "children"), Input("url", "search"))
    def _analyses(search: str | None) -> Any:
        return computed_with_id(search, "analyses", analysis_section)

    @app.callback(Output("summary-memory", "children"), Input("url", "search"))
    def _memory(search: str | None) -> Any:
        return computed_with_id(search, "memory", memory_section)

    @app.callback(Output("summary-spans", "children"), Input("url", "search"))
    def _spans(search: str | None) -> Any:
        return computed_with_id(search, "spans", spans_section)

    @app.callback(Output("summary-source", "children"), Input("url", "search"))
    def _source(search: str | None) -> Any:
        return computed_with_id(search, "source", hottest_lines_section)
