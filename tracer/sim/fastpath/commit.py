"""Committing a matched segment: its templates for this set of buffers, the scheduling, lazy records, spans.

At the end of a matched segment the variant's recipes give the template of each instruction for the blocks,
tensors and tile names the segment actually used (cached per instruction by those values), the variant's program
schedules everything (:mod:`tracer.sim.fastpath.schedule`), and every block and tensor the segment touched is left
*lazy*: it points at the committed :class:`Seg`, whose producers fill the variant's output structure for it when the
records are needed again (:meth:`tracer.sim.fastpath.controller.FastPath.break_chain`).  Scopes entered or left in
the segment get their Span boxes and rows here, in the order the general path would have written them.
"""

from __future__ import annotations

from operator import ne
from typing import TYPE_CHECKING, Any

from tracer.sim.fastpath import state
from tracer.sim.fastpath.edges import emit_table
from tracer.sim.fastpath.match import Segment, all_names
from tracer.sim.fastpath.schedule import program, run
from tracer.sim.fastpath.trie import ENTER, Variant, substitution
from tracer.sim.records import VKey

if TYPE_CHECKING:
    from tracer.sim.fastpath.controller import FastPath


#: Bindings (buffer addresses, tile names, templates) remembered per variant to rebuild only what differs in a new
#: one.  (HBM tensors are no part of a template: a DMA trigger's ``aux`` names its tensor.)
RECENT_BINDINGS = 4


class Seg:
    """A committed segment, as referenced by the lazy records it left."""

    __slots__ = ("offs", "sigs", "vals", "var")

    def __init__(self, var: Variant, vals: tuple[Any, ...]) -> None:
        self.var = var
        self.vals = vals
        self.sigs = var.out_sigs  # type: ignore[attr-defined]
        self.offs = var.out_offs  # type: ignore[attr-defined]


def prepare(fast: FastPath, var: Variant) -> None:
    """Give a new variant its uid, output layout, template-cache keys and emitter table."""
    var.out_sigs = [o[0] for o in var.outputs]  # type: ignore[attr-defined]
    offs = [0]
    for _sig, struct, _srcs in var.outputs:
        offs.append(offs[-1] + state.n_leaves(struct))
    var.out_offs = offs  # type: ignore[attr-defined]
    # a segment repeats a few recipes many times, and variants share them: each is analysed once per run (keyed by
    # its text, which tells 1 from 1.0 and True where equality does not)
    parts = fast.recipe_parts
    analysed = []
    for p in var.positions:
        key = repr(p.recipe)
        got = parts.get(key)
        if got is None:
            got = parts[key] = (recipe_refs(p.recipe), substitution(p.recipe))
        analysed.append(got)
    var.pos_refs = [refs for refs, _ in analysed]  # type: ignore[attr-defined]
    var.pos_cache = {}  # type: ignore[attr-defined]
    var.pos_subst = [subst for _, subst in analysed]  # type: ignore[attr-defined]
    # which instructions refer to each block role and tile-name role (for templates' partial rebuild)
    by_block: dict[int, list[int]] = {}
    by_name: dict[Any, list[int]] = {}
    for j, (brefs, nrefs) in enumerate(var.pos_refs):  # type: ignore[attr-defined]
        for r in brefs:
            by_block.setdefault(r, []).append(j)
        for r in nrefs:
            by_name.setdefault(r, []).append(j)
    var.pos_by_ref = (by_block, by_name)  # type: ignore[attr-defined]
    var.recent_bindings = []  # type: ignore[attr-defined]
    var.uid = len(fast.variants)
    var.emit_table = emit_table(var)  # type: ignore[attr-defined]
    fast.variants.append(var)


def commit(fast: FastPath, var: Variant) -> None:
    """Schedule the matched segment with its variant and leave its records lazy (see the module docstring)."""
    m = fast.m
    core, ctx = fast.core, fast.ctx
    names = all_names(m) if var.name_roles else m.names
    binding = (tuple([b.addr for b in m.blocks]), tuple([names[r] for r in var.name_roles]))
    ent = var.tids.get(binding)
    if ent is None:
        ent = var.tids[binding] = templates(core, var, m)
    prog = var.run
    if prog is None:
        prog = var.run = program(var)
    nf = bool(m.open0) or bool(m.scopes)
    outs, starts, fins = run(prog, core, ctx, m.leaves, m.aux, ent[1], ent[0], m.cv,
                             core._cols if core.sink is not None else None, nf, m.names)
    seg = Seg(var, outs)
    chain = fast.chain
    r = 0
    for obj in m.blocks:
        obj.lz_seg = seg
        obj.lz_role = r
        chain[id(obj)] = obj
        r += 1
    for obj in m.tensors:
        obj.lz_seg = seg
        obj.lz_role = r
        chain[id(obj)] = obj
        r += 1
    if nf:
        spans(core, m, starts, fins)
    fast.stats["matched"] += 1
    fast.stats["instructions"] += len(var.positions)
    fast.m = None
    core._maybe_handoff()


