"""``trnprof sweep``: simulate a kernel at every combination of parameter values, constants and architectures."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from profiler.cli import int_arg, is_query_interrupt, seed_arg
from profiler.cli._analysis import add_format_arguments, format_value, print_table
from tracer.errors import ConfigError, KernelError, TrnprofError

#: Columns of the text table (CSV and JSON have every engine's busy share too).
TABLE_COLUMNS = ("simulated_us", "vs_fastest", "tensor_tflops", "tensor_peak_pct", "dma_gbps", "dma_peak_pct",
                 "busiest", "bottleneck", "memory_bound_us", "compute_bound_us", "sbuf_peak_kib", "instructions",
                 "wall_s", "trace", "error")


def _values(items: list[str] | None, option: str) -> dict[str, list[str]]:
    from tracer.sim.sweep import split_values

    out: dict[str, list[str]] = {}
    for item in items or []:
        name, values = split_values(item, option)
        if name in out:
            raise ConfigError(f"{option} {name}=...: given twice; list every value once: {option} {name}=V1,V2,...")
        out[name] = values
    return out


class SweepCommand:
    """Simulate KERNEL at every combination of the values given (untraced, but see --trace-dir and --bounds).

    Each -p and --set takes one value or a comma-separated list, where A..B, A..B:STEP and A..B*FACTOR are
    integer ranges (512..4096*2: 512, 1024, 2048, 4096); the sweep runs every combination (at most
    1,000), one after another or, with -j, several at once.  The table gives each point's simulated time, how
    much slower than the fastest it is, the Tensor engine's throughput and share of its peak, the DMA throughput
    against the cost model's DMA bandwidth, and the busiest of them.  A point the kernel rejects (a block too big
    for SBUF) shows the kernel's error and the sweep goes on.  Examples:

      trnprof sweep matmul_rowload -p block_m=1,2,4,8 -p row_n=512,1024,2048 --sort time
      trnprof sweep matmul_naive --set dma_bandwidth_gbps=136,272,544 --arch trn1,trn2
    """

    name = "sweep"
    help = "simulate a kernel at every combination of parameter values and constants, and compare"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("kernel", metavar="KERNEL", help="kernel name, or path/to/file.py:function")
        parser.add_argument("-p", "--param", action="append", metavar="KEY=V1,V2,...", dest="params",
                            help="kernel parameter and its values (repeatable), e.g. -p block_m=2,4,8")
        parser.add_argument("--set", action="append", metavar="CONST=V1,V2,...", dest="overrides",
                            help="cost-model constant and its values (repeatable), e.g. --set dma_bandwidth_gbps="
                                 "136,272 (`trnprof record --help` lists the names)")
        parser.add_argument("--arch", default="trn2", metavar="ARCH[,ARCH]",
                            help="architecture(s): trn1, trn2 or trn1,trn2 (default trn2)")
        parser.add_argument("--check", action="store_true",
                            help="compute each point's values and compare them with the kernel's numpy reference "
                                 "(slower; a mismatch is that point's error)")
        parser.add_argument("--seed", type=seed_arg, default=0, help="seed of the random inputs (default 0)")
        parser.add_argument("--sort", choices=("order", "time"), default="order",
                            help="rows in the sweep's order (default) or fastest first")
        parser.add_argument("--trace-dir", metavar="DIR",
                            help="also record each point's trace into DIR (new or empty) with the table as "
                                 "DIR/sweep.json; `trnprof serve DIR` then shows the sweep and its traces")
        parser.add_argument("--bounds", action="store_true",
                            help="record each point (into --trace-dir, else a temporary folder) and compute its "
                                 "performance bounds: the bottleneck they name, the memory, compute and pipeline "
                                 "bounds (slower: each trace is ingested)")
        parser.add_argument("-j", "--jobs", type=int_arg("a number of processes (0: one per CPU)", 0, 1024),
                            default=1, metavar="N",
                            help="run N points at once in worker processes (default 1; 0: one per CPU)")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
        add_format_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        from profiler.sweep import Sweep, fastest_first_table

        archs = [a.strip() for a in args.arch.split(",")]
        if not all(archs) or len(set(archs)) != len(archs):
            raise ConfigError(f"--arch {args.arch!r}: expected trn1, trn2 or trn1,trn2")
        with Sweep(args.kernel, _values(args.params, "-p"), _values(args.overrides, "--set"), archs,
                   check=args.check, seed=args.seed, trace_dir=args.trace_dir, bounds=args.bounds) as sweep:
            bar = _bar(len(sweep.points), args.quiet)
            interrupted = False

            def started(_i: int, point: Any) -> None:
                if bar:
                    bar.set_postfix_str(point.label(sweep.names), refresh=True)

            try:
                for _row in sweep.run(args.jobs or os.cpu_count() or 1, on_start=started):
                    if bar:
                        bar.update(1)
            except KeyboardInterrupt:
                interrupted = True   # the points done are still shown, and saved
            except Exception as exc:
                if not is_query_interrupt(exc):  # Ctrl-C while DuckDB ingested a point for its bounds
                    raise
                interrupted = True
            finally:
                if bar:
                    bar.close()
            save_error: TrnprofError | None = None
            try:
                saved = sweep.save()   # the sweep file, for `trnprof serve DIR` (with --trace-dir)
            except TrnprofError as exc:   # the table is still shown, before the error
                saved, save_error = None, exc
            table = sweep.table()
            if args.sort == "time":
                table = fastest_first_table(table)
            if args.format == "table":
                table = table.select([c for c in table.column_names if c in sweep.names] +
                                     [c for c in TABLE_COLUMNS if c in table.column_names])
                if all(v is None for v in table.column("error").to_pylist()):
                    table = table.drop_columns(["error"])
            print_table(table, args.format, title=_title(args.kernel, sweep.rows, len(sweep.points), sweep.names)
                        if args.format == "table" else None)
        if save_error is not None:
            raise save_error
        if saved is not None and args.format == "table":
            print(f"\nthe points' traces and the table ({saved.name}) are in {saved.parent}: "
                  f"`trnprof serve {saved.parent}` shows the sweep and each point")
        if interrupted:
            print(f"trnprof: interrupted after {len(sweep.rows)} of {len(sweep.points)} points (the table has "
                  "those)", file=sys.stderr)
            return 130
        if sweep.failed:
            raise KernelError(f"no point of the sweep ran; the first error: {sweep.rows[0].error}")
        return 0


def _title(kernel: str, rows: list[Any], total: int, names: list[str]) -> str:
    ran = [r for r in rows if r.result is not None]
    head = f"sweep of {kernel}: {len(ran)} of {total} points ran"
    if not ran:
        return head
    best = min(ran, key=lambda r: r.result.simulated_ns)
    worst = max(ran, key=lambda r: r.result.simulated_ns)
    label = best.point.label(names)
    ratio = worst.result.simulated_ns / max(best.result.simulated_ns, 1)
    more = f" ({format_value(ratio)}x faster than the slowest)" if len(ran) > 1 else ""
    return f"{head}; fastest: {label} at {format_value(best.result.simulated_ns / 1e3)} us{more}"


def _bar(total: int, quiet: bool) -> Any:
    if quiet or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit=" point", desc="sweeping", leave=False, file=sys.stderr)


COMMAND = SweepCommand()
