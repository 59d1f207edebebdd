"""``trnprof record``: run a kernel on the simulated NeuronCore and record its instruction-level trace."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from profiler.cli import seed_arg
from profiler.cli._listen import check_can_listen
from profiler.cli.record_serve import DEFAULT_PORT, DashboardFollower
from profiler.errors import CommandError
from profiler.leftovers import recording_aside_pid, remove_left_by_dead
from tracer.errors import ConfigError, TraceExistsError
from tracer.sim import PRESETS, emit_spawn, malloc_tuning, overridable_names
from tracer.sim.arch import parse_overrides
from tracer.trace_dir import TABLE_FILE_SUFFIX


def parse_params(items: list[str] | None) -> dict[str, str]:
    """``["M=1024", "dtype=fp32"]`` -> ``{"M": "1024", "dtype": "fp32"}``; ConfigError without ``=``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-p {item!r}: expected KEY=VALUE (see `trnprof kernels` for the parameters)")
        key = key.strip()
        if key in out:  # the last one would silently win
            raise ConfigError(f"-p {key} is given twice ({key}={out[key]} and {key}={value.strip()}); give each "
                              "parameter once")
        out[key] = value.strip()
    return out


def default_output(kernel: str, arch: str) -> Path:
    """``<kernel>-<arch>.trace`` in the working directory (the function name for file.py:function)."""
    name = kernel.rpartition(":")[2] if ":" in kernel else kernel
    return Path(f"{name}-{arch}.trace")


def _holds_trace(path: Path) -> bool:
    return path.is_dir() and any(f.name.endswith(TABLE_FILE_SUFFIX) for f in path.iterdir())


class RecordCommand:
    """Run a kernel on the simulated NeuronCore and record its instruction-level trace.

    KERNEL is a shipped kernel (see `trnprof kernels`) or path/to/file.py:function.  The trace streams to disk
    while the kernel runs (a killed run keeps what was flushed).  An existing trace is replaced only with
    --force, and only once the new recording has finished.  --serve opens the dashboard on the trace while it is
    recorded: the timeline fills in as the rows are written.
    """

    name = "record"
    help = "run a kernel on the simulated NeuronCore and record its trace"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("kernel", metavar="KERNEL", help="kernel name, or path/to/file.py:function")
        parser.add_argument("-p", "--param", action="append", metavar="KEY=VALUE", dest="params",
                            help="kernel parameter (repeatable), e.g. -p M=2048")
        parser.add_argument("--arch", choices=sorted(PRESETS), default="trn2", help="architecture (default trn2)")
        parser.add_argument("--set", action="append", metavar="CONST=VALUE", dest="overrides",
                            help="override a cost-model constant (repeatable); names: "
                                 + ", ".join(overridable_names()))
        parser.add_argument("-o", "--output", metavar="TRACE_DIR",
                            help="trace directory to write (default: ./KERNEL-ARCH.trace)")
        parser.add_argument("--force", action="store_true",
                            help="replace an existing trace at the output path (a directory holding anything "
                                 "but the trace's table files is never replaced)")
        parser.add_argument("--no-trace", action="store_true", help="simulate only; write no trace")
        parser.add_argument("--numerics", action="store_true", help="compute values with numpy (slower)")
        parser.add_argument("--check", action="store_true",
                            help="compute values and compare every output with the kernel's numpy reference")
        parser.add_argument("--seed", type=seed_arg, default=0,
                            help="seed of the random inputs, 0 or more (default 0)")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
        parser.add_argument("--serve", action="store_true",
                            help="open the dashboard on the trace as soon as the recording starts; it follows the "
                                 "recording as it is written, and goes on serving the trace until Ctrl-C")
        parser.add_argument("--port", type=int, default=None, help="the dashboard's port with --serve (default "
                            "8050; loopback only)")
        parser.add_argument("--no-browser", action="store_true", help="with --serve: do not open a web browser")

    def run(self, args: argparse.Namespace) -> int:
        if args.no_trace and args.output:
            raise CommandError(f"-o {args.output} names the trace to write, and --no-trace writes none: leave out one")
        malloc_tuning.tune_this_process()  # this process only records: big freed blocks kept for reuse
        if not args.no_trace and emit_spawn.emit_mode() == "process":
            # the trace writer's imports (~0.17 s) overlap this process's own from here on, instead of holding up
            # the end of a short recording (a writer no recording takes ends when this process exits)
            emit_spawn.prestart()
        from tracer import aot  # the simulator's modules, after the writer has started
        from tracer.sim import run_kernel

        params = parse_params(args.params)
        overrides = parse_overrides(args.overrides)
        out: Path | None = None
        target: Path | None = None
        if not args.no_trace:
            out = Path(args.output) if args.output else default_output(args.kernel, args.arch)
            target = out
            if out.exists():
                if not out.is_dir():
                    raise TraceExistsError(f"{out}: exists and is not a directory; choose another output path (-o)")
                if _holds_trace(out):
                    if not args.force:
                        raise TraceExistsError(f"{out}: a trace already exists here; pass --force to replace it "
                                               "or -o to choose another path")
                    foreign = sorted(f.name for f in out.iterdir()
                                     if not (f.is_file() and f.name.endswith(TABLE_FILE_SUFFIX)))
                    if foreign:  # --force replaces a trace, never files that are not part of one
                        raise TraceExistsError(f"{out}: holds {foreign[0]!r}, which is not part of a trace, so --force "
                                               "will not replace the directory; move it away or choose another "
                                               "path (-o)")
                    # record beside it; the old trace is replaced only when the new one is complete (and what
                    # earlier runs killed outright left beside it goes: nothing else would ever find it)
                    remove_left_by_dead(out.parent, recording_aside_pid(out))
                    target = out.with_name(f".{out.name}.recording-{os.getpid()}")
                elif any(out.iterdir()):
                    raise TraceExistsError(f"{out}: directory is not empty and holds no trace; choose an empty or "
                                           "new path (-o)")
        follower = _follower(args, target, out)
        bar = _progress_bar(args.quiet, target)
        guard = _DiskGuard(target, out) if target is not None and out is not None else None
        progress = _both(bar.update if bar else None, guard.check if guard else None,
                         follower.poll if follower else None)
        try:
            result = run_kernel(args.kernel, params, arch=args.arch, overrides=overrides, trace_path=target,
                                numerics=args.numerics, check=args.check, seed=args.seed, progress=progress)
        except BaseException:
            if follower is not None:
                follower.stop()
            if target is not None and target != out and target.exists():
                shutil.rmtree(target, ignore_errors=True)
            raise
        finally:
            if bar:
                bar.close()
        if target is not None and out is not None and target != out:
            _replace(out, target)
            result.trace_path = out
        for line in result.summary_lines():
            print(line)
        for build in aot.started_builds():
            print(f"note: compiling the simulator's scheduling loop in the background, once (~4 CPU-s, into "
                  f"{build.parent}); later recordings load it at once (TRNPROF_AOT=0 turns this off)",
                  file=sys.stderr)
        return follower.serve_until_interrupted() if follower is not None else 0


