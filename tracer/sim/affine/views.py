"""Slices whose bounds depend on a symbolic loop index: ``x[i * 128:(i + 1) * 128, :]``, ``t[:, j * 512:...]``.

While an affine body is traced, slicing an HBM tensor or a tile with an affine bound makes a :class:`SymView`
and records a VIEW event (the slice is checked against the tensor or tile, with the same error messages, when the
iteration that makes it runs).  A slice's *size* must not depend on the index (tile shapes are static in NKI).
"""

from __future__ import annotations

from typing import Any

from tracer.errors import KernelError
from tracer.sim.affine.index import Affine, bound, is_symbolic


def has_symbolic(key: Any) -> bool:
    """True when an index or slice bound in ``key`` is a symbolic loop index."""
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if isinstance(k, slice):
            if is_symbolic(k.start) or is_symbolic(k.stop) or is_symbolic(k.step):
                return True
        elif is_symbolic(k):
            return True
    return False


def normalise(part: Any, where: str, axis: str) -> tuple[Any, ...]:
    """One axis of a key as ``("s", start, stop)`` or ``("i", index)`` with symbolic bounds kept."""
    if isinstance(part, slice):
        if part.step is not None and not (isinstance(part.step, int) and part.step == 1):
            raise KernelError(f"{where}: strided slices are not supported ({axis} step {part.step!r})")
        return ("s", bound(part.start), bound(part.stop))
    if isinstance(part, Affine) or (isinstance(part, int) and not isinstance(part, bool)):
        return ("i", bound(part))
    raise KernelError(f"{where}: index {part!r} on the {axis} must be an int or a slice")


def extent(part: tuple[Any, ...], size: int, where: str, axis: str) -> int:
    """The number of elements ``part`` selects on an axis of ``size`` (must not depend on a loop index)."""
    if part[0] == "i":
        return 1
    if not isinstance(part[1], Affine) and not isinstance(part[2], Affine):
        start, stop, _ = slice(part[1], part[2]).indices(size)
        if stop <= start:
            raise KernelError(f"{where}: empty slice {part[1]!r}:{part[2]!r} on the {axis}")
        return stop - start
    start = 0 if part[1] is None else part[1]
    stop = size if part[2] is None else part[2]
    n = bound(stop - start)
    if isinstance(n, Affine):
        raise KernelError(f"{where}: the size of a slice on the {axis} depends on the loop index ({part[1]!r}:"
                          f"{part[2]!r}); slices must have a fixed size (tile shapes are static)")
    if not isinstance(n, int) or n <= 0:
        raise KernelError(f"{where}: empty slice {part[1]!r}:{part[2]!r} on the {axis}")
    return n


def key_of(parts: tuple[tuple[Any, ...], ...]) -> tuple[Any, Any]:
    """Rebuild a key from normalised parts (bounds must be plain ints now)."""
    out = []
    for p in parts:
        out.append(slice(p[1], p[2]) if p[0] == "s" else p[1])
    return tuple(out)  # type: ignore[return-value]


class SymView:
    """A slice with a symbolic bound (of an HBM tensor, a tile, or another such slice), made while tracing.

    It knows its shape, memory and dtype (so the kernel's Python can inspect them); its bounds become concrete
    when an iteration runs.
    """

    __slots__ = ("bcast", "ctx", "dtype", "mem", "parts", "shape", "source", "tensor", "tile", "vid", "where")

    def __init__(self, ctx: Any, vid: int, source: Any, parts: tuple[tuple[Any, ...], ...], shape: tuple[int, int],  # noqa: PLR0917
                 mem: str, dtype: Any, where: str, *, tile: Any = None, tensor: Any = None, bcast: int = 0) -> None:
        self.ctx = ctx
        self.vid = vid
        self.source = source
        self.parts = parts
        self.shape = shape
        self.mem = mem
        self.dtype = dtype
        self.where = where
        self.tile = tile
        self.tensor = tensor
        self.bcast = bcast

    def __getitem__(self, key: Any) -> SymView:
        return self.ctx.symrec.view(self, key, self.ctx.caller_location())

    def broadcast(self, partitions: int) -> SymView:
        """This one-row HBM slice repeated on ``partitions`` partitions (see :meth:`HbmView.broadcast`)."""
        return self.ctx.symrec.broadcast(self, partitions, self.ctx.caller_location())

    def __repr__(self) -> str:
        what = self.tensor.name if self.tensor is not None else getattr(self.tile, "name", "?")
        return f"<symbolic slice of {what} {self.shape[0]}x{self.shape[1]}: {self.parts}>"
