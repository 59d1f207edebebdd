"""Dependency tracking: which earlier instruction or DMA transfer each new one must wait for.

The tracker turns data accesses into dependencies the way the Neuron compiler inserts semaphore waits:
read-after-write (``flow``), write-after-read (``anti``) and write-after-write (``output``) on tile regions and
PSUM banks, and at tensor granularity on HBM (reads wait for earlier writes, writes for earlier reads).

A producer is identified by its *pinfo* tuple ``(stream, seq, ready_ns, out_table, out_id)``: the semaphore
stream it increments, its sequence number on that stream (the semaphore value after it), the time its result
is visible, and the trace row a Flow edge should point at.  Streams are in-order, so a wait for stream ``s`` to
reach ``seq`` covers every earlier producer on ``s``: dependencies are kept per stream, latest only.

Per on-chip block (see :mod:`tracer.sim.memory`) the tracker keeps writer records ``[p0, p1, f0, f1, pinfo]``
(a new write drops the records it covers) and, per stream, one reader record merged to the bounding box of the
regions read (conservative: never misses a dependency).
"""

# Hot path: `if a > b: b = a` is about twice as fast as `b = max(a, b)` in CPython.
# ruff: noqa: PLR1730

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracer.sim.allocator import Block
from tracer.sim.memory import HBM, HbmView

FLOW, ANTI, OUTPUT = 0, 1, 2
DEP_NAMES = ("flow", "anti", "output")

Deps = dict[int, tuple[tuple[Any, ...], int]]


#: Called with (new producer, current producer) whenever two producers of one stream are compared; the loop
#: fast path's recorder sets it to learn which comparisons a recorded segment depends on.
COMPARE_HOOK: Callable[[tuple[Any, ...], tuple[Any, ...]], None] | None = None


def _add(deps: Deps, pinfo: tuple[Any, ...], kind: int) -> None:
    cur = deps.get(pinfo[0])
    if cur is None:
        deps[pinfo[0]] = (pinfo, kind)
        return
    if COMPARE_HOOK is not None:
        COMPARE_HOOK(pinfo, cur[0])
    if pinfo[1] > cur[0][1]:
        deps[pinfo[0]] = (pinfo, kind)


def resolve(reads: list[Any], writes: list[Any]) -> Deps:
    """Dependencies (per stream, latest producer) of an operation reading ``reads`` and writing ``writes``."""
    deps: Deps = {}
    for v in reads:
        if v.mem == HBM:
            for p in v.tensor.writers.values():
                _add(deps, p, FLOW)
            continue
        block: Block = v.tile.block
        p0, p1, f0, f1 = v.p0, v.p1, v.f0, v.f1
        for w in block.writers:
            if w[0] < p1 and p0 < w[1] and w[2] < f1 and f0 < w[3]:
                _add(deps, w[4], FLOW)
    for v in writes:
        if v.mem == HBM:
            for p in v.tensor.readers.values():
                _add(deps, p, ANTI)
            continue
        block = v.tile.block
        p0, p1, f0, f1 = v.p0, v.p1, v.f0, v.f1
        for w in block.writers:
            if w[0] < p1 and p0 < w[1] and w[2] < f1 and f0 < w[3]:
                _add(deps, w[4], OUTPUT)
        for r in block.readers.values():
            if r[0] < p1 and p0 < r[1] and r[2] < f1 and f0 < r[3]:
                _add(deps, r[4], ANTI)
        if block.inherited:
            for pinfo, kind in block.inherited.values():
                _add(deps, pinfo, kind)
    return deps


def update(reads: list[Any], writes: list[Any], pinfo: tuple[Any, ...]) -> None:
    """Record that the producer ``pinfo`` read ``reads`` and wrote ``writes``."""
    stream = pinfo[0]
    for v in writes:
        if v.mem == HBM:
            v.tensor.writers[stream] = pinfo
            continue
        block: Block = v.tile.block
        p0, p1, f0, f1 = v.p0, v.p1, v.f0, v.f1
        if block.writers:
            block.writers = [w for w in block.writers if not (p0 <= w[0] and w[1] <= p1 and f0 <= w[2] and w[3] <= f1)]
        if block.readers:
            for s in [s for s, r in block.readers.items() if p0 <= r[0] and r[1] <= p1 and f0 <= r[2] and r[3] <= f1]:
                del block.readers[s]
        block.writers.append([p0, p1, f0, f1, pinfo])
        if block.inherited and v.is_full:
            block.inherited = None
    for v in reads:
        if v.mem == HBM:
            v.tensor.readers[stream] = pinfo
            continue
        block = v.tile.block
        r = block.readers.get(stream)
        if r is None:
            block.readers[stream] = [v.p0, v.p1, v.f0, v.f1, pinfo]
        else:
            if v.p0 < r[0]:
                r[0] = v.p0
            if v.p1 > r[1]:
                r[1] = v.p1
            if v.f0 < r[2]:
                r[2] = v.f0
            if v.f1 > r[3]:
                r[3] = v.f1
            r[4] = pinfo


def release(block: Block) -> None:
    """Fold a freed block's records into ``block.inherited`` (what the next tile in this memory must wait for)."""
    deps: Deps = dict(block.inherited) if block.inherited else {}
    for w in block.writers:
        _add(deps, w[4], OUTPUT)
    for r in block.readers.values():
        _add(deps, r[4], ANTI)
    block.inherited = deps or None
    block.writers = []
    block.readers = {}


def is_hbm(v: Any) -> bool:
    """True for an HBM view."""
    return isinstance(v, HbmView)
