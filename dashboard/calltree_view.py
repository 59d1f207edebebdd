"""The call-tree page's content, computed without a browser: the URL's choices, the icicle and the per-name table.

``?start=&end=`` (ns) pick the window (default: the whole trace), ``?rows=merged`` merges the stacks of every row
(default: one root per process / thread).  The figure is :func:`profiler.figures.call_tree.call_tree_figure` of
:func:`profiler.analyses.call_tree.call_tree`, the same as ``Trace.call_tree_figure`` in a notebook; the table is
:func:`profiler.analyses.call_tree.top_frames`, each name linked to the timeline searching for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from dash import dcc, html

from dashboard.computed import ComputedCache
from dashboard.errors import public_message
from dashboard.inputs import as_time_range
from dashboard.links import TRACE_PARAM, timeline_search_href
from dashboard.memory_view import url_window
from profiler import db_schema as dbs
from profiler.analyses import schema as rs
from profiler.analyses.call_tree import CallTree, call_tree
from profiler.analyses.call_tree_diff import diff_names
from profiler.analyses.call_tree_views import root_summary, roots, subtree, top_frames
from profiler.analyses.instruction_tree import DEFAULT_LEVELS, check_levels, instruction_tree
from profiler.analyses.kernel_tree import has_gpu_events, kernel_tree
from profiler.analyses.schema import PATH_SEPARATOR
from profiler.errors import QueryError, TrnprofError
from profiler.figures.call_tree import call_tree_diff_figure, call_tree_figure, kept_frames
from profiler.figures.timefmt import format_duration, format_time
from tracer import schema as ts

CALLTREE_PATH = "/calltree"
ROWS_PARAM = "rows"
ROOT_PARAM = "root"
STEPS_PARAM = "steps"
OF_PARAM = "of"
#: ``?of=``: the tree of the spans, or of the instructions (engine time by layer, operator, line, engine, opcode).
OF_SPANS = "spans"
OF_INSTRUCTIONS = "instructions"
#: ``?of=kernels``: GPU time under the CPU stacks that launched it (a PyTorch/Kineto trace of a GPU run).
OF_KERNELS = "kernels"
OF_VALUES = (OF_SPANS, OF_INSTRUCTIONS, OF_KERNELS)
LEVELS_PARAM = "levels"
#: What each level of the instructions' tree is called on the page.
LEVEL_LABELS = {"layer": "layer", "operator": "operator", "source": "source line", "engine": "engine",
                "opcode": "opcode"}
#: ``?steps=merged``: numbered iterations (``ProfilerStep#552``) merged into one frame each.
STEPS_MERGED = "merged"
#: The root picker's value for "every root".
ALL_ROOTS = ""
#: ``?rows=`` values: one root per row (the default) or every row's stacks merged.
ROWS_SPLIT = "split"
ROWS_MERGED = "merged"
#: Names listed under the graph (by self time).
TOP_NAMES = 25
#: Longest name shown in the table (the link searches for the whole name).
MAX_NAME_CHARS = 90


@dataclass(frozen=True)
class CallTreeView:
    """What the page shows: a figure, a status line and the per-name table, or an error line."""

    figure: Any
    status: str
    table: Any
    error: str | None
    window: tuple[int, int] | None
    #: The root picker's options and value (:data:`ALL_ROOTS` or a root frame's name).
    root_options: tuple[dict[str, Any], ...] = ()
    root: str = ALL_ROOTS
    #: Whether numbered iterations are merged.
    merge_steps: bool = False
    #: The tree shown: one of :data:`OF_VALUES`.
    of: str = "spans"
    #: The instructions' tree's levels.
    levels: tuple[str, ...] = DEFAULT_LEVELS


def url_rows(query: dict[str, str]) -> str:
    """``?rows=``: :data:`ROWS_MERGED` when it says so, else :data:`ROWS_SPLIT`."""
    return ROWS_MERGED if str(query.get(ROWS_PARAM, "")).lower() == ROWS_MERGED else ROWS_SPLIT


def url_of(query: dict[str, str], trace: Any) -> str:
    """``?of=``: one of :data:`OF_VALUES`; by default the spans of a trace that has any, else its instructions (a
    recording without layer names, a Neuron profile)."""
    value = str(query.get(OF_PARAM, "")).lower()
    if value in OF_VALUES:
        return value
    events = trace.overview().get("events") or {}
    return OF_SPANS if events.get(dbs.SLICE_TABLE) or not events.get(ts.INSTRUCTION.name) else OF_INSTRUCTIONS


def as_levels(value: Any) -> tuple[str, ...] | None:
    """``value`` (a list of level names, or the URL's comma-separated text) as the instructions' tree's levels;
    None when it is not a non-empty list of known levels, each once."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")[:16] if v.strip()]
    try:
        return check_levels(value)
    except QueryError:
        return None


