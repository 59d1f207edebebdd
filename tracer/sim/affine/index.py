"""Symbolic loop indices: what ``for i in nc.affine_range(n)`` yields while the loop body is traced.

As in NKI, ``i`` is not a Python int but an affine expression of loop variables: ``i * 128 + 64``,
``(i * 128) // 64`` (= ``2 * i``), ``j * 512 + i`` stay affine and can be used in slices of HBM tensors and tiles.
Anything that needs the index's *value* while the body is traced -- ``if i == 0``, ``min(128, rows - i)``,
``range(i)``, ``some_list[i]``, ``f"x{i}"`` -- raises a :class:`~tracer.errors.KernelError` naming the kernel line
and suggesting ``nc.sequential_range`` or a plain ``range`` (whose indices are concrete ints).

After its loop has ended, a loop variable takes its last value (as a Python loop variable does), so expressions
kept past the loop behave like ints again.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tracer.errors import KernelError
from tracer.sim.kernel_sources import kernel_frame

_HINT = ("loop indices of nc.affine_range are symbolic while the body is traced once (as in NKI): use "
         "nc.sequential_range(...) or a plain range(...) for a loop whose body needs the index's value")


def _where(depth: int = 2) -> str:
    # the kernel's line, not the simulator's (a tile shape made of a loop index is refused in its shape check)
    f = kernel_frame(sys._getframe(depth))
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"


class LoopVar:
    """The iteration counter of one traced loop (0, 1, ..., n-1); ``value`` is set once the loop has ended."""

    __slots__ = ("n", "name", "uid", "value")
    _count = 0

    def __init__(self, n: int, name: str = "i") -> None:
        LoopVar._count += 1
        self.uid = LoopVar._count
        self.n = n
        #: How error messages show it: i for the outermost traced loop, j, k, ... for loops nested in it.
        self.name = name
        self.value: int | None = None

    def __repr__(self) -> str:
        return self.name


def _combine(a: dict[LoopVar, int], b: dict[LoopVar, int], sign: int) -> dict[LoopVar, int]:
    out = dict(a)
    for v, coef in b.items():
        c = out.get(v, 0) + sign * coef
        if c:
            out[v] = c
        else:
            out.pop(v, None)
    return out


class Affine:
    """``const + sum(coef * var)`` over loop variables (integers only)."""

    __slots__ = ("const", "terms")

    def __init__(self, terms: dict[LoopVar, int], const: int = 0) -> None:
        self.terms = terms
        self.const = const

    # -- construction ---------------------------------------------------------------------------------------
    @staticmethod
    def make(terms: dict[LoopVar, int], const: int) -> Affine | int:
        """An Affine, folding variables whose loop has ended; a plain int when nothing symbolic is left."""
        live: dict[LoopVar, int] = {}
        for v, c in terms.items():
            if v.value is not None:
                const += c * v.value
            elif c:
                live[v] = c
        return Affine(live, const) if live else const

    def _other(self, x: Any, op: str) -> tuple[dict[LoopVar, int], int]:
        if isinstance(x, Affine):
            return x.terms, x.const
        if isinstance(x, int) and not isinstance(x, bool):
            return {}, x
        if hasattr(x, "__index__") and not isinstance(x, float):
            try:
                return {}, x.__index__()
            except TypeError:
                pass
        raise KernelError(f"{_where(3)}: a loop index can only be combined with ints (here {op} "
                          f"{type(x).__name__}); {_HINT}")

    def __add__(self, x: Any) -> Affine | int:
        t, c = self._other(x, "+")
        return Affine.make(_combine(self.terms, t, 1), self.const + c)

    __radd__ = __add__

    def __sub__(self, x: Any) -> Affine | int:
        t, c = self._other(x, "-")
        return Affine.make(_combine(self.terms, t, -1), self.const - c)

    def __rsub__(self, x: Any) -> Affine | int:
        t, c = self._other(x, "-")
        return Affine.make(_combine(t, self.terms, -1), c - self.const)

    def __neg__(self) -> Affine | int:
        return Affine.make({v: -c for v, c in self.terms.items()}, -self.const)

    def __pos__(self) -> Affine:
        return self

    def __mul__(self, x: Any) -> Affine | int:
        t, c = self._other(x, "*")
        if t:
            raise KernelError(f"{_where()}: the product of two loop indices is not affine; {_HINT}")
        return Affine.make({v: k * c for v, k in self.terms.items()}, self.const * c)

    __rmul__ = __mul__

    def _divisor(self, x: Any, op: str) -> int:
        t, c = self._other(x, op)
        if t or c <= 0:
            raise KernelError(f"{_where(3)}: a loop index can only be divided by a positive int constant "
                              f"(here {op} {x!r}); {_HINT}")
        if any(k % c for k in self.terms.values()):
            raise KernelError(f"{_where(3)}: {self!r} {op} {c} is not affine in the loop index (a coefficient is "
                              f"not a multiple of {c}); {_HINT}")
        return c

    def __floordiv__(self, x: Any) -> Affine | int:
        c = self._divisor(x, "//")
        return Affine.make({v: k // c for v, k in self.terms.items()}, self.const // c)

    def __mod__(self, x: Any) -> int:
        c = self._divisor(x, "%")
        return self.const % c

    # -- what is refused while the loop is traced: anything needing the value ------------------------------------
    def _value(self) -> int | None:
        """The value once every loop variable in it has ended (a loop variable keeps its last value), else None."""
        total = self.const
        for v, c in self.terms.items():
            if v.value is None:
                return None
            total += c * v.value
        return total

    def _refuse(self, what: str, depth: int = 3) -> KernelError:
        return KernelError(f"{_where(depth)}: {what} a symbolic loop index ({self!r}); {_HINT}")

    def _need(self, what: str) -> int:
        v = self._value()
        if v is None:
            raise self._refuse(what, 4)
        return v

    def __bool__(self) -> bool:
        return bool(self._need("branching on"))

    def __index__(self) -> int:
        return self._need("using as a Python int (list index, range bound, ...)")

    def __int__(self) -> int:
        return self._need("converting to int")

    def __float__(self) -> float:
        return float(self._need("using as a number value"))

    def __str__(self) -> str:
        return str(self._need("formatting"))

    def __format__(self, spec: str) -> str:
        return format(self._need("formatting"), spec)

    def __hash__(self) -> int:
        return hash(self._need("hashing"))

    def _compare(self, x: object, op: str) -> bool:
        v = self._value()
        other = x._value() if isinstance(x, Affine) else x
        if v is None or other is None:
            raise self._refuse(f"comparing ({op})", 4)
        return bool({"==": v == other, "!=": v != other, "<": v < other, "<=": v <= other,  # type: ignore[operator]
                     ">": v > other, ">=": v >= other}[op])  # type: ignore[operator]

    def __eq__(self, x: object) -> bool:
        return self._compare(x, "==")

    def __ne__(self, x: object) -> bool:
        return self._compare(x, "!=")

    def __lt__(self, x: object) -> bool:
        return self._compare(x, "<")

    def __le__(self, x: object) -> bool:
        return self._compare(x, "<=")

    def __gt__(self, x: object) -> bool:
        return self._compare(x, ">")

    def __ge__(self, x: object) -> bool:
        return self._compare(x, ">=")

    def __truediv__(self, x: Any) -> Any:
        raise self._refuse("true division (/) of")

    __rtruediv__ = __truediv__

    def __pow__(self, x: Any) -> Any:
        raise self._refuse("raising to a power")

    def __repr__(self) -> str:
        parts = [f"{c}*{v.name}" if c != 1 else v.name for v, c in self.terms.items()]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)

    # -- evaluation -------------------------------------------------------------------------------------------
    def coef(self, var: LoopVar) -> int:
        """The coefficient of ``var``."""
        return self.terms.get(var, 0)

    def same(self, other: Any) -> bool:
        """Structural equality (``==`` is refused on symbolic indices)."""
        if not isinstance(other, Affine):
            return False
        return self.const == other.const and self.terms == other.terms


def bound(x: Any) -> Any:
    """``x`` with variables of ended loops folded (an int when nothing symbolic is left)."""
    if isinstance(x, Affine):
        return Affine.make(x.terms, x.const)
    return x


def is_symbolic(x: Any) -> bool:
    """True for an expression that still depends on a loop variable whose loop is being traced."""
    return isinstance(x, Affine) and any(v.value is None for v in x.terms)


def evaluate(x: Any, values: dict[LoopVar, int]) -> Any:
    """``x`` (an Affine, int, or None) with every variable taken from ``values`` (or its final value)."""
    if not isinstance(x, Affine):
        return x
    total = x.const
    for v, c in x.terms.items():
        val = values.get(v)
        if val is None:
            val = v.value
        total += c * val  # type: ignore[operator]
    return total


def depends_on(x: Any, var: LoopVar) -> bool:
    """True when ``x`` has a nonzero coefficient for ``var``."""
    return isinstance(x, Affine) and x.terms.get(var, 0) != 0


def same(a: Any, b: Any) -> bool:
    """Structural equality of two bounds (ints, None, or Affine)."""
    if isinstance(a, Affine) or isinstance(b, Affine):
        return isinstance(a, Affine) and a.same(b)
    return a == b and type(a) is type(b)


def span(x: Any, ranges: dict[LoopVar, int]) -> tuple[int, int]:
    """(min, max) of ``x`` over every variable ``v`` in 0..ranges[v]-1 (others at their final value)."""
    if not isinstance(x, Affine):
        return x, x
    lo = hi = x.const
    for v, c in x.terms.items():
        n = ranges.get(v)
        if n is None:
            lo += c * (v.value or 0)
            hi += c * (v.value or 0)
            continue
        top = c * (n - 1)
        lo += min(0, top)
        hi += max(0, top)
    return lo, hi


def var_name(depth: int) -> str:
    """The display name of the loop variable of a traced loop nested ``depth`` deep (0: outermost)."""
    return "ijklmnpq"[depth] if depth < 8 else f"i{depth}"
