"""The selection panel of the timeline page: :func:`profiler.selection.selection_summary` as cards and tables."""

from __future__ import annotations

from typing import Any

from dash import html

from dashboard.errors import public_message
from dashboard.timeline_picks import clip_range, selection_range
from profiler.figures.timefmt import format_duration
from profiler.selection import SelectionSummary, selection_summary
from tracer.errors import TrnprofError


def _si(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    v = float(value)
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def _card(label: str, value: str, ident: str | None = None) -> html.Div:
    return html.Div([html.Div(value, className="value"), html.Div(label, className="label")], className="card",
                    **({"id": ident} if ident else {}))


def render_selection(s: SelectionSummary) -> html.Div:
    """Cards (duration, DMA bytes and throughput, FLOPs, HFU), per-engine busy table, top names."""
    cards = html.Div([
        _card("range", format_duration(s.duration_ns), "sel-duration"),
        _card("DMA bytes", _si(s.dma_bytes, "B")),
        _card("DMA bytes / range", _si(s.dma_throughput_bytes_per_s, "B/s")),
        _card("FLOPs", _si(s.flops, "FLOP")),
        _card("HFU", "–" if s.hfu_percent is None else f"{float(s.hfu_percent):.1f} %"),
    ], className="cards")
    multi_core = len({core for _n, core, _b, _f in s.engines}) > 1
    engine_rows = [html.Tr([html.Td(f"NC{core} {name}" if multi_core else name), html.Td(format_duration(busy),
                                                                                          className="num"),
                            html.Td(f"{100 * frac:.1f} %", className="num")])
                   for name, core, busy, frac in s.engines]
    total = s.names_total_ns or 1.0      # a share of every name's time in the range, not of the ten shown
    top_rows = [html.Tr([html.Td(name), html.Td(format_duration(v), className="num"),
                         html.Td(f"{100 * v / total:.0f} %", className="num")]) for name, v in s.top_names]
    heading = ("Top opcodes by time" if s.names_exact else
               f"Top opcodes by time (estimated from the index: {s.names_events:,} events; select less for exact "
               "times)")
    return html.Div([
        cards,
        html.Table([html.Thead(html.Tr([html.Th("engine"), html.Th("busy"), html.Th("%")])),
                    html.Tbody(engine_rows)], className="mini-table", id="sel-engines"),
        html.H4(heading, id="sel-top-heading"),
        html.Table(html.Tbody(top_rows), className="mini-table", id="sel-top"),
    ], id="selection-summary")


def selection_panel(trace: Any, start_ns: int, end_ns: int, trace_id: str | None = None) -> Any:
    """Compute and render the summary of ``[start_ns, end_ns)``, with what the engines waited on, the peaks of live
    SBUF and PSUM (recordings), its performance bounds and, for a trace with spans, the names with the most self
    time in the range (Perfetto's area-selection aggregation; with ``trace_id``, linked to its call tree)."""
    from dashboard.analysis_views import bounds_section, waits_section
    from dashboard.calltree_view import selection_section as spans_section
    from dashboard.memory_view import selection_section as memory_section

    return html.Div([render_selection(selection_summary(trace, start_ns, end_ns)),
                     spans_section(trace, trace_id, start_ns, end_ns),
                     waits_section(trace, start_ns, end_ns), memory_section(trace, start_ns, end_ns),
                     bounds_section(trace, start_ns, end_ns)])


def selection_outputs(trace: Any, box: Any, state: Any) -> Any:
    """The panel for a box selection (``tl-range`` data), else for the visible range of ``state``; None when
    neither is a valid range.  The range is ordered and cut to the trace's time range."""
    rng = selection_range(box, state)
    if rng is None:
        return None
    t0, t1 = trace.time_range
    clipped = clip_range(rng, (int(t0), int(t1)))
    if clipped is None:
        return html.Div("The range is outside the trace: nothing to summarize.", className="muted")
    try:
        trace_id = state.get("trace") if isinstance(state, dict) and isinstance(state.get("trace"), str) else None
        return selection_panel(trace, *clipped, trace_id)
    except TrnprofError as exc:
        return html.Div(public_message(exc, trace), className="error")