def url_levels(query: dict[str, str]) -> tuple[str, ...]:
    """``?levels=engine,opcode``: the instructions' tree's levels (the default ones when missing or malformed)."""
    return as_levels(query.get(LEVELS_PARAM, "")) or DEFAULT_LEVELS


def url_steps(query: dict[str, str]) -> bool:
    """``?steps=merged``: whether numbered iterations are merged."""
    return str(query.get(STEPS_PARAM, "")).lower() == STEPS_MERGED


def calltree_href(trace_id: str, window: tuple[int, int] | None, rows: str = ROWS_SPLIT,
                  root: str = ALL_ROOTS, *, merge_steps: bool = False, of: str | None = None,
                  levels: tuple[str, ...] = DEFAULT_LEVELS) -> str:
    """This page for ``trace_id``, ``window`` (None: the whole trace), ``rows`` and ``root``: the link to the
    view."""
    values = {TRACE_PARAM: trace_id}
    if window is not None:
        values.update(start=str(window[0]), end=str(window[1]))
    if rows == ROWS_MERGED:
        values[ROWS_PARAM] = ROWS_MERGED
    if root:
        values[ROOT_PARAM] = root
    if merge_steps:
        values[STEPS_PARAM] = STEPS_MERGED
    if of in OF_VALUES:
        values[OF_PARAM] = of
    if tuple(levels) != DEFAULT_LEVELS:
        values[LEVELS_PARAM] = ",".join(levels)
    return CALLTREE_PATH + "?" + urlencode(values)


def view_calltree_href(search: str | None, state: Any) -> str | None:
    """The call-tree page for the view the timeline's ``state`` shows (the timeline's "call tree of this view";
    None without a view)."""
    from dashboard.app import query_values  # (the app imports the pages, which import this module)

    view = as_time_range(state.get("view")) if isinstance(state, dict) else None
    trace_id = query_values(search).get(TRACE_PARAM) or (state.get("trace") if isinstance(state, dict) else None)
    if view is None or view[0] >= view[1] or not isinstance(trace_id, str):
        return None
    return calltree_href(trace_id, view)


#: Most roots the picker offers (the widest; merged rows can make every GPU kernel's name a root).
MAX_ROOT_OPTIONS = 200


def root_options(tree: CallTree, keep: str = ALL_ROOTS) -> tuple[dict[str, Any], ...]:
    """The root picker's options: every root, then the widest :data:`MAX_ROOT_OPTIONS` root frames with their
    share of the time (and ``keep``, the picked one, wherever it ranks)."""
    whole = max(tree.span_ns, 1)
    opts = [{"label": "all roots", "value": ALL_ROOTS}]
    listed = roots(tree)
    shown_roots = listed[:MAX_ROOT_OPTIONS] + [r for r in listed[MAX_ROOT_OPTIONS:] if r[0] == keep]
    for name, total in shown_roots:
        shown = name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS - 1] + "…"
        opts.append({"label": f"{shown} — {format_duration(total)} ({total / whole:.0%})", "value": name})
    return tuple(opts)


