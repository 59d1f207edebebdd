"""``trnprof recommend``: ranked, rule-based recommendations, each citing the numbers that triggered it."""

from __future__ import annotations

import argparse
import json
import textwrap

from profiler.analyses import schema as rs
from profiler.analyses.host_recommendations import host_recommendations
from profiler.analyses.kernel_tree import has_gpu_events
from profiler.analyses.recommendations import recommendations, stake_text
from profiler.cli._analysis import (
    add_format_arguments,
    add_trace_argument,
    add_window_arguments,
    note_merged_cores,
    open_trace,
    output_limit,
    print_json,
    print_table,
)
from profiler.cli._progress import working
from profiler.errors import QueryError
from profiler.overview import has_device_events


class RecommendCommand:
    """Recommendations ranked by the bottleneck-aware time they would save: low model or active FLOPs,
    transposes, spill reloads, small DMA transfers, data loaded more than once, a bottleneck engine left idle.
    For a host trace of a GPU run (PyTorch, JAX; no instructions or DMA): a GPU left idle, communication not
    overlapped by computation, kernels too short for their launches.  See docs/analyses.md for the rules and
    thresholds."""

    name = "recommend"
    help = "ranked recommendations, each citing its numbers"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        add_window_arguments(parser)
        add_format_arguments(parser, limit=10)

    def run(self, args: argparse.Namespace) -> int:
        limit = output_limit(args)
        with open_trace(args.db) as trace, working("working out the recommendations"):
            note_merged_cores(trace, args.core)
            if has_device_events(trace):
                recs = recommendations(trace, args.start, args.end, args.core)
            elif has_gpu_events(trace):   # a host trace of a GPU run (PyTorch, JAX): its GPUs' rules
                recs = host_recommendations(trace, args.start, args.end)
            else:
                raise QueryError(f"{args.db}: no instructions or DMA packets, and no GPU kernels: the recommendations "
                                 "need a device trace (a simulator recording, a Neuron profile) or the host trace of "
                                 "a GPU run")
        if args.format == "json":  # evidence as the JSON object it is (the table holds it as JSON text)
            rows = recs.to_pylist()[:limit]
            print_json([{**r, rs.EVIDENCE: json.loads(r[rs.EVIDENCE]) if r[rs.EVIDENCE] else None} for r in rows])
            return 0
        if args.format != "table":
            print_table(recs, args.format, limit)
            return 0
        if recs.num_rows == 0:
            print("no recommendation: no rule fired (see docs/analyses.md for the thresholds)")
            return 0
        for r in recs.slice(0, limit).to_pylist():
            print(f"{r[rs.RANK]}. {r[rs.TITLE]} [{r[rs.RULE]}: {stake_text(r)}]")
            print(textwrap.indent(textwrap.fill(r[rs.MESSAGE], 100), "   "))
        return 0


COMMAND = RecommendCommand()
