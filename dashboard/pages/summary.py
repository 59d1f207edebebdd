"""The summary page: the ``trnprof summary`` metrics of a trace as cards and charts.

The figures come from :mod:`profiler.figures.summary`; this page only lays them out.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from dashboard.analysis_views import analysis_section
from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry
from dashboard.selection_view import _card, _si
from profiler.figures import summary as sfig
from profiler.figures.timefmt import format_duration
from tracer.errors import TrnprofError


def layout(ctx: PageContext) -> Any:
    """Cards of the headline numbers, then one chart per breakdown the summary has."""
    trace = ctx.registry.open(ctx.trace_id)
    try:
        with ctx.registry.lock(ctx.trace_id):
            inputs = sfig.summary_inputs(trace)
    except (TrnprofError, ImportError) as exc:
        return html.Div(f"no summary for this trace: {str(exc).splitlines()[0]}", className="error-panel")
    cards = [_card(label, headline_text(value, unit)) for label, value, unit in sfig.headline_numbers(inputs.summary)]
    charts = [dcc.Graph(figure=fig, config={"displaylogo": False}, id=f"summary-chart-{i}")
              for i, fig in enumerate(sfig.summary_figures(inputs))]
    with ctx.registry.lock(ctx.trace_id):
        analyses = analysis_section(trace)
    return html.Div([
        html.H2(f"Summary of {ctx.registry.entry(ctx.trace_id).label}"),
        html.Div(cards, className="cards", id="summary-cards"),
        analyses,
        html.Div(charts, className="charts", id="summary-charts"),
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


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """The summary page is static per trace: no callbacks."""
