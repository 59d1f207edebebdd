"""Memory of the simulated NeuronCore: HBM tensors, SBUF/PSUM tiles and their views (the on-chip allocators are in
:mod:`tracer.sim.allocator`).

* :class:`HbmTensor` — a 2-D kernel input, output or scratch tensor in device memory.
* :class:`Tile` — a 2-D ``[partition, free]`` tile in SBUF or PSUM, backed by a :class:`Block` of the allocator.
  A tile's memory is released when the Python object is garbage (CPython frees it deterministically when the
  last reference goes), like a tile going out of scope in an NKI kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tracer.errors import KernelError
from tracer.sim.affine.views import has_symbolic
from tracer.sim.allocator import Block
from tracer.sim.dtypes import DType

if TYPE_CHECKING:
    from tracer.sim.context import KernelContext

SBUF = "SBUF"
PSUM = "PSUM"
HBM = "HBM"
ALIGN = 64


def _slice_bounds(key: Any, size: int, axis: str, where: str) -> tuple[int, int]:
    if isinstance(key, (int, np.integer)):
        i = int(key)
        if i < 0:
            i += size
        if not 0 <= i < size:
            raise KernelError(f"{where}: index {key} out of range for {axis} of size {size}")
        return i, i + 1
    if not isinstance(key, slice):
        raise KernelError(f"{where}: index {key!r} on the {axis} must be an int or a slice")
    if key.step not in (None, 1):
        raise KernelError(f"{where}: strided slices are not supported ({axis} step {key.step})")
    try:
        start, stop, _ = key.indices(size)
    except TypeError:  # 32.0, "8": a slice takes ints
        bound = next((b for b in (key.start, key.stop) if b is not None and not hasattr(b, "__index__")), key)
        raise KernelError(f"{where}: slice bound {str(bound)[:30]!r} on the {axis} must be an int") from None
    if (key.start is not None and not -size <= int(key.start) <= size) or (
            key.stop is not None and not -size <= int(key.stop) <= size):
        raise KernelError(f"{where}: slice {key.start}:{key.stop} out of range for {axis} of size {size}")
    if stop <= start:
        raise KernelError(f"{where}: empty slice {key.start}:{key.stop} on the {axis}")
    return start, stop


def _split_key(key: Any, where: str) -> tuple[Any, Any]:
    if not isinstance(key, tuple):
        return key, slice(None)
    if len(key) == 1:
        return key[0], slice(None)
    if len(key) != 2:
        raise KernelError(f"{where}: tiles and tensors are 2-D; got {len(key)} indices")
    return key


def _fast_bounds(key: Any, rows: int, cols: int) -> tuple[int, int, int, int] | None:
    """Bounds of ``[a:b, c:d]`` with plain in-range int slices (the common case), else None."""
    if type(key) is tuple and len(key) == 2:
        a, b = key
        if type(a) is slice and type(b) is slice and a.step is None and b.step is None:
            r0 = 0 if a.start is None else a.start
            r1 = rows if a.stop is None else a.stop
            c0 = 0 if b.start is None else b.start
            c1 = cols if b.stop is None else b.stop
            if type(r0) is int and type(r1) is int and type(c0) is int and type(c1) is int and \
                    0 <= r0 < r1 <= rows and 0 <= c0 < c1 <= cols:
                return r0, r1, c0, c1
    return None


def _subview(tile: Tile, p0: int, p1: int, f0: int, f1: int, key: Any) -> TileView:  # noqa: PLR0917
    """The view ``key`` of the region [p0:p1, f0:f1] of ``tile`` (errors name the kernel line 3 frames up)."""
    fast = _fast_bounds(key, p1 - p0, f1 - f0)
    if fast is not None:
        return TileView(tile, p0 + fast[0], p0 + fast[1], f0 + fast[2], f0 + fast[3])
    ctx = tile.ctx
    where = ctx.caller_location(3)
    if ctx.symrec is not None and has_symbolic(key):
        full = p0 == 0 and f0 == 0 and p1 == tile.p1 and f1 == tile.f1
        return ctx.symrec.view(tile if full else TileView(tile, p0, p1, f0, f1), key, where)  # type: ignore[return-value]
    pk, fk = _split_key(key, where)
    a0, a1 = _slice_bounds(pk, p1 - p0, f"partitions of {tile.name}", where)
    b0, b1 = _slice_bounds(fk, f1 - f0, f"free dimension of {tile.name}", where)
    return TileView(tile, p0 + a0, p0 + a1, f0 + b0, f0 + b1)


def unwritten_box(written: np.ndarray) -> tuple[int, int, int, int] | None:
    """The bounding box ``(r0, r1, c0, c1)`` of the False cells of the 2-D mask ``written`` (None: there are none)."""
    missing = ~written
    rows = np.flatnonzero(missing.any(axis=1))
    if not rows.size:
        return None
    cols = np.flatnonzero(missing.any(axis=0))
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def mark_region(owner: Tile | HbmTensor, r0: int, r1: int, c0: int, c1: int) -> None:
    """Record in ``owner.written`` that ``[r0:r1, c0:c1]`` holds data (``owner.full_written`` once all of it
    does)."""
    if r0 == 0 and c0 == 0 and (r1, c1) == owner.shape:
        owner.full_written = True
        owner.written = None
        return
    if owner.written is None:
        owner.written = np.zeros(owner.shape, np.bool_)
    owner.written[r0:r1, c0:c1] = True
    if owner.written.all():
        owner.full_written = True
        owner.written = None


class HbmTensor:
    """A 2-D tensor in HBM (device memory): a kernel input, output or scratch buffer.

    Index it (``t[r0:r1, c0:c1]``) to get an :class:`HbmView` for ``dma_copy``.
    """

    def __init__(self, ctx: KernelContext, name: str, shape: tuple[int, int], dt: DType, kind: str,  # noqa: PLR0917
                 data: np.ndarray | None, index: int, loc: str = "") -> None:
        self.ctx = ctx
        self.name = name
        #: ``file.py:LINE`` of its declaration (named when it is read before it was written).
        self.loc = loc
        self.shape = shape
        self.dtype = dt
        self.kind = kind
        self.data = data
        self.index = index
        #: The code of its name among the core's names: DMA triggers name the tensor in their ``aux``
        #: (:func:`tracer.sim.records.dma_aux`), not in their template.
        self.code = ctx.core.name_code(name)
        #: Dependency records per stream: the latest writer and reader (pinfo tuples), tensor granularity.
        self.writers: dict[int, tuple[Any, ...]] = {}
        self.readers: dict[int, tuple[Any, ...]] = {}
        #: Loop fast path bookkeeping, as on :class:`Block`.
        self.lz_seg: Any = None
        self.lz_role = 0
        self.touch: Any = None
        #: What the kernel has written of an output or scratch tensor, tracked where it has values (numerics):
        #: True once all of it was (an input holds its values from the start; a timing-only run has none).
        self.full_written = kind == "input" or data is None
        #: Partly written: a bool mask of the written elements (None: nothing written yet, or all of it).
        self.written: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return self.shape[0] * self.shape[1] * self.dtype.itemsize

    def mark_written(self, v: HbmView) -> None:
        """Record that the DMA destination ``v`` now holds data."""
        if not self.full_written:
            mark_region(self, v.r0, v.r1, v.c0, v.c1)

    def unwritten_part(self, r0: int, r1: int, c0: int, c1: int) -> tuple[int, int, int, int] | None:
        """The bounding box ``(r0, r1, c0, c1)`` of what was never written in ``[r0:r1, c0:c1]`` (None: all of it
        was)."""
        if self.full_written:
            return None
        if self.written is None:
            return r0, r1, c0, c1
        box = unwritten_box(self.written[r0:r1, c0:c1])
        return None if box is None else (r0 + box[0], r0 + box[1], c0 + box[2], c0 + box[3])

    def __getitem__(self, key: Any) -> HbmView:
        fast = _fast_bounds(key, self.shape[0], self.shape[1])
        if fast is not None:
            return HbmView(self, *fast)
        where = self.ctx.caller_location()
        if self.ctx.symrec is not None and has_symbolic(key):
            return self.ctx.symrec.view(self, key, where)  # type: ignore[no-any-return]
        rk, ck = _split_key(key, where)
        r0, r1 = _slice_bounds(rk, self.shape[0], f"rows of {self.name}", where)
        c0, c1 = _slice_bounds(ck, self.shape[1], f"columns of {self.name}", where)
        return HbmView(self, r0, r1, c0, c1)

    def full(self) -> HbmView:
        """A view of the whole tensor."""
        return HbmView(self, 0, self.shape[0], 0, self.shape[1])

    def __repr__(self) -> str:
        return f"HbmTensor({self.name!r}, {self.shape}, {self.dtype.name}, {self.kind})"


class HbmView:
    """A rectangle ``[r0:r1, c0:c1]`` of an HBM tensor; ``broadcast(P)`` repeats a one-row view P times."""

    __slots__ = ("bcast", "c0", "c1", "r0", "r1", "tensor")
    mem = HBM

    def __init__(self, tensor: HbmTensor, r0: int, r1: int, c0: int, c1: int, bcast: int = 0) -> None:  # noqa: PLR0917
        self.tensor = tensor
        self.r0, self.r1, self.c0, self.c1 = r0, r1, c0, c1
        self.bcast = bcast

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns) as seen by a DMA (broadcast rows count)."""
        return (self.bcast or self.r1 - self.r0, self.c1 - self.c0)

    @property
    def dtype(self) -> DType:
        """Element type of the tensor."""
        return self.tensor.dtype

    def broadcast(self, partitions: int) -> HbmView:
        """This one-row view repeated to ``partitions`` rows (a partition-broadcast DMA)."""
        if self.r1 - self.r0 != 1:
            where = self.tensor.ctx.caller_location()
            raise KernelError(f"{where}: broadcast needs a one-row view of {self.tensor.name}, "
                              f"got {self.r1 - self.r0} rows")
        most = self.tensor.ctx.cm.partitions
        if (type(partitions) is not int and (isinstance(partitions, bool) or not hasattr(partitions, "__index__"))) \
                or not 1 <= partitions <= most:  # "128" was shown as a shape mismatch of equal shapes, 0 copied a row
            where = self.tensor.ctx.caller_location()
            raise KernelError(f"{where}: broadcast takes a number of partitions from 1 to {most}, not "
                              f"{str(partitions)[:30]!r}")
        return HbmView(self.tensor, self.r0, self.r1, self.c0, self.c1, int(partitions))

    def read(self) -> np.ndarray:
        """The values (numerics mode)."""
        data = self.tensor.data[self.r0:self.r1, self.c0:self.c1]
        return np.broadcast_to(data, self.shape) if self.bcast else data

    def text(self) -> str:
        """Neuron-style operand text, e.g. ``a[0:128,256:384]``."""
        bc = f"*{self.bcast}" if self.bcast else ""
        return f"{self.tensor.name}[{self.r0}:{self.r1},{self.c0}:{self.c1}]{bc}"