def build_view(trace: Any, trace_id: str, query: dict[str, str], rows: Any = None, root: Any = None, *,
               merge_steps: Any = None, of: Any = None, levels: Any = None, label: str | None = None,
               cache: ComputedCache | None = None) -> CallTreeView:
    """The page for the URL's ``query`` (its window) and the picked ``rows``, ``root``, ``merge_steps`` and ``of``
    (each defaulting to the URL's); an error line, not an exception, for a trace or window it cannot show; a root
    the window does not have shows every root.  With ``cache`` the whole trace's trees are computed once per trace
    (a window's are computed at each visit: they read only the window's spans or instructions)."""
    rows = rows if rows in (ROWS_SPLIT, ROWS_MERGED) else url_rows(query)
    root = root if isinstance(root, str) else str(query.get(ROOT_PARAM, ALL_ROOTS))
    steps = merge_steps if isinstance(merge_steps, bool) else url_steps(query)
    of = of if of in OF_VALUES else url_of(query, trace)
    chosen = as_levels(levels) or url_levels(query)
    window = url_window(query)
    by_thread = rows == ROWS_SPLIT

    def compute() -> CallTree:
        if of == OF_INSTRUCTIONS:
            return instruction_tree(trace, *(window or (None, None)), levels=chosen)
        if of == OF_KERNELS:
            return kernel_tree(trace, *(window or (None, None)), merge_steps=steps)
        return call_tree(trace, *(window or (None, None)), by_thread=by_thread, merge_steps=steps)

    key = (("calltree", of, chosen) if of == OF_INSTRUCTIONS else ("calltree", of, steps) if of == OF_KERNELS
           else ("calltree", of, by_thread, steps))
    try:
        tree = compute() if cache is None or window is not None else cache.get(trace_id, key, compute, trace=trace)
    except TrnprofError as exc:
        return CallTreeView(None, "", None, public_message(exc, trace, label=label), window, of=of, levels=chosen)
    options = root_options(tree, root)
    if root and any(o["value"] == root for o in options):
        tree = subtree(tree, root)
    else:
        root = ALL_ROOTS
    origin = trace.time_range[0]
    drawn = len(kept_frames(tree))
    where = ("the whole trace" if window is None else
             f"{format_time(tree.start_ns, origin)} to {format_time(tree.end_ns, origin)}")
    frames = (f"{tree.table.num_rows:,} frames" if drawn == tree.table.num_rows else
              f"the widest {drawn:,} of {tree.table.num_rows:,} frames drawn")
    if of == OF_INSTRUCTIONS:
        time = f"{format_duration(tree.span_ns)} of engine time (engines working at once add up)"
    elif of == OF_KERNELS:
        time = f"{format_duration(tree.span_ns)} of GPU time under the CPU stacks that launched it"
    else:
        time = f"{format_duration(tree.span_ns)} of span time{' summed over rows' if by_thread and not root else ''}"
    status = (f"{tree.spans:,} {tree.what} in {where} ({format_duration(tree.end_ns - tree.start_ns)}), {time}; "
              f"{frames}. Click a box to zoom to it, the top box to go back up.")
    if tree.spans == 0:
        status = f"No {tree.what} in {where}."
    title = root or ("every core: " + " › ".join(LEVEL_LABELS[x] for x in chosen) if of == OF_INSTRUCTIONS
                     else "GPU kernels, copies and memsets under their launching stacks" if of == OF_KERNELS
                     else "every row" if by_thread else "every row, merged")
    return CallTreeView(call_tree_figure(tree, title=title), status, names_table(trace_id, tree), None, window,
                        options, root, steps, of, chosen)


#: Names the summary page lists.
SUMMARY_NAMES = 8


