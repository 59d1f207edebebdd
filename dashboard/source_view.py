"""The source page's content: a kernel source file, line by line, with each line's instructions.

:func:`profiler.analyses.source_lines.source_listing` computes the table; this module turns it into the page's
file picker options, its status line and an HTML table (heat bar, counts, times, the line's text), each line with
instructions linked to the timeline, which searches for exactly that line (``?search="file.py:LINE"``) and shows its
first instruction.  Everything here is a plain function of a trace and the URL's values, tested without a browser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dash import dcc, html

from dashboard.computed import ComputedCache
from dashboard.errors import public_message
from dashboard.inputs import as_int
from dashboard.links import source_href, timeline_search_href
from profiler.analyses import schema as rs
from profiler.analyses.operators import time_by
from profiler.analyses.source_lines import line_text, resolve_file, source_files, source_listing, split_location
from profiler.figures.sizes import transfers_text
from profiler.figures.timefmt import format_duration
from tracer.errors import TrnprofError

#: Longest line number a URL may ask for.
MAX_LINE = 10_000_000


@dataclass
class SourceView:
    """What the page shows for one trace, file and line."""

    options: list[dict[str, Any]] = field(default_factory=list)
    file: str | None = None
    status: str = ""
    table: Any = None
    error: str | None = None


def file_options(files: Any) -> list[dict[str, Any]]:
    """Dropdown options of :func:`source_files`' table: ``softmax.py — 48 instructions``."""
    out = []
    for r in files.to_pylist():
        what = f"{r[rs.INSTRUCTIONS]:,} instructions" if r[rs.INSTRUCTIONS] else "no instructions"
        if not r[rs.HAS_TEXT]:
            what += ", text not recorded"
        out.append({"label": f"{r[rs.FILE]} — {what}", "value": r[rs.FILE]})
    return out


#: Longest file name the page looks up (the URL's ``?file=`` is cut to 2,000 characters).
MAX_FILE_CHARS = 2000


def build_view(trace: Any, trace_id: str, file: Any, line: Any, *, busy_only: bool = False,
               critical: bool = False, label: str | None = None, cache: ComputedCache | None = None) -> SourceView:
    """The page for ``file`` of the trace (default: the file with the most instructions), line ``line`` marked;
    an error line (not an exception) for a trace or file the view cannot show.  With ``cache``, a file's listing
    is computed once per trace (it reads every instruction of the file and finds DMA triggers among every
    packet: seconds at 10^7 events); marking a line or showing only busy lines reuses it.  ``critical`` adds each
    line's time on the critical path (computing the path: seconds at 10^7 events, also kept)."""
    target = _line_number(line)
    asked = file if isinstance(file, str) and file else None
    if asked is not None and len(asked) > MAX_FILE_CHARS:  # (a key of the cache: no file's name is that long)
        return SourceView(error=f"no source file of {len(asked):,} characters in the trace; pick one from the list")

    def compute() -> tuple[Any, str, Any]:
        name = resolve_file(trace, asked)
        return source_files(trace), name, source_listing(trace, name, critical=critical)

    try:
        files, name, listing = compute() if cache is None else cache.get(trace_id, ("source", asked, critical),
                                                                          compute, trace=trace)
    except TrnprofError as exc:
        return SourceView(error=public_message(exc, trace, label=label))
    rows = listing.to_pylist()
    n = sum(r[rs.INSTRUCTIONS] for r in rows)
    t = sum(r[rs.INSTRUCTION_NS] for r in rows)
    share = sum(r[rs.INSTRUCTION_SHARE] or 0 for r in rows)
    status = f"{name}: {n:,} instructions on {sum(1 for r in rows if r[rs.INSTRUCTIONS]):,} lines, " \
             f"{format_duration(t)} of instruction time ({share:.1%} of the trace's)"
    if rows and all(r[rs.TEXT] is None for r in rows):
        status += "; the trace holds no text of this file (trnprof keeps it for the kernels it records), so its " \
                  "lines with instructions are listed by number"
    shown = [r for r in rows if r[rs.INSTRUCTIONS] or r[rs.LINE] == target] if busy_only else rows
    return SourceView(options=file_options(files), file=name, status=status,
                      table=listing_table(shown, trace_id, name, target))


def _line_number(value: Any) -> int | None:
    """A line number from the URL (a string of digits) or a component (a number); None for anything else."""
    if isinstance(value, str):
        return int(value) if value.isascii() and value.isdigit() and 0 < len(value) <= 8 and int(value) else None
    return as_int(value, 1, MAX_LINE)


