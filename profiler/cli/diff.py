"""``trnprof diff``: compare two traces — total time, per-engine active time, bounds, per-identity time deltas."""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from typing import Any

import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.diff import diff
from profiler.analyses.source_lines import line_text
from profiler.cli._analysis import (
    add_trace_argument,
    check_limit,
    core_index,
    note_merged_cores,
    open_trace,
    print_json,
    print_table,
    row_limit,
)
from profiler.cli._progress import working


def _speed(metric: dict[str, Any]) -> str:
    ratio = metric[rs.RATIO]
    if ratio is None or ratio == 0:
        return ""
    return f" ({1 / ratio:.2f}x faster)" if ratio < 1 else (f" ({ratio:.2f}x slower)" if ratio > 1 else " (same)")


def _params(side: dict[str, Any]) -> dict[str, Any]:
    try:
        params = json.loads(side.get("kernel_params") or "{}")
    except (TypeError, ValueError):
        return {}
    return params if isinstance(params, dict) else {}


def _value(v: Any) -> str:
    """A constant's value as it is typed on the command line (``false``, ``736``, ``0.5``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _describe(side: dict[str, Any], other: dict[str, Any]) -> str:
    """``path (kernel, arch; -p the parameters that differ from the other side's; --set NAME=VALUE ...)``."""
    parts = [p for p in (side.get("profile_name"), side.get("arch")) if p]
    mine, theirs = _params(side), _params(other)
    differ = [f"{k}={mine[k]}" for k in sorted(mine) if k not in theirs or theirs[k] != mine[k]]
    extra = [f"-p {' '.join(differ)}"] if differ else []
    overrides = side.get("overrides") or {}
    names = side.get("overridden") or []
    if names:
        extra.append("--set " + ", ".join(f"{n}={_value(overrides[n])}" if overrides.get(n) is not None else str(n)
                                          for n in names))
    text = ", ".join(parts) + ("; " + "; ".join(extra) if extra else "")
    return f"{side['path']} ({text})" if text else str(side["path"])


class DiffCommand:
    """Compare trace B with trace A: total time, per-engine active time, the performance bounds, and time per
    operator, opcode and kernel source line aligned by identity (full outer join).  Deltas are B - A.

    The what-if workflow: record a kernel twice, once with a changed hardware constant
    (`trnprof record KERNEL --set dma_bandwidth_gbps=736 -o b.trace`), then `trnprof diff a.trace b.trace`.
    """

    name = "diff"
    help = "compare two traces (B relative to A)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser, "a", "the baseline trace (database, trace directory or importable profile)")
        add_trace_argument(parser, "b", "the trace compared with it")
        parser.add_argument("--by", choices=tuple(rs.GROUP_KEYS), action="append",
                            help="per-identity tables to show (repeatable; default: all three)")
        parser.add_argument("--core", type=core_index, metavar="N", help="physical core (default: every core)")
        parser.add_argument("--limit", type=row_limit, default=None, metavar="N",
                            help="rows per delta table (default: 15 in the text, all in --json; 0: all)")
        parser.add_argument("--json", action="store_true", help="print the comparison as JSON")

    def run(self, args: argparse.Namespace) -> int:
        limit = (None if args.json else 15) if args.limit is None else check_limit(args.limit)
        by = tuple(dict.fromkeys(args.by)) if args.by else tuple(rs.GROUP_KEYS)
        with ExitStack() as stack:
            a = stack.enter_context(open_trace(args.a))
            b = stack.enter_context(open_trace(args.b))
            stack.enter_context(working("comparing the traces"))
            note_merged_cores(a, args.core)
            if b.path != a.path:
                note_merged_cores(b, args.core)
            result = diff(a, b, core=args.core, by=by)
            if not args.json and rs.SOURCE in result[rs.DIFF_BY]:   # each line's text, from A's source or B's
                table = result[rs.DIFF_BY][rs.SOURCE]
                locations = table.column(rs.SOURCE).to_pylist()
                shown = len(locations) if limit is None else min(limit, len(locations))   # (the rows printed)
                texts = [line_text(a, loc) or line_text(b, loc) for loc in locations[:shown]]
                texts += [None] * (len(locations) - shown)
                result[rs.DIFF_BY][rs.SOURCE] = table.append_column(rs.TEXT, pa.array(texts, pa.string()))
        if args.json:
            if limit is not None:
                result[rs.DIFF_BY] = {g: t.slice(0, limit) for g, t in result[rs.DIFF_BY].items()}
            print_json(result)
            return 0
        traces = result[rs.DIFF_TRACES]
        total = result[rs.DIFF_TOTAL]
        print(f"A: {_describe(traces[rs.A], traces[rs.B])}")
        print(f"B: {_describe(traces[rs.B], traces[rs.A])}")
        print(f"total time (first event to last): {total[rs.A]:,} -> {total[rs.B]:,} ns, {total[rs.DELTA]:+,} ns"
              f"{_speed(total)}")
        neck = result[rs.DIFF_BOTTLENECK]
        print(f"bottleneck: {neck[rs.A]} -> {neck[rs.B]}")
        print_table(result[rs.DIFF_ENGINES], "table",
                    title="\nactive time per engine (ns, in the bounds' window: first DMA start to last DMA end):")
        print_table(result[rs.DIFF_BOUNDS], "table", title="\nbounds (ns, same window):")
        if result[rs.DIFF_MEMORY].num_rows:
            print_table(result[rs.DIFF_MEMORY], "table", title="\npeak live bytes per partition:")
        for grouping, table in result[rs.DIFF_BY].items():
            print_table(table, "table", limit,
                        title=f"\ntime per {grouping} (busy ns over the whole trace, largest change first):")
        return 0


COMMAND = DiffCommand()
