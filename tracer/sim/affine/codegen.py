"""Expanding a traced ``nc.affine_range`` loop nest: the trace compiled to the Python loop nest it stands for.

After tracing and checking (:mod:`tracer.sim.affine.analysis`), the outermost loop's events become one generated
function: a ``for`` loop per affine loop (its first iteration runs the events of pass 1, later ones those of pass
2), sequential loops unrolled (their iterations were recorded one by one), every operation a call of the kernel
API with concrete operands -- symbolic slice bounds become integer expressions of the iteration counters.  The
generated code carries the kernel's own line numbers and file (so ``caller_location``, error messages and the
loop fast path's call sites are those of real code), and the loops are ``_Loop`` objects, so the fast path
(:mod:`tracer.sim.fastpath`) segments, records and replays the expansion as it would the kernel's own loops.

Tiles: each allocation stores its instance in ``E[slot]`` (a local variable ``e<slot>`` in the compiled code); a
release recorded while tracing is ``E[slot] = None``
(the last reference: the instance is freed by reference counting at exactly the point the kernel dropped it).
Iteration ``k >= 2`` of an affine loop first moves the previous iteration's instances from the pass-2 slots to
their pass-1 twins (the loop's ``pairs``), because pass 2's events name the previous iteration's tiles by their
pass-1 slots.  This is NKI's per-iteration tile allocation (a rotating buffer): each iteration allocates its own
tile, freed when the kernel's Python would have dropped it, so the allocator sees what concrete execution does.
"""

from __future__ import annotations

import ast
import math
import re
import sys
import weakref
from collections import Counter
from typing import TYPE_CHECKING, Any

from tracer.sim.affine.events import AFFINE, ALLOC, BCAST, ENTER, EXIT, FREE, LOOP, OP, VIEW, LoopNode, iter_events
from tracer.sim.affine.index import Affine
from tracer.sim.affine.recorder import ALLOCS, OPS, Recorder
from tracer.sim.memory import DeadTile, HbmView, SymTile, Tile, TileView

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


