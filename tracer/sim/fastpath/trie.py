"""The recorded loop segments: a trie of events per segment start, and the variants at its leaves.

A *segment* is the stretch of a kernel between two commit points of its ``nc.affine_range`` /
``nc.sequential_range`` loops (see :mod:`tracer.sim.fastpath.controller`).  Each recorded segment is a path of
:class:`Node` s, one per event (an operation, a tile allocation or release, a scope entered or left, an inner
loop step), whose ``spec`` says exactly what the kernel did and what the dependency records it first touched
looked like.  Segments that start at the same place share a root, and paths share prefixes, so the matcher walks
the trie as the kernel runs.  The last node of a path (a ``COMMIT``) holds the :class:`Variant`: everything needed
to schedule the whole segment at once.

Template keys are stored as *recipes*: keys whose block addresses, tensor names and tile names are references
to the segment's roles (``("@B", role)``, ``("@T", role)``, ``("@N", role)``), so a variant serves every set of
buffers the kernel rotates through (:func:`substitute`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracer.sim.records import VKey

OP, ALLOC, FREE, ENTER, EXIT, MARK, COMMIT = range(7)
#: Sources of a dependency or of a produced record: an instruction of the segment, a DMA transfer of the
#: segment (by instruction position), or an input leaf (a producer found in the records at first touch).
SRC_INSTR, SRC_DMA, SRC_LEAF = range(3)


@dataclass(eq=False)
class Position:
    """One instruction a recorded event issued."""

    stream: int
    engine: int
    kind: int
    dur: int
    flops_adj: int
    throttle: bool
    dma: bool
    aux_dynamic: bool
    #: Access-conflict lists it joins (tracer.sim.records.PORT_*), 0 for none.
    ports: int
    #: DMA queue group (the semaphore stream of a transfer), -1 for other instructions.
    group: int
    recipe: tuple[Any, ...]
    #: Dependencies on other streams, in the order the tracker found them: (source kind, source, dependency type).
    deps: tuple[tuple[int, int, int], ...]
    #: What the instruction read and wrote, for re-issuing it through the general path:
    #: ``("B", block role, p0, p1, f0, f1, is_full)`` or ``("H", tensor role)``.
    reads: tuple[tuple[Any, ...], ...]
    writes: tuple[tuple[Any, ...], ...]
    #: Where its layer and operator names come from: the names in force at the segment's start (``("A", 0)``,
    #: ``("A", 1)``) or the k-th scope entered in the segment (``("S", k)``).
    lsrc: tuple[str, int]
    osrc: tuple[str, int]
    #: A PE transpose's adjusted FLOPs (``flops_adj`` holds a matmul's: the model's work).
    transpose_flops: int = 0

    def key(self) -> tuple[Any, ...]:
        """Everything that identifies the position (for sharing trie nodes)."""
        return (self.stream, self.engine, self.kind, self.dur, self.flops_adj, self.throttle, self.dma,
                self.aux_dynamic, self.ports, self.group, self.recipe, self.deps, self.reads, self.writes, self.lsrc,
                self.osrc, self.transpose_flops)


class Node:
    """One event of a recorded segment."""

    __slots__ = ("children", "code", "depth", "first", "fn", "guards", "kind", "lasti", "op", "params", "parent",
                 "positions", "sib", "spec", "variant")

    def __init__(self, kind: int, spec: tuple[Any, ...], guards: tuple[Any, ...],
                 positions: tuple[Position, ...], parent: Node | None) -> None:
        self.kind = kind
        self.spec = spec
        self.guards = guards
        self.positions = positions
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        #: Children in the order they were recorded (``first`` then each ``sib``), and by key for insertion.
        self.first: Node | None = None
        self.sib: Node | None = None
        self.children: dict[tuple[Any, ...], Node] = {}
        self.variant: Variant | None = None
        #: (code, lasti) of the kernel call (operations, allocations) or of the loop (markers).
        self.code: Any = None
        self.lasti = -1
        #: The operation name (operations) or memory (allocations), compared by the matching API methods.
        self.op = spec[0] if kind in (0, 1) else None
        #: Generated matching function and its constants (see tracer.sim.fastpath.match).
        self.fn: Any = None
        self.params: tuple[Any, ...] = ()

    def key(self) -> tuple[Any, ...]:
        """Identity of the node among its siblings."""
        return (self.spec, self.guards, tuple(p.key() for p in self.positions))

    def path(self) -> list[Node]:
        """The nodes from the root's first event down to this node."""
        out = []
        node: Node | None = self
        while node is not None and node.parent is not None:
            out.append(node)
            node = node.parent
        out.reverse()
        return out

    def add_child(self, node: Node) -> Node:
        """Insert ``node`` below this one, or return the existing equal child."""
        key = node.key()
        old = self.children.get(key)
        if old is not None:
            return old
        node.parent = self
        node.depth = self.depth + 1
        self.children[key] = node
        if self.first is None:
            self.first = node
        else:
            last = self.first
            while last.sib is not None:
                last = last.sib
            last.sib = node
        return node


