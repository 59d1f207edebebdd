"""The trace picker: every served trace and bundled sample with what it is (format, machine, duration, events),
each a link to its timeline, summary, source, memory, call-tree, comparison and SQL pages."""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from dashboard.errors import public_message
from dashboard.pages import PageContext
from dashboard.registry import ServedTrace, TraceRegistry
from dashboard.sweep_view import SWEEP_PATH, sweep_folders
from profiler.figures.timefmt import format_duration
from profiler.importers import chrome_json, neuron_json, neuron_parquet
from profiler.overview import events_text
from profiler.sources import TraceDirectorySource
from tracer.errors import TrnprofError

#: ``source_format`` values as the page names them.
FORMAT_NAMES = {TraceDirectorySource.format_name: "trnprof recording", chrome_json.FORMAT_NAME: "Chrome trace JSON",
                neuron_parquet.FORMAT_NAME: "Neuron Explorer Parquet", neuron_json.FORMAT_NAME: "neuron-profile JSON"}


def trace_facts(registry: TraceRegistry, entry: ServedTrace) -> tuple[str, str, str]:
    """(what it is: format and machine, its duration, its events) of a served trace, from ``Trace.overview``; a
    trace that cannot be opened says why in the first column."""
    try:
        facts = registry.open(entry.id).overview()
    except TrnprofError as exc:
        return f"cannot be opened: {public_message(exc, label=entry.label)}", "", ""
    what = FORMAT_NAMES.get(facts["source_format"] or "", facts["source_format"] or "unknown format")
    machine = [facts["arch"]] if facts["arch"] else []
    if facts["is_simulation"]:
        machine.append("simulated")
    status = registry.live_status(entry.id)
    if status is not None and not status.complete:   # a followed recording: its rows as of the last read
        machine.append("recording, followed")
    return (f"{what} ({', '.join(machine)})" if machine else what, format_duration(facts["duration_ns"]),
            events_text(facts["events"]))


def _row(registry: TraceRegistry, entry: ServedTrace, current: str) -> html.Tr:
    q = f"?trace={entry.id}"
    what, duration, events = trace_facts(registry, entry)
    return html.Tr(className="current" if entry.id == current else "", id=f"trace-row-{entry.id}", children=[
        html.Td(html.Strong(entry.label) if entry.id == current else entry.label),
        html.Td("sample" if entry.sample else "served"),
        html.Td(what), html.Td(duration, className="num"), html.Td(events),
        html.Td([dcc.Link("timeline", href="/" + q, id=f"pick-{entry.id}"), " · ",
                 dcc.Link("summary", href="/summary" + q), " · ", dcc.Link("source", href="/source" + q), " · ",
                 dcc.Link("memory", href="/memory" + q), " · ", dcc.Link("call tree", href="/calltree" + q), " · ",
                 dcc.Link("compare", href="/compare" + q), " · ",
                 dcc.Link("SQL", href="/sql" + q)]),
    ])


def layout(ctx: PageContext) -> Any:
    """A table of the served traces, the current one in bold."""
    entries = ctx.registry.entries
    served = [e for e in entries if not e.sample]
    samples = [e for e in entries if e.sample]
    parts: list[Any] = [html.H2("Traces")]
    folders = sweep_folders(ctx.registry)
    if folders:   # served from a sweep's folder: its page charts the points and links them
        parts.append(html.P(["Served from a sweep (", ", ".join(f.name for f in folders), "): ",
                             dcc.Link("the Sweep page", href=f"{SWEEP_PATH}?trace={ctx.trace_id}", id="traces-sweep"),
                             " charts the points and compares them."], className="muted"))
    for title, group in (("Served", served), ("Samples", samples)):
        if not group:
            continue
        parts.append(html.H3(title))
        parts.append(html.Table(className="picker", children=[
            html.Thead(html.Tr([html.Th(h) for h in ("trace", "kind", "what", "duration", "events", "open")])),
            html.Tbody([_row(ctx.registry, e, ctx.trace_id) for e in group]),
        ]))
    return html.Div(parts, className="traces-page")


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """The picker is links only: switching traces is a URL change handled by the app's router."""
