"""``trnprof source``: a kernel source file, line by line, with the instructions each line issued."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.source_lines import hottest, resolve_file, source_files, source_listing
from profiler.cli import int_arg
from profiler.cli._analysis import (
    FORMATS,
    add_trace_argument,
    add_window_arguments,
    open_trace,
    print_table,
)
from profiler.cli._progress import working
from profiler.errors import CommandError
from profiler.figures.sizes import transfers_text
from profiler.figures.timefmt import format_duration
from tracer.sim.kernel_sources import MAX_FILE_BYTES

#: ``--hot N``: a line count.
hot_lines = int_arg("a line count", 1, 1 << 31)
#: Columns of the annotated listing: (header, width).
_HEAD = (("line", 5), ("instr", 7), ("time", 9), ("share", 6), ("wait", 9), ("DMA transfers", 24), ("engines", 14))


class SourceCommand:
    """A kernel source file annotated with the instructions of each line: count, summed time, share of the
    window's instruction time, semaphore waits before them, DMA transfers they triggered and engines.  The text
    comes from the trace (a recording keeps the kernel's files); without it the lines with instructions are
    listed by number."""

    name = "source"
    help = "a kernel source file annotated with each line's instructions, time and waits"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        parser.add_argument("file", nargs="?", metavar="FILE",
                            help="source file, as in nki_source_location (default: the one with the most instructions)")
        add_window_arguments(parser)
        parser.add_argument("--files", action="store_true", help="list the trace's source files instead")
        parser.add_argument("--source-dir", metavar="DIR",
                            help="read the file from DIR when the trace holds no text of it (an imported profile)")
        parser.add_argument("--hot", type=hot_lines, metavar="N", help="only the N lines with the most time "
                            "(critical-path time with --critical), hottest first")
        parser.add_argument("--critical", action="store_true",
                            help="also each line's time on the critical path (computes the critical path)")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--format", choices=FORMATS, default="table",
                           help="output format (default: table, an annotated listing)")
        group.add_argument("--json", action="store_const", const="json", dest="format", help="same as --format json")

    def run(self, args: argparse.Namespace) -> int:
        if args.source_dir is not None and not Path(args.source_dir).is_dir():  # even when the trace holds the text
            raise CommandError(f"--source-dir {args.source_dir}: not a directory")
        with open_trace(args.db) as trace, working("annotating the source"):
            if args.files:
                print_table(source_files(trace, args.start, args.end, args.core), args.format)
                return 0
            name = resolve_file(trace, args.file)
            files = source_files(trace, args.start, args.end, args.core)
            text = None
            held = trace.source_text(name) or trace.source_text(os.path.basename(name))
            if args.source_dir is not None and held is None:
                text = read_source(args.source_dir, name)
            table = source_listing(trace, name, args.start, args.end, args.core, text=text,
                                   critical=args.critical)
        if args.format != "table":
            print_table(table if args.hot is None else hottest(table, args.hot), args.format)
            return 0
        print(render_listing(table, name, files, hot=args.hot))
        return 0


def read_source(directory: str, file: str) -> str:
    """The text of location file ``file`` found under ``directory``: the path as the location writes it (made
    relative), else its last components, down to its base name; CommandError naming what was tried otherwise."""
    root = Path(directory)
    if not root.is_dir():
        raise CommandError(f"--source-dir {directory}: not a directory")
    parts = Path(file.lstrip("/")).parts
    tried = [root.joinpath(*parts[i:]) for i in range(len(parts))]
    for path in tried:
        if path.is_file():
            try:
                data = path.read_bytes()[:MAX_FILE_BYTES + 1]
            except OSError as exc:
                raise CommandError(f"{path}: cannot read ({exc.strerror or exc})") from None
            if len(data) > MAX_FILE_BYTES:
                raise CommandError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; not a kernel source file")
            return data.decode("utf-8", "replace")
    raise CommandError(f"--source-dir {directory}: no {file} there (tried {', '.join(str(p) for p in tried[-2:])})")


def render_listing(table: pa.Table, file: str, files: pa.Table | None = None, *, hot: int | None = None) -> str:
    """The annotated listing of ``source_listing``'s ``table`` for ``file``: a header, then one line per row
    (statistics left blank for lines without instructions); with ``hot``, only that many of the hottest lines."""
    rows = table.to_pylist()
    n = sum(r[rs.INSTRUCTIONS] for r in rows)
    t = sum(r[rs.INSTRUCTION_NS] for r in rows)
    share = sum(r[rs.INSTRUCTION_SHARE] or 0 for r in rows)
    head = [f"{file}: {n:,} instructions, {format_duration(t)} of instruction time ({share:.1%} of the window's)"]
    if rows and all(r[rs.TEXT] is None for r in rows):
        head.append("(the trace holds no text of this file: lines are listed by number)")
    if files is not None and files.num_rows > 1:
        others = [f for f in files.column(rs.FILE).to_pylist() if f != file]
        head.append(f"other files: {', '.join(others[:8])}{', ...' if len(others) > 8 else ''}")
    if hot is not None:
        rows = hottest(table, hot).to_pylist()
        what = "critical-path time" if any(r[rs.CRITICAL_NS] is not None for r in rows) else "instruction time"
        head.append(f"the {len(rows)} lines with the most {what}, hottest first")
    critical = any(r[rs.CRITICAL_NS] is not None for r in rows)
    heads = list(_HEAD[:5]) + ([("critical", 9)] if critical else []) + list(_HEAD[5:])
    if critical:
        head.append("critical: the time this line holds on the critical path (its instructions and the DMA "
                    "transfers they triggered)")
    cells = [[h for h, _ in heads] + ["source"]]
    for r in rows:
        text = (r[rs.TEXT] or "").rstrip()
        if not r[rs.INSTRUCTIONS]:
            cells.append([str(r[rs.LINE])] + [""] * (len(heads) - 1) + [text])
            continue
        dma = transfers_text(r[rs.DMA_TRANSFERS], r[rs.DMA_BYTES], r[rs.DMA_NS])
        on_path = [format_duration(r[rs.CRITICAL_NS]) if r[rs.CRITICAL_NS] else ""] if critical else []
        cells.append([str(r[rs.LINE]), f"{r[rs.INSTRUCTIONS]:,}", format_duration(r[rs.INSTRUCTION_NS]),
                      f"{(r[rs.INSTRUCTION_SHARE] or 0):.1%}",
                      format_duration(r[rs.WAIT_NS]) if r[rs.WAIT_NS] else "", *on_path, dma, r[rs.ENGINES] or "",
                      text])
    widths = [max(w, *(len(c[i]) for c in cells)) for i, (_, w) in enumerate(heads)]
    lines = []
    for c in cells:
        stats = "  ".join(c[i].ljust(widths[i]) if i == len(heads) - 1 else c[i].rjust(widths[i])
                          for i in range(len(heads)))
        lines.append(f"{stats} | {c[-1]}".rstrip())
    return "\n".join([*head, "", *lines])


COMMAND = SourceCommand()
