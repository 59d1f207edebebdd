"""Canonical form of the dependency records of one block or HBM tensor: structure, leaves, materialisation.

The dependency tracker (:mod:`tracer.sim.tracker`) keeps, per SBUF/PSUM block, writer records
``[p0, p1, f0, f1, pinfo]``, reader records per stream and inherited ``(pinfo, kind)`` per stream, and per HBM
tensor the latest writer and reader ``pinfo`` per stream.  Everything the tracker decides depends on the
*structure* of these records (regions, streams, kinds, order) and on comparisons between the producers' sequence
numbers.  A record set is therefore split into

* its structure: a hashable tuple, interned to a small int (the block's *signature*), and
* its leaves: the producer ``pinfo`` tuples, in a fixed order.

The loop fast path matches signatures, carries leaves from segment to segment, and writes records back
(:func:`materialise`) only when the general path needs them.
"""

from __future__ import annotations

from typing import Any

Struct = tuple[Any, ...]


def block_struct(block: Any) -> Struct:
    """The structure of ``block``'s records (regions, streams and kinds, in order)."""
    inh = block.inherited
    return ("B",
            tuple((r[0], r[1], r[2], r[3], r[4][0]) for r in block.writers),
            tuple((s, r[0], r[1], r[2], r[3]) for s, r in block.readers.items()),
            None if inh is None else tuple((s, e[1]) for s, e in inh.items()))


def block_leaves(block: Any) -> list[tuple[Any, ...]]:
    """The producers of ``block``'s records, in structure order."""
    out = [r[4] for r in block.writers]
    out.extend(r[4] for r in block.readers.values())
    if block.inherited is not None:
        out.extend(e[0] for e in block.inherited.values())
    return out


def tensor_struct(tensor: Any) -> Struct:
    """The structure of an HBM tensor's records: its writer streams and reader streams, in order."""
    return ("T", tuple(tensor.writers), tuple(tensor.readers))


def tensor_leaves(tensor: Any) -> list[tuple[Any, ...]]:
    """The producers of an HBM tensor's records, in structure order."""
    return [*tensor.writers.values(), *tensor.readers.values()]


def struct_of(obj: Any) -> Struct:
    """Structure of a block or tensor."""
    return block_struct(obj) if hasattr(obj, "inherited") else tensor_struct(obj)


def leaves_of(obj: Any) -> list[tuple[Any, ...]]:
    """Leaves of a block or tensor."""
    return block_leaves(obj) if hasattr(obj, "inherited") else tensor_leaves(obj)


def copy_leaves(obj: Any) -> list[tuple[Any, ...]]:
    """Replace every producer in ``obj``'s records by an equal but distinct tuple and return them in order.

    A recording identifies where a dependency came from by object identity; fresh copies make every leaf unique
    (the same producer may sit in several records) without changing any value.
    """
    out: list[tuple[Any, ...]] = []
    if hasattr(obj, "inherited"):
        for r in obj.writers:
            r[4] = p = (*r[4],)
            out.append(p)
        for r in obj.readers.values():
            r[4] = p = (*r[4],)
            out.append(p)
        if obj.inherited is not None:
            for s, (p0, kind) in list(obj.inherited.items()):
                p = (*p0,)
                obj.inherited[s] = (p, kind)
                out.append(p)
    else:
        for d in (obj.writers, obj.readers):
            for s, p0 in list(d.items()):
                d[s] = p = (*p0,)
                out.append(p)
    return out


def materialise(obj: Any, struct: Struct, vals: Any, off: int) -> None:
    """Write records of structure ``struct`` with producers ``vals[off:]`` into ``obj`` (a block or tensor)."""
    if struct[0] == "B":
        _, w, rd, inh = struct
        i = off
        writers = []
        for p0, p1, f0, f1, _s in w:
            writers.append([p0, p1, f0, f1, vals[i]])
            i += 1
        readers = {}
        for s, p0, p1, f0, f1 in rd:
            readers[s] = [p0, p1, f0, f1, vals[i]]
            i += 1
        obj.writers = writers
        obj.readers = readers
        if inh is None:
            obj.inherited = None
        else:
            inherited = {}
            for s, kind in inh:
                inherited[s] = (vals[i], kind)
                i += 1
            obj.inherited = inherited
    else:
        _, ws, rs = struct
        i = off
        writers = {}
        for s in ws:
            writers[s] = vals[i]
            i += 1
        readers = {}
        for s in rs:
            readers[s] = vals[i]
            i += 1
        obj.writers = writers
        obj.readers = readers


def n_leaves(struct: Struct) -> int:
    """Number of producers a structure holds."""
    if struct[0] == "B":
        return len(struct[1]) + len(struct[2]) + (0 if struct[3] is None else len(struct[3]))
    return len(struct[1]) + len(struct[2])


def leaf_streams(struct: Struct) -> list[int]:
    """The stream of each leaf of ``struct``, in order."""
    if struct[0] == "B":
        out = [w[4] for w in struct[1]]
        out.extend(r[0] for r in struct[2])
        if struct[3] is not None:
            out.extend(s for s, _k in struct[3])
        return out
    return [*struct[1], *struct[2]]


class Interner:
    """Small ints for structures (and back)."""

    __slots__ = ("ids", "structs")

    def __init__(self) -> None:
        self.ids: dict[Struct, int] = {}
        self.structs: list[Struct] = []

    def id(self, struct: Struct) -> int:
        """The signature of ``struct``."""
        sid = self.ids.get(struct)
        if sid is None:
            sid = self.ids[struct] = len(self.structs)
            self.structs.append(struct)
        return sid
