"""``trnprof timeline``: the dashboard's timeline of a trace, or of a window of it, as one self-contained HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path

from profiler.cli import int_arg
from profiler.cli._analysis import add_trace_argument, check_window, open_trace, time_ns
from profiler.cli.critical_path import event_ref
from profiler.cli.sql import timeout_seconds
from profiler.db.window_query import MAX_WIDTH_PX
from profiler.figures.palette import COLOUR_MODES
from profiler.trace import DEFAULT_SQL_TIMEOUT_S

#: plotly.js's options in the file: no logo, and nothing that uploads the chart ("no chart leaves the machine";
#: plotly.js shows no "Edit in Chart Studio" link by default).
HTML_CONFIG = {"displaylogo": False, "showSendToCloud": False, "scrollZoom": True}


class TimelineCommand:
    """Write the timeline of TRACE as one HTML file with plotly.js inside: it opens offline in any browser, to
    attach to a bug report or a review.

    It is the dashboard's timeline (`Trace.timeline`): a row per engine, DMA queues per core in one row (or one per
    queue with --expand-dma), the busy %, DMA, HFU and counter lanes, the level of detail of --width pixels (zooming
    the file magnifies those pixels; `trnprof serve` re-queries on zoom).  --rows keeps the rows a filter keeps
    ("Tensor, -NC1", "/regex/"); --query draws a SQL query's result as rows above them (a start_ts column; end_ts or
    duration_ns, name, track; a value column draws counter lanes); --critical-path or --chain Instruction:42 draws
    the critical path or the dependency chain ending at that event over them.  The file is written beside OUTPUT
    and renamed over it when complete.
    """

    name = "timeline"
    help = "write the timeline of a trace (or a window of it) as a self-contained HTML file"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        parser.add_argument("-o", "--output", required=True, metavar="OUTPUT.html", help="the HTML file to write")
        parser.add_argument("--start", type=time_ns, metavar="TIME",
                            help="view start: ns, or 1.5us, 20ms (default: trace start)")
        parser.add_argument("--end", type=time_ns, metavar="TIME", help="view end, exclusive (default: trace end)")
        parser.add_argument("--width", type=int_arg("a width in pixels", 1, MAX_WIDTH_PX), default=1600, metavar="PX",
                            help="pixels across the view: its level of detail (default: 1600)")
        parser.add_argument("--color-by", choices=COLOUR_MODES, default="opcode", help="colour mode (default: opcode)")
        parser.add_argument("--expand-dma", action="store_true", help="one row per DMA queue")
        parser.add_argument("--rows", metavar="FILTER", help="the rows to draw: comma-separated text or /regex/ terms, "
                                                             "'-' before a term hides what it matches")
        parser.add_argument("--query", metavar="SQL", help="draw this read-only query's result as rows")
        parser.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_SQL_TIMEOUT_S, metavar="SECONDS",
                            help=f"interrupt --query after this long (default: {DEFAULT_SQL_TIMEOUT_S:g})")
        overlay = parser.add_mutually_exclusive_group()
        overlay.add_argument("--critical-path", action="store_true", help="draw the critical path over the rows")
        overlay.add_argument("--chain", type=event_ref, metavar="TABLE:ID",
                             help="draw the dependency chain ending at this event (Instruction:42) over the rows")
        parser.add_argument("--force", action="store_true", help="replace an existing OUTPUT")

    def run(self, args: argparse.Namespace) -> int:
        from profiler.exporters.common import atomic_output

        out = Path(args.output)
        with open_trace(args.db) as trace:
            inputs = (trace.path, trace.db_path)
            check_window(trace, args.start, args.end)
            fig = trace.timeline(args.start, args.end, width_px=args.width, color_by=args.color_by,
                                 expand_dma=args.expand_dma, rows=args.rows, query=args.query,
                                 critical_path=args.critical_path, chain=args.chain, query_timeout_s=args.timeout)
            title = fig.layout.title.text or ""
        with atomic_output(out, force=args.force, inputs=inputs) as tmp:
            fig.write_html(tmp, include_plotlyjs=True, full_html=True, config=HTML_CONFIG)
            size = tmp.stat().st_size
        rows = len(fig.layout.yaxis.ticktext or ())
        print(f"wrote {out} ({size / 1e6:.1f} MB): {rows} rows · {title}")
        return 0


COMMAND = TimelineCommand()
