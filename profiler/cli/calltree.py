"""``trnprof calltree``: time per stack of nested spans, or of a device trace's instructions by layer, operator,
source line, engine and opcode (a flame graph's numbers); per name; folded stacks; two traces compared."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import Any

import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.call_tree import INSTRUCTIONS, KERNELS, CallTree, call_tree
from profiler.analyses.call_tree_diff import diff_names, diff_stacks
from profiler.analyses.call_tree_views import folded, limit_depth, top_frames
from profiler.analyses.instruction_tree import DEFAULT_LEVELS, check_levels, instruction_tree
from profiler.analyses.kernel_tree import kernel_tree
from profiler.cli import int_arg
from profiler.cli._analysis import (
    FORMATS,
    add_trace_argument,
    core_index,
    open_trace,
    output_limit,
    print_table,
    row_limit,
    time_ns,
    window_text,
)
from profiler.cli._progress import working
from profiler.errors import CommandError, QueryError

#: ``--format`` values: the analysis formats and Brendan Gregg's folded stacks.
CALLTREE_FORMATS = (*FORMATS, "folded")
#: Deepest ``--max-depth`` accepted.
MAX_DEPTH = 10_000
SHARE = "share"
FRAME = "frame"
INDENT = "  "


class CallTreeCommand:
    """Where the time goes, stack by stack (a flame graph's numbers), in three kinds of tree.  By default, the
    spans (PyTorch/JAX operators, Python functions, GPU kernels, a recording's layers and operators): each distinct
    stack of enclosing span names with its spans' count, total time (children included) and self time (children
    excluded), clipped to the window, depth first under one root per row (process / thread).  --instructions: a
    device trace's engine time by layer, operator, kernel source line, engine and opcode (--levels) under a root
    per NeuronCore.  --kernels: a PyTorch/Kineto trace's GPU time under the CPU stacks that launched it.

    --top lists time per name instead (a nested call of the same name counted once in its total); --format folded
    prints folded stacks (`root;frame;frame SELF_NS`) for flamegraph.pl or speedscope; --against B compares with
    another trace (B - A per stack, or per name with --top): a flame-graph diff.  The dashboard's call-tree page
    draws the trees as icicles, and its compare page draws B's coloured by the change from A.
    """

    name = "calltree"
    help = "time per stack of nested spans or of instructions' layer/operator/line/opcode (flame graph numbers)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        parser.add_argument("--start", type=time_ns, metavar="TIME",
                            help="window start: ns, or 1.5us, 20ms (default: trace start)")
        parser.add_argument("--end", type=time_ns, metavar="TIME",
                            help="window end, exclusive (default: trace end)")
        parser.add_argument("--merge-rows", action="store_true",
                            help="merge the stacks of every row (process/thread) instead of one root per row")
        parser.add_argument("--merge-steps", action="store_true",
                            help="names ending in #NUMBER (ProfilerStep#552) end in #N: a loop's iterations make one "
                                 "frame (always on with --against)")
        parser.add_argument("--instructions", action="store_true",
                            help="the tree of the instructions instead of the spans: engine time by --levels under a "
                                 "root per NeuronCore")
        parser.add_argument("--levels", type=_levels, metavar="LIST",
                            help=f"levels of --instructions, outermost first (default: {','.join(DEFAULT_LEVELS)}; "
                                 "levels no instruction fills are left out)")
        parser.add_argument("--kernels", action="store_true",
                            help="GPU time by the CPU stack that launched it: a PyTorch/Kineto trace's kernels, "
                                 "copies and memsets under their launches' stacks")
        parser.add_argument("--core", type=core_index, metavar="N",
                            help="physical core of --instructions (default: every core, a root each)")
        parser.add_argument("--top", action="store_true", help="time per name, by self time")
        parser.add_argument("--against", metavar="B",
                            help="compare with trace B (B - A per stack, or per name with --top; rows and numbered "
                                 "steps merged, so runs with other process, thread and step numbers line up); "
                                 "--start/--end apply to both")
        parser.add_argument("--max-depth", type=int_arg("a depth (0: roots only)", 0, MAX_DEPTH), metavar="N",
                            help="leave out frames deeper than N (the roots are depth 0)")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--format", choices=CALLTREE_FORMATS, default="table",
                           help="output format (default: table; folded: one `stack SELF_NS` line per frame)")
        group.add_argument("--json", action="store_const", const="json", dest="format", help="same as --format json")
        parser.add_argument("--limit", type=row_limit, default=None, metavar="N",
                            help="show at most N rows (default: 40 in the table, all in folded, csv and json; "
                                 "0: all; folded and csv/json of the tree keep the depth-first order)")
        parser.set_defaults(table_limit=40)

    def run(self, args: argparse.Namespace) -> int:
        limit = output_limit(args)
        if args.top and args.format == "folded":
            raise CommandError("--format folded writes stacks: it does not go with --top")
        _check_kind(args)
        if args.against is not None:
            return self._against(args, limit)
        with open_trace(args.db) as trace, working("building the call tree"):
            tree = _tree(trace, args)
        if args.top:
            if args.max_depth is not None:
                raise CommandError("--max-depth cuts the tree: it does not go with --top (time per name)")
            print_table(top_frames(tree), args.format, limit,
                        title=f"Time per name, {tree.spans:,} {tree.what} in {window_text(tree.start_ns, tree.end_ns)}")
            return 0
        if args.max_depth is not None:
            tree = limit_depth(tree, args.max_depth)
        table = tree.table
        if args.format == "folded":
            lines = folded(tree)
            sys.stdout.write("".join(line + "\n" for line in (lines if limit is None else lines[:limit])))
            return 0
        if args.format in ("csv", "json"):
            print_table(table, args.format, limit)
            return 0
        how = ("engine time, a root per core" if tree.what == INSTRUCTIONS else
               "GPU time under the launching CPU stacks" if tree.what == KERNELS else
               "all rows merged" if not tree.by_thread else "one root per row")
        where = window_text(tree.start_ns, tree.end_ns)
        print_table(_text_tree(table, tree.span_ns), args.format, limit,
                    title=f"Call tree of {tree.spans:,} {tree.what} in {where}, {how}")
        return 0

    @staticmethod
    def _against(args: argparse.Namespace, limit: int | None) -> int:
        """``--against B``: the stacks (or names, ``--top``) of both traces, B - A, largest change first."""
        if args.format == "folded":
            raise CommandError("--format folded writes one trace's stacks: it does not go with --against")
        if args.max_depth is not None and args.top:
            raise CommandError("--max-depth cuts the tree: it does not go with --top (time per name)")
        with ExitStack() as stack:
            a = stack.enter_context(open_trace(args.db))
            b = stack.enter_context(open_trace(args.against))
            trees = [_tree(t, args, compare=True) for t in (a, b)]
        if args.max_depth is not None:
            trees = [limit_depth(t, args.max_depth) for t in trees]
        table = diff_names(*trees) if args.top else diff_stacks(*trees)
        a_ns, b_ns = trees[0].span_ns, trees[1].span_ns
        what = "name (self time)" if args.top else "stack (total time)"
        kind = trees[0].what
        of = {INSTRUCTIONS: "engine time", KERNELS: "GPU time"}.get(kind, "span time")
        print_table(table, args.format, limit,
                    title=f"A: {args.db}: {trees[0].spans:,} {kind}, {a_ns:,} ns of {of}\n"
                          f"B: {args.against}: {trees[1].spans:,} {kind}, {b_ns:,} ns of {of} ({b_ns - a_ns:+,} ns)"
                          f"\nchange per {what}, largest first:")
        return 0


def _levels(text: str) -> tuple[str, ...]:
    """argparse ``type`` of ``--levels``: comma-separated level names."""
    try:
        return check_levels([x.strip() for x in text.split(",") if x.strip()])
    except QueryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check_kind(args: argparse.Namespace) -> None:
    """The options of one kind of tree only."""
    if args.instructions and args.kernels:
        raise CommandError("--instructions and --kernels are two kinds of tree: give one")
    if args.kernels and args.merge_rows:
        raise CommandError("--merge-rows applies to spans: it does not go with --kernels")
    if args.instructions:
        for flag, given in (("--merge-rows", args.merge_rows), ("--merge-steps", args.merge_steps)):
            if given:
                raise CommandError(f"{flag} applies to spans: it does not go with --instructions")
    if not args.instructions:
        for flag, given in (("--levels", args.levels is not None), ("--core", args.core is not None)):
            if given:
                raise CommandError(f"{flag} applies to the instruction tree: add --instructions")


def _tree(trace: Any, args: argparse.Namespace, *, compare: bool = False) -> CallTree:
    """The tree the arguments ask for (``compare``: rows and numbered steps merged, so two runs line up)."""
    if args.instructions:
        return instruction_tree(trace, args.start, args.end, levels=args.levels or DEFAULT_LEVELS, core=args.core)
    if args.kernels:
        return kernel_tree(trace, args.start, args.end, merge_steps=args.merge_steps or compare)
    if compare:
        return call_tree(trace, args.start, args.end, by_thread=False, merge_steps=True)
    return call_tree(trace, args.start, args.end, by_thread=not args.merge_rows, merge_steps=args.merge_steps)


def _text_tree(table: pa.Table, span_ns: int) -> pa.Table:
    """The tree for the terminal: names indented by depth, times, and each frame's share of the span time."""
    total = table.column(rs.TOTAL_NS).to_pylist()
    return pa.table({
        FRAME: [INDENT * d + n for d, n in zip(table.column(rs.DEPTH).to_pylist(), table.column(rs.NAME).to_pylist(),
                                                strict=True)],
        rs.COUNT: table.column(rs.COUNT),
        rs.TOTAL_NS: table.column(rs.TOTAL_NS),
        rs.SELF_NS: table.column(rs.SELF_NS),
        SHARE: [t / span_ns if span_ns else 0.0 for t in total],
    })


COMMAND = CallTreeCommand()
