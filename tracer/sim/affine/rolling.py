"""How iterations share one piece of generated code (see :mod:`tracer.sim.affine.codegen`).

* :func:`entry_moves` -- an affine loop's first iteration runs pass 2's events too, once the tiles pass 1 released
  are moved to the slots pass 2's code names the previous iteration's tiles by;
* :func:`roll` -- a sequential or static loop met while tracing (its iterations recorded one by one) becomes a
  Python loop again when its iterations differ only in integers that grow linearly (slice bounds of the index)
  and in which tiles they allocate; iteration 0 joins the loop the same way, by moves, when it can.

Both work on the generated text of the iterations: slots (``E[k]``) and slices (``Vk``) are renamed by their role
(allocated here, by the previous iteration, or outside) and the remaining integers compared.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tracer.sim.affine.events import ALLOC, BCAST, FREE, LOOP, VIEW, LoopNode, iter_events

#: Integers that may vary between a sequential loop's iterations (not table indices such as ``E[3]``, ``C[0]``).
NUMBER = re.compile(r"(?<![\w.\[])-?\d+(?![\w.])")
SLOT = re.compile(r"E\[(\d+)\]")
VIEW_NAME = re.compile(r"\bV(\d+)\b")


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


EmitBody = Callable[[Any, list[tuple[Any, ...]], int], None]


def roll(src: Any, node: LoopNode, depth: int, seq: str, emit_body: EmitBody) -> bool:
    """Emit the sequential loop ``node`` as a Python loop when its recorded iterations 1, 2, ... differ only in
    integers that grow linearly (slice bounds of the index) and in which tiles they allocate; False otherwise.

    Iteration 1's code runs iterations 1.. (and iteration 0 too when :func:`_first_as_later` finds the moves
    that make it; else iteration 0 keeps its own code); iteration ``k >= 2`` first moves iteration ``k - 1``'s
    tiles to the slots iteration 0's tiles had (iteration 1's code names the previous iteration's tiles by those),
    as for affine loops; afterwards the last two iterations' tiles move to the slots the code after the loop names
    them by.  ``emit_body(src, events, depth)`` writes one iteration's code.
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
            emit_body(src, body, depth + 1)
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
            lines = [VIEW_NAME.sub(view, SLOT.sub(slot, t)) for t, _ in texts[k]]
        except _NotUniform:
            return False
        if k == 1:
            normal1 = lines
        text = "\n".join(lines)
        nums = [int(x) for x in NUMBER.findall(text)]
        skel = NUMBER.sub("#", text)
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
        pieces = NUMBER.split(t)
        found = NUMBER.findall(t)
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
        t = SLOT.sub(lambda m: f"E[A{own[int(m.group(1))]}]" if int(m.group(1)) in own else m.group(0), raw)
        lines0.append(VIEW_NAME.sub(lambda m: f"VW{own_views[int(m.group(1))]}" if int(m.group(1)) in own_views
                                else m.group(0), t))
    # releases of tiles from before the loop that only iteration 0 makes: kept, under ``if j == 0``
    extra_free = re.compile(r"\s*E\[\d+\] = None")
    pairs: list[tuple[str, str]] = []
    extras.clear()
    k = 0
    for a in lines0:
        if k < len(normal1) and NUMBER.sub("#", SLOT_ANY.sub("E[]", a)) == \
                NUMBER.sub("#", SLOT_ANY.sub("E[]", normal1[k])):
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
        pa, pb = SLOT_ANY.split(a), SLOT_ANY.split(b)
        sa, sb = SLOT_ANY.findall(a), SLOT_ANY.findall(b)
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
        ra, rb = SLOT_ANY.sub("E[]", a), SLOT_ANY.sub("E[]", b)
        if NUMBER.sub("#", ra) != NUMBER.sub("#", rb):
            return None
        n0.extend(int(v) for v in NUMBER.findall(ra))
    if len(n0) != len(numbers1) or any(v != v1 - d for v, v1, d in zip(n0, numbers1, deltas, strict=True)):
        return None
    xs = list(mapping.values())
    if len(set(xs)) != len(xs) or set(mapping) - freed or any(e.strip()[:-7] in xs for _, e in extras):
        return None
    return [(i, int(x[2:-1])) for i, x in sorted(mapping.items())]


SLOT_ANY = re.compile(r"E\[[AP]?\d+\]")


class _NotUniform(Exception):
    """An iteration uses a slice made by the previous one: the loop is not rolled."""


def entry_moves(node: LoopNode) -> list[tuple[int, int]] | None:
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
    previous = smap.keys()  # pass-1 slots: in pass 2 they name the previous iteration's tiles (a view: no copy)
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
