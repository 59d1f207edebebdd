"""Parameter sweeps: one kernel simulated at every combination of parameter values, cost-model constants and
architectures, without tracing, to tune a kernel (its block sizes) or ask "what if" of the hardware (a faster DMA).

:func:`sweep_points` expands and checks a sweep before anything runs (an unknown parameter or constant, a value of
the wrong type, too many points: :class:`~tracer.errors.ConfigError`); :func:`run_sweep` runs the points, one by
one or in worker processes, and yields a :class:`SweepRow` per point as each ends.  A point the kernel rejects (a
block too large for SBUF, a size its tiling does not divide) is a row with the kernel's one-line error, not the end
of the sweep: finding which combinations work is part of what a sweep is for.  :mod:`profiler.sweep_table` turns
the rows into a table, and :class:`profiler.sweep.Sweep` holds a sweep for Python and ``trnprof sweep``.
"""

from __future__ import annotations

import itertools
import multiprocessing
import pickle
import re
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracer.argcheck import sequence_of
from tracer.errors import ConfigError, KernelError
from tracer.sim.arch import PRESETS, cost_model

#: Most points a sweep may have (each is a whole simulation).
MAX_POINTS = 1000


@dataclass(frozen=True)
class SweepPoint:
    """One combination: the architecture, the kernel parameters and the cost-model constants given for it (as
    typed; the run converts them)."""

    arch: str
    params: Mapping[str, Any] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def names(self) -> list[str]:
        """Every name the point gives a value for: ``arch``, its parameters, its constants."""
        return [ARCH, *self.params, *self.overrides]

    def value(self, name: str) -> Any:
        """The point's value of ``name`` (``arch``, a parameter or a constant; None when not given)."""
        return self.arch if name == ARCH else {**self.params, **self.overrides}.get(name)

    def label(self, names: Sequence[str] | None = None) -> str:
        """``arch=trn2 block_m=8 dma_bandwidth_gbps=400``: the values of ``names`` (default: every name given),
        what the progress bar, errors and trace names show."""
        return " ".join(f"{n}={self.value(n)}" for n in (self.names() if names is None else names))

    def trace_name(self, index: int, names: Sequence[str] | None = None) -> str:
        """``007-block_m=8-row_n=1024.trace``: the point's trace directory name in a sweep's ``trace_dir``, with the
        values of ``names`` (default: every name given; characters other than letters, digits, ``.``, ``_``, ``-``
        and ``=`` become ``_``)."""
        parts = [_UNSAFE.sub("_", f"{n}={self.value(n)}") for n in (self.names() if names is None else names)]
        return f"{index:03d}-" + "-".join(parts)[:180] + ".trace"


#: The architecture's name among a point's values.
ARCH = "arch"


def varied_names(points: Sequence[SweepPoint]) -> list[str]:
    """The names whose value differs between points (``arch``, parameters, constants), in the sweep's order; every
    name given when none varies (a sweep of one point)."""
    names: list[str] = [ARCH]
    for p in points:
        for name in p.names():
            if name not in names:
                names.append(name)
    varied = [n for n in names if len({str(p.value(n)) for p in points}) > 1]
    return varied or names


_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]")


@dataclass
class SweepRow:
    """What one point gave: the run's result, or the kernel's error for it."""

    point: SweepPoint
    result: Any = None   # tracer.sim.runner.RunResult (imported lazily: the runner loads the simulator)
    error: str | None = None
    #: The point's trace directory when the sweep records traces (also for a point that failed part-way: its
    #: trace keeps what ran, marked incomplete); None otherwise, or when nothing was written.
    trace: Path | None = None
    #: The point's position in the sweep (rows of a parallel sweep come in the order the points end).
    index: int = 0


