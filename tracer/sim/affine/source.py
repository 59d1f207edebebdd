"""The text of a generated loop-nest expansion (:mod:`tracer.sim.affine.codegen` writes it through this).

A :class:`Source` holds the generated function's statements, each with the kernel line it stands for (so the
compiled code reports the kernel's own file and lines), and the tables the statements index: constants (``C``),
tiles from before the loop (``R``) and HBM tensors (``H``).  It turns the trace's argument descriptors into
expressions: affine slice bounds into integer expressions of the iteration counters in scope, and slices that are
in range in every iteration into views built directly (``HV(...)`` / ``TV(...)``) instead of parsing the key.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

from tracer.sim.affine.index import Affine
from tracer.sim.affine.recorder import Recorder


class Source:
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
        return f"R[{_entry(self.tiles, self.tile_ids, obj)}]"

    def tensor(self, t: Any) -> str:
        """The expression of an HBM tensor."""
        return f"H[{_entry(self.tensors, self.tensor_ids, t)}]"

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

    def _bounds(self, parts: tuple[tuple[Any, ...], ...], shape: tuple[int, int],
                offsets: tuple[int, int] = (0, 0)) -> list[str] | None:
        """``[r0, r1, c0, c1]`` expressions of the 2-D key ``parts`` on a region of ``shape`` starting at
        ``offsets``, when it is a non-empty fixed-size rectangle in range in every iteration, else None (the
        slicing itself then reports the error or applies Python's rules for negative bounds)."""
        if len(parts) != 2:
            return None
        out = []
        for p, size, off in zip(parts, shape, offsets, strict=True):
            if p[0] == "s":
                start = 0 if p[1] is None else p[1]
                stop = size if p[2] is None else p[2]
            else:  # an index: no arithmetic on it here, which would fold the (ended) loops' variables
                start = p[1]
                stop = Affine(dict(start.terms), start.const + 1) if isinstance(start, Affine) else start + 1
            lo, _ = self.span(start)
            _, hi = self.span(stop)
            if isinstance(start, Affine) or isinstance(stop, Affine):
                same = isinstance(start, Affine) and isinstance(stop, Affine) and start.terms == stop.terms
                if not same:
                    return None
                n = stop.const - start.const
            else:
                n = stop - start
            if n <= 0 or lo < 0 or hi > size:
                return None
            if off:
                out += [f"({off} + {self.expr(start)})", f"({off} + {self.expr(stop)})"]
            else:
                out += [self.expr(start), self.expr(stop)]
        return out

    def hbm_view(self, tensor: Any, parts: tuple[tuple[Any, ...], ...]) -> str | None:
        """``HV(tensor, r0, r1, c0, c1, 0)`` for a slice of an HBM tensor that is in range in every iteration (what
        ``tensor[key]`` makes, without parsing the key), else None."""
        out = self._bounds(parts, tensor.shape)
        return None if out is None else f"HV({self.tensor(tensor)}, {', '.join(out)}, 0)"

    def tile_view(self, base: tuple[Any, ...], parts: tuple[tuple[Any, ...], ...]) -> str | None:
        """``TV(tile, p0, p1, f0, f1)`` for a slice of a whole tile (``("T", ref)``) or of a fixed region of one
        (``("V", ref, p0, p1, f0, f1)``) that is in range in every iteration (what ``tile[key]`` makes, without
        parsing the key), else None."""
        ref = base[1]
        if isinstance(ref, int):
            shape = self.rec.slots[ref].event[3]
        else:
            obj = ref() if isinstance(ref, weakref.ref) else ref
            if obj is None:
                return None
            shape = obj.shape
        offsets = (0, 0)
        if base[0] == "V":
            _k, _r, p0, p1, f0, f1 = base
            shape, offsets = (p1 - p0, f1 - f0), (p0, f0)
        out = self._bounds(parts, shape, offsets)
        return None if out is None else f"TV({self.tile(ref)}, {', '.join(out)})"

    def key(self, parts: tuple[tuple[Any, ...], ...]) -> str:
        out = []
        for p in parts:
            if p[0] == "s":
                out.append(f"{self.expr(p[1])}:{self.expr(p[2])}")
            else:
                out.append(self.expr(p[1]))
        return ", ".join(out)


def _entry(table: list[Any], index: dict[int, int], obj: Any) -> int:
    """The position of ``obj`` in ``table`` (by identity), appended on first use."""
    k = index.get(id(obj))
    if k is None:
        k = index[id(obj)] = len(table)
        table.append(obj)
    return k
