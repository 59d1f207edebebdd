"""Tracing an ``nc.affine_range`` body: the kernel API, while a body is traced, records events instead of running.

The :class:`Recorder` is installed on the kernel context for the duration of the outermost affine loop's passes.
Its API methods (same signatures as :class:`~tracer.sim.context.KernelContext`'s) append events to the body being
traced (see :mod:`tracer.sim.affine.events`): operations with their arguments described, tile allocations
(returning *symbolic* tiles, which have a shape and dtype but no memory yet), tile releases (a symbolic tile
dropped by the kernel, or a real tile from before the loop, whose release is deferred to the point where the
iteration that drops it runs), symbolic slices, scopes and nested loops.  Nothing reaches the simulated core
while tracing; operations are checked when the iteration that issues them runs, so errors name the same line
and come at the same point as without tracing.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tracer.errors import KernelError
from tracer.sim.affine.events import AFFINE, ALLOC, BCAST, FREE, LOOP, OP, SEQUENTIAL, VIEW, LoopNode
from tracer.sim.affine.index import Affine, LoopVar, bound, is_symbolic, var_name
from tracer.sim.affine.views import SymView, extent, normalise
from tracer.sim.dtypes import dtype
from tracer.sim.fastpath.match import forwarders
from tracer.sim.memory import HBM, PSUM, SBUF, HbmTensor, HbmView, SymTile, Tile, TileView

if TYPE_CHECKING:
    from tracer.sim.context import KernelContext

#: Operations recorded while tracing, and the tile allocators.
OPS = ("dma_copy", "dma_transpose", "matmul", "transpose", "activation", "tensor_tensor", "tensor_scalar",
       "tensor_reduce", "tensor_copy", "memset", "iota", "partition_reduce", "affine_select",
       "bn_stats", "bn_aggr", "tensor_scalar_reduce", "scalar_tensor_tensor", "tensor_tensor_scan",
       "max8", "find_index8", "match_replace8", "select_reduce")
ALLOCS = {"sbuf_tile": SBUF, "psum_tile": PSUM}


class SlotInfo:
    """A tile allocated while tracing."""

    __slots__ = ("anc", "event", "freed", "obj")

    def __init__(self, event: tuple[Any, ...], anc: tuple[Any, ...], obj: Tile) -> None:
        self.event = event
        #: The traced loops and passes it was allocated in: ((node, pass or iteration), ...), outermost first.
        self.anc = anc
        self.obj = weakref.ref(obj)
        #: Ancestry where the kernel dropped it (None while it is referenced).
        self.freed: tuple[Any, ...] | None = None


class Frame:
    """A body being traced: one pass of an affine loop or one iteration of a sequential loop."""

    __slots__ = ("anc", "body", "node", "part")

    def __init__(self, node: LoopNode, part: int, body: list[tuple[Any, ...]], anc: tuple[Any, ...]) -> None:
        self.node = node
        self.part = part
        self.body = body
        self.anc = anc


class Recorder:
    """Records what the kernel does while an affine loop body is traced (see the module docstring)."""

    def __init__(self, ctx: KernelContext) -> None:
        self.ctx = ctx
        self.frames: list[Frame] = []
        self.slots: list[SlotInfo] = []
        self.n_views = 0
        self.methods = self._make_methods(type(ctx))
        self.recording = False
        #: Full path of each kernel source file seen (by base name, as ``where`` strings name them).
        self.files: dict[str, str] = {}
        #: What the context's instance dictionary held for the names installed (the fast path's methods).
        self.saved: dict[str, Any] = {}
        #: A loop inside the traced body was left early (break / return): reported when the trace ends.
        self.early_exit: str | None = None

    # -- installation ----------------------------------------------------------------------------------------------
    def _make_methods(self, cls: Any) -> dict[str, Any]:
        methods = forwarders(cls, (*OPS, *ALLOCS), self, lambda name: "alloc" if name in ALLOCS else "op")
        for name in ("input", "output", "scratch"):
            methods[name] = self._no_tensor
        methods["release_tile"] = self.free_real
        return methods

    def install(self) -> None:
        """Route the kernel API to this recorder (keeping what was installed before, e.g. the fast path's)."""
        d = self.ctx.__dict__
        self.saved = {name: d[name] for name in self.methods if name in d}
        d.update(self.methods)
        self.recording = True

    def uninstall(self) -> None:
        """Give the kernel API back to the context."""
        if not self.recording:
            return
        d = self.ctx.__dict__
        for name in self.methods:
            d.pop(name, None)
        d.update(self.saved)
        self.saved = {}
        self.recording = False

    # -- frames ----------------------------------------------------------------------------------------------------
    @property
    def anc(self) -> tuple[Any, ...]:
        """Ancestry of the body being traced."""
        return self.frames[-1].anc

    def push(self, node: LoopNode, part: int, body: list[tuple[Any, ...]]) -> None:
        """Start tracing ``body`` (pass or iteration ``part`` of ``node``)."""
        anc = (self.frames[-1].anc if self.frames else ()) + ((node, part),)
        self.frames.append(Frame(node, part, body, anc))

    def pop(self, node: LoopNode) -> None:
        """Stop tracing the body of ``node`` on top of the stack."""
        if self.frames and self.frames[-1].node is node:
            self.frames.pop()

    def append(self, ev: tuple[Any, ...]) -> None:
        """Add an event to the body being traced."""
        self.frames[-1].body.append(ev)

    # -- recorded API ----------------------------------------------------------------------------------------------
    def _where(self, frame: Any) -> str:
        loc = self.ctx.caller_location_of(frame)
        base = loc.rpartition(":")[0]
        if base not in self.files:
            self.files[base] = frame.f_code.co_filename
        return loc

    def op(self, name: str, frame: Any, args: tuple[Any, ...]) -> None:
        """An operation: describe its arguments and record it."""
        where = self._where(frame)
        self.append((OP, name, where, tuple([self.desc(a, where) for a in args])))

    def alloc(self, name: str, frame: Any, args: tuple[Any, ...]) -> Tile:
        """A tile allocation: check shape and dtype now, return a symbolic tile."""
        from tracer.sim.context import _shape2

        shape, dt, tname = args
        where = self._where(frame)
        mem = ALLOCS[name]
        d = dtype(dt, where)
        shape = _shape2(shape, where, "tile")
        ctx = self.ctx
        if shape[0] > ctx.cm.partitions:
            raise KernelError(f"{where}: tile has {shape[0]} partitions; the partition dimension is at most "
                              f"{ctx.cm.partitions} (split the first axis into tiles of {ctx.cm.partitions})")
        if tname is not None and not isinstance(tname, str):
            tname = str(tname)  # as the general path would name it (an index refuses to be formatted)
        slot = len(self.slots)
        ev = (ALLOC, slot, mem, shape, d, tname, where)
        tile = SymTile.make(ctx, tname or f"{mem.lower()}?", shape, d, mem, None, where, slot)  # type: ignore[arg-type]
        self.slots.append(SlotInfo(ev, self.anc, tile))
        self.append(ev)
        return tile

    def _no_tensor(self, name: Any = None, *args: Any, **kwargs: Any) -> Any:
        where = self.ctx.caller_location()
        raise KernelError(f"{where}: declare HBM tensors (nc.input/output/scratch) before the nc.affine_range loop, "
                          "not inside its body")

    def free(self, tile: Tile) -> None:
        """The kernel dropped a symbolic tile."""
        info = self.slots[tile.uid]
        info.freed = self.anc
        self.append((FREE, tile.uid))

    def free_real(self, tile: Tile) -> None:
        """The kernel dropped a real tile (from before the loop): its release happens when its iteration runs."""
        if type(tile) is Tile:
            self.append((FREE, tile))  # keeps the object (resurrected in its __del__) until then

    # -- operands ------------------------------------------------------------------------------------------------
    @staticmethod
    def ref(tile: Tile) -> Any:
        """How an event refers to a tile: its slot (symbolic) or a weak reference (a real tile)."""
        return tile.uid if type(tile) is SymTile else weakref.ref(tile)

    def desc(self, a: Any, where: str) -> tuple[Any, ...]:
        """The descriptor of one argument (see tracer.sim.affine.events)."""
        if isinstance(a, Tile):
            return ("T", self.ref(a))
        if isinstance(a, TileView):
            return ("V", self.ref(a.tile), a.p0, a.p1, a.f0, a.f1)
        if isinstance(a, SymView):
            return ("SV", a.vid)
        if isinstance(a, HbmTensor):
            return ("H", a)
        if isinstance(a, HbmView):
            return ("HV", a.tensor, a.r0, a.r1, a.c0, a.c1, a.bcast)
        if isinstance(a, Affine):
            if is_symbolic(a):
                raise KernelError(f"{where}: a symbolic loop index cannot be passed as a value ({a!r}); loop "
                                  "indices of nc.affine_range can only select slices (use nc.iota for values, or "
                                  "nc.sequential_range / range for a concrete index)")
            a = bound(a)
        return ("C", a)

    # -- symbolic slices -------------------------------------------------------------------------------------------
    def view(self, base: Any, key: Any, where: str) -> SymView:
        """``base[key]`` where ``key`` has a symbolic bound (``base``: a tile, slice or HBM tensor)."""
        from tracer.sim.memory import _split_key

        pk, fk = _split_key(key, where)
        if isinstance(base, HbmTensor):
            rows, cols = base.shape
            src: tuple[Any, ...] = ("H", base)
            mem, dt, tile, tensor = HBM, base.dtype, None, base
            axes = (f"rows of {base.name}", f"columns of {base.name}")
        elif isinstance(base, SymView):
            rows, cols = base.shape
            src = ("SV", base.vid)
            mem, dt, tile, tensor = base.mem, base.dtype, base.tile, base.tensor
            if tensor is not None:
                raise KernelError(f"{where}: slices of HBM tensors cannot be sliced again; slice the tensor once")
            axes = (f"partitions of {tile.name}", f"free dimension of {tile.name}")
        else:  # a tile or a tile view
            tile = base.tile
            rows, cols = base.shape
            src = self.desc(base, where)
            mem, dt, tensor = tile.mem, tile.dtype, None
            axes = (f"partitions of {tile.name}", f"free dimension of {tile.name}")
        parts = (normalise(pk, where, axes[0]), normalise(fk, where, axes[1]))
        shape = (extent(parts[0], rows, where, axes[0]), extent(parts[1], cols, where, axes[1]))
        self.n_views += 1
        vid = self.n_views
        self.append((VIEW, vid, src, parts, where))
        return SymView(self.ctx, vid, src, parts, shape, mem, dt, where, tile=tile, tensor=tensor)

    def broadcast(self, base: SymView, partitions: int, where: str) -> SymView:
        """``base.broadcast(partitions)`` of a symbolic HBM slice."""
        if base.tensor is None:
            raise KernelError(f"{where}: broadcast needs a one-row view of an HBM tensor")
        if base.shape[0] != 1:
            raise KernelError(f"{where}: broadcast needs a one-row view of {base.tensor.name}, got {base.shape[0]} "
                              "rows")
        self.n_views += 1
        vid = self.n_views
        self.append((BCAST, vid, base.vid, int(partitions), where))
        return SymView(self.ctx, vid, ("SV", base.vid), base.parts, (int(partitions), base.shape[1]), HBM,
                       base.dtype, where, tensor=base.tensor, bcast=int(partitions))

    # -- loops met while tracing -------------------------------------------------------------------------------------
    def affine_loop(self, r: range, where: str) -> Iterator[Any]:
        """A nested affine loop: traced twice (its first iteration, then any later one)."""
        n = len(r)
        if n == 0:
            return
        var = LoopVar(n, var_name(sum(f.node.kind == AFFINE for f in self.frames)))
        node = LoopNode(AFFINE, where, r.start, r.step, n, var)
        self.append((LOOP, node))
        index = Affine.make({var: r.step}, r.start)
        try:
            for part in range(min(n, 2)):
                body: list[tuple[Any, ...]] = []
                node.bodies.append(body)
                self.push(node, part, body)
                try:
                    yield index
                finally:
                    self.pop(node)
        except GeneratorExit:  # the kernel left the loop early (break / return)
            if self.early_exit is None:
                self.early_exit = where
            raise
        finally:
            var.value = n - 1

    def sequential_loop(self, r: range, where: str) -> Iterator[int]:
        """A sequential loop met while tracing: its iterations run with concrete indices, each recorded."""
        node = LoopNode(SEQUENTIAL, where, r.start, r.step, len(r), None)
        self.append((LOOP, node))
        count = 0
        try:
            for k, v in enumerate(r):
                body: list[tuple[Any, ...]] = []
                node.bodies.append(body)
                node.values.append(v)
                self.push(node, k, body)
                count += 1
                try:
                    yield v
                finally:
                    self.pop(node)
        finally:
            node.n = count


__all__ = ["AFFINE", "ALLOCS", "OPS", "SEQUENTIAL", "Recorder", "SlotInfo"]
