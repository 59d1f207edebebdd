"""``trnprof export``: write a trace as Chrome trace JSON (Perfetto, chrome://tracing) or Neuron-shaped Parquet."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profiler.errors import CommandError


def parse_time(text: str, option: str) -> int:
    """``"1500"`` -> 1500 ns, ``"1.5us"`` -> 1500, ``"2ms"`` -> 2000000; CommandError naming ``option`` otherwise
    (:func:`profiler.cli._analysis.parse_time_text`)."""
    from profiler.cli._analysis import parse_time_text

    try:
        return parse_time_text(text)
    except ValueError as exc:
        raise CommandError(f"{option} {exc}") from None


#: JSON past which an export warns that the Perfetto UI may not open it (trace-viewers: ~2 GB WASM ceiling, the
#: in-memory trace 2-4x the file; "< 1GB should be reasonable for Chrome").
PERFETTO_UI_JSON_BYTES = 1_000_000_000


def _total_of(bar: Any) -> Callable[[int], None]:
    """A callback setting the progress bar's total (the rows the export will write)."""
    def set_total(n: int) -> None:
        bar.total = n
        bar.refresh()
    return set_total


class ExportCommand:
    """Write a trace as Chrome trace JSON or as Neuron-Explorer-shaped Parquet.

    TRACE is a trnprof database, a trace directory, or any input `trnprof ingest` reads (ingested on the fly
    into the cache).  --format chrome writes one JSON file (gzip when OUTPUT ends in .gz) that opens in the
    Perfetto UI (ui.perfetto.dev) and chrome://tracing: every row as a named thread, dependencies as flow
    arrows.  --format parquet writes a directory of <Table>.parquet files named as Neuron Explorer names them.
    --start/--end keep only the events overlapping that window (times relative to the trace start with
    --relative).  The output is written beside OUTPUT and renamed over it when complete.
    """

    name = "export"
    help = "write a trace as Chrome trace JSON (Perfetto) or Neuron-shaped Parquet"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="database, trace directory or importable profile")
        parser.add_argument("--format", choices=("chrome", "parquet"), required=True, dest="fmt",
                            help="chrome: one JSON file; parquet: a directory of Parquet tables")
        parser.add_argument("-o", "--output", required=True, metavar="OUTPUT",
                            help="file (chrome) or directory (parquet) to write")
        parser.add_argument("--start", metavar="TIME", help="window start, e.g. 1500 (ns), 1.5us, 20ms")
        parser.add_argument("--end", metavar="TIME", help="window end (exclusive)")
        parser.add_argument("--relative", action="store_true",
                            help="--start/--end count from the first event of the trace")
        parser.add_argument("--force", action="store_true", help="replace an existing output")
        parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")

    def run(self, args: argparse.Namespace) -> int:
        import profiler
        from profiler.cli._analysis import check_window
        from profiler.exporters import TimeWindow, export_chrome, export_parquet

        if args.output == "-":
            raise CommandError("-o -: exports are written to a file (chrome) or a directory (parquet), not to "
                               "standard output; give a path")
        start = parse_time(args.start, "--start") if args.start is not None else None
        end = parse_time(args.end, "--end") if args.end is not None else None
        with profiler.open(args.trace) as trace:
            if args.relative:
                origin = trace.time_range[0]
                start = None if start is None else origin + start
                end = None if end is None else origin + end
            if start is not None or end is not None:
                check_window(trace, start, end, hint="" if args.relative else
                             "; --relative counts --start/--end from its first event")
            window = TimeWindow(start, end)
            bar = None
            if not args.quiet and sys.stderr.isatty():
                from tqdm import tqdm

                bar = tqdm(desc="export", unit=" rows", unit_scale=True, file=sys.stderr)
            notes: list[str] = []
            try:
                progress = bar.update if bar is not None else None
                expected = None if bar is None else _total_of(bar)
                if args.fmt == "chrome":
                    stats = export_chrome(trace, args.output, window=window, force=args.force, progress=progress,
                                          expected=expected)
                    rows = sum(v for k, v in stats.events.items() if k != "M")
                    summary = f"{rows:,} events"
                    if stats.json_bytes > PERFETTO_UI_JSON_BYTES:
                        notes.append(f"{stats.json_bytes / 1e9:.1f} GB of JSON: the Perfetto UI in a browser stops "
                                     "near 2 GB of trace in memory, so it may not open it; export a window "
                                     "(--start/--end) or open it with Perfetto's trace_processor --httpd")
                else:
                    pstats = export_parquet(trace, args.output, window=window, force=args.force,
                                            progress=progress, expected=expected)
                    rows = sum(pstats.rows.values())
                    summary = f"{rows:,} rows in {len(pstats.files)} files"
                    if pstats.left_out:
                        notes.append(f"left out {', '.join(pstats.left_out)}: whole-profile figures, not the "
                                     "window's")
            finally:
                if bar is not None:
                    bar.close()
        if not args.quiet:
            print(f"wrote {Path(args.output)} ({summary})")
            for note in notes:
                print(f"trnprof: note: {note}", file=sys.stderr)
        return 0


COMMAND = ExportCommand()