class _Source:
    """The generated function being written: lines, each with the kernel line it stands for."""

    def __init__(self, rec: Recorder, base: str) -> None:
        self.rec = rec
        self.base = base
        self.lines: list[tuple[str, int]] = []
        self.consts: list[Any] = []
        self.const_ids: dict[Any, int] = {}
        self.tiles: list[Any] = []
        self.tile_ids: dict[int, int] = {}
        self.tensors: list[Any] = []
        self.tensor_ids: dict[int, int] = {}
        self.names: dict[Any, str] = {}
        self.n_loops = 0

    # -- lines -------------------------------------------------------------------------------------------------
    def line(self, depth: int, text: str, where: str | None, structural: bool = False) -> None:
        """Add a statement; ``where`` (``file.py:LINE``) is the kernel line it comes from (``structural``: a loop
        or branch header, which names no location)."""
        lineno = 0
        foreign = None
        if where is not None:
            base, _, num = where.rpartition(":")
            if base == self.base:
                lineno = int(num)
            elif not structural:
                foreign = where
        if foreign is not None:  # another file: caller_location reads the location from the context
            self.lines.append((f"{'    ' * depth}nc.cl_loc = {self.const(foreign)}", 0))
            self.lines.append((f"{'    ' * depth}{text}", 0))
            self.lines.append((f"{'    ' * depth}nc.cl_loc = None", 0))
        else:
            self.lines.append((f"{'    ' * depth}{text}", lineno))

    # -- operands ----------------------------------------------------------------------------------------------
    def const(self, value: Any) -> str:
        """A Python expression for a constant argument."""
        # strings go to the table: digits inside a literal must never look like an integer of the code (the
        # rolling of sequential loops rewrites those)
        if value is None or isinstance(value, bool) or (type(value) is int) or \
                (type(value) is float and math.isfinite(value) and "e" not in repr(value)):
            return repr(value)
        if isinstance(value, tuple) and all(type(v) is int for v in value):
            return repr(value)
        key = (type(value), value) if type(value) in (str, float) else id(value)  # equal values: one entry
        k = self.const_ids.get(key)
        if k is None:
            k = self.const_ids[key] = len(self.consts)
            self.consts.append(value)
        return f"C[{k}]"

    def tile(self, ref: Any) -> str:
        """The expression of a tile reference (a slot, or a weak reference to a tile from before the loop)."""
        if isinstance(ref, int):
            return f"E[{ref}]"
        obj = ref() if isinstance(ref, weakref.ref) else ref
        k = self.tile_ids.get(id(obj))
        if k is None:
            k = self.tile_ids[id(obj)] = len(self.tiles)
            self.tiles.append(obj)
        return f"R[{k}]"

    def tensor(self, t: Any) -> str:
        """The expression of an HBM tensor."""
        k = self.tensor_ids.get(id(t))
        if k is None:
            k = self.tensor_ids[id(t)] = len(self.tensors)
            self.tensors.append(t)
        return f"H[{k}]"

    def expr(self, x: Any) -> str:
        """An integer expression of the iteration counters in scope (None for an absent slice bound)."""
        if x is None:
            return ""
        if not isinstance(x, Affine):
            return f"({int(x)})"
        parts = [repr(x.const)] if x.const else []
        const = 0
        for v, c in x.terms.items():
            name = self.names.get(v)
            if name is None:  # a variable of a loop that has ended
                const += c * (v.value or 0)
            else:
                parts.append(f"{c}*{name}")
        if const:
            parts.append(repr(const))
        return "(" + " + ".join(parts or ["0"]) + ")"

    def desc(self, d: tuple[Any, ...]) -> str:
        """The expression of an argument descriptor (see tracer.sim.affine.events)."""
        k = d[0]
        if k == "T":
            return self.tile(d[1])
        if k == "V":
            return f"TV({self.tile(d[1])}, {d[2]}, {d[3]}, {d[4]}, {d[5]})"
        if k == "SV":
            return f"V{d[1]}"
        if k == "H":
            return self.tensor(d[1])
        if k == "HV":
            return f"HV({self.tensor(d[1])}, {d[2]}, {d[3]}, {d[4]}, {d[5]}, {d[6]})"
        return self.const(d[1])

    def span(self, x: Any) -> tuple[int, int]:
        """(min, max) of a bound over every iteration of the loops in scope (ended loops at their last value)."""
        if not isinstance(x, Affine):
            return int(x), int(x)
        lo = hi = x.const
        for v, c in x.terms.items():
            if v in self.names:
                top = c * (v.n - 1)
                lo += min(0, top)
                hi += max(0, top)
            else:
                lo += c * (v.value or 0)
                hi += c * (v.value or 0)
        return lo, hi

    def hbm_view(self, tensor: Any, parts: tuple[tuple[Any, ...], ...]) -> str | None:
        """``HV(tensor, r0, r1, c0, c1, 0)`` for a slice of an HBM tensor that is in range in every iteration (what
        ``tensor[key]`` makes, without parsing the key), else None (the slicing itself reports the error)."""
        out = []
        for p, size in zip(parts, tensor.shape, strict=True):
            if p[0] == "s":
                start = 0 if p[1] is None else p[1]
                stop = size if p[2] is None else p[2]
            else:
                start, stop = p[1], p[1] + 1
            lo, _ = self.span(start)
            _, hi = self.span(stop)
            n = stop - start
            if isinstance(n, Affine) or n <= 0 or lo < 0 or hi > size:
                return None
            out += [self.expr(start), self.expr(stop)]
        return f"HV({self.tensor(tensor)}, {', '.join(out)}, 0)"

    def key(self, parts: tuple[tuple[Any, ...], ...]) -> str:
        out = []
        for p in parts:
            if p[0] == "s":
                out.append(f"{self.expr(p[1])}:{self.expr(p[2])}")
            else:
                out.append(self.expr(p[1]))
        return ", ".join(out)


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


def _body(src: _Source, body: list[tuple[Any, ...]], depth: int) -> None:
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
    # a slice of an HBM tensor used once, by the next operation, on the same kernel line: written into the call
    inline_ok = set()
    for i, ev in enumerate(body[:-1]):
        nxt = body[i + 1]
        if ev[0] == VIEW and ev[2][0] == "H" and uses.get(ev[1]) == 1 and nxt[0] == OP and nxt[2] == ev[4] and \
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
            view = (src.hbm_view(base[1], parts) if base[0] == "H" and len(parts) == 2 else None) or \
                f"{base_expr}[{src.key(parts)}]"
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