def listing_table(rows: list[dict[str, Any]], trace_id: str, file: str, target: int | None) -> html.Table:
    """The listing as a table: one row per line (``id="src-line-N"``), a heat bar scaled to the hottest line,
    the statistics of lines with instructions, the text; the ``target`` line marked (``src-target``) and the
    hottest line flagged (``src-hottest``: the page scrolls to it when no line is marked): the one with the most
    critical-path time when that is shown, else the most instruction time (as :func:`hottest` ranks them)."""
    top = max((r[rs.INSTRUCTION_NS] for r in rows), default=0) or 1
    critical = any(r[rs.CRITICAL_NS] is not None for r in rows)
    hottest = max((r for r in rows if r[rs.INSTRUCTIONS]),
                  key=lambda r: ((r[rs.CRITICAL_NS] or 0) if critical else 0, r[rs.INSTRUCTION_NS], -r[rs.LINE]),
                  default=None)
    body = []
    for r in rows:
        n = r[rs.LINE]
        busy = r[rs.INSTRUCTIONS] > 0
        classes = ["src-row"] + (["src-busy"] if busy else []) + (["src-target"] if n == target else []) \
            + (["src-hottest"] if r is hottest else [])
        # few components per line: the browser's rendering, not the server, set how long a listing took to show
        # (~11 per line, 2-3 s for 96 lines); a line without instructions is three cells
        code = html.Td(r[rs.TEXT] if r[rs.TEXT] is not None else "", className="src-code")
        if not busy:
            cells = [html.Td(str(n), className="src-num"), html.Td(colSpan=7 + critical), code]
        else:
            width = f"{100 * r[rs.INSTRUCTION_NS] / top:.1f}%"
            tip = (f"{r[rs.INSTRUCTIONS]:,} instructions, {format_duration(r[rs.INSTRUCTION_NS])} "
                   f"({(r[rs.INSTRUCTION_SHARE] or 0):.1%}), busy {format_duration(r[rs.BUSY_NS])}; "
                   f"opcodes {r[rs.OPCODES] or '–'}")
            cells = [
                html.Td(dcc.Link(str(n), href=timeline_search_href(trace_id, f"{file}:{n}"),
                                 title="show this line's instructions on the timeline"), className="src-num"),
                html.Td(html.Div(className="src-heat", style={"--fill": width}), title=tip),
                html.Td(f"{r[rs.INSTRUCTIONS]:,}", className="num"),
                html.Td(format_duration(r[rs.INSTRUCTION_NS]), className="num"),
                html.Td(f"{(r[rs.INSTRUCTION_SHARE] or 0):.1%}", className="num"),
                html.Td(format_duration(r[rs.WAIT_NS]) if r[rs.WAIT_NS] else "", className="num",
                        title="semaphore waits before this line's instructions (evt_wait_time_ns, summed)"),
                *([html.Td(format_duration(r[rs.CRITICAL_NS]) if r[rs.CRITICAL_NS] else "",
                           className="num src-critical",
                           title="time on the critical path: this line's instructions and the DMA transfers "
                                 "they triggered")] if critical else []),
                html.Td(transfers_text(r[rs.DMA_TRANSFERS], r[rs.DMA_BYTES], r[rs.DMA_NS], times="×"),
                        className="num", title="DMA transfers this line's instructions triggered"),
                html.Td(r[rs.ENGINES] or ""),
                code,
            ]
        body.append(html.Tr(cells, id=f"src-line-{n}", className=" ".join(classes)))
    names = ("line", "", "instr", "time", "share", "wait", *(("critical",) if critical else ()), "DMA transfers",
             "engines", "source")
    head = html.Thead(html.Tr([html.Th(h) for h in names]))
    return html.Table([head, html.Tbody(body)], className="src-table", id="src-table")


#: Lines the summary page lists.
HOTTEST_LINES = 5


def hottest_lines_section(trace: Any, trace_id: str, n: int = HOTTEST_LINES) -> Any:
    """The summary page's "Hottest source lines": the ``n`` kernel source lines with the most instruction time
    (their instructions' durations summed, as the source page and ``trnprof source --hot`` rank them), with their
    busy time (the union of those intervals: less where a line's instructions overlap, as pipelined matmuls do;
    :func:`profiler.analyses.operators.time_by` by source), each with its text and a link to it on the source page;
    nothing for a trace whose instructions name no source line."""
    try:
        table = time_by(trace, "source")
    except TrnprofError:   # no instructions (a host-only trace): the other parts of the page say why
        return html.Div()
    rows = sorted(table.to_pylist(), key=lambda r: (-(r[rs.INSTRUCTION_NS] or 0), r[rs.SOURCE] or ""))
    lines = [(r, where) for r in rows
             if (where := split_location(r[rs.SOURCE])) is not None and where[1] is not None][:n]
    if not lines:
        return html.Div()
    body = []
    for r, (file, line) in lines:
        body.append(html.Tr([
            html.Td(dcc.Link(r[rs.SOURCE], href=source_href(trace_id, file, line))),
            html.Td(f"{r[rs.INSTRUCTIONS]:,}", className="num"),
            html.Td(format_duration(r[rs.INSTRUCTION_NS]), className="num"),
            html.Td(format_duration(r[rs.BUSY_NS]), className="num"),
            html.Td(html.Code(line_text(trace, r[rs.SOURCE]) or "")),
        ]))
    return html.Div([
        html.H3("Hottest source lines"),
        html.Table([html.Thead(html.Tr([html.Th("line"), html.Th("instructions"), html.Th("time"), html.Th("busy"),
                                        html.Th("source")])), html.Tbody(body)],
                   className="mini-table", id="summary-hot-lines"),
    ], className="analysis-section")
