"""Falling back: the events of a segment matched so far are issued through the general path after all.

When a kernel call fits no recorded continuation, nothing of the current segment has been scheduled yet (matching
only checks and defers).  :func:`reissue` replays those events in order through the general path's own functions --
templates from the recipes, dependencies resolved afresh by the tracker on stand-in views of the same blocks,
:meth:`tracer.sim.core.Core.execute`, releases, usage counters, scope boxes and rows -- so the result is what the
general path would have produced had it run them live.  The recorder notes them as the start of a new recording.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracer.sim import tracker
from tracer.sim.fastpath.match import Segment
from tracer.sim.fastpath.trie import ALLOC, ENTER, EXIT, FREE, OP, Node, substitute
from tracer.sim.memory import SBUF

if TYPE_CHECKING:
    from tracer.sim.fastpath.controller import FastPath
    from tracer.sim.fastpath.record import Recorder


class _StandinView:
    """What the tracker needs of an on-chip view, rebuilt from a recorded position."""

    __slots__ = ("block", "f0", "f1", "is_full", "mem", "p0", "p1", "tile")

    def __init__(self, block: Any, p0: int, p1: int, f0: int, f1: int, is_full: bool) -> None:  # noqa: PLR0917
        self.block = block
        self.tile = self
        self.mem = block.mem
        self.p0, self.p1, self.f0, self.f1 = p0, p1, f0, f1
        self.is_full = is_full


class _StandinHbm:
    """What the tracker needs of an HBM view."""

    __slots__ = ("tensor",)
    mem = "HBM"

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor


def reissue(fast: FastPath, m: Segment, path: list[Node], rec: Recorder | None) -> None:
    """Issue the events of ``path`` (matched but not yet scheduled) through the general path, in order."""
    core, ctx = fast.core, fast.ctx
    live = core.open_spans
    core.open_spans = list(m.open0)
    issue = ctx.issue
    names = m.names
    src = [names[("A", 0)], names[("A", 1)]]
    stack = []
    nsc = 0
    core.set_scope(*src)
    ai = ci = si = 0
    for node in path:
        kind = node.kind
        if rec is not None:
            rec.adopt(node, m)
        if kind == OP:
            for p in node.positions:
                tid = core.template(substitute(p.recipe, m.blocks, m.names))
                aux = -1
                if p.aux_dynamic:
                    aux = m.aux[ai]
                    ai += 1
                issue(tid, [_standin(x, m) for x in p.reads], [_standin(x, m) for x in p.writes], aux)
        elif kind == ALLOC:
            core.counter(_usage(node.spec[0])[0], m.cv[ci], _usage(node.spec[0])[1])
            ci += 1
        elif kind == FREE:
            tspec = node.spec[1]
            block = m.lblk[tspec[1]] if tspec[0] == "L" else m.oblk[tspec[1]]
            tracker.release(block)
            core.counter(_usage(node.spec[0])[0], m.cv[ci], _usage(node.spec[0])[1])
            ci += 1
        elif kind == ENTER:
            scope = m.scopes[si][2]
            core.open_spans.append(scope.box)
            si += 1
            stack.append(list(src))
            src[0 if scope.category == "layer" else 1] = names[("S", nsc)]
            nsc += 1
            core.set_scope(*src)
        elif kind == EXIT:
            scope = m.scopes[si][2]
            si += 1
            src = stack.pop()
            core.set_scope(*src)
            spans = core.open_spans
            del spans[next(i for i, b in enumerate(spans) if b is scope.box)]
            row = scope.row()
            if row is not None:
                core.span(row)
        if rec is not None:
            rec.end()
    if [id(b) for b in core.open_spans] != [id(b) for b in live] or src != [ctx.cur_layer, ctx.cur_operator]:
        raise RuntimeError("trnprof loop fast path: scopes out of step after re-issuing a segment")
    core.open_spans = live

def _standin(spec: tuple[Any, ...], m: Segment) -> Any:
    if spec[0] == "H":
        return _StandinHbm(m.tensors[spec[1]])
    _b, role, p0, p1, f0, f1, full = spec
    return _StandinView(m.blocks[role], p0, p1, f0, f1, full)


def _usage(mem: str) -> tuple[str, str]:
    return ("sbuf_usage_bytes", "B") if mem == SBUF else ("psum_banks_in_use", "banks")
