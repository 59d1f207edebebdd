"""What tracing an ``nc.affine_range`` body records: events, loop nodes, and operand descriptors.

A traced body is a list of *events* (tuples, first element the kind):

==========  =====================================================================================================
``ALLOC``   ``(ALLOC, slot, mem, shape, dtype, name, where)`` -- a tile allocated (``slot`` names it in this trace)
``FREE``    ``(FREE, ref)`` -- the kernel dropped a tile (a slot, or a real tile from before the loop)
``OP``      ``(OP, name, where, descs)`` -- an API operation; ``descs`` describe its arguments in signature order
``VIEW``    ``(VIEW, vid, base, key, where)`` -- a slice whose bounds depend on a loop index (``base[key]``)
``BCAST``   ``(BCAST, vid, base vid, partitions, where)`` -- ``.broadcast(partitions)`` of such a slice
``ENTER``   ``(ENTER, category, name)`` / ``(EXIT, category, name)`` -- ``nc.layer`` / ``nc.operator`` scopes
``LOOP``    ``(LOOP, node)`` -- a nested loop (:class:`LoopNode`)
==========  =====================================================================================================

An argument descriptor is ``("T", ref)`` (a tile), ``("V", ref, p0, p1, f0, f1)`` (a tile slice with plain
bounds), ``("SV", vid)`` (a symbolic slice, made by a VIEW event), ``("H", tensor)``, ``("HV", tensor, r0, r1, c0,
c1, bcast)`` (an HBM slice with plain bounds) or ``("C", value)``.  A tile reference is an int (the slot of a tile
allocated while tracing) or a ``weakref`` to a real tile from before the loop.

An affine loop is traced twice: pass 1 stands for its first iteration, pass 2 for every later one (the second
trace also tells where the previous iteration's tiles are dropped).  A ``nc.sequential_range`` loop met while
tracing runs with concrete indices, so each of its iterations is recorded on its own.
"""

from __future__ import annotations

from typing import Any

from tracer.sim.affine.index import LoopVar

ALLOC, FREE, OP, VIEW, BCAST, ENTER, EXIT, LOOP = range(8)
KIND_NAMES = ("alloc", "free", "op", "view", "broadcast", "enter", "exit", "loop")

AFFINE, SEQUENTIAL = 0, 1


class LoopNode:
    """A loop met while tracing: an affine loop (two traced passes) or a sequential one (its iterations)."""

    __slots__ = ("bodies", "first_n", "flags", "kind", "n", "pairs", "start", "step", "tensors", "values", "var",
                 "where")

    def __init__(self, kind: int, where: str, start: int, step: int, n: int, var: LoopVar | None) -> None:  # noqa: PLR0917
        self.kind = kind
        self.where = where
        self.start = start
        self.step = step
        #: Iterations the loop runs (fewer than its range when the kernel broke out of it while tracing).
        self.n = n
        self.var = var
        #: Affine: [pass 1] or [pass 1, pass 2]; sequential: one body per iteration.
        self.bodies: list[list[tuple[Any, ...]]] = []
        #: Sequential: the index of each recorded iteration.
        self.values: list[int] = []
        #: Affine: (pass-1 slot, pass-2 slot) of the same allocation, including those of nested loops.
        self.pairs: list[tuple[int, int]] = []
        #: Analysis results (see tracer.sim.affine.analysis): "indexdep" (on-chip regions or view sizes depend on
        #: this loop's index: no replay), "replay_ok" (whether replaying its iterations may be tried).
        self.flags: dict[str, Any] = {}
        #: HBM tensors the loop's events touch (filled by the analysis).
        self.tensors: list[Any] = []
        self.first_n = n

    def body(self, it: int) -> list[tuple[Any, ...]]:
        """The events of iteration ``it``."""
        if self.kind == AFFINE:
            return self.bodies[0] if it == 0 else self.bodies[1]
        return self.bodies[it]

    def index(self, it: int) -> int:
        """The loop index of iteration ``it``."""
        return self.start + self.step * it

    def __repr__(self) -> str:
        kind = "affine" if self.kind == AFFINE else "sequential"
        return f"<{kind} loop at {self.where}, {self.n} iterations>"


def iter_events(body: list[tuple[Any, ...]]) -> Any:
    """Every event of ``body`` and of the loops nested in it (depth first, in order)."""
    for ev in body:
        yield ev
        if ev[0] == LOOP:
            for b in ev[1].bodies:
                yield from iter_events(b)


def instruction_count(node: LoopNode, issued: dict[str, int]) -> int:
    """Instructions the loop issues over all its iterations, nested loops included: ``issued[name]`` for each
    operation named in it, 1 for the others."""
    if node.kind == AFFINE:
        if not node.n:
            return 0
        return _body_count(node.bodies[0], issued) + (node.n - 1) * _body_count(node.bodies[-1], issued)
    return sum(_body_count(body, issued) for body in node.bodies)


def _body_count(body: list[tuple[Any, ...]], issued: dict[str, int]) -> int:
    total = 0
    for ev in body:
        if ev[0] == OP:
            total += issued.get(ev[1], 1)
        elif ev[0] == LOOP:
            total += instruction_count(ev[1], issued)
    return total


def nodes(body: list[tuple[Any, ...]]) -> Any:
    """Every loop node nested in ``body`` (depth first)."""
    for ev in body:
        if ev[0] == LOOP:
            yield ev[1]
            for b in ev[1].bodies:
                yield from nodes(b)