class TileView:
    """A rectangle ``[p0:p1, f0:f1]`` of a tile (partition range x free range)."""

    __slots__ = ("f0", "f1", "p0", "p1", "tile")

    def __init__(self, tile: Tile, p0: int, p1: int, f0: int, f1: int) -> None:
        self.tile = tile
        self.p0, self.p1, self.f0, self.f1 = p0, p1, f0, f1

    @property
    def shape(self) -> tuple[int, int]:
        """(partitions, free elements)."""
        return (self.p1 - self.p0, self.f1 - self.f0)

    @property
    def mem(self) -> str:
        """``SBUF`` or ``PSUM``."""
        return self.tile.mem

    @property
    def dtype(self) -> DType:
        """Element type of the tile."""
        return self.tile.dtype

    @property
    def is_full(self) -> bool:
        """True when the view covers the whole tile."""
        t = self.tile
        return self.p0 == 0 and self.f0 == 0 and self.p1 == t.shape[0] and self.f1 == t.shape[1]

    def __getitem__(self, key: Any) -> TileView:
        return _subview(self.tile, self.p0, self.p1, self.f0, self.f1, key)

    def text(self) -> str:
        """Neuron-style operand text, as the trace's operands give it (:func:`tracer.sim.templates.vtext`), e.g.
        ``bf16[512]@SBUF[0:128]+0x400``."""
        t = self.tile
        addr = t.block.addr + self.f0 * t.dtype.itemsize
        return f"{t.dtype.name}[{self.f1 - self.f0}]@{t.mem}[{self.p0}:{self.p1}]+{addr:#x}"