def split_values(item: str, option: str) -> tuple[str, list[str]]:
    """``"block_m=2,4,8"`` -> ``("block_m", ["2", "4", "8"])``; ConfigError naming ``option`` when malformed.

    A value may be an integer range: ``A..B`` (A to B by 1, both included), ``A..B:S`` (by S) or ``A..B*F``
    (multiplied by F each time: ``512..4096*2`` is 512, 1024, 2048, 4096); ranges and single values mix
    (``1,2..4``).
    """
    name, sep, values = item.partition("=")
    name = name.strip()
    parts = [v.strip() for v in values.split(",")]
    if not sep or not name or not all(parts):
        raise ConfigError(f"{option} {item!r}: expected NAME=VALUE or NAME=V1,V2,... (no empty value)")
    expanded: list[str] = []
    for part in parts:
        expanded.extend(_range(part, option, item) if ".." in part else [part])
        if len(expanded) > MAX_POINTS:
            raise ConfigError(f"{option} {item!r}: more than {MAX_POINTS:,} values")
    if len(set(expanded)) != len(expanded):
        raise ConfigError(f"{option} {item!r}: a value is given twice")
    return name, expanded


_RANGE = re.compile(r"(-?\d+)\.\.(-?\d+)(?:([:*])(\d+))?")


def _range(text: str, option: str, item: str) -> list[str]:
    """The values of one ``A..B``, ``A..B:S`` or ``A..B*F`` (see :func:`split_values`)."""
    match = _RANGE.fullmatch(text)
    if match is None:
        raise ConfigError(f"{option} {item!r}: {text!r} is not a range (A..B, A..B:STEP or A..B*FACTOR, integers)")
    lo, hi, kind, by = int(match[1]), int(match[2]), match[3], int(match[4] or 1)
    if hi < lo:
        raise ConfigError(f"{option} {item!r}: the range {text!r} ends before it starts")
    if kind == "*":
        if by < 2 or lo < 1:
            raise ConfigError(f"{option} {item!r}: {text!r}: a geometric range needs a start of 1 or more and a "
                              "factor of 2 or more")
        out = []
        value = lo
        while value <= hi and len(out) <= MAX_POINTS:
            out.append(str(value))
            value *= by
        return out
    if by < 1:
        raise ConfigError(f"{option} {item!r}: {text!r}: the step must be 1 or more")
    if (hi - lo) // by >= MAX_POINTS:
        raise ConfigError(f"{option} {item!r}: {text!r} has more than {MAX_POINTS:,} values")
    return [str(v) for v in range(lo, hi + 1, by)]


def sweep_points(kernel: Any, params: Mapping[str, Sequence[Any]] | None = None,
                 overrides: Mapping[str, Sequence[Any]] | None = None,
                 archs: Sequence[str] = ("trn2",)) -> list[SweepPoint]:
    """Every combination of ``archs`` x ``params`` values x ``overrides`` values, in that order (the
    architecture varies slowest, the last constant, else the last parameter, fastest), each checked as a run would
    check it.

    Raises:
        ConfigError: an unknown kernel, parameter, constant or architecture, a value the parameter or constant does
            not take, no value for a name, or more than :data:`MAX_POINTS` points.
    """
    from tracer.kernels import resolve_kernel

    spec = resolve_kernel(kernel)
    for what, given in (("parameters", params), ("overrides", overrides)):
        if given is not None and not isinstance(given, Mapping):  # "rows=128" was a raw ValueError
            raise ConfigError(f"sweep {what} must be a mapping of name -> list of values (or None), not "
                              f"{str(given)[:40]!r}")
    params = dict(params or {})
    overrides = dict(overrides or {})
    if isinstance(archs, str):  # one architecture, not its letters ("unknown architecture 't'")
        archs = [archs]
    names = sequence_of(archs, str)
    if names is None:
        raise ConfigError(f"archs must be an architecture or a list of them, not {str(archs)[:40]!r}")
    archs = names
    if not archs:
        raise ConfigError("a sweep needs at least one architecture")
    for arch in archs:
        if arch not in PRESETS:
            raise ConfigError(f"unknown architecture {arch!r}; choose from {', '.join(sorted(PRESETS))}")
    for what, given in (("parameter", params), ("constant", overrides)):
        for name, values in given.items():
            if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
                raise ConfigError(f"sweep {what} {name!r}: give a non-empty list of values, not {values!r}")
    count = len(archs)
    for values in [*params.values(), *overrides.values()]:
        count *= len(values)
    if count > MAX_POINTS:
        raise ConfigError(f"the sweep has {count:,} points, more than {MAX_POINTS:,}: give fewer values")
    # each value checked once on its own (the message names the one at fault), then every combination's cost model
    for name, values in params.items():
        _once(f"parameter {name!r}", values, lambda v, name=name: spec.bind({name: v})[name])
    for name, values in overrides.items():
        _once(f"constant {name!r}", values, lambda v, name=name: getattr(cost_model(archs[0], {name: v}), name))
    points = []
    names = list(params)
    consts = list(overrides)
    for arch in archs:
        for combo in itertools.product(*params.values()):
            for const_combo in itertools.product(*overrides.values()):
                changes = dict(zip(consts, const_combo, strict=True))
                cost_model(arch, changes)
                points.append(SweepPoint(arch, dict(zip(names, combo, strict=True)), changes))
    return points


