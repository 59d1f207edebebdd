"""Expanding a traced ``nc.affine_range`` loop nest: the trace compiled to the Python loop nest it stands for.

After tracing and checking (:mod:`tracer.sim.affine.analysis`), the outermost loop's events become one generated
function: a ``for`` loop per affine loop running pass 2's events for every iteration (or pass 1's for the first
one and pass 2's for the others when :func:`~tracer.sim.affine.rolling.entry_moves` cannot make pass 2's code do
the first iteration's releases), sequential loops rolled back into loops (:func:`~tracer.sim.affine.rolling.roll`)
or unrolled, every operation a call of the kernel API with concrete operands -- symbolic slice bounds become
integer expressions of the iteration counters.  The
generated code carries the kernel's own line numbers and file (so ``caller_location``, error messages and the
loop fast path's call sites are those of real code), and the loops are what the kernel's own loops would be
(:func:`tracer.sim.context.loop_range`), so the fast path (:mod:`tracer.sim.fastpath`) segments, records and
replays the expansion as it would the kernel's own loops.
The statements and their operand expressions are written through :class:`~tracer.sim.affine.source.Source`.

Tiles: each allocation stores its instance in ``E[slot]`` (a local variable ``e<slot>`` in the compiled code); a
release recorded while tracing is ``E[slot] = None`` (the last reference: the instance is freed by reference
counting at exactly the point the kernel dropped it).  Each later iteration of an affine loop first moves the
previous iteration's instances from the pass-2 slots to their pass-1 twins (the loop's ``pairs``), because pass
2's events name the previous iteration's tiles by their pass-1 slots.  This is NKI's per-iteration tile
allocation (a rotating buffer): each iteration allocates its own tile, freed when the kernel's Python would have
dropped it, so the allocator sees what concrete execution does.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from tracer.sim.affine.events import (
    AFFINE,
    ALLOC,
    BCAST,
    ENTER,
    EXIT,
    FREE,
    LOOP,
    OP,
    VIEW,
    LoopNode,
    instruction_count,
)
from tracer.sim.affine.hoist import hoist_views
from tracer.sim.affine.recorder import ALLOCS, OPS, Recorder
from tracer.sim.affine.rolling import SLOT, entry_moves, roll
from tracer.sim.affine.source import Source
from tracer.sim.memory import DeadTile, HbmView, SymTile, Tile, TileView
from tracer.sim.ops import INSTRUCTIONS_ISSUED

if TYPE_CHECKING:
    from tracer.sim.context import KernelContext

#: (positional parameter count, keyword-only names, keyword-only defaults) of each API method (KernelContext's).
_SIGNATURES: dict[str, tuple[int, tuple[str, ...], tuple[Any, ...]]] = {}
#: Compiled expansions by generated source, file and lines (a loop nest met again, e.g. inside a sequential loop,
#: with other tiles and tensors reuses its code).
_CODE_CACHE: dict[tuple[Any, ...], Any] = {}
_CODE_CACHE_MAX = 256


def _signatures() -> dict[str, tuple[int, tuple[str, ...], tuple[Any, ...]]]:
    if not _SIGNATURES:
        import inspect

        from tracer.sim.context import KernelContext

        for name in (*OPS, *ALLOCS):
            params = list(inspect.signature(getattr(KernelContext, name)).parameters.values())[1:]
            npos = sum(p.kind is not inspect.Parameter.KEYWORD_ONLY for p in params)
            _SIGNATURES[name] = (npos, tuple(p.name for p in params[npos:]), tuple(p.default for p in params[npos:]))
    return _SIGNATURES


def _is_default(desc: tuple[Any, ...], default: Any) -> bool:
    """True when a recorded keyword argument is the parameter's default (left out of the generated call)."""
    if desc[0] != "C":
        return False
    v = desc[1]
    return type(v) is type(default) and type(v) in (str, int, float, bool, type(None)) and v == default


