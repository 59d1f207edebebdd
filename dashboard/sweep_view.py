"""The Sweep page's content as plain functions: which served traces came from a sweep (``trnprof sweep
--trace-dir DIR`` then ``trnprof serve DIR``), and the page that shows it: its chart, and a table with one row per
point linking to that point's timeline, its summary and its comparison with the fastest point.

The sweep is read from the ``sweep.json`` beside the served traces (:func:`profiler.sweep_table.read_sweep_file`),
server side: the browser only ever names traces by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from dash import dcc, html

from dashboard.graph_config import graph_config
from dashboard.registry import TraceRegistry
from profiler import sweep_table as sw
from profiler.figures.sweep import point_labels, sweep_figure
from profiler.figures.timefmt import format_duration
from tracer.errors import TrnprofError

#: The Sweep page's path.
SWEEP_PATH = "/sweep"
#: The ``type`` of the sweep charts' pattern-matching ids (``{"type": CHART_TYPE, "index": i}``).
CHART_TYPE = "sweep-chart"


@dataclass(frozen=True)
class ServedSweep:
    """A sweep whose folder the dashboard serves traces from: the sweep (None when its file cannot be read, then
    ``error`` says why) and, per row of its table, the id of that point's served trace (None: it wrote none)."""

    folder: Path
    sweep: sw.SweepFile | None
    trace_ids: list[str | None]
    error: str | None = None

    @property
    def fastest(self) -> int | None:
        """The row of the fastest point that ran (None when none did)."""
        if self.sweep is None or not self.sweep.table.num_rows:
            return None
        first = sw.fastest_first_order(self.sweep.table)[0]
        return first if self.sweep.table.column(sw.SIMULATED_US)[first].as_py() is not None else None


def sweep_folders(registry: TraceRegistry) -> list[Path]:
    """The folders holding a sweep file that served (not sample) traces sit in, in serving order."""
    folders: list[Path] = []
    for entry in registry.entries:
        folder = entry.path.parent
        if not entry.sample and folder not in folders and (folder / sw.SWEEP_FILE).is_file():
            folders.append(folder)
    return folders


def served_sweeps(registry: TraceRegistry) -> list[ServedSweep]:
    """Every served sweep (:func:`sweep_folders`), its points matched with their served traces."""
    by_path = {e.path: e.id for e in registry.entries}
    out = []
    for folder in sweep_folders(registry):
        try:
            sweep = sw.read_sweep_file(folder)
        except TrnprofError as exc:
            out.append(ServedSweep(folder, None, [], str(exc)))
            continue
        if sweep is None:   # removed since it was looked at
            continue
        ids = []
        for row in range(sweep.table.num_rows):
            path = sweep.trace_path(row)
            ids.append(None if path is None else by_path.get(path.resolve()))
        out.append(ServedSweep(folder, sweep, ids))
    return out


def _href(path: str, **values: str) -> str:
    return path + "?" + urlencode(values)


def _duration_us(us: float | None) -> str:
    return "" if us is None else format_duration(us * 1e3)


def point_rows(served: ServedSweep, current_id: str) -> list[dict[str, Any]]:
    """One dict per point for the table: its label, measures as text (``busiest``: the bottleneck its bounds name
    when the sweep computed them, else its busiest engine), its trace id and the links (timeline, summary, compare
    with the fastest), whether it is the fastest and whether it is the page's trace."""
    sweep = served.sweep
    if sweep is None:
        return []
    table = sweep.table
    labels = point_labels(table, sweep.names)
    fastest = served.fastest
    fastest_id = served.trace_ids[fastest] if fastest is not None else None
    rows = []
    for i, row in enumerate(table.to_pylist()):
        trace_id = served.trace_ids[i]
        ran = row[sw.SIMULATED_US] is not None
        links: list[tuple[str, str]] = []
        if trace_id is not None:
            links.append(("timeline", _href("/", trace=trace_id)))
            links.append(("summary", _href("/summary", trace=trace_id)))
            if fastest_id is not None and trace_id != fastest_id:
                links.append(("compare with the fastest", _href("/compare", trace=fastest_id, b=trace_id)))
        rows.append({
            "label": labels[i],
            "time": format_duration(row[sw.SIMULATED_US] * 1e3) if ran else "",
            "vs_fastest": f"{row[sw.VS_FASTEST]:.2f}x" if ran and row[sw.VS_FASTEST] is not None else "",
            "busiest": row.get(sw.BOTTLENECK) or row[sw.BUSIEST] or "",
            "tensor": f"{row[sw.TENSOR_PEAK_PCT]:.1f}%" if ran else "",
            "dma": f"{row[sw.DMA_PEAK_PCT]:.1f}%" if ran else "",
            # with bounds: the memory and compute bounds, the kernel's floor whichever engine it is on
            "memory_bound": _duration_us(row.get(sw.MEMORY_BOUND_US)),
            "compute_bound": _duration_us(row.get(sw.COMPUTE_BOUND_US)),
            "error": row[sw.ERROR] or "",
            "trace_id": trace_id,
            "links": links,
            "fastest": i == fastest,
            "current": trace_id is not None and trace_id == current_id,
        })
    return rows