@dataclass(eq=False)
class Variant:
    """Everything needed to schedule a recorded segment in one go (see tracer.sim.fastpath.schedule)."""

    uid: int
    positions: list[Position]
    #: Per event, in order: (event kind, instructions issued before it, memory of a usage counter or None).
    events: list[tuple[int, int, Any]]
    n_blocks: int
    n_tensors: int
    n_leaves: int
    #: Per block role then per tensor role: (structure signature, structure, sources of its producers).
    outputs: list[tuple[int, tuple[Any, ...], tuple[tuple[int, int], ...]]]
    #: Streams (and DMA groups) in order of first use, with the position of their last instruction.
    last: list[tuple[int, int]]
    #: Flow edges for the emitter: (position, source kind, source, dependency type), in trace order.
    edges: list[tuple[int, int, int, int]]
    #: Leaves the edges use, in edge order of first use.
    edge_leaves: list[int]
    #: Roles whose names or addresses the recipes use, for the binding key.
    name_roles: list[tuple[str, int]] = field(default_factory=list)
    #: Templates per binding: binding -> (template ids, templates).
    tids: dict[tuple[Any, ...], tuple[list[int], list[Any]]] = field(default_factory=dict)
    run: Any = None
    commits: int = 0


def substitute(recipe: Any, blocks: list[Any], names: dict[tuple[str, int], str]) -> Any:
    """The template key of ``recipe`` with the segment's current blocks and tile names (HBM tensors are no part of
    a key: a DMA trigger's ``aux`` names its tensor)."""
    if type(recipe) is VKey:
        addr = recipe.addr
        if type(addr) is tuple:
            return VKey(recipe[0], blocks[addr[1]].addr, *recipe[2:])
        return recipe
    if type(recipe) is tuple:
        if len(recipe) == 2 and recipe[0] == "@N":
            return names[recipe[1]]
        return tuple(substitute(x, blocks, names) for x in recipe)
    return recipe


def substitution(recipe: Any) -> Callable[[list[Any], dict[Any, str]], Any]:
    """``substitute`` for one recipe, prepared once: a function of (blocks, names) that rebuilds only the
    parts of the recipe that name a role and reuses the rest as they are (a variant's recipes are substituted
    again for every new set of buffers)."""
    if not has_refs(recipe):
        return lambda _b, _n: recipe
    new = tuple.__new__
    if type(recipe) is VKey:
        role, head, rest = recipe.addr[1], recipe[0], tuple(recipe[2:])
        return lambda b, _n: new(VKey, (head, b[role].addr, *rest))
    if len(recipe) == 2 and recipe[0] == "@N":
        role = recipe[1]
        return lambda _b, n: n[role]
    base = list(recipe)
    parts = [(i, substitution(x)) for i, x in enumerate(recipe) if has_refs(x)]

    def rebuilt(b: list[Any], n: dict[Any, str]) -> tuple[Any, ...]:
        out = base.copy()
        for i, sub in parts:
            out[i] = sub(b, n)
        return tuple(out)

    return rebuilt


def has_refs(recipe: Any) -> bool:
    """True when ``recipe`` names a role (else it is already a key)."""
    if type(recipe) is VKey:
        return type(recipe.addr) is tuple
    if type(recipe) is tuple:
        if len(recipe) == 2 and recipe[0] == "@N":
            return True
        return any(has_refs(x) for x in recipe)
    return False
