"""Tile views built once per loop instead of once per call: a pass over a generated expansion's statements.

A slice of a tile that is in range in every iteration is written into the generated code as the view it stands
for, ``TV(tile, p0, p1, f0, f1)`` (:meth:`tracer.sim.affine.source.Source.tile_view`), built afresh by every call
that uses it.  In a matmul loop nest most of them are the same view again and again: matmul_rowload's stationary
operands ``TV(E[128], 0, 128, 0, 128)`` do not depend on the two inner loops at all, and each moving operand is
used by ``block_m`` matmuls in a row.  Building a view costs ~0.12 us, about a tenth of what simulating an
instruction costs there.

:func:`hoist_views` moves such a view out of a ``for`` loop of the generated code into a local ``w<k>``: before
the loop when its bounds name no counter of the loop or of the loops inside it, else to the top of the loop's
body when it is used more than once per iteration (or inside an inner loop).  Only when the tile it views is
never assigned inside the loop (no allocation, release or move of that slot there; a tile from before the
expansion, ``R[k]``, is never assigned but may be released there, by ``RELEASE(R[k])``, which counts as
assigned): the view then refers to the same tile wherever the loop would have built it.  Views cannot fail
(their bounds were checked over the whole loop nest when the code was generated), so building one earlier changes
no error.  Every ``w<k>`` is set to None right after its loop: a view holds its tile, and a tile is released when
its last reference goes (:mod:`tracer.sim.affine.codegen`), so the tiles are freed at exactly the statements they
were before (the slot holds the tile for the whole loop anyway).  The trace is the same
(``tests/unit/test_sim_affine_hoist.py``, and the random programs of ``tests/unit/test_sim_affine.py``).
"""

from __future__ import annotations

import re

#: A statement of the generated function and the kernel line it stands for (0: none).
Line = tuple[str, int]

_FOR = re.compile(r"^(\s*)for (\w+) in ")
_ASSIGNED = re.compile(r"E\[(\d+)\] = ")
_RELEASED = re.compile(r"RELEASE\((R\[\d+\])\)")
_NAME = re.compile(r"[A-Za-z_]\w*")
_BASE = re.compile(r"[ER]\[\d+\]$")


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def _block_end(lines: list[Line], head: int) -> int:
    """The index after the last line of the block whose header is ``lines[head]``."""
    depth = _indent(lines[head][0])
    end = head + 1
    while end < len(lines) and _indent(lines[end][0]) > depth:
        end += 1
    return end


def tile_views(text: str) -> list[tuple[str, str, list[str]]]:
    """Every ``TV(base, b0, b1, b2, b3)`` call in ``text``: (the call's text, its base, its four bounds)."""
    out = []
    start = text.find("TV(")
    while start >= 0:
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            depth = 0
            args: list[str] = []
            arg_start = start + 3
            i = start + 2
            while i < len(text):
                c = text[i]
                if c in "([":
                    depth += 1
                elif c in ")]":
                    depth -= 1
                    if depth == 0:
                        args.append(text[arg_start:i].strip())
                        break
                elif c == "," and depth == 1:
                    args.append(text[arg_start:i].strip())
                    arg_start = i + 1
                i += 1
            if depth == 0 and len(args) == 5:
                out.append((text[start:i + 1], args[0], args[1:]))
        start = text.find("TV(", start + 3)
    return out


class _Names:
    """The pass's state: the count of locals made, and each statement's views (a statement is scanned once, not
    once per loop around it)."""

    def __init__(self) -> None:
        self.n = 0
        self.views: dict[str, list[tuple[str, str, list[str]]]] = {}

    def of(self, text: str) -> list[tuple[str, str, list[str]]]:
        found = self.views.get(text)
        if found is None:
            found = self.views[text] = tile_views(text) if "TV(" in text else []
        return found

    def new(self) -> str:
        self.n += 1
        return f"w{self.n}"


def hoist_views(lines: list[Line]) -> list[Line]:
    """``lines`` with the tile views of every ``for`` loop built once (see the module's docstring)."""
    return _hoist(list(lines), _Names())


def _hoist(lines: list[Line], names: _Names) -> list[Line]:
    out: list[Line] = []
    i = 0
    while i < len(lines):
        m = _FOR.match(lines[i][0])
        if m is None:
            out.append(lines[i])
            i += 1
            continue
        end = _block_end(lines, i)
        pre, body, post = _hoist_loop(lines[i + 1:end], m.group(1), m.group(2), names)
        out += pre
        out.append(lines[i])
        out += _hoist(body, names)  # the loops inside: what is left to hoist out of them
        out += post
        i = end
    return out


def _hoist_loop(body: list[Line], indent: str, var: str, names: _Names) -> tuple[list[Line], list[Line], list[Line]]:
    """(statements before the loop, its body, statements after it) with its invariant views hoisted."""
    inner = {m.group(2) for text, _ in body if (m := _FOR.match(text))}
    assigned = {f"E[{x}]" for text, _ in body for x in _ASSIGNED.findall(text)}
    assigned.update(x for text, _ in body for x in _RELEASED.findall(text))  # a tile from before, freed here
    uses: dict[str, int] = {}
    nested: set[str] = set()  # views used inside a loop nested in this one
    invariant: set[str] = set()
    body_depth = _indent(body[0][0]) if body else 0
    loops: list[int] = []  # indentation of the inner loops the current line is in
    for text, _ in body:
        depth = _indent(text)
        while loops and depth <= loops[-1]:
            loops.pop()
        in_loop = bool(loops)
        if _FOR.match(text):
            loops.append(depth)
        for call, base, bounds in names.of(text):
            if _BASE.match(base) is None or base in assigned:
                continue
            used = {n for bound in bounds for n in _NAME.findall(bound)}
            if used & inner:
                continue
            uses[call] = uses.get(call, 0) + 1
            if in_loop:
                nested.add(call)
            if var not in used:
                invariant.add(call)
    before: list[str] = []
    top: list[str] = []
    for call, n in uses.items():  # in order of first use
        if call in invariant:
            before.append(call)
        elif n > 1 or call in nested:
            top.append(call)
    if not before and not top:
        return [], body, []
    local = {call: names.new() for call in before + top}
    new_body = [(_substitute(text, names.of(text), local), ln) for text, ln in body]
    inside = " " * body_depth
    pre = [(f"{indent}{local[c]} = {c}", 0) for c in before]
    head = [(f"{inside}{local[c]} = {c}", 0) for c in top]
    post = [(f"{indent}{' = '.join(local[c] for c in before + top)} = None", 0)]
    return pre, head + new_body, post


def _substitute(text: str, calls: list[tuple[str, str, list[str]]], local: dict[str, str]) -> str:
    """``text`` with each of its view ``calls`` that has a local replaced by that local (a call's text is a whole
    ``TV(...)`` expression, never part of another one)."""
    for call, _base, _bounds in calls:
        name = local.get(call)
        if name is not None:
            text = text.replace(call, name)
    return text