def _views_used(ev: tuple[Any, ...], out: set[int]) -> None:
    k = ev[0]
    if k == OP:
        out.update(d[1] for d in ev[3] if d[0] == "SV")
    elif k == VIEW:
        if ev[2][0] == "SV":
            out.add(ev[2][1])
    elif k == BCAST:
        out.add(ev[2])
    elif k == LOOP:
        for b in ev[1].bodies:
            for e in b:
                _views_used(e, out)


def _body(src: Source, body: list[tuple[Any, ...]], depth: int) -> None:
    """Emit the events of one body at indentation ``depth``."""
    # the last event of this body using each view made here: the view is dropped right after it
    last: dict[int, int] = {}
    for i, ev in enumerate(body):
        if ev[0] in (VIEW, BCAST):
            last[ev[1]] = i
        used: set[int] = set()
        _views_used(ev, used)
        for vid in used:
            if vid in last:
                last[vid] = i
    uses: dict[int, int] = {}
    for ev in body:
        used_here: set[int] = set()
        _views_used(ev, used_here)
        for vid in used_here:
            uses[vid] = uses.get(vid, 0) + (sum(d[0] == "SV" and d[1] == vid for d in ev[3]) if ev[0] == OP else 2)
    # views made without parsing a key (in range in every iteration: they cannot fail)
    direct: dict[int, str | None] = {}
    for ev in body:
        if ev[0] == VIEW:
            _, vid, base, parts, _where = ev
            if base[0] == "H":
                direct[vid] = src.hbm_view(base[1], parts)
            elif base[0] in ("T", "V"):
                direct[vid] = src.tile_view(base, parts)
    # a slice of an HBM tensor or a tile used once, by the next operation: written into the call (made at the
    # same point and dropped when the call returns, as the separate statements would). One that may fail must be
    # on the operation's kernel line, where its error names it.
    inline_ok = set()
    for i, ev in enumerate(body[:-1]):
        nxt = body[i + 1]
        if ev[0] == VIEW and ev[2][0] in ("H", "T", "V") and uses.get(ev[1]) == 1 and nxt[0] == OP and \
                (nxt[2] == ev[4] or direct.get(ev[1]) is not None) and \
                any(d[0] == "SV" and d[1] == ev[1] for d in nxt[3]):
            inline_ok.add(ev[1])
    inline: dict[int, str] = {}
    drop_after: dict[int, list[int]] = {}
    for vid, i in last.items():
        if vid not in inline_ok:
            drop_after.setdefault(i, []).append(vid)
    sig = _signatures()
    emitted = False
    for i, ev in enumerate(body):
        k = ev[0]
        if k == OP:
            name, where, descs = ev[1], ev[2], ev[3]
            npos, kw, defaults = sig[name]
            args = [inline.pop(d[1]) if d[0] == "SV" and d[1] in inline else src.desc(d) for d in descs]
            keywords = [f"{n}={a}" for n, a, d, default in zip(kw, args[npos:], descs[npos:], defaults, strict=True)
                        if not _is_default(d, default)]
            src.line(depth, f"nc.{name}({', '.join(args[:npos] + keywords)})", where)
        elif k == ALLOC:
            _, slot, mem, shape, d, tname, where = ev
            fn = "sbuf_tile" if mem == "SBUF" else "psum_tile"
            src.line(depth, f"E[{slot}] = nc.{fn}({shape!r}, {src.const(d)}, name={src.const(tname)})", where)
        elif k == FREE:
            ref = ev[1]
            if isinstance(ref, int):
                src.line(depth, f"E[{ref}] = None", None)
            else:
                src.line(depth, f"RELEASE({src.tile(ref)})", None)
        elif k == VIEW:
            _, vid, base, parts, where = ev
            base_expr = src.tensor(base[1]) if base[0] == "H" else src.desc(base)
            view = direct.get(vid) or f"{base_expr}[{src.key(parts)}]"
            if vid in inline_ok:
                inline[vid] = view
                continue
            src.line(depth, f"V{vid} = {view}", where)
        elif k == BCAST:
            _, vid, base_vid, partitions, where = ev
            src.line(depth, f"V{vid} = V{base_vid}.broadcast({partitions})", where)
        elif k == ENTER:
            src.line(depth, f"SIN({src.const(ev[1])}, {src.const(ev[2])})", None)
        elif k == EXIT:
            src.line(depth, "SOUT()", None)
        elif k == LOOP:
            _loop(src, ev[1], depth)
        emitted = True
        for vid in drop_after.get(i, ()):
            src.line(depth, f"V{vid} = None", None)
    if not emitted:
        src.line(depth, "pass", None)