def _loop(src: _Source, node: LoopNode, depth: int) -> None:
    """Emit a loop met while tracing (affine: a for loop over both passes; sequential: unrolled)."""
    src.n_loops += 1
    name = f"i{src.n_loops}"
    if node.kind == AFFINE:
        src.names[node.var] = name
        src.line(depth, f"for {name} in LOOP({node.n}):", node.where, True)
        moves = _entry_moves(node) if len(node.bodies) == 2 else None
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
            named = {int(x) for text, _ in src.lines[head:] for x in _SLOT.findall(text)}
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
    if node.n == node.first_n and len(node.bodies) >= 3 and _rolled(src, node, depth, seq):
        return
    src.line(depth, f"{seq} = SEQ({node.first_n})", node.where, True)
    for body in node.bodies:
        src.line(depth, f"next({seq})", node.where, True)
        _body(src, body, depth)
    if node.n == node.first_n:
        src.line(depth, f"SEQEND({seq})", node.where, True)


#: Integers that may vary between a sequential loop's iterations (not table indices such as ``E[3]``, ``C[0]``).
_NUMBER = re.compile(r"(?<![\w.\[])-?\d+(?![\w.])")
_SLOT = re.compile(r"E\[(\d+)\]")
_VIEW = re.compile(r"\bV(\d+)\b")


def _allocs(body: list[tuple[Any, ...]]) -> tuple[list[int], list[int]]:
    """Slots allocated and views made by ``body`` (nested loops included), in order."""
    slots, views = [], []
    for ev in iter_events(body):
        if ev[0] == ALLOC:
            slots.append(ev[1])
        elif ev[0] in (VIEW, BCAST):
            views.append(ev[1])
    return slots, views


def _freed(body: list[tuple[Any, ...]]) -> set[Any]:
    return {ev[1] for ev in iter_events(body) if ev[0] == FREE and isinstance(ev[1], int)}