def _follower(args: argparse.Namespace, target: Path | None, out: Path | None) -> DashboardFollower | None:
    """The dashboard ``--serve`` starts beside the recording (None without it); CommandError for what it cannot
    follow, before anything is simulated."""
    if not args.serve:
        for given, name in ((args.no_browser, "--no-browser"), (args.port is not None, "--port")):
            if given:
                raise CommandError(f"{name} goes with --serve")
        return None
    if target is None or out is None:
        raise CommandError("--serve shows the trace being recorded: leave out --no-trace")
    if target != out:
        raise CommandError(f"{out}: --serve follows a new trace as it is written, not one replacing an existing "
                           "trace (written aside until complete): remove the old trace or choose another -o")
    port = DEFAULT_PORT if args.port is None else args.port
    check_can_listen("127.0.0.1", port)
    return DashboardFollower(out, port, browser=not args.no_browser)


def _dir_bytes(path: Path) -> int:
    """Bytes in the files of the directory ``path`` (OSError when it cannot be listed)."""
    return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())


def _both(*callbacks: Any) -> Any:
    """One progress callback calling each of ``callbacks`` that is not None (None when none is)."""
    active = [c for c in callbacks if c is not None]
    if not active:
        return None
    if len(active) == 1:
        return active[0]

    def call(instructions: int, simulated_ns: int, expected: int | None = None, low: int | None = None) -> None:
        for c in active:
            c(instructions, simulated_ns, expected, low)

    return call