def spans_section(trace: Any, trace_id: str, n: int = SUMMARY_NAMES) -> Any:
    """The summary page's "Spans": per row (process / thread, stream), its spans and the time in its outermost ones
    with their share of the trace, then the ``n`` names with the most self time (each a link to the timeline's
    search) and a link to the call tree; nothing for a trace without spans."""
    try:
        tree = call_tree(trace)
    except TrnprofError:   # no spans: a recording without layer names; the other parts say what it holds
        return html.Div()
    if tree.spans == 0:
        return html.Div()
    per_root = root_summary(tree, trace.time_range[1] - trace.time_range[0]).to_pylist()
    rows = [html.Tr([
        html.Td(dcc.Link(r[rs.NAME], href=calltree_href(trace_id, None, root=r[rs.NAME]))),
        html.Td(f"{r[rs.COUNT]:,}", className="num"),
        html.Td(format_duration(r[rs.TOTAL_NS]), className="num"),
        html.Td(f"{r[rs.FRACTION]:.1%}", className="num"),
    ]) for r in per_root]
    return html.Div([
        html.H3("Spans"),
        html.P([f"{tree.spans:,} spans on {len(per_root):,} rows; ",
                dcc.Link("the call tree", href=calltree_href(trace_id, None), id="summary-calltree-link"),
                " shows where their time goes, stack by stack",
                *([" (and ", dcc.Link("the GPU time by the stack that launched it", id="summary-kernels-link",
                                      href=calltree_href(trace_id, None, of=OF_KERNELS)), ")"]
                  if has_gpu_events(trace) else []), "."], className="muted"),
        html.Table([html.Thead(html.Tr([html.Th(h) for h in ("row", "spans", "in outermost spans",
                                                              "of the trace")])),
                    html.Tbody(rows)], className="mini-table", id="summary-span-rows"),
        names_table(trace_id, tree, n),
    ], className="analysis-section")


#: Names the timeline's selection panel lists.
SELECTION_NAMES = 6


def selection_section(trace: Any, trace_id: str | None, start_ns: int, end_ns: int, n: int = SELECTION_NAMES) -> Any:
    """The timeline selection panel's "Spans": the ``n`` names with the most self time in ``[start_ns, end_ns)``
    (:func:`top_frames` of the range's call tree) and, with ``trace_id``, a link to the range's call tree; nothing
    for a trace or range without spans."""
    try:
        tree = call_tree(trace, start_ns, end_ns)
    except TrnprofError:
        return html.Div(id="selection-spans")
    if tree.spans == 0:
        return html.Div(id="selection-spans")
    top = top_frames(tree).slice(0, n).to_pylist()
    rows = [html.Tr([html.Td(r[rs.NAME] if len(r[rs.NAME]) <= 60 else r[rs.NAME][:59] + "…", title=r[rs.NAME]),
                     html.Td(f"{r[rs.COUNT]:,}", className="num"), html.Td(format_duration(r[rs.SELF_NS]),
                                                                           className="num"),
                     html.Td(f"{r[rs.FRACTION]:.0%}", className="num")]) for r in top]
    link = [] if trace_id is None else [" · ", dcc.Link("call tree of this range", id="sel-calltree-link",
                                                        href=calltree_href(trace_id, (int(start_ns), int(end_ns))))]
    return html.Div([
        html.H4(["Spans by self time", *link]),
        html.Div(f"{tree.spans:,} spans, {format_duration(tree.span_ns)} of span time in the range",
                 className="muted"),
        html.Table([html.Thead(html.Tr([html.Th(h) for h in ("name", "spans", "self", "share")])),
                    html.Tbody(rows)], className="mini-table", id="sel-span-names"),
    ], id="selection-spans")


#: Names listed under the compare page's differential call tree.
COMPARE_NAMES = 20