def _loop(src: Source, node: LoopNode, depth: int) -> None:
    """Emit a loop met while tracing (affine: a for loop over both passes; sequential: unrolled)."""
    src.n_loops += 1
    name = f"i{src.n_loops}"
    if node.kind == AFFINE:
        src.names[node.var] = name
        src.line(depth, f"for {name} in LOOP({node.n}):", node.where, True)
        moves = entry_moves(node) if len(node.bodies) == 2 else None
        if len(node.bodies) == 1:
            _body(src, node.bodies[0], depth + 1)
        elif moves is not None:  # one body for every iteration: the first one set up to free what pass 1 did
            src.lines.pop()
            for t2, t1 in moves:
                src.line(depth, f"E[{t2}] = E[{t1}]; E[{t1}] = None", None, True)
            src.line(depth, f"for {name} in LOOP({node.n}):", node.where, True)
            head = len(src.lines)
            _body(src, node.bodies[1], depth + 1)
            # only the previous iteration's tiles the body names need moving (the others are released already)
            named = {int(x) for text, _ in src.lines[head:] for x in SLOT.findall(text)}
            rotate = [(s1, s2) for s1, s2 in node.pairs if s1 in named]
            if rotate:
                lines = [(f"{'    ' * (depth + 1)}if {name}:", 0)]
                lines += [(f"{'    ' * (depth + 2)}E[{s1}] = E[{s2}]; E[{s2}] = None", 0) for s1, s2 in rotate]
                src.lines[head:head] = lines
        else:
            src.line(depth + 1, f"if {name} == 0:", node.where, True)
            _body(src, node.bodies[0], depth + 2)
            src.line(depth + 1, "else:", node.where, True)
            if node.pairs and node.n > 2:
                src.line(depth + 2, f"if {name} >= 2:", node.where, True)
                for s1, s2 in node.pairs:
                    src.line(depth + 3, f"E[{s1}] = E[{s2}]; E[{s2}] = None", None, True)
            _body(src, node.bodies[1], depth + 2)
        src.names.pop(node.var, None)
        return
    seq = f"s{src.n_loops}"
    if node.n == node.first_n and len(node.bodies) >= 3 and roll(src, node, depth, seq, _body):
        return
    src.line(depth, f"{seq} = SEQ({node.first_n})", node.where, True)
    for body in node.bodies:
        src.line(depth, f"next({seq})", node.where, True)
        _body(src, body, depth)
    if node.n == node.first_n:
        src.line(depth, f"SEQEND({seq})", node.where, True)


def _compile(text: str, lines: list[tuple[str, int]], filename: str, first: int) -> Any:
    """Compile ``text`` (the generated function) with each statement at its kernel line in ``filename``."""
    key = (text, filename, first, tuple(ln for _, ln in lines))  # the same code at other lines is other code
    code = _CODE_CACHE.get(key)
    if code is not None:
        return code
    tree = ast.parse(text)
    line_of = [first] + [ln or first for _, ln in lines]  # generated line 1 is the def
    last = first
    for i, (_, ln) in enumerate(lines, start=1):  # lines without a kernel line take the one before them
        if ln:
            last = ln
        line_of[i] = last
    for node in ast.walk(tree):
        if hasattr(node, "lineno") and node.lineno is not None:
            ln = line_of[min(node.lineno - 1, len(line_of) - 1)]
            node.lineno = ln
            node.end_lineno = ln
    code = compile(tree, filename, "exec")
    if len(_CODE_CACHE) >= _CODE_CACHE_MAX:
        _CODE_CACHE.clear()
    _CODE_CACHE[key] = code
    return code


