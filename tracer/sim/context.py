"""The kernel-facing object ``nc``: tensors, tiles, loops, layer/operator scopes, and instruction issue.

A kernel is a plain Python function ``kernel(nc, **params)``.  It declares HBM tensors (``nc.input``,
``nc.output``), allocates tiles (``nc.sbuf_tile``, ``nc.psum_tile``) and calls operations
(:class:`~tracer.sim.ops.OpsMixin`: ``dma_copy``, ``matmul``, ``activation``, ...; and
:class:`~tracer.sim.ops_elementwise.ElementwiseOpsMixin`: ``tensor_tensor``, ``affine_select``, ...).  Each operation is
validated, described by an interned :class:`~tracer.sim.core.Template`, given its dependencies by the
tracker and scheduled by the :class:`~tracer.sim.core.Core` at once: nothing is buffered, so a kernel of
millions of instructions streams.

Every error a kernel can cause is a :class:`~tracer.errors.KernelError` whose message starts with the kernel
source line (``file.py:LINE``).
"""

from __future__ import annotations

import math
import operator
import os
import sys
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from tracer.errors import KernelError
from tracer.sim import tracker
from tracer.sim.affine.events import ENTER, EXIT
from tracer.sim.allocator import Allocator
from tracer.sim.arch import CostModel
from tracer.sim.core import Core
from tracer.sim.dtypes import DType, dtype
from tracer.sim.kernel_sources import kernel_frame
from tracer.sim.memory import ALIGN, PSUM, SBUF, HbmTensor, Tile
from tracer.sim.ops import OpsMixin
from tracer.sim.ops_elementwise import ElementwiseOpsMixin
from tracer.sim.records import AUX_MAX_TENSOR_CODE, AUX_OFFSET_MASK

TensorInit = np.ndarray | Callable[[np.random.Generator, tuple[int, int]], np.ndarray] | None