class Tile:
    """A 2-D ``[partition, free]`` tile in SBUF or PSUM.  Index it to get a :class:`TileView`.

    A tile is also a view of itself (``p0 = f0 = 0``), so it can be passed wherever a view is expected.
    """

    __slots__ = ("__weakref__", "block", "ctx", "data", "dtype", "f1", "full_written", "loc", "mem", "name",
                 "p1", "shape", "uid", "written")
    p0 = 0
    f0 = 0
    is_full = True

    def __init__(self, ctx: KernelContext, name: str, shape: tuple[int, int], dt: DType, mem: str,  # noqa: PLR0917
                 block: Block, loc: str, numerics: bool, uid: int = 0) -> None:
        #: Serial number of the tile in its kernel (allocation order).
        self.uid = uid
        self.ctx = ctx
        self.name = name
        self.shape = shape
        self.p1, self.f1 = shape
        self.dtype = dt
        self.mem = mem
        self.block = block
        self.loc = loc
        self.data = np.zeros(shape, np.float32) if numerics else None
        self.written: np.ndarray | None = None
        self.full_written = False

    @property
    def tile(self) -> Tile:
        """The tile itself (views have the same attribute)."""
        return self

    @property
    def nbytes_per_partition(self) -> int:
        """Bytes of one partition row."""
        return self.shape[1] * self.dtype.itemsize

    def __getitem__(self, key: Any) -> TileView:
        # the common case ``[a:b, c:d]`` with in-range int bounds, inline (kernels index tiles in their inner loops)
        if key.__class__ is tuple and len(key) == 2:
            a, b = key
            if a.__class__ is slice and b.__class__ is slice and a.step is None and b.step is None:
                r0, r1, c0, c1 = a.start, a.stop, b.start, b.stop
                if r0 is None:
                    r0 = 0
                if r1 is None:
                    r1 = self.p1
                if c0 is None:
                    c0 = 0
                if c1 is None:
                    c1 = self.f1
                if r0.__class__ is int and r1.__class__ is int and c0.__class__ is int and c1.__class__ is int \
                        and 0 <= r0 < r1 <= self.p1 and 0 <= c0 < c1 <= self.f1:
                    return TileView(self, r0, r1, c0, c1)
        return _subview(self, 0, self.p1, 0, self.f1, key)

    def text(self) -> str:
        """Neuron-style operand text, e.g. ``bf16[512]@SBUF[0:128]+0x400``."""
        return TileView.text(self)  # type: ignore[arg-type]

    def mark_written(self, v: TileView | Tile) -> None:
        """Record that ``v`` now holds data."""
        if self.full_written:
            return
        if v.is_full:
            self.full_written = True
            self.written = None
            return
        mark_region(self, v.p0, v.p1, v.f0, v.f1)

    def is_written(self, v: TileView | Tile) -> bool:
        """True when every element of ``v`` has been written."""
        if self.full_written:
            return True
        if self.written is None:
            return False
        return bool(self.written[v.p0:v.p1, v.f0:v.f1].all())

    def __del__(self) -> None:
        try:  # noqa: SIM105 - contextlib.suppress costs a context manager per release (hot path)
            self.ctx.release_tile(self)
        except Exception:  # interpreter shutdown or a context already closed
            pass

    @classmethod
    def make(cls, ctx: KernelContext, name: str, shape: tuple[int, int], dt: DType, mem: str,  # noqa: PLR0917
             block: Block, loc: str, uid: int) -> Tile:
        """A tile without numerics data (what ``__init__`` builds with ``numerics=False``), made quickly."""
        t = cls.__new__(cls)
        t.uid = uid
        t.ctx = ctx
        t.name = name
        t.shape = shape
        t.p1, t.f1 = shape
        t.dtype = dt
        t.mem = mem
        t.block = block
        t.loc = loc
        t.data = None
        t.written = None
        t.full_written = False
        return t

    def __repr__(self) -> str:
        return f"Tile({self.name!r}, {self.shape}, {self.dtype.name}, {self.mem}@{self.block.addr:#x})"


class SymTile(Tile):
    """A tile allocated while an ``nc.affine_range`` body is traced: a shape and dtype, no memory yet.

    Each iteration of the expanded loop allocates its own instance (see :mod:`tracer.sim.affine`); ``uid`` holds
    the tile's slot in the trace.  When the loop has run, the tiles the kernel still holds become the last
    iteration's instances (their class becomes :class:`Tile`).
    """

    __slots__ = ()

    def __del__(self) -> None:
        try:
            rec = self.ctx.symrec
            if rec is not None and rec.recording:
                rec.free(self)
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"Tile({self.name!r}, {self.shape}, {self.dtype.name}, {self.mem}, symbolic)"


class DeadTile(Tile):
    """An expansion's tile instance whose memory now belongs to another object (its release does nothing)."""

    __slots__ = ()

    def __del__(self) -> None:
        pass