def _rolled(src: _Source, node: LoopNode, depth: int, seq: str) -> bool:
    """Emit the sequential loop ``node`` as a Python loop when its recorded iterations 1, 2, ... differ only in
    integers that grow linearly (slice bounds of the index) and in which tiles they allocate; False otherwise.

    Iteration 0 keeps its own code; iteration ``k >= 2`` first moves iteration ``k - 1``'s tiles to the slots
    iteration 0's tiles had (iteration 1's code names the previous iteration's tiles by those), as for affine
    loops; afterwards the last two iterations' tiles move to the slots the code after the loop names them by.
    """
    bodies = node.bodies
    allocs = [_allocs(b) for b in bodies]
    freed = [_freed(b) for b in bodies]
    for k in range(len(bodies) - 2):  # a tile must be dropped by the end of the next iteration
        if any(t not in freed[k] and t not in freed[k + 1] for t in allocs[k][0]):
            return False
    base_loops = src.n_loops
    saved = src.lines
    texts: list[list[tuple[str, int]]] = []
    top = base_loops
    try:
        for body in bodies:
            src.lines = []
            src.n_loops = base_loops
            _body(src, body, depth + 1)
            top = max(top, src.n_loops)
            texts.append(src.lines)
    finally:
        src.lines = saved
        src.n_loops = top
    skeleton = None
    normal1: list[str] = []
    numbers: list[list[int]] = []
    for k in range(1, len(bodies)):
        own = {t: i for i, t in enumerate(allocs[k][0])}
        prev = {t: i for i, t in enumerate(allocs[k - 1][0])}
        own_views = {v: i for i, v in enumerate(allocs[k][1])}
        prev_views = set(allocs[k - 1][1])

        def slot(m: re.Match[str], own: dict[int, int] = own, prev: dict[int, int] = prev) -> str:
            t = int(m.group(1))
            if t in own:
                return f"E[A{own[t]}]"
            if t in prev:
                return f"E[P{prev[t]}]"
            return m.group(0)

        def view(m: re.Match[str], own_views: dict[int, int] = own_views, prev_views: set[int] = prev_views) -> str:
            v = int(m.group(1))
            if v in prev_views:
                raise _NotUniform
            return f"VW{own_views[v]}" if v in own_views else m.group(0)

        try:
            lines = [_VIEW.sub(view, _SLOT.sub(slot, t)) for t, _ in texts[k]]
        except _NotUniform:
            return False
        if k == 1:
            normal1 = lines
        text = "\n".join(lines)
        nums = [int(x) for x in _NUMBER.findall(text)]
        skel = _NUMBER.sub("#", text)
        if skeleton is None:
            skeleton = skel
        elif skel != skeleton or len(nums) != len(numbers[0]):
            return False
        numbers.append(nums)
    deltas = [b - a for a, b in zip(numbers[0], numbers[1], strict=True)]
    for k, nums in enumerate(numbers):
        if any(v != v1 + k * d for v, v1, d in zip(nums, numbers[0], deltas, strict=True)):
            return False
    b0, b1 = allocs[0][0], allocs[1][0]
    j = f"j{base_loops}"
    extras: list[tuple[int, str]] = []
    moves = _first_as_later(texts[0], normal1, allocs[0], numbers[0], deltas, extras)
    if moves is not None:  # iteration 1's code runs iteration 0 too, once it holds the tiles iteration 0 used
        for i, x in moves:
            src.line(depth, f"E[{b0[i]}] = E[{x}]; E[{x}] = None", None, True)
        src.line(depth, f"{seq} = SEQ({node.first_n})", node.where, True)
        src.line(depth, f"for {j} in {seq}:", node.where, True)
        rotate = f"if {j}:"
    else:  # iteration 0, then iterations 1.. with iteration 1's code, its integers as functions of the index
        src.line(depth, f"{seq} = SEQ({node.first_n})", node.where, True)
        src.line(depth, f"next({seq})", node.where, True)
        src.lines.extend((("    " * depth) + t[4 * (depth + 1):], ln) for t, ln in texts[0])
        src.line(depth, f"for {j} in {seq}:", node.where, True)
        rotate = f"if {j} >= 2:"
    # only tiles the next iteration names (E[Pi]) move; the others are released within their own iteration
    named_prev = {int(x) for t in normal1 for x in re.findall(r"E\[P(\d+)\]", t)}
    pairs = [(t0, t1) for i, (t0, t1) in enumerate(zip(b0, b1, strict=True)) if i in named_prev]
    if pairs:
        src.line(depth + 1, rotate, node.where, True)
        for t0, t1 in pairs:
            src.line(depth + 2, f"E[{t0}] = E[{t1}]; E[{t1}] = None", None, True)
    it = iter(deltas)
    views1 = allocs[1][1]
    before: dict[int, list[str]] = {}
    if moves is not None:
        for k, e in extras:
            before.setdefault(k, []).append(e)
    for index, (t, (_, ln)) in enumerate(zip(normal1, texts[1], strict=True)):
        for e in before.get(index, ()):
            indent = e[:len(e) - len(e.lstrip())]
            src.lines.append((f"{indent}if not {j}: {e.strip()}", 0))
        pieces = _NUMBER.split(t)
        found = _NUMBER.findall(t)
        out = [pieces[0]]
        for x, rest in zip(found, pieces[1:], strict=True):
            d = next(it)
            out.append(x if d == 0 else f"({int(x) - d} + {d}*{j})")
            out.append(rest)
        line = "".join(out)
        line = re.sub(r"E\[A(\d+)\]", lambda m: f"E[{b1[int(m.group(1))]}]", line)
        line = re.sub(r"E\[P(\d+)\]", lambda m: f"E[{b0[int(m.group(1))]}]", line)
        line = re.sub(r"\bVW(\d+)\b", lambda m: f"V{views1[int(m.group(1))]}", line)
        src.lines.append((line, ln))
    for e in before.get(len(normal1), ()):
        indent = e[:len(e) - len(e.lstrip())]
        src.lines.append((f"{indent}if not {j}: {e.strip()}", 0))
    last, penult = allocs[-1][0], allocs[-2][0]
    for t_last, t1 in zip(last, b1, strict=True):  # the last iteration's tiles, under the names used after it
        src.line(depth, f"E[{t_last}] = E[{t1}]; E[{t1}] = None", None, True)
    for t_pen, t0 in zip(penult, b0, strict=True):
        if t_pen != t0:
            src.line(depth, f"E[{t_pen}] = E[{t0}]; E[{t0}] = None", None, True)
    return True