def templates(core: Any, var: Variant, m: Segment) -> tuple[list[int], list[Any]]:
    """Template ids of the variant's instructions for the segment's blocks and names, cached per instruction by the
    values its recipe refers to.  Only the instructions referring to a value that differs from the closest of the
    variant's last :data:`RECENT_BINDINGS` bindings are looked up again (buffers rotating through a few addresses
    match an older binding); the rest keep that binding's templates, which depend on nothing else."""
    cache = var.pos_cache  # type: ignore[attr-defined]
    blocks, names = m.blocks, m.names
    addrs = [b.addr for b in blocks]
    by_block, by_name = var.pos_by_ref  # type: ignore[attr-defined]
    nvals = {r: names[r] for r in by_name}
    recent = var.recent_bindings  # type: ignore[attr-defined]
    last = None
    fewest = len(addrs) + 1
    for old in recent:
        if len(old[0]) == len(addrs):
            n = sum(map(ne, old[0], addrs))  # lengths checked just above
            if n < fewest:
                last, fewest = old, n
    if last is None:
        tids: list[int] = [0] * len(var.positions)
        tpls: list[Any] = [None] * len(var.positions)
        dirty: Any = range(len(var.positions))
    else:
        tids, tpls = list(last[2]), list(last[3])
        marked: set[int] = set()
        for r, (was, now) in enumerate(zip(last[0], addrs, strict=True)):
            if was != now and r in by_block:
                marked.update(by_block[r])
        for r, now in nvals.items():
            if last[1][r] != now:
                marked.update(by_name[r])
        dirty = marked
    positions, refs, subst = var.positions, var.pos_refs, var.pos_subst  # type: ignore[attr-defined]
    for j in dirty:
        p = positions[j]
        brefs, nrefs = refs[j]
        key = (j, *[addrs[r] for r in brefs], *[nvals[r] for r in nrefs])
        tid = cache.get(key)
        if tid is None:
            tid = cache[key] = core.template(subst[j](blocks, names))
            tpl = core.templates[tid]
            if tpl.stream != p.stream or tpl.engine != p.engine or tpl.dur != p.dur:
                raise RuntimeError("trnprof loop fast path: a rebuilt template differs from the recorded one")
        tids[j] = tid
        tpls[j] = core.templates[tid]
    recent.append((addrs, nvals, tids, tpls))
    if len(recent) > RECENT_BINDINGS:
        del recent[0]
    return tids, tpls


def spans(core: Any, m: Segment, starts: list[int], fins: list[int]) -> None:
    """Update the Span boxes the segment's instructions fall in, then record the rows of the scopes it left."""
    n = len(starts)
    open_ = [(box, 0) for box in m.open0]  # (box, the segment's first instruction in it), innermost last
    ranges = []
    exits = []
    for kind, pos, scope in m.scopes:
        if kind == ENTER:
            open_.append((scope.box, pos))
            continue
        box = scope.box
        if open_[-1][0] is box:  # scopes are left in the reverse order of entry (``with`` blocks)
            a = open_.pop()[1]
        else:
            a = open_.pop(next(i for i, (b, _a) in enumerate(open_) if b is box))[1]
        ranges.append((box, a, pos))
        exits.append(scope)
    ranges.extend((box, a, n) for box, a in open_)
    for box, a, b in ranges:
        if a < b:
            lo = min(starts[a:b])
            hi = max(fins[a:b])
            box[0] = min(box[0], lo)
            box[1] = max(box[1], hi)
    rows = [row for row in [scope.row() for scope in exits] if row is not None]
    if rows:
        core.spans(rows)


def recipe_refs(recipe: Any) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """Block roles and tile-name roles a recipe refers to."""
    blocks: list[int] = []
    names: list[Any] = []

    def walk(x: Any) -> None:
        tx = type(x)
        if tx is VKey:
            if type(x.addr) is tuple:
                blocks.append(x.addr[1])
        elif tx is tuple:
            if len(x) == 2 and x[0] == "@N":
                names.append(x[1])
            else:
                for y in x:
                    walk(y)

    walk(recipe)
    return tuple(blocks), tuple(names)
