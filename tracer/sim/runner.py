"""Running a kernel on the simulated NeuronCore: set-up, tracing, the result summary and ``--check``.

:func:`run_kernel` is the library entry point behind ``trnprof record``::

    from tracer.sim import run_kernel
    result = run_kernel("matmul_rowload", {"M": 1024}, arch="trn2", trace_path="mm.trace")
    print(result.simulated_ns, result.engine_busy)
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tracer import trace_dir
from tracer._version import __version__
from tracer.errors import ConfigError, KernelError, TrnprofError
from tracer.sim import kernel_sources
from tracer.sim.arch import CostModel, cost_model
from tracer.sim.check import CheckResult, check_outputs, failure_message
from tracer.sim.context import KernelContext
from tracer.sim.core import Core
from tracer.sim.emit_process import ProcessEmitter
from tracer.sim.emit_spawn import emit_mode, process_available
from tracer.sim.fastpath import FastPath
from tracer.sim.records import ENGINE_NAMES

_TRACER_DIR = Path(__file__).resolve().parents[1]

#: During a run, the cyclic garbage collector's full collections come at most once per this many collections of
#: its middle generation (Python's default: 10).  The simulation's long-lived objects (templates, recorded
#: segments, tiles' records) hardly ever become cyclic garbage: in ~1 M-instruction runs of the benchmark kernels
#: full collections found 9 objects in all, yet cost 2-8% of the run (mlp: four of ~45 ms each in 2 s), each
#: rescanning everything the run keeps.  Young garbage is collected as before.
GC_FULL_EVERY = 100

@dataclasses.dataclass
class RunResult:
    """What a simulated run produced."""

    kernel: str
    arch: str
    params: dict[str, Any]
    simulated_ns: int
    instructions: int
    dma_transfers: int
    dma_packets: int
    dma_bytes: int
    engine_busy_ns: dict[str, int]
    engine_instructions: dict[str, int]
    dma_queue_busy_ns: int
    #: Adjusted FLOPs of the matmuls (bf16-equivalent; PE transposes are in ``pe_transpose_flops``).
    pe_flops: float
    wall_s: float
    trace_path: Path | None
    outputs: dict[str, np.ndarray] | None = None
    checks: list[CheckResult] = dataclasses.field(default_factory=list)
    sbuf_peak_bytes: int = 0
    cost: CostModel | None = None
    #: Instructions scheduled by the loop fast path (replayed loop segments) rather than one by one.
    fast_path_instructions: int = 0
    #: Adjusted FLOPs of PE transposes (the array's time, not the model's work).
    pe_transpose_flops: float = 0.0

    @property
    def engine_busy(self) -> dict[str, float]:
        """Busy fraction (0..1) of each engine over the simulated time."""
        t = max(self.simulated_ns, 1)
        return {e: ns / t for e, ns in self.engine_busy_ns.items()}

    @property
    def instructions_per_second(self) -> float:
        """Simulated instructions per wall-clock second."""
        return self.instructions / self.wall_s if self.wall_s > 0 else 0.0

    def summary_lines(self) -> list[str]:
        """A short human-readable result."""
        busy = ", ".join(f"{e} {100 * f:.1f}%" for e, f in self.engine_busy.items())
        cm = self.cost
        dma_cap = cm.dma_queues * max(self.simulated_ns, 1) if cm else 1
        lines = [
            f"kernel {self.kernel} on {self.arch}: simulated time {self.simulated_ns / 1000:,.3f} us",
            f"engines busy: {busy}; DMA queues busy {100 * self.dma_queue_busy_ns / dma_cap:.1f}%",
            f"{self.instructions:,} instructions, {self.dma_transfers:,} DMA transfers ({self.dma_packets:,} packets, "
            f"{self.dma_bytes / 2**20:,.2f} MiB) in {self.wall_s:.2f} s wall "
            f"({_rate(self.instructions_per_second)} instructions/s)",
        ]
        if cm and self.simulated_ns:
            extra = (f"; PE transposes another {self.pe_transpose_flops / self.simulated_ns / 1e3:,.2f} TFLOPS"
                     if self.pe_transpose_flops else "")
            lines.append(f"Tensor engine: {self.pe_flops / self.simulated_ns / 1e3:,.2f} bf16-equivalent TFLOPS of "
                         f"matmuls ({100 * self.pe_flops / (cm.pe_peak_flops * self.simulated_ns * 1e-9):.1f}% of "
                         f"peak){extra}")
        for c in self.checks:
            lines.append(f"check {c.name}: {'OK' if c.ok else 'MISMATCH'} ({c.describe()})")
        lines.append(f"trace: {self.trace_path}" if self.trace_path else "trace: not written (--no-trace)")
        return lines


def _rate(per_s: float) -> str:
    """A rate with a unit that keeps three significant digits: ``1.15 M``, ``412 K``, ``96.5``."""
    for scale, unit in ((1e6, " M"), (1e3, " K")):
        if per_s >= 0.9995 * scale:  # what rounds to 1000 K is 1 M
            value = per_s / scale
            return (f"{value:.3g}" if value < 999.5 else f"{value:,.0f}") + unit
    return f"{per_s:.3g}"


def run_kernel(kernel: str | Callable[..., Any], params: Mapping[str, Any] | None = None, *,
               arch: str = "trn2", overrides: Mapping[str, Any] | None = None,
               trace_path: str | os.PathLike[str] | None = None, overwrite: bool = False,
               numerics: bool = False, check: bool = False, seed: int = 0,
               progress: Callable[..., None] | None = None, emit: str | None = None,
               fast_path: bool | None = None, expand_symbolic: bool | None = None) -> RunResult:
    """Run ``kernel`` on a simulated NeuronCore and (with ``trace_path``) record its trace.

    Args:
        kernel: a registered kernel name, ``path/to/file.py:function``, or a kernel function.
        params: kernel parameters (strings are converted to the parameter's type).
        arch: ``trn1`` or ``trn2``.
        overrides: cost-model constants to change (``{"dma_bandwidth_gbps": 100}``).
        trace_path: trace directory to write; ``None`` simulates without tracing.
        overwrite: replace an existing trace at ``trace_path``.
        numerics: compute values with numpy (implied by ``check``).
        check: compare every output with the kernel's numpy reference; KernelError on a mismatch.
        seed: seed of the random inputs.
        progress: called with (instructions, simulated ns) at each hand-over of records (every ~50 ms); a callback
            taking a third argument also gets the instructions the run is expected to reach (predicted from the
            first iteration of each loop; None until a loop has run one).
        emit: where trace tables are built and written: ``process`` (a child process, the default: no GIL
            shared with the simulation; falls back to ``thread`` off POSIX), ``thread`` or ``inline``.
            Default: the ``TRNPROF_EMIT`` environment variable, else ``process``.
        fast_path: replay recorded loop segments with generated scheduling code (same trace, much faster; see
            ``docs/cost-model.md``).  Default: on unless ``TRNPROF_FASTPATH=0``; always off with numerics.
        expand_symbolic: ``nc.affine_range`` traces its body once with a symbolic index and the simulator expands
            the iterations (NKI's contract, see ``docs/kernels.md``); False runs the body's Python once per
            iteration with concrete indices instead (the same trace).  Default: on unless ``TRNPROF_SYMBOLIC=0``.

    Raises:
        KernelError: the kernel misused the core, or ``check`` found a mismatch.
        ConfigError: bad architecture, constant or parameter.
    """
    from tracer.kernels import resolve_kernel

    if trace_path is not None and not isinstance(trace_path, (str, os.PathLike)):
        raise ConfigError(f"trace_path must be a path (str or os.PathLike) or None, not {type(trace_path).__name__} "
                          f"{trace_path!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, not {seed!r}")
    if emit is not None:  # an explicit choice is checked even when nothing is traced
        _checked_emit(emit)
    if progress is not None and not callable(progress):  # (it failed at the first hand-over, mid-run)
        raise ConfigError(f"progress must be a function (or None), not {str(progress)[:40]!r}")
    spec = resolve_kernel(kernel)
    kparams = spec.bind({} if params is None else params)  # (0 or "" ran the kernel's defaults)
    cm = cost_model(arch, overrides)
    numerics = numerics or check
    core = Core(cm, progress=progress)
    # a run that fails before its first instruction leaves no trace behind where there was none (a directory
    # holding only Metadata would look like a recording)
    fresh = trace_path is not None and not _holds_anything(Path(trace_path))
    created = trace_path is not None and not os.path.lexists(trace_path)
    # the kernel's own source file goes in the trace before the run (a killed recording keeps it)
    sources = kernel_sources.source_rows([f for f in [kernel_sources.kernel_file(spec.fn)] if f]) \
        if trace_path is not None else []
    sink = _open_sink(core, trace_path, overwrite, _metadata(cm, spec.name, kparams), emit, sources) \
        if trace_path is not None else None
    if sink is not None:
        core.sink = sink.submit
        core.pump = getattr(sink, "pump", None)
    if expand_symbolic is None:
        expand_symbolic = os.environ.get("TRNPROF_SYMBOLIC", "1") not in ("0", "false", "no", "off")
    ctx = KernelContext(core, numerics=numerics, seed=seed, symbolic=expand_symbolic)
    if fast_path is None:
        fast_path = os.environ.get("TRNPROF_FASTPATH", "1") not in ("0", "false", "no", "off")
    fast = FastPath(ctx) if fast_path and not numerics else None
    ctx.fast = fast
    t0 = time.perf_counter()
    ok = False
    # Objects that exist before the run (modules, numba, pyarrow: ~100 K) are left out of the cyclic garbage
    # collector's full passes during the run (each pass would scan them again: 10-40 ms each, ~8% of a 1 s run);
    # they are handed back afterwards.  Skipped when the caller froze objects of its own.  Full collections also
    # come less often (GC_FULL_EVERY).
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], max(thresholds[2], GC_FULL_EVERY))
    try:
        _call_kernel(spec, ctx, kparams)
        ctx.finish()
        core.handoff()
        ok = True
    finally:
        if not ok:
            ctx.abort_symbolic()
        if not ok:
            with contextlib.suppress(Exception):  # keep what was issued before the error in the trace
                if ctx.fast is not None:
                    ctx.fast.finish()
                core.handoff()   # (the general path's records since the last hand-over were lost)
        ctx.closed = True
        gc.set_threshold(*thresholds)
        if freeze:
            gc.unfreeze()
        if sink is not None:
            # the other files the kernel's instructions came from (helper modules)
            more: list[dict[str, Any]] = []
            with contextlib.suppress(Exception):  # a missing source file must not cost the trace
                used = {tpl.loc for tpl in core.templates}
                more = kernel_sources.source_rows(kernel_sources.location_files(ctx.location_codes(used)),
                                                  skip=[r[kernel_sources.FILE] for r in sources])
            # each HBM tensor's kind (a scratch tensor's round trip is not necessary traffic for the bounds)
            kinds = {trace_dir.HBM_TENSORS: json.dumps({n: t.kind for n, t in ctx.tensors.items()},
                                                    separators=(",", ":"))}
            if ok:
                sink.close(True, more, kinds)
            else:
                with contextlib.suppress(Exception):  # the original error matters more
                    sink.close(False, more, kinds)
                # nothing recorded (no instruction issued, or the writer died before it wrote one): no trace left
                if fresh and (core.n == 0 or not _holds_events(Path(trace_path))):  # type: ignore[arg-type]
                    _empty(Path(trace_path), remove=created)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    busy = core.finish_busy()
    result = RunResult(
        kernel=spec.name, arch=cm.arch, params=kparams, simulated_ns=core.last_ns, instructions=core.n,
        dma_transfers=core.n_xfers, dma_packets=core.n_packets, dma_bytes=core.dma_bytes,
        engine_busy_ns=dict(zip(ENGINE_NAMES, busy, strict=True)),
        engine_instructions=dict(zip(ENGINE_NAMES, core.instructions_per_engine, strict=True)),
        dma_queue_busy_ns=core.queue_busy_ns, pe_flops=core.pe_flops, wall_s=wall,
        trace_path=Path(trace_path) if trace_path is not None else None, sbuf_peak_bytes=ctx.sbuf.peak,
        cost=cm, fast_path_instructions=fast.stats["instructions"] if fast is not None else 0,
        pe_transpose_flops=core.pe_transpose_flops,
    )
    if numerics:
        result.outputs = {n: t.data for n, t in ctx.tensors.items() if t.kind == "output"}
    if check:
        result.checks = check_outputs(spec, ctx, kparams)
        failed = failure_message(spec.name, result.checks)
        if failed:
            error = KernelError(failed)
            error.result = result   # type: ignore[attr-defined]  (the outputs and checks, to look at)
            raise error
    return result


def _holds_anything(path: Path) -> bool:
    """True when ``path`` exists and is not an empty directory."""
    try:
        if not os.path.lexists(path):
            return False
        return not path.is_dir() or any(path.iterdir())
    except OSError:
        return True


def _holds_events(path: Path) -> bool:
    """True when the trace directory ``path`` holds a file of instructions, DMA transfers or spans."""
    from tracer import schema

    names = (schema.INSTRUCTION.file_name, schema.table_spec("DmaTransfer").file_name, schema.SPAN.file_name)
    try:
        return any((path / name).is_file() and (path / name).stat().st_size > 0 for name in names)
    except OSError:
        return True


def _empty(path: Path, *, remove: bool) -> None:
    """Delete what a failed run wrote in the directory ``path``, and the directory itself when ``remove``."""
    with contextlib.suppress(OSError):
        for f in path.iterdir():
            f.unlink()
        if remove:
            path.rmdir()


class _ThreadSink:
    """Trace emission on a thread (or inline) of this process."""

    def __init__(self, core: Core, path: str | os.PathLike[str], overwrite: bool, metadata: dict[str, Any], *,
                 threaded: bool, sources: list[dict[str, Any]]) -> None:
        from tracer.sim.emitter import Emitter  # Arrow, loaded only where this process writes the trace itself
        from tracer.writer import TraceWriter

        self.writer = TraceWriter(path, overwrite=overwrite, metadata=metadata, compression_threads=False)
        if sources:
            self.writer.append_rows(kernel_sources.TABLE, sources)
        self.emitter = Emitter(core, self.writer, threaded=threaded)
        self.submit = self.emitter.submit

    def close(self, complete: bool, sources: list[dict[str, Any]] | None = None,
              metadata: dict[str, Any] | None = None) -> None:
        try:
            self.emitter.close()
            if sources:
                self.writer.append_rows(kernel_sources.TABLE, sources)
            if metadata:
                self.writer.update_metadata(**metadata)
        except BaseException:
            self.writer.close(complete=False)
            raise
        self.writer.close(complete=complete)


def _checked_emit(emit: str | None) -> str:
    """The emission mode ``emit`` (or ``$TRNPROF_EMIT``) asks for; ConfigError when it is none of the three."""
    mode = emit_mode(emit)
    if mode not in ("process", "thread", "inline"):
        raise ConfigError(f"trace emission must be process, thread or inline, not {mode!r} (emit= or TRNPROF_EMIT)")
    return mode


def _open_sink(core: Core, path: str | os.PathLike[str], overwrite: bool, metadata: dict[str, Any],  # noqa: PLR0917
               emit: str | None, sources: list[dict[str, Any]]) -> Any:
    emit = _checked_emit(emit)
    if emit == "process" and process_available():
        return ProcessEmitter(core, path, overwrite=overwrite, metadata=metadata, sources=sources)
    return _ThreadSink(core, path, overwrite, metadata, threaded=emit != "inline", sources=sources)


def _call_kernel(spec: Any, ctx: KernelContext, params: Mapping[str, Any]) -> None:
    """Run the kernel body; a Python error raised by the kernel's own code (or ``sys.exit``) becomes a KernelError
    naming its line."""
    try:
        spec.fn(ctx, **params)
    except TrnprofError:
        raise
    except SystemExit as exc:  # the kernel must return: exiting would end `trnprof record` without a word
        raise KernelError(f"{_user_line(exc, spec.fn)}: kernel {spec.name} called sys.exit({exc.code!r}); a kernel "
                          "must return normally (raise an exception to report an error)") from None
    except Exception as exc:
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame.f_code.co_filename)
            last = tb
            tb = tb.tb_next
        if frames and Path(frames[-1]).resolve().is_relative_to(_TRACER_DIR):
            raise  # a bug in the simulator itself: let it surface as an internal error
        if last.tb_frame.f_code.co_name == "_expand" and "__name__" not in last.tb_frame.f_globals:
            raise  # the generated expansion of an affine loop (tracer/sim/affine/codegen.py): a simulator bug
        hint = ""
        if isinstance(exc, IndexError) and "list index" in str(exc) and ctx.affine_traced:
            hint = (" (if the list was filled in an nc.affine_range loop: its body's Python runs for two iterations "
                    "only, so the list holds two entries; fill it in an nc.static_range loop)")
        raise KernelError(f"{_user_line(exc, spec.fn)}: kernel {spec.name} raised {type(exc).__name__}: {exc}"
                          f"{hint}") from exc


def _user_line(exc: BaseException, fn: Any) -> str:
    """``file.py:LINE`` of the innermost traceback frame of the user's own code -- not of an installed library
    (numpy, ...), the standard library or trnprof (except ``fn``'s own file) -- else of ``fn``'s file, else of the
    innermost frame."""
    import sysconfig

    libraries = tuple({str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "purelib", "platlib")})
    own = getattr(getattr(fn, "__code__", None), "co_filename", None)
    user = in_fn = last = None
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        here = f"{Path(name).name}:{tb.tb_lineno}"
        last = here
        if name == own:
            in_fn = here
        path = Path(name)
        if path.is_absolute() and not str(path.resolve()).startswith(libraries) and \
                (name == own or not path.resolve().is_relative_to(_TRACER_DIR)):
            user = here
        tb = tb.tb_next
    return user or in_fn or last or "?"



def _metadata(cm: CostModel, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "is_simulation": True, "arch": cm.arch, "instance_type": cm.instance_type, "profile_name": name,
        "kernel_params": json.dumps(params, sort_keys=True, default=str), "cost_model": cm.to_json(),
        "num_physical_cores": 1, "tool_version": f"trnprof {__version__} (simulated {cm.neuroncore_version})",
        "dma_ddr_bandwidth": cm.dma_bandwidth_gbps * 1e9, "hbm_ddr_bandwidth": cm.hbm_bandwidth_gbps * 1e9,
        "num_dma_engines_per_neuroncore": cm.dma_queues,
        "tensor_engine_num_rows": cm.pe_rows, "tensor_engine_num_cols": cm.pe_cols,
        "tensor_engine_clock_freq": cm.pe_clock_ghz, "vector_engine_clock_freq": cm.dve_clock_ghz,
        "scalar_engine_clock_freq": cm.act_clock_ghz, "gpsimd_engine_clock_freq": cm.pool_clock_ghz,
        "neuroncore_clock_freq": cm.neuroncore_clock_ghz,
        "vector_engine_num_channels": cm.vector_channels, "scalar_engine_num_channels": cm.scalar_channels,
        "gpsimd_engine_num_channels": cm.gpsimd_channels, "ticks_per_nanosec": cm.ticks_per_nanosec,
    }