def _first_as_later(text0: list[tuple[str, int]], normal1: list[str], allocs0: tuple[list[int], list[int]],  # noqa: PLR0917
                    numbers1: list[int], deltas: list[int],
                    extras: list[tuple[int, str]]) -> list[tuple[int, Any]] | None:
    """How iteration 1's code can run iteration 0: ``[(i, x)]`` -- slot ``x`` (a tile from before the loop) plays
    the part of iteration 0's ``i``-th tile (``E[Pi]``, the previous iteration's) -- or None when it cannot.
    ``extras`` receives the releases only iteration 0 makes: (index of the line of iteration 1 they precede, line).
    """
    own = {t: i for i, t in enumerate(allocs0[0])}
    own_views = {v: i for i, v in enumerate(allocs0[1])}
    lines0 = []
    for raw, _ in text0:
        t = _SLOT.sub(lambda m: f"E[A{own[int(m.group(1))]}]" if int(m.group(1)) in own else m.group(0), raw)
        lines0.append(_VIEW.sub(lambda m: f"VW{own_views[int(m.group(1))]}" if int(m.group(1)) in own_views
                                else m.group(0), t))
    # releases of tiles from before the loop that only iteration 0 makes: kept, under ``if j == 0``
    extra_free = re.compile(r"\s*E\[\d+\] = None")
    pairs: list[tuple[str, str]] = []
    extras.clear()
    k = 0
    for a in lines0:
        if k < len(normal1) and _NUMBER.sub("#", _SLOT_ANY.sub("E[]", a)) == \
                _NUMBER.sub("#", _SLOT_ANY.sub("E[]", normal1[k])):
            pairs.append((a, normal1[k]))
            k += 1
        elif extra_free.fullmatch(a):
            extras.append((k, a))
        else:
            return None
    if k != len(normal1):
        return None
    prev = re.compile(r"E\[P(\d+)\]")
    mapping: dict[int, str] = {}
    freed: set[int] = set()
    n0: list[int] = []
    for a, b in pairs:
        pa, pb = _SLOT_ANY.split(a), _SLOT_ANY.split(b)
        sa, sb = _SLOT_ANY.findall(a), _SLOT_ANY.findall(b)
        if len(sa) != len(sb) or len(pa) != len(pb):
            return None
        for x, y in zip(sa, sb, strict=True):
            m = prev.fullmatch(y)
            if m is None:
                if x != y:
                    return None
                continue
            i = int(m.group(1))
            if x.startswith("E[A") or x.startswith("E[P") or mapping.setdefault(i, x) != x:
                return None
        m = re.fullmatch(r"\s*E\[P(\d+)\] = None", b)
        if m is not None:
            freed.add(int(m.group(1)))
        ra, rb = _SLOT_ANY.sub("E[]", a), _SLOT_ANY.sub("E[]", b)
        if _NUMBER.sub("#", ra) != _NUMBER.sub("#", rb):
            return None
        n0.extend(int(v) for v in _NUMBER.findall(ra))
    if len(n0) != len(numbers1) or any(v != v1 - d for v, v1, d in zip(n0, numbers1, deltas, strict=True)):
        return None
    xs = list(mapping.values())
    if len(set(xs)) != len(xs) or set(mapping) - freed or any(e.strip()[:-7] in xs for _, e in extras):
        return None
    return [(i, int(x[2:-1])) for i, x in sorted(mapping.items())]


_SLOT_ANY = re.compile(r"E\[[AP]?\d+\]")


class _NotUniform(Exception):
    """An iteration uses a slice made by the previous one: the loop is not rolled."""