def _once(what: str, values: Sequence[Any], convert: Callable[[Any], Any]) -> None:
    """Check each value (the message names the one at fault) and refuse two that are one (``1000`` and ``1e3``:
    the same point run twice)."""
    seen: dict[Any, Any] = {}
    for value in values:
        key = convert(value)
        if key in seen:
            raise ConfigError(f"sweep {what}: {seen[key]!r} and {value!r} are the same value; give each once")
        seen[key] = value


def run_sweep(kernel: Any, points: Sequence[SweepPoint], *, check: bool = False, seed: int = 0,
              trace_dir: str | Path | None = None, jobs: int = 1,
              on_start: Callable[[int, SweepPoint], None] | None = None) -> Iterator[SweepRow]:
    """Run ``kernel`` at each point (numerics only with ``check``), yielding a row per point as it ends.

    Without ``trace_dir`` nothing is traced.  With it, each point's trace is recorded into it, named by the values
    that vary (:meth:`SweepPoint.trace_name`), so that points can be opened side by side (``trnprof serve DIR``,
    the compare page, ``trnprof diff``); the directory must be new or empty (ConfigError otherwise, before
    anything runs).

    ``jobs`` > 1 runs that many points at once, in worker processes (the simulation is deterministic: the same rows
    as one at a time); rows then come in the order the points end, each with its :attr:`SweepRow.index`.  Workers
    are fresh interpreters (``spawn``), not forks of this process, whose other threads (a progress bar's monitor,
    a database's pool) could hold a lock at the fork; so the kernel must be given by name, as
    ``path/to/file.py:function`` or as a function importable by its module (ConfigError otherwise), and a script
    that starts a parallel sweep needs the usual ``if __name__ == "__main__":`` guard.

    ``on_start(i, point)`` is called before point ``i`` runs (progress; with ``jobs`` > 1, when it is handed to a
    worker).  A :class:`~tracer.errors.KernelError` (the kernel misused the core at that point, or ``check`` found
    a mismatch) or a :class:`~tracer.errors.ConfigError` (the kernel refused the combination: a size its tiling
    does not divide; every name and value was checked by :func:`sweep_points`) becomes the row's ``error``; any
    other error ends the sweep.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"jobs must be a whole number of at least 1, not {jobs!r}")
    out = None if trace_dir is None else Path(trace_dir)
    if out is not None:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise ConfigError(f"{out}: exists and is not an empty directory; the sweep's traces go into a new or "
                              "empty directory (choose another, or remove it)")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{out}: cannot create the directory ({exc.strerror}); choose another path") from None
    job = _Job(kernel, list(points), check, seed, out, varied_names(points))
    if jobs > 1 and len(job.points) > 1:
        try:
            pickle.dumps(job)
        except Exception as exc:  # whatever pickling raises, the answer is the same
            raise ConfigError(f"a parallel sweep (jobs={jobs}) sends the kernel to worker processes, and "
                              f"{kernel!r} cannot be sent ({exc}); give it by name or as path/to/file.py:function, "
                              "or run with jobs=1") from None
    if jobs == 1 or len(job.points) < 2:
        for i, point in enumerate(job.points):
            if on_start is not None:
                on_start(i, point)
            yield job.run(i)
        return
    yield from _run_parallel(job, min(jobs, len(job.points)), on_start)


@dataclass
class _Job:
    """What every point of a sweep shares (sent once to each worker; then only indices and rows travel)."""

    kernel: Any
    points: list[SweepPoint]
    check: bool
    seed: int
    trace_dir: Path | None
    #: The names trace directories are named by (those that vary).
    names: list[str] = field(default_factory=list)

    def run(self, i: int) -> SweepRow:
        from tracer.sim.runner import run_kernel

        point = self.points[i]
        path = None if self.trace_dir is None else self.trace_dir / point.trace_name(i, self.names)
        try:
            result = run_kernel(self.kernel, point.params, arch=point.arch, overrides=point.overrides,
                                check=self.check, seed=self.seed, trace_path=path)
        except (KernelError, ConfigError) as exc:
            return SweepRow(point, error=str(exc), trace=path if path is not None and path.exists() else None,
                            index=i)
        return SweepRow(point, result=result, trace=path, index=i)


#: The sweep a worker process runs (set by its initializer).
_WORKER: dict[str, _Job] = {}


def _init_worker(job: _Job) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle: it stops the workers
    # the parent stops a worker with SIGTERM: a plain stop, whatever handler the worker was started with
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _WORKER["job"] = job


def _worker_point(i: int) -> SweepRow:
    return _WORKER["job"].run(i)


def _run_parallel(job: _Job, workers: int, on_start: Callable[[int, SweepPoint], None] | None) -> Iterator[SweepRow]:
    """The points run by ``workers`` spawned processes, as they finish.  A worker that dies (a crash in native code,
    the out-of-memory killer; or a script without the ``__main__`` guard, whose workers cannot start) is one
    KernelError: multiprocessing's Pool replaced such workers forever, or hung in its terminate."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                               initargs=(job,))
    pending: dict[Any, int] = {}
    points = iter(range(len(job.points)))

    def start_next() -> None:
        i = next(points, None)
        if i is None:
            return
        if on_start is not None:
            on_start(i, job.points[i])
        try:
            pending[pool.submit(_worker_point, i)] = i
        except BrokenProcessPool:   # a worker died meanwhile, running one of the points pending
            raise _worker_died(job, list(pending.values())) from None

    try:
        for _ in range(workers):
            start_next()
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: pending[f]):
                i = pending.pop(future)
                try:
                    row = future.result()
                except BrokenProcessPool:
                    raise _worker_died(job, [i, *pending.values()]) from None
                start_next()
                yield row
    finally:
        # stops what still runs (Ctrl-C, an error, a caller that stopped iterating): the workers are ours
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def _worker_died(job: _Job, running: list[int]) -> KernelError:
    """The error of a worker process that died while the points ``running`` ran."""
    running = sorted(set(running))
    which = (f"point {running[0] + 1} ({_point_text(job.points[running[0]])})" if len(running) == 1 else
             "one of points " + ", ".join(f"{i + 1} ({_point_text(job.points[i])})" for i in running))
    return KernelError(f"a sweep worker process died while running {which}: a crash in native code or the "
                       "out-of-memory killer, or, from a Python script, a script without the "
                       "`if __name__ == \"__main__\":` guard (the workers import it); run with jobs=1 (-j 1) to see "
                       "the point's own error")


def _point_text(point: SweepPoint) -> str:
    text = " ".join(f"{k}={v}" for k, v in {**point.params, **point.overrides}.items())
    return text or point.arch


__all__ = ["ARCH", "MAX_POINTS", "SweepPoint", "SweepRow", "run_sweep", "split_values", "sweep_points",
           "varied_names"]