class _DiskGuard:
    """Stops a recording whose trace is predicted to outgrow the free disk space, long before the disk fills.

    Once the simulator predicts the run's length (``expected`` instructions), the trace's size so far scaled to
    that length is compared with the free space: more than :attr:`MARGIN` times what is left ends the run with one
    line naming the sizes and the fixes (the trace keeps what was written, marked incomplete).  The writer trails
    the simulation, so the size so far errs low; the length is the simulator's *low* estimate (``expected_low``:
    for a loop whose iterations grow, no more than the latest iterations' average times the iterations left), so a
    growing trend that stops (a sliding window) does not stop a run whose trace would fit; iterations that later
    shrink below the latest ones can still be overestimated, as before the trend was followed.  Without a
    prediction (numerics turn the loop fast path off, and a plain ``range`` outer loop has none) and as a backstop,
    a run stops once less than :attr:`RESERVE_BYTES` are free: the writer still has room to write its buffered rows
    and close the trace, which a full disk would not leave.
    """

    #: Seconds between two looks at the disk.
    INTERVAL_S = 0.5
    #: Predicted growth beyond the free space that stops the run.
    MARGIN = 1.25
    #: Instructions before the prediction is trusted.
    MIN_INSTRUCTIONS = 10_000
    #: Free bytes below which any recording stops (a second of trace is a few MB; closing it needs less).
    RESERVE_BYTES = 100_000_000

    def __init__(self, trace_dir: Path, shown: Path) -> None:
        self.trace_dir = trace_dir
        self.shown = shown
        self._at = -1.0

    def check(self, instructions: int, simulated_ns: int, expected: int | None = None,
              low: int | None = None) -> None:
        now = time.monotonic()
        if now - self._at < self.INTERVAL_S:
            return
        try:
            size = _dir_bytes(self.trace_dir)
            free = shutil.disk_usage(self.trace_dir).free
        except OSError:
            return
        if not size:  # nothing written yet: look again at the next hand-over
            return
        self._at = now
        expected = low if low is not None else expected  # never act on a trend that may stop (docs/kernels.md)
        if expected is None or instructions < self.MIN_INSTRUCTIONS or expected <= instructions:
            if free < self.RESERVE_BYTES:
                from profiler.figures.sizes import format_bytes

                raise CommandError(f"{self.shown}: the disk is nearly full ({format_bytes(free)} free, "
                                   f"{format_bytes(size)} of trace written after {instructions:,} instructions); "
                                   "the recording stops here, keeping what was written: free space, record smaller "
                                   "parameters, use --no-trace, or write elsewhere (-o)")
            return
        predicted = size * expected / instructions
        if predicted - size > self.MARGIN * free:
            raise CommandError(f"{self.shown}: the trace would grow to about {predicted / 1e9:,.1f} GB "
                               f"({expected:,} instructions) but {free / 1e9:,.1f} GB are free; record smaller "
                               "parameters, use --no-trace, or write elsewhere (-o)")


def _replace(out: Path, new: Path) -> None:
    """Swap the finished recording ``new`` into ``out`` (an existing trace directory)."""
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    out.rename(old)
    new.rename(out)
    shutil.rmtree(old, ignore_errors=True)


class _Progress:
    """A tqdm bar counting simulated instructions, with the simulated time and the trace's size on disk as postfix.

    Once the simulator predicts the run's length (after the first iteration of its outermost loop) the bar gets
    that total, so it shows a percentage and the time left, and the postfix the trace size expected at the end:
    the size so far scaled up to the predicted instructions, the largest such estimate since the prediction (the
    writer trails the simulation and writes in batches, so each single estimate errs low).
    """

    #: Seconds between two looks at the trace directory's size.
    SIZE_INTERVAL_S = 0.5

    def __init__(self, trace_dir: Path | None = None) -> None:
        from tqdm import tqdm

        try:  # a terminal that reports no size (some emulated ones): tqdm would hide the bar (0 rows, 0 columns)
            size = os.get_terminal_size(sys.stderr.fileno())
            sized = size.columns > 0 and size.lines > 0
        except (OSError, ValueError, AttributeError):
            sized = False
        self.bar: Any = tqdm(unit=" instr", unit_scale=True, file=sys.stderr, desc="simulating", leave=False,
                             dynamic_ncols=sized, ncols=None if sized else 100, nrows=None if sized else 24)
        self.last = 0
        self.trace_dir = trace_dir
        self._size = 0
        self._size_at = -1.0
        self._expected_size = 0.0

    def update(self, instructions: int, simulated_ns: int, expected: int | None = None,
               low: int | None = None) -> None:
        """One report of the run (``low``, the simulator's low estimate, is the disk guard's: the bar shows the
        best estimate)."""
        total = expected if expected is not None and expected >= instructions else None  # a low prediction: unknown
        if total != self.bar.total:
            self.bar.total = total
            self._expected_size = 0.0
        self.bar.update(instructions - self.last)
        self.last = instructions
        postfix = f"simulated {simulated_ns / 1000:,.1f} us"
        size = self._trace_bytes()
        if size:
            postfix += f", trace {size / 1e6:,.1f} MB"
            if total and instructions:
                self._expected_size = max(self._expected_size, size * total / instructions)
                postfix += f" (~{self._expected_size / 1e6:,.0f} MB at the end)"
        self.bar.set_postfix_str(postfix, refresh=False)

    def _trace_bytes(self) -> int:
        """Bytes in the trace directory so far (looked up at most every :attr:`SIZE_INTERVAL_S`)."""
        if self.trace_dir is None:
            return 0
        now = time.monotonic()
        if now - self._size_at >= self.SIZE_INTERVAL_S:
            self._size_at = now
            with contextlib.suppress(OSError):  # the directory is being written: a file may come or go
                self._size = _dir_bytes(self.trace_dir)
        return self._size

    def close(self) -> None:
        self.bar.close()


def _progress_bar(quiet: bool, trace_dir: Path | None = None) -> _Progress | None:
    if quiet or not sys.stderr.isatty():
        return None
    return _Progress(trace_dir)


COMMAND = RecordCommand()