def _entry_moves(node: LoopNode) -> list[tuple[int, int]] | None:
    """How to run pass 2's events for the first iteration too, or None when they cannot stand for pass 1.

    The passes differ only in their releases (the analysis checked the rest): where pass 2 drops the previous
    iteration's tile (a pass-1 slot ``t2``), pass 1 dropped nothing or a tile from before the loop (slot ``t1``).
    Moving ``E[t1]`` to ``E[t2]`` on entry makes iteration 0 free what pass 1 freed, at the same point.
    """
    smap = dict(node.pairs)
    moves: list[tuple[int, int]] = []
    if not _match_bodies(node.bodies[0], node.bodies[1], smap, moves):
        return None
    targets = [t2 for t2, _ in moves]
    sources = [t1 for _, t1 in moves]
    if len(set(targets)) != len(targets) or len(set(sources)) != len(sources):
        return None
    return moves


def _match_bodies(b1: list[tuple[Any, ...]], b2: list[tuple[Any, ...]], smap: dict[int, int],
                  moves: list[tuple[int, int]]) -> bool:
    gaps1, evs1 = _gaps(b1)
    gaps2, evs2 = _gaps(b2)
    if len(evs1) != len(evs2):
        return False
    for g1, g2 in zip(gaps1, gaps2, strict=True):
        if not _match_gap(g1, g2, smap, moves):
            return False
    for e1, e2 in zip(evs1, evs2, strict=True):
        if e1[0] == LOOP:
            n1, n2 = e1[1], e2[1]
            if len(n1.bodies) != len(n2.bodies):
                return False
            for x1, x2 in zip(n1.bodies, n2.bodies, strict=True):
                if not _match_bodies(x1, x2, smap, moves):
                    return False
    return True


def _gaps(body: list[tuple[Any, ...]]) -> tuple[list[list[Any]], list[tuple[Any, ...]]]:
    """The releases before each other event (and after the last), and those other events."""
    gaps: list[list[Any]] = [[]]
    evs = []
    for ev in body:
        if ev[0] == FREE:
            gaps[-1].append(ev[1])
        else:
            evs.append(ev)
            gaps.append([])
    return gaps, evs


def _match_gap(g1: list[Any], g2: list[Any], smap: dict[int, int], moves: list[tuple[int, int]]) -> bool:
    previous = set(smap)  # pass-1 slots: in pass 2 they name the previous iteration's tiles
    j = 0
    for t2 in g2:
        t1 = g1[j] if j < len(g1) else None
        if isinstance(t1, int) and smap.get(t1) == t2:
            j += 1
            continue
        if not (isinstance(t2, int) and t2 in previous):
            return False
        if t1 is not None and not (isinstance(t1, int) and t1 in previous):
            if not isinstance(t1, int):  # a tile from before the loop: released explicitly, not by reference
                return False
            moves.append((t2, t1))
            j += 1
    return j == len(g1)


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


def generate(rec: Recorder, root: LoopNode) -> tuple[Any, _Source]:
    """The compiled expansion of the traced loop ``root`` and its tables (constants, tiles, tensors)."""
    bases = Counter(ev_where.rpartition(":")[0] for ev_where in _wheres(root))
    base = bases.most_common(1)[0][0] if bases else root.where.rpartition(":")[0]
    src = _Source(rec, base)
    _loop(src, root, 1)
    # slots as local variables (cheaper than list items), all None at first, handed back at the end
    named = sorted({int(x) for t, _ in src.lines for x in _SLOT.findall(t)})
    src.lines[:0] = [(f"    {' = '.join(f'e{k}' for k in named[i:i + 32])} = None", 0)
                     for i in range(0, len(named), 32)]
    src.lines.append((f"    return {{{', '.join(f'{k}: e{k}' for k in named)}}}", 0))
    body = [_SLOT.sub(r"e\1", text) for text, _ in src.lines]
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
    from tracer.sim.context import Scope, _Loop

    fn, src = generate(rec, root)
    slots: list[Any] = [None] * len(rec.slots)
    scopes: list[Any] = []

    def loop(n: int) -> Any:
        fast = ctx.fast
        if fast is None:
            return iter(range(n))
        f = sys._getframe(1)
        return _Loop(fast, range(n), (f.f_code, f.f_lasti))

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