def span_comparison(a: Any, b: Any, labels: tuple[str, str], why: str) -> tuple[Any, Any, Any] | None:
    """The compare page's headline, chart and table for two traces the device analyses cannot compare (``why``)
    but whose spans can be: span counts and times A -> B, B's icicle coloured by the change from A
    (:func:`profiler.figures.call_tree.call_tree_diff_figure`, rows merged so that runs line up), for two GPU runs
    also B's GPU time by launching stack coloured so (:func:`profiler.analyses.kernel_tree.kernel_tree`), and the
    names whose self time changed most (:func:`profiler.analyses.call_tree_diff.diff_names`); None when either trace
    has no spans."""
    try:
        ta, tb = call_tree(a, by_thread=False, merge_steps=True), call_tree(b, by_thread=False, merge_steps=True)
    except TrnprofError:
        return None
    headline = html.Div([
        html.Div(f"spans: {ta.spans:,} → {tb.spans:,}; span time {format_duration(ta.span_ns)} → "
                 f"{format_duration(tb.span_ns)}", className="cmp-line", id="cmp-span-headline"),
        html.Div("The device analyses need instructions or DMA packets in both traces; their spans are compared "
                 "instead, stack by stack (rows and numbered steps merged, so that runs with other process, thread "
                 "and step numbers line up).",
                 className="muted", title=why),
    ])
    chart = dcc.Graph(figure=call_tree_diff_figure(ta, tb, labels=("A", "B")), id="cmp-calltree-diff",
                      style={"height": "560px", "gridColumn": "1 / -1"})   # the whole width of the charts' grid
    table = diff_names(ta, tb)
    body = [html.Tr([
        html.Td(r[rs.NAME] if len(r[rs.NAME]) <= MAX_NAME_CHARS else r[rs.NAME][:MAX_NAME_CHARS - 1] + "…",
                title=r[rs.NAME]),
        html.Td(r[rs.PRESENCE]),
        html.Td(format_duration(r[rs.A_SELF_NS]), className="num"),
        html.Td(format_duration(r[rs.B_SELF_NS]), className="num"),
        html.Td(("+" if r[rs.DELTA_SELF_NS] >= 0 else "−") + format_duration(abs(r[rs.DELTA_SELF_NS])),
                className="num"),
        html.Td(f"{r[rs.A_COUNT]:,} → {r[rs.B_COUNT]:,}", className="num"),
    ]) for r in table.slice(0, COMPARE_NAMES).to_pylist()]
    deltas = html.Div([
        html.H3("Self time per name (B − A), largest change first"),
        html.Table([html.Thead(html.Tr([html.Th(h) for h in ("name", "presence", "A self", "B self", "change",
                                                              "spans A → B")])), html.Tbody(body)],
                   className="mini-table", id="cmp-name-deltas"),
        html.P(f"{COMPARE_NAMES} of {table.num_rows:,} names; `trnprof calltree A --against B --top` lists them all.",
               className="muted") if table.num_rows > COMPARE_NAMES else None,
    ])
    charts = [chart]
    if has_gpu_events(a) and has_gpu_events(b):   # GPU runs: which operators' GPU time changed
        try:
            ka, kb = kernel_tree(a, merge_steps=True), kernel_tree(b, merge_steps=True)
        except TrnprofError:
            ka = kb = None
        if ka is not None and kb is not None:
            fig = call_tree_diff_figure(ka, kb, labels=("A", "B"))
            fig.update_layout(title={"text": "B's GPU time under the CPU stacks that launched it, coloured by the "
                                             "change from A"})
            charts.append(dcc.Graph(figure=fig, id="cmp-kernels-diff",
                                    style={"height": "560px", "gridColumn": "1 / -1"}))
    return headline, charts, deltas


#: What the frame panel says before a click.
FRAME_PROMPT = "Click a box to see its stack and numbers here (a click also zooms the graph to it)."
#: Units of each tree's counts, for the frame panel.
UNITS = {OF_SPANS: "spans", OF_INSTRUCTIONS: "instructions", OF_KERNELS: "GPU events"}


