"""``nc.affine_range`` with NKI's contract: trace the body with a symbolic index, then expand the iterations.

The outermost affine loop (one not inside another traced body) is a generator that:

1. installs a :class:`~tracer.sim.affine.recorder.Recorder` on the kernel context (the API records instead of
   issuing; the loop fast path's state is untouched);
2. yields the symbolic index twice (pass 1 = the first iteration, pass 2 = any later one), the kernel's Python
   running the body once per pass -- nested ``nc.affine_range`` loops do the same inside, nested
   ``nc.sequential_range`` / ``nc.static_range`` loops run their iterations with concrete indices, each recorded;
3. checks the trace (:mod:`tracer.sim.affine.analysis`), then expands every iteration with the generated loop nest
   (:mod:`tracer.sim.affine.codegen`), which turns the symbolic tiles the kernel still holds into the last
   iteration's tiles; loop variables keep their last value (as Python's do).

Nothing of the loop is issued if the kernel raises while its body is traced (the error is the kernel's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tracer.errors import KernelError
from tracer.sim.affine import analysis, codegen
from tracer.sim.affine.events import AFFINE, LoopNode
from tracer.sim.affine.index import Affine, LoopVar
from tracer.sim.affine.recorder import Recorder

if TYPE_CHECKING:
    from tracer.sim.context import KernelContext

_EARLY = ("leaving an nc.affine_range loop early (break or return) is not supported: its body is traced once and "
          "every iteration runs (as in NKI); use nc.sequential_range(...) or range(...) for a loop that can stop")


class LoopRange:
    """What ``nc.affine_range`` returns in symbolic mode: iterable once, with a length."""

    __slots__ = ("gen", "n")

    def __init__(self, gen: Iterator[Any], n: int) -> None:
        self.gen = gen
        self.n = n

    def __iter__(self) -> Iterator[Any]:
        return self.gen

    def __len__(self) -> int:
        return self.n


def affine_range(ctx: KernelContext, r: range, where: str) -> LoopRange:
    """``nc.affine_range`` in symbolic mode (traced once, expanded by the simulator)."""
    rec = ctx.symrec
    if rec is not None and rec.recording:
        return LoopRange(rec.affine_loop(r, where), len(r))
    return LoopRange(_outermost(ctx, r, where), len(r))


def concrete_range(ctx: KernelContext, r: range, where: str) -> LoopRange:
    """``nc.sequential_range`` / ``nc.static_range`` met while a body is traced: concrete iterations, recorded."""
    return LoopRange(ctx.symrec.sequential_loop(r, where), len(r))


def _outermost(ctx: KernelContext, r: range, where: str) -> Iterator[Any]:
    ctx.raise_deferred()
    n = len(r)
    if n == 0:
        return
    rec = Recorder(ctx)
    ctx.symrec = rec
    ctx.affine_traced = True   # (a later IndexError may be a list filled in this loop: runner's hint)
    rec.install()
    var = LoopVar(n)
    node = LoopNode(AFFINE, where, r.start, r.step, n, var)
    index = Affine.make({var: r.step}, r.start)
    try:
        for part in range(min(n, 2)):
            body: list[tuple[Any, ...]] = []
            node.bodies.append(body)
            rec.push(node, part, body)
            try:
                yield index
            finally:
                rec.pop(node)
    except GeneratorExit:  # the kernel left the loop early: nothing can be raised from here, report it later
        ctx.sym_error = KernelError(f"{where}: {_EARLY}")
        raise
    finally:
        var.value = n - 1
        abort(ctx, rec)
    if rec.early_exit is not None:
        raise KernelError(f"{rec.early_exit}: {_EARLY}")
    analysis.check(node, rec.slots)
    codegen.expand(ctx, rec, node)


def abort(ctx: KernelContext, rec: Recorder | None = None) -> None:
    """Stop tracing (after the passes, or when the kernel raised while its body was traced)."""
    rec = rec if rec is not None else ctx.symrec
    if rec is None:
        return
    rec.uninstall()
    if ctx.symrec is rec:
        ctx.symrec = None