def generate(rec: Recorder, root: LoopNode) -> tuple[Any, Source]:
    """The compiled expansion of the traced loop ``root`` and its tables (constants, tiles, tensors)."""
    bases = Counter(ev_where.rpartition(":")[0] for ev_where in _wheres(root))
    base = bases.most_common(1)[0][0] if bases else root.where.rpartition(":")[0]
    src = Source(rec, base)
    _loop(src, root, 1)
    src.lines = hoist_views(src.lines)
    # slots as local variables (cheaper than list items), all None at first, handed back at the end
    named = sorted({int(x) for t, _ in src.lines for x in SLOT.findall(t)})
    src.lines[:0] = [(f"    {' = '.join(f'e{k}' for k in named[i:i + 32])} = None", 0)
                     for i in range(0, len(named), 32)]
    src.lines.append((f"    return {{{', '.join(f'{k}: e{k}' for k in named)}}}", 0))
    body = [SLOT.sub(r"e\1", text) for text, _ in src.lines]
    text = "def _expand(nc, R, H, C, TV, HV, LOOP, SEQ, SEQEND, RELEASE, SIN, SOUT):\n" + "\n".join(body) + "\n"
    filename = rec.files.get(base, base)
    first = int(root.where.rpartition(":")[2]) if root.where.rpartition(":")[0] == base else 1
    code = _compile(text, src.lines, filename, first)
    ns: dict[str, Any] = {}
    exec(code, ns)
    return ns["_expand"], src


def _wheres(node: LoopNode) -> Any:
    for body in node.bodies:
        for ev in body:
            k = ev[0]
            if k == OP:
                yield ev[2]
            elif k == ALLOC:
                yield ev[6]
            elif k in (VIEW, BCAST):
                yield ev[4]
            elif k == LOOP:
                yield ev[1].where
                yield from _wheres(ev[1])


def expand(ctx: KernelContext, rec: Recorder, root: LoopNode) -> None:
    """Issue every iteration of the traced loop ``root``; the tiles the kernel holds become the last instances."""
    from tracer.sim.context import Scope, loop_range

    fn, src = generate(rec, root)
    if ctx.fast is not None:  # the fast path cuts its segments for the run ahead from the start
        ctx.fast.expect(instruction_count(root, INSTRUCTIONS_ISSUED))
    slots: list[Any] = [None] * len(rec.slots)
    scopes: list[Any] = []

    def loop(n: int) -> Any:
        fast = ctx.fast
        if fast is None:
            return iter(range(n))
        return iter(loop_range(fast, range(n), sys._getframe(1)))  # SEQEND takes what a loop left of it

    def seq_end(it: Any) -> None:
        for _ in it:  # the final step: the fast path's end-of-loop marker
            pass

    def release(tile: Tile) -> None:
        ctx.release_tile(tile)

    def scope_in(category: str, name: str) -> None:
        s = Scope(ctx, category, name)
        s.__enter__()
        scopes.append(s)

    def scope_out() -> None:
        scopes.pop().__exit__(None, None, None)

    live = fn(ctx, src.tiles, src.tensors, src.consts, TileView, HbmView, loop, loop, seq_end, release, scope_in,
              scope_out)
    for k, inst in live.items():
        slots[k] = inst
    live.clear()
    _concretise(rec, slots)


def _concretise(rec: Recorder, slots: list[Any]) -> None:
    """Turn the symbolic tiles the kernel still holds into their last instances."""
    for info in rec.slots:
        obj = info.obj()
        if obj is None or type(obj) is not SymTile:
            continue
        inst = slots[obj.uid]
        if inst is None:  # cannot happen after the analysis: every held tile has a live last instance
            raise RuntimeError(f"trnprof: symbolic tile {obj.name} ({obj.loc}) has no instance after expansion")
        slots[obj.uid] = None
        for name in ("block", "name", "uid", "data", "written", "full_written", "loc"):
            setattr(obj, name, getattr(inst, name))
        obj.__class__ = Tile
        inst.__class__ = DeadTile
    slots.clear()  # instances nothing refers to any more are released here


__all__ = ["expand", "generate"]