def sweep_section(served: ServedSweep, current_id: str, index: int) -> html.Section:
    """One sweep: its headline, chart and table (or why its file cannot be read)."""
    if served.sweep is None:
        return html.Section(className="sweep", children=[
            html.H3(f"Sweep in {served.folder.name}"),
            html.Div(served.error or "", className="error-panel", id=f"sweep-error-{index}")])
    sweep = served.sweep
    rows = point_rows(served, current_id)
    ran = sum(1 for r in rows if r["time"])
    head = f"{sweep.kernel}: {ran} of {sweep.points} points ran"
    if sweep.table.num_rows < sweep.points:
        head += f" (interrupted after {sweep.table.num_rows})"
    fastest = served.fastest
    if fastest is not None:
        head += f"; fastest {rows[fastest]['label']} at {rows[fastest]['time']}"
    order = sw.fastest_first_order(sweep.table)
    by_time = sweep.table.take(order)
    has_bounds = sw.BOTTLENECK in sweep.table.column_names
    body = []
    for i, r in enumerate(rows):
        cls = " ".join(c for c, on in (("current", r["current"]), ("fastest", r["fastest"])) if on)
        link_parts: list[Any] = []
        for k, (text, href) in enumerate(r["links"]):
            if k:
                link_parts.append(" · ")
            link_parts.append(dcc.Link(text, href=href, id=f"sweep-{index}-{i}-{text.split()[0]}"))
        bound_cells = [html.Td(r["memory_bound"], className="num"), html.Td(r["compute_bound"], className="num")] \
            if has_bounds else []
        body.append(html.Tr(className=cls, id=f"sweep-{index}-row-{i}", children=[
            html.Td(("★ " if r["fastest"] else "") + r["label"]), html.Td(r["time"], className="num"),
            html.Td(r["vs_fastest"], className="num"), html.Td(r["busiest"]), *bound_cells,
            html.Td(r["tensor"], className="num"), html.Td(r["dma"], className="num"),
            html.Td(link_parts or r["error"] or "no trace")]))
    return html.Section(className="sweep", children=[
        html.H3(f"Sweep of {head}", id=f"sweep-head-{index}"),
        html.P(f"{served.folder}", className="muted"),
        dcc.Graph(figure=sweep_figure(by_time, sweep.names, keys=[served.trace_ids[i] for i in order]),
                  config=graph_config(), id={"type": CHART_TYPE, "index": index}, className="sweep-chart"),
        html.Table(className="picker", children=[
            html.Thead(html.Tr([html.Th(h) for h in (
                "point", "simulated time", "vs fastest", "bottleneck" if has_bounds else "busiest",
                *(("memory bound", "compute bound") if has_bounds else ()), "Tensor of peak", "DMA of bandwidth",
                "open")])),
            html.Tbody(body)]),
    ])


def clicked_point_href(registry: TraceRegistry, click: Any) -> str | None:
    """Where a click on a sweep chart's bar goes: the timeline of that point's trace (its id is the bar's
    ``customdata[3]``, checked to be a served trace: a click's data comes from the browser); None for anything
    else (a bar without a served trace, malformed data)."""
    try:
        trace_id = click["points"][0]["customdata"][3]
    except (TypeError, KeyError, IndexError):
        return None
    if not isinstance(trace_id, str) or trace_id not in registry:
        return None
    return _href("/", trace=trace_id)


def sweep_page(registry: TraceRegistry, current_id: str) -> html.Div:
    """The Sweep page: the sweep the page's trace belongs to first, then any other served sweep."""
    sweeps = served_sweeps(registry)
    if not sweeps:
        return html.Div([html.H2("Sweep"), html.P(
            "No sweep is served. Record one with `trnprof sweep KERNEL -p KEY=V1,V2 --trace-dir DIR`, then serve "
            "it with `trnprof serve DIR`.", id="sweep-none")])
    sweeps.sort(key=lambda s: current_id not in s.trace_ids)
    return html.Div([html.H2("Sweep"), *[sweep_section(s, current_id, i) for i, s in enumerate(sweeps)]],
                    className="sweep-page")


__all__ = ["CHART_TYPE", "SWEEP_PATH", "ServedSweep", "clicked_point_href", "point_rows", "served_sweeps",
           "sweep_folders", "sweep_page", "sweep_section"]
