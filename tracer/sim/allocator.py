"""The on-chip allocators of the simulated NeuronCore: per-partition byte ranges of SBUF or PSUM.

* :class:`Block` — a byte range of every partition, with the dependency records of its last tenant.
* :class:`Allocator` — freed blocks are reused oldest-first (least recently freed), so a tile allocated once per
  loop iteration rotates through two or more buffers and the next iteration's loads overlap the current iteration's
  compute, as the Neuron compiler's multi-buffering does.  Reusing a block makes the new tile's first writes wait
  for the old tile's last accesses (anti / output dependencies), which the dependency tracker keeps in
  ``Block.inherited`` (:func:`merge_inherited` combines them when blocks coalesce).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from tracer.errors import KernelError


class Block:
    """A byte range [addr, addr + size) of every partition of SBUF or PSUM, with its dependency records."""

    __slots__ = ("addr", "inherited", "lz_role", "lz_seg", "mem", "owner_parts", "readers", "site", "size", "touch",
                 "writers")

    def __init__(self, mem: str, addr: int, size: int) -> None:
        self.mem = mem
        self.addr = addr
        self.size = size
        #: Writer records ``[p0, p1, f0, f1, pinfo]`` of the current tile (see tracer.sim.tracker).
        self.writers: list[list[Any]] = []
        #: Reader records per stream, merged to their bounding box.
        self.readers: dict[int, list[Any]] = {}
        #: Last accesses of previous tiles in this memory, per stream: ``(pinfo, dependency type)``.
        self.inherited: dict[int, tuple[tuple[Any, ...], int]] | None = None
        #: (tile name, allocation site) of the tile holding the block.
        self.owner_parts = ("", "")
        self.site = ""
        #: While the loop fast path owns this block's records: the replayed segment that last touched it and the
        #: block's role there (the records above are stale until :mod:`tracer.sim.fastpath` materialises them).
        self.lz_seg: Any = None
        self.lz_role = 0
        #: Token of the fast-path segment that last touched the block (first-touch detection).
        self.touch: Any = None

    @property
    def owner(self) -> str:
        """``name (file.py:LINE)`` of the tile holding the block."""
        name, site = self.owner_parts
        return f"{name} ({site})" if name or site else ""


class Allocator:
    """Allocates per-partition byte ranges of one on-chip memory; raises KernelError on overflow.

    Freed blocks are kept per allocation site (source line): a tile allocated once per loop iteration reuses
    the blocks of the same line, and only once ``spare`` younger ones are free too (or when memory would
    otherwise run out), so it rotates through ``spare + 2`` buffers: deep enough that a load issued for a
    later iteration does not wait for this one (the DMA start latency alone is ~1.3 us), as the Neuron
    compiler's per-tensor multi-buffering does.  Other sites' blocks are used only when memory is short.
    """

    def __init__(self, mem: str, capacity: int, unit: int, spare: int = 2) -> None:
        self.mem = mem
        self.spare = spare
        self.capacity = capacity
        self.unit = unit
        self.bump = 0
        self.free_by_key: dict[tuple[int, str], deque[Block]] = {}
        self.in_use = 0
        self.peak = 0
        self.live: dict[int, Block] = {}
        #: Last accesses of memory given back to the bump region by coalescing (new blocks there inherit them).
        self.bump_inherited: dict[int, Any] | None = None

    def round_size(self, nbytes: int) -> int:
        """Bytes actually reserved per partition for a request of ``nbytes``."""
        return max(self.unit, math.ceil(nbytes / self.unit) * self.unit)

    def alloc(self, nbytes: int, where: str, name: str) -> Block:
        """A block of at least ``nbytes`` per partition (oldest freed block of that size first)."""
        size = self.round_size(nbytes)
        if size > self.capacity:
            raise KernelError(f"{where}: tile {name} needs {size:,} B per partition but {self.mem} has "
                              f"{self.capacity:,} B per partition; split it into smaller tiles")
        block = self._take(size, where)
        if block is None:
            self._coalesce()
            block = self._take(size, where)
        if block is None:
            owners = sorted((b.size, b.owner) for b in self.live.values())[::-1][:3]
            largest = ", ".join(f"{o} ({s:,} B)" for s, o in owners)
            raise KernelError(
                f"{where}: {self.mem} overflow allocating tile {name} ({size:,} B per partition): "
                f"{self.in_use:,} of {self.capacity:,} B per partition are held by {len(self.live)} live tiles "
                f"(largest: {largest}); drop references to tiles you no longer need or use smaller tiles")
        block.owner_parts = (name, where)
        block.site = where
        self.in_use += block.size
        self.peak = max(self.peak, self.in_use)
        self.live[id(block)] = block
        return block

    def peek(self, nbytes: int, site: str) -> Block | bool | None:
        """The block :meth:`alloc` would return now without merging free blocks: an existing :class:`Block`, True
        for a new block from the free top of memory, None when it would have to merge free blocks or fail."""
        size = self.round_size(nbytes)
        if size > self.capacity:
            return None
        queue = self.free_by_key.get((size, site))
        if queue and len(queue) > self.spare:
            return queue[0]
        if self.bump + size <= self.capacity:
            return True
        if queue:
            return queue[0]
        return None

    def take_peeked(self, block: Block | bool, nbytes: int, site: str, name: str) -> Block:
        """Allocate the block :meth:`peek` just returned for (``nbytes``, ``site``): the same result as
        :meth:`alloc`, without its search."""
        if block is True:
            return self.alloc(nbytes, site, name)
        size = self.round_size(nbytes)
        self.free_by_key[(size, site)].popleft()
        block.owner_parts = (name, site)  # type: ignore[union-attr]
        block.site = site  # type: ignore[union-attr]
        self.in_use += block.size  # type: ignore[union-attr]
        self.peak = max(self.peak, self.in_use)
        self.live[id(block)] = block  # type: ignore[assignment]
        return block  # type: ignore[return-value]

    def _take(self, size: int, site: str) -> Block | None:
        queue = self.free_by_key.get((size, site))
        if queue and len(queue) > self.spare:
            return queue.popleft()
        if self.bump + size <= self.capacity:
            block = Block(self.mem, self.bump, size)
            block.inherited = dict(self.bump_inherited) if self.bump_inherited else None
            self.bump += size
            return block
        if queue:
            return queue.popleft()
        # memory is short: another site's block of this size, else the smallest bigger block (used whole)
        best: tuple[int, deque[Block]] | None = None
        for (s, _site), q in self.free_by_key.items():
            if q and s >= size and (best is None or s < best[0]):
                best = (s, q)
        if best is not None:
            return best[1].popleft()
        return None

    def _coalesce(self) -> None:
        """Merge adjacent free blocks (and free space at the top) so a larger request can fit."""
        free = sorted((b for q in self.free_by_key.values() for b in q), key=lambda b: b.addr)
        if not free:
            return
        merged: list[Block] = []
        for b in free:
            if merged and merged[-1].addr + merged[-1].size == b.addr:
                top = merged[-1]
                top.size += b.size
                top.inherited = merge_inherited(top.inherited, b.inherited)
            else:
                merged.append(b)
        if merged[-1].addr + merged[-1].size == self.bump:
            top = merged.pop()
            self.bump = top.addr
            self.bump_inherited = merge_inherited(self.bump_inherited, top.inherited)
        self.free_by_key = {}
        for b in merged:
            self.free_by_key.setdefault((b.size, b.site), deque()).append(b)

    def free(self, block: Block) -> None:
        """Return ``block``; it will be reused after every block freed before it."""
        if self.live.pop(id(block), None) is None:
            return
        self.in_use -= block.size
        key = (block.size, block.site)
        queue = self.free_by_key.get(key)
        if queue is None:
            queue = self.free_by_key[key] = deque()
        queue.append(block)


def merge_inherited(a: dict[int, Any] | None, b: dict[int, Any] | None) -> dict[int, Any] | None:
    """Union of two inherited-dependency summaries, keeping the latest producer per stream."""
    if not a:
        return dict(b) if b else None
    if not b:
        return a
    out = dict(a)
    for stream, entry in b.items():
        cur = out.get(stream)
        if cur is None or entry[0][1] > cur[0][1]:
            out[stream] = entry
    return out