def clicked_frame(click: Any) -> tuple[str, str, int, int, int] | None:
    """The (name, path, count, total_ns, self_ns) a click on the icicle reports (the figure's ``customdata``), None
    for anything else."""
    points = click.get("points") if isinstance(click, dict) else None
    point = points[0] if isinstance(points, list) and points and isinstance(points[0], dict) else None
    data = point.get("customdata") if point is not None else None
    if not isinstance(data, list) or len(data) != 5:
        return None
    name, path, count, total, own = data
    if not (isinstance(name, str) and isinstance(path, str)) or len(name) > 10_000 or len(path) > 100_000:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63 for v in (count, total, own)):
        return None
    return name, path, count, total, own


def frame_panel(trace_id: str, click: Any, of: Any = OF_SPANS) -> Any:
    """The panel under the graph for a clicked box: its stack (outermost first), count, total and self time, and a
    link to the timeline searching for its name; the prompt for no box or malformed click data."""
    frame = clicked_frame(click)
    if frame is None:
        return html.P(FRAME_PROMPT, className="muted")
    name, path, count, total, own = frame
    unit = UNITS.get(of, "spans") if isinstance(of, str) else "spans"
    stack = path.split(PATH_SEPARATOR) if path else [name]
    crumbs: list[Any] = []
    for i, part in enumerate(stack):
        crumbs += [" › "] if i else []
        crumbs.append(html.Strong(part) if i == len(stack) - 1 else part)
    link = [] if not path or len(stack) == 1 else [" · ", dcc.Link(
        "find it on the timeline", href=timeline_search_href(trace_id, name), id="ct-frame-search")]
    return html.Div([
        html.Div(crumbs, className="ct-frame-stack", id="ct-frame-stack"),
        html.Div([f"{count:,} {unit}, total {format_duration(total)}, self {format_duration(own)}", *link],
                 className="muted", id="ct-frame-numbers"),
    ])


def names_table(trace_id: str, tree: CallTree, limit: int = TOP_NAMES) -> Any:
    """The names with the most self time (:func:`top_frames`), each linked to the timeline searching for it."""
    top = top_frames(tree)
    if top.num_rows == 0:
        return html.P("No spans in this window.", className="muted")
    body = []
    for r in top.slice(0, limit).to_pylist():
        name = r[rs.NAME]
        shown = name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS - 1] + "…"
        body.append(html.Tr([
            html.Td(dcc.Link(shown, href=timeline_search_href(trace_id, name), title=name)),
            html.Td(f"{r[rs.COUNT]:,}", className="num"),
            html.Td(format_duration(r[rs.SELF_NS]), className="num"),
            html.Td(f"{r[rs.FRACTION]:.1%}", className="num"),
            html.Td(format_duration(r[rs.TOTAL_NS]), className="num"),
        ]))
    head = ["name", "spans", "self time", "share of self time", "total (nested calls once)"]
    more = [] if top.num_rows <= limit else [html.P(
        f"{limit} of {top.num_rows:,} names; `trnprof calltree --top` lists them all.", className="muted")]
    return html.Div([
        html.H3("Time per name, by self time"),
        html.Table([html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(body)], className="mini-table",
                   id="ct-top-table"),
        *more,
    ])


__all__ = [
    "ALL_ROOTS",
    "CALLTREE_PATH",
    "LEVELS_PARAM",
    "LEVEL_LABELS",
    "OF_INSTRUCTIONS",
    "OF_KERNELS",
    "OF_PARAM",
    "OF_SPANS",
    "OF_VALUES",
    "ROOT_PARAM",
    "ROWS_MERGED",
    "ROWS_PARAM",
    "ROWS_SPLIT",
    "STEPS_MERGED",
    "STEPS_PARAM",
    "CallTreeView",
    "as_levels",
    "build_view",
    "calltree_href",
    "clicked_frame",
    "frame_panel",
    "names_table",
    "root_options",
    "selection_section",
    "span_comparison",
    "spans_section",
    "url_levels",
    "url_of",
    "url_rows",
    "url_steps",
    "view_calltree_href",
]