class KernelContext(OpsMixin, ElementwiseOpsMixin):
    """What a kernel sees as ``nc``: one simulated NeuronCore.

    Args:
        core: the scheduler.
        numerics: compute values with numpy (needed for ``--check``); off, only timing is simulated.
        seed: seed of the random input data.
    """

    def __init__(self, core: Core, *, numerics: bool = False, seed: int = 0, symbolic: bool = True) -> None:
        self.core = core
        self.cm: CostModel = core.cm
        self.numerics = numerics
        self.seed = seed
        self.sbuf = Allocator(SBUF, self.cm.sbuf_partition_bytes, ALIGN)
        self.psum = Allocator(PSUM, self.cm.psum_partition_bytes, self.cm.psum_partition_bytes // self.cm.psum_banks, 0)
        self.tensors: dict[str, HbmTensor] = {}
        #: Each input's values as declared (with numerics), for the reference of ``--check``.
        self.initial_inputs: dict[str, np.ndarray] = {}
        #: The types of the tiles allocated with numerics on (``--check``'s tolerance follows the coarsest).
        self.tile_dtypes: set[DType] = set()
        #: Whether an nc.affine_range body has been (or is being) traced: its Python runs for two iterations only.
        self.affine_traced = False
        self.cur_layer: str | None = None
        self.cur_operator: str | None = None
        self.last_pinfo: dict[int, tuple[Any, ...]] = {}
        self.closed = False
        #: ``file.py:LINE`` by (id of a code object, instruction offset), with that code object (which keeps the id
        #: its own).
        self._locs: dict[tuple[int, int], tuple[str, Any]] = {}
        self._n_tiles = 0
        self._span_ids = 0
        self._span_stack: list[int] = []
        #: The loop fast path (:mod:`tracer.sim.fastpath`); None runs every operation through the general path.
        self.fast: Any = None
        #: The kernel's frame while the fast path calls an API method on its behalf (see caller_location).
        self.cl_frame: Any = None
        #: The kernel line an expanded affine loop's statement comes from when it is in another file than the
        #: loop's generated code (see tracer.sim.affine.codegen and caller_location).
        self.cl_loc: str | None = None
        #: ``nc.affine_range`` traces its body once with a symbolic index (NKI's contract) and the simulator
        #: expands the iterations (:mod:`tracer.sim.affine`); False runs the body per iteration, concretely.
        self.symbolic = symbolic
        #: The recorder while an affine loop body is traced (see tracer.sim.affine.recorder).
        self.symrec: Any = None
        #: An error found where it could not be raised (a traced loop left early), raised at the next loop or
        #: at the end of the kernel.
        self.sym_error: KernelError | None = None

    # -- source locations ----------------------------------------------------------------------------------
    def caller_location(self, depth: int = 2) -> str:
        """``file.py:LINE`` of the kernel code that called the API (``depth`` frames up)."""
        if self.cl_loc is not None:
            return self.cl_loc
        f = self.cl_frame if self.cl_frame is not None and depth == 2 else sys._getframe(depth)
        return self.caller_location_of(f)

    def caller_location_of(self, f: Any) -> str:
        """``file.py:LINE`` of frame ``f``.  Cached by the code object's id and the frame's instruction offset: not
        by the code object (hashing one hashes its constants and bytecode every time, ~1.5 us for a kernel's
        expanded loop nest), and not by ``f_lineno``, which decodes the code's line table from its start on every
        read (a third of the general path's time in matmul_rowload's expanded loop nest)."""
        code = f.f_code
        key = (id(code), f.f_lasti)
        hit = self._locs.get(key)
        if hit is None:
            hit = self._locs[key] = (f"{os.path.basename(code.co_filename)}:{f.f_lineno}", code)
        return hit[0]

    def location_codes(self, locations: set[str | None]) -> list[Any]:
        """The code objects the ``file.py:LINE`` locations among ``locations`` came from (the kernel's files)."""
        return [code for loc, code in self._locs.values() if loc in locations]

    # -- HBM tensors -----------------------------------------------------------------------------------------
    def input(self, name: str, shape: tuple[int, int], dt: str | DType = "bf16", *,
              init: TensorInit = None) -> HbmTensor:
        """Declare a kernel input in HBM.  With numerics on it holds ``init`` (an array, or a function of
        ``(rng, shape)``; default: standard normal values seeded by the tensor name), rounded to ``dt``."""
        return self._tensor(name, shape, dt, "input", init, self.caller_location())

    def output(self, name: str, shape: tuple[int, int], dt: str | DType = "bf16") -> HbmTensor:
        """Declare a kernel output in HBM (checked against the reference with ``--check``)."""
        return self._tensor(name, shape, dt, "output", None, self.caller_location())

    def scratch(self, name: str, shape: tuple[int, int], dt: str | DType = "bf16") -> HbmTensor:
        """Declare an HBM buffer for intermediate results."""
        return self._tensor(name, shape, dt, "scratch", None, self.caller_location())

    def _tensor(self, name: str, shape: tuple[int, int], dt: str | DType, kind: str, init: TensorInit,  # noqa: PLR0917
                where: str) -> HbmTensor:
        d = dtype(dt, where)
        shape = _shape2(shape, where, f"tensor {name}")
        if not isinstance(name, str) or not name:
            raise KernelError(f"{where}: tensor name must be a non-empty string")
        if name in self.tensors:
            raise KernelError(f"{where}: tensor {name!r} is declared twice; give each HBM tensor its own name")
        if shape[0] * shape[1] > AUX_OFFSET_MASK:
            raise KernelError(f"{where}: tensor {name!r} of shape {shape} has 2**40 elements or more; HBM holds far "
                              "less: split it")
        data = None
        if self.numerics:
            if init is None:
                rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
                data = rng.standard_normal(shape).astype(np.float32) if kind == "input" else \
                    np.zeros(shape, np.float32)
            else:
                rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
                try:
                    data = np.asarray(init(rng, shape) if callable(init) else init, dtype=np.float32)
                except (TypeError, ValueError) as exc:  # init="zeros", a function of other arguments, ...
                    raise KernelError(f"{where}: init of {name} must be an array of numbers or a function (rng, "
                                      f"shape) -> array: {str(exc).splitlines()[0][:120]}") from None
                if data.shape != shape:
                    raise KernelError(f"{where}: init of {name} has shape {data.shape}, expected {shape}")
            data = d.round(np.array(data, np.float32))
        if len(self.core.names) >= AUX_MAX_TENSOR_CODE:
            raise KernelError(f"{where}: tensor {name!r} is declared after {len(self.core.names):,} layer, operator "
                              "and tensor names; declare HBM tensors before the kernel's loops")
        t = HbmTensor(self, name, shape, d, kind, data, len(self.tensors), where)
        self.tensors[name] = t
        if data is not None and kind == "input":  # what --check's reference gets, whatever the kernel writes there
            self.initial_inputs[name] = data.copy()
        return t

    # -- tiles ---------------------------------------------------------------------------------------------------
    def sbuf_tile(self, shape: tuple[int, int], dt: str | DType = "bf16", *, name: str | None = None) -> Tile:
        """Allocate a ``[partitions, free]`` tile in SBUF (freed when the last reference to it goes)."""
        return self._tile(shape, dt, SBUF, name, self.caller_location())

    def psum_tile(self, shape: tuple[int, int], dt: str | DType = "fp32", *, name: str | None = None) -> Tile:
        """Allocate a ``[partitions, free]`` tile in PSUM, in whole banks (2 KiB per partition each)."""
        return self._tile(shape, dt, PSUM, name, self.caller_location())

    def _tile(self, shape: tuple[int, int], dt: str | DType, mem: str, name: str | None, where: str) -> Tile:
        d = dtype(dt, where)
        shape = _shape2(shape, where, "tile")
        if shape[0] > self.cm.partitions:
            raise KernelError(f"{where}: tile has {shape[0]} partitions; the partition dimension is at most "
                              f"{self.cm.partitions} (split the first axis into tiles of {self.cm.partitions})")
        self._n_tiles += 1
        name = name or f"{mem.lower()}{self._n_tiles}"
        alloc = self.sbuf if mem == SBUF else self.psum
        block = alloc.alloc(shape[1] * d.itemsize, where, name)
        tile = Tile(self, name, shape, d, mem, block, where, self.numerics, self._n_tiles)
        if self.numerics:
            self.tile_dtypes.add(d)
        self._usage_counter(mem)
        return tile

    def _usage_counter(self, mem: str) -> None:
        if mem == SBUF:
            self.core.counter("sbuf_usage_bytes", self.sbuf.in_use * self.cm.partitions, "B")
        else:
            self.core.counter("psum_banks_in_use", self.psum.in_use // self.psum.unit, "banks")

    def release_tile(self, tile: Tile) -> None:
        """Free a tile's memory (called when the tile object is garbage)."""
        if self.closed:
            return
        fast = self.fast
        if fast is not None and fast.on_free(tile):
            return
        self.release_general(tile)

    def release_general(self, tile: Tile) -> None:
        """The general path's release: fold the tile's dependency records, free its memory, sample usage."""
        tracker.release(tile.block)
        (self.sbuf if tile.mem == SBUF else self.psum).free(tile.block)
        self._usage_counter(tile.mem)

    # -- loops ------------------------------------------------------------------------------------------------
    def affine_range(self, *args: int) -> Iterable[Any]:
        """Loop whose iterations are independent (like ``nl.affine_range``), over ``range(*args)``.

        As in NKI, the body is traced once with a symbolic index (an affine expression usable in slices) and the
        simulator expands the iterations itself; see ``docs/kernels.md`` ("Loops") for the rules.  With
        ``symbolic=False`` (``run_kernel(expand_symbolic=False)``) it iterates over concrete ints instead.
        """
        r = self._range("affine_range", args)
        if self.symbolic:
            from tracer.sim.affine.loops import affine_range

            return affine_range(self, r, self.caller_location())
        return self._concrete(r)

    def sequential_range(self, *args: int) -> Iterable[int]:
        """Loop with a loop-carried dependency (like ``nl.sequential_range``): concrete indices, one iteration
        after the other (the body's Python runs per iteration)."""
        return self._concrete(self._range("sequential_range", args))

    def static_range(self, *args: int) -> Iterable[int]:
        """Loop unrolled with concrete indices (like ``nl.static_range``): for bodies that need the index's value
        (list indices, names, Python branches) or keep tiles across iterations."""
        return self._concrete(self._range("static_range", args))

    def _range(self, what: str, args: tuple[Any, ...]) -> range:
        """``range(*args)`` for loop ``what``; KernelError on the kernel's line for arguments a range refuses
        (floats, strings) or one too long to count (its length must fit in 63 bits)."""
        try:
            r = range(*args)
            len(r)
        except (TypeError, ValueError, OverflowError) as exc:
            shown = ", ".join(str(a)[:30] for a in args)
            raise KernelError(f"{self.caller_location(3)}: nc.{what}({shown}): a loop takes ints (stop, or start, "
                              f"stop[, step]) for fewer than 2**63 iterations ({str(exc)[:80]})") from None
        return r

    def _concrete(self, r: range) -> Iterable[int]:
        rec = self.symrec
        if rec is not None and rec.recording:
            from tracer.sim.affine.loops import concrete_range

            return concrete_range(self, r, self.caller_location(3))
        if self.fast is None:
            return r
        return loop_range(self.fast, r, sys._getframe(2))

    def raise_deferred(self) -> None:
        """Raise the error found where it could not be raised (a traced loop left early), if any."""
        if self.sym_error is not None:
            err, self.sym_error = self.sym_error, None
            raise err

    def abort_symbolic(self) -> None:
        """Stop tracing an affine loop body (the kernel raised while it was traced)."""
        if self.symrec is not None:
            from tracer.sim.affine.loops import abort

            abort(self)

    # -- layer and operator scopes -----------------------------------------------------------------------------
    def layer(self, name: str) -> Scope:
        """Instructions issued inside carry ``layer=name``; the scope becomes a ``layer`` Span row."""
        return Scope(self, "layer", str(name))

    def operator(self, name: str) -> Scope:
        """Instructions issued inside carry ``hlo_name=name``; the scope becomes an ``operator`` Span row."""
        return Scope(self, "operator", str(name))

    def scope_open(self, scope: Scope) -> None:
        """Enter ``scope``: tag what follows, open its Span box."""
        core = self.core
        if scope.category == "layer":
            scope.prev = self.cur_layer
            self.cur_layer = scope.name
            core.lyr_code = core.name_code(scope.name)
        else:
            scope.prev = self.cur_operator
            self.cur_operator = scope.name
            core.hlo_code = core.name_code(scope.name)
        self._span_ids += 1
        sid = scope.span_id = self._span_ids
        stack = self._span_stack
        scope.parent = stack[-1] if stack else None
        stack.append(sid)
        box = scope.box = [math.inf, -math.inf]
        core.open_spans.append(box)

    def scope_close(self, scope: Scope, row: bool = True) -> tuple[Any, ...] | None:
        """Leave ``scope``; returns its Span row (None for a scope that issued nothing, or unless ``row``), not
        yet recorded."""
        core = self.core
        spans = core.open_spans
        box = scope.box
        if spans and spans[-1] is box:  # scopes are left in the reverse order of entry (``with`` blocks)
            spans.pop()
        else:
            at = next((i for i, b in enumerate(spans) if b is box), None)
            if at is None:  # left twice, or entered in a traced loop body and left after the loop
                where = self.caller_location_of(kernel_frame(sys._getframe(1)))  # (not scope_exit's, ...)
                raise KernelError(f"{where}: scope {scope.name!r} is left but is not open (left "
                                  "twice, or entered in another loop body than where it is left): use it as a "
                                  "`with` block")
            del spans[at]
        stack = self._span_stack
        stack.pop()
        if scope.category == "layer":
            self.cur_layer = scope.prev
            core.lyr_code = core.name_code(scope.prev)
        else:
            self.cur_operator = scope.prev
            core.hlo_code = core.name_code(scope.prev)
        scope.depth = len(stack)
        return scope.row() if row else None

    # -- issuing -----------------------------------------------------------------------------------------------------
    def issue(self, tid: int, reads: list[Any], writes: list[Any], aux: int = -1) -> tuple[Any, ...]:
        """Resolve dependencies, schedule and record one instruction."""
        deps = tracker.resolve(reads, writes)
        pinfo = self.core.execute(tid, deps, aux)
        tracker.update(reads, writes, pinfo)
        self.last_pinfo[pinfo[0]] = pinfo
        return pinfo

    def finish(self) -> None:
        """Issue the final barrier: Sync waits until every stream and DMA group has finished."""
        if self.closed:
            return
        self.raise_deferred()
        if self.fast is not None:
            self.fast.finish()
        tid = self.core.template(("BAR",))
        deps = {s: (p, tracker.FLOW) for s, p in self.last_pinfo.items()}
        self.core.execute(tid, deps)
        self.closed = True


def _shape2(shape: Any, where: str, what: str) -> tuple[int, int]:
    if type(shape) is tuple and len(shape) == 2 and type(shape[0]) is int and type(shape[1]) is int \
            and shape[0] > 0 and shape[1] > 0:  # the common case, at the cost of a few checks (every allocation)
        return shape
    try:  # ints only (operator.index): int() made 64.7 columns 64, True one partition, "128" 128
        dims = tuple(operator.index(x) for x in shape)
    except (TypeError, ValueError):
        raise KernelError(f"{where}: {what} shape must be a pair of ints, got {shape!r}") from None
    if any(isinstance(x, bool | np.bool_) for x in shape):
        raise KernelError(f"{where}: {what} shape must be a pair of ints, got {shape!r}")
    if len(dims) != 2:
        raise KernelError(f"{where}: {what} must be 2-D [partition, free], got shape {dims}")
    if min(dims) <= 0:
        raise KernelError(f"{where}: {what} shape {dims} has an empty dimension")
    return dims  # type: ignore[return-value]


class Scope:
    """A ``with nc.layer(...)`` / ``with nc.operator(...)`` block: tags instructions and becomes a Span row."""

    __slots__ = ("box", "category", "ctx", "depth", "name", "parent", "prev", "span_id")

    def __init__(self, ctx: KernelContext, category: str, name: str) -> None:
        self.ctx = ctx
        self.category = category
        self.name = name
        self.box: list[float] = []
        self.prev: str | None = None
        self.span_id = 0
        self.parent: int | None = None
        self.depth = 0

    def __enter__(self) -> None:
        rec = self.ctx.symrec
        if rec is not None and rec.recording:
            rec.append((ENTER, self.category, self.name))
            return
        fast = self.ctx.fast
        if fast is not None:
            fast.scope_enter(self)
        else:
            self.ctx.scope_open(self)

    def __exit__(self, *exc: object) -> None:
        rec = self.ctx.symrec
        if rec is not None and rec.recording:
            rec.append((EXIT, self.category, self.name))
            return
        fast = self.ctx.fast
        if fast is not None:
            fast.scope_exit(self)
        else:
            row = self.ctx.scope_close(self)
            if row is not None:
                self.ctx.core.span(row)

    def row(self) -> tuple[Any, ...] | None:
        """The Span row of the closed scope for :meth:`Core.span`, from its box (None when it covered no
        instruction): (id, start, end, name, category, depth, parent id or None)."""
        box = self.box
        if not box[0] <= box[1]:
            return None
        return self.span_id, int(box[0]), int(box[1]), self.name, self.category, self.depth, self.parent


class _Loop:
    """``nc.affine_range`` / ``nc.sequential_range``: a range that tells the loop fast path where iterations start.

    Not made for a loop the fast path has found to be a mere step inside its segments (its site is in the fast
    path's ``steps``): such a loop tells it nothing, and is iterated as a plain range (:func:`loop_range`)."""

    __slots__ = ("__weakref__", "d1", "d2", "d3", "fast", "i", "n", "r", "site", "start_n")

    def __init__(self, fast: Any, r: range, site: tuple[Any, int]) -> None:
        self.fast = fast
        self.r = r
        self.n = len(r)
        self.i = 0
        self.site = site
        self.start_n = 0
        #: Instructions issued by the run's first ``k``, ``k / 2`` and ``k / 4`` iterations at its last power of two
        #: ``k`` (the fast path's progress total: :meth:`~tracer.sim.fastpath.controller.FastPath._repredict`).
        self.d1 = self.d2 = self.d3 = 0

    def __iter__(self) -> _Loop:
        return self

    def __next__(self) -> int:
        i = self.i
        if i >= self.n:
            self.fast.marker(self, -1)
            raise StopIteration
        self.i = i + 1
        self.fast.marker(self, i)
        return self.r[i]

    def __len__(self) -> int:
        return self.n


def loop_range(fast: Any, r: range, frame: Any) -> Any:
    """What a loop of the kernel at ``frame`` iterates over with the fast path on: a :class:`_Loop` telling it where
    iterations start, or ``r`` itself for a loop it knows to be a step inside its segments (the loop's steps and end
    are then no events at all, recorded or matched alike: mlp made ~0.65 marker calls per instruction)."""
    site = fast.site(frame)
    most = fast.steps.get(site)
    if most is not None:
        if len(r) <= most:
            return r
        fast.promote(site)
    else:
        most = fast.promoted.get(site)
        if most is not None and len(r) <= most:  # a promoted loop's short run: inside its enclosing segment, silent
            return r
    return _Loop(fast, r, site)
