"""The kernel-facing object ``nc``: tensors, tiles, loops, layer/operator scopes, and instruction issue.

A kernel is a plain Python function ``kernel(nc, **params)``.  It declares HBM tensors (``nc.input``,
``nc.output``), allocates tiles (``nc.sbuf_tile``, ``nc.psum_tile``) and calls operations
(:class:`~tracer.sim.ops.OpsMixin`: ``dma_copy``, ``matmul``, ``activation``, ...).  Each operation is
validated, described by an interned :class:`~tracer.sim.core.Template`, given its dependencies by the
tracker and scheduled by the :class:`~tracer.sim.core.Core` at once: nothing is buffered, so a kernel of
millions of instructions streams.

Every error a kernel can cause is a :class:`~tracer.errors.KernelError` whose message starts with the kernel
source line (``file.py:LINE``).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tracer.errors import KernelError
from tracer.sim import tracker
from tracer.sim.arch import CostModel
from tracer.sim.core import Core
from tracer.sim.dtypes import DType, dtype
from tracer.sim.memory import ALIGN, PSUM, SBUF, Allocator, HbmTensor, Tile
from tracer.sim.ops import OpsMixin

TensorInit = np.ndarray | Callable[[np.random.Generator, tuple[int, int]], np.ndarray] | None


class KernelContext(OpsMixin):
    """What a kernel sees as ``nc``: one simulated NeuronCore.

    Args:
        core: the scheduler.
        numerics: compute values with numpy (needed for ``--check``); off, only timing is simulated.
        seed: seed of the random input data.
    """

    def __init__(self, core: Core, *, numerics: bool = False, seed: int = 0) -> None:
        self.core = core
        self.cm: CostModel = core.cm
        self.numerics = numerics
        self.seed = seed
        self.sbuf = Allocator(SBUF, self.cm.sbuf_partition_bytes, ALIGN)
        self.psum = Allocator(PSUM, self.cm.psum_partition_bytes, self.cm.psum_partition_bytes // self.cm.psum_banks, 0)
        self.tensors: dict[str, HbmTensor] = {}
        self.cur_layer: str | None = None
        self.cur_operator: str | None = None
        self.last_pinfo: dict[int, tuple[Any, ...]] = {}
        self.closed = False
        self._locs: dict[tuple[Any, int], str] = {}
        self._n_tiles = 0
        self._span_ids = 0
        self._span_stack: list[int] = []

    # -- source locations ----------------------------------------------------------------------------------
    def caller_location(self, depth: int = 2) -> str:
        """``file.py:LINE`` of the kernel code that called the API (``depth`` frames up)."""
        f = sys._getframe(depth)
        key = (f.f_code, f.f_lineno)
        loc = self._locs.get(key)
        if loc is None:
            loc = self._locs[key] = f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"
        return loc

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
        data = None
        if self.numerics:
            if init is None:
                rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
                data = rng.standard_normal(shape).astype(np.float32) if kind == "input" else \
                    np.zeros(shape, np.float32)
            else:
                rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
                data = np.asarray(init(rng, shape) if callable(init) else init, dtype=np.float32)
                if data.shape != shape:
                    raise KernelError(f"{where}: init of {name} has shape {data.shape}, expected {shape}")
            data = d.round(np.array(data, np.float32))
        t = HbmTensor(self, name, shape, d, kind, data, len(self.tensors))
        self.tensors[name] = t
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
        tile = Tile(self, name, shape, d, mem, block, where, self.numerics)
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
        tracker.release(tile.block)
        (self.sbuf if tile.mem == SBUF else self.psum).free(tile.block)
        self._usage_counter(tile.mem)

    # -- loops ------------------------------------------------------------------------------------------------
    @staticmethod
    def affine_range(*args: int) -> range:
        """Loop whose iterations are independent (like ``nl.affine_range``)."""
        return range(*args)

    @staticmethod
    def sequential_range(*args: int) -> range:
        """Loop with a loop-carried dependency (like ``nl.sequential_range``)."""
        return range(*args)

    # -- layer and operator scopes -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def layer(self, name: str) -> Iterator[None]:
        """Instructions issued inside carry ``layer=name``; the scope becomes a ``layer`` Span row."""
        with self._scope("layer", str(name)):
            yield

    @contextlib.contextmanager
    def operator(self, name: str) -> Iterator[None]:
        """Instructions issued inside carry ``hlo_name=name``; the scope becomes an ``operator`` Span row."""
        with self._scope("operator", str(name)):
            yield

    @contextlib.contextmanager
    def _scope(self, category: str, name: str) -> Iterator[None]:
        attr = f"cur_{category}"
        prev = getattr(self, attr)
        setattr(self, attr, name)
        self._span_ids += 1
        span_id = self._span_ids
        parent = self._span_stack[-1] if self._span_stack else None
        self._span_stack.append(span_id)
        box = [math.inf, -math.inf]
        self.core.open_spans.append(box)
        try:
            yield
        finally:
            spans = self.core.open_spans
            del spans[next(i for i, b in enumerate(spans) if b is box)]
            self._span_stack.pop()
            setattr(self, attr, prev)
            if box[0] <= box[1]:
                self.core.span({
                    "id": span_id, "start_ts": int(box[0]), "end_ts": int(box[1]),
                    "duration_ns": int(box[1] - box[0]), "name": name, "category": category,
                    "depth": len(self._span_stack), "parent_id": parent, "track_group": "NeuronCore 0",
                    "track_name": category, "pcore_idx": 0,
                })

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
        tid = self.core.template(("BAR",))
        deps = {s: (p, tracker.FLOW) for s, p in self.last_pinfo.items()}
        self.core.execute(tid, deps)
        self.closed = True


def _shape2(shape: Any, where: str, what: str) -> tuple[int, int]:
    try:
        dims = tuple(int(x) for x in shape)
    except (TypeError, ValueError):
        raise KernelError(f"{where}: {what} shape must be a pair of ints, got {shape!r}") from None
    if len(dims) != 2:
        raise KernelError(f"{where}: {what} must be 2-D [partition, free], got shape {dims}")
    if min(dims) <= 0:
        raise KernelError(f"{where}: {what} shape {dims} has an empty dimension")
    return dims  # type: ignore[return-value]
