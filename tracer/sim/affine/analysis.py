"""Checking a traced affine loop against NKI's contract, and what its expansion needs to know about it.

For each affine loop (outermost first, then nested ones):

* **Same work in both passes.** Pass 2 (any later iteration) must do what pass 1 (the first iteration) did:
  the same operations from the same lines on the same tiles (by allocation position), the same slices and
  scopes.  Only releases may differ (pass 1 may drop tiles from before the loop, pass 2 drops those of the
  previous iteration).  A difference means the body depends on Python state an iteration changed: an error.
* **No loop-carried tiles.** Pass 2 must not read or write a tile of the previous iteration, and a tile of
  one iteration must be released (dropped by the kernel) by the end of the next one (not kept in a list).
* **Pairs.** The (pass-1 slot, pass-2 slot) of each allocation, so the expansion can tell, in iteration ``k``,
  which tile of iteration ``k - 1`` a release refers to.
* **Replay flags.** A loop whose index selects on-chip regions, or changes a slice's size, does different work
  in each iteration (its iterations are run one by one); the HBM tensors the loop touches.
"""

from __future__ import annotations

import weakref
from typing import Any

from tracer.errors import KernelError
from tracer.sim.affine.events import AFFINE, ALLOC, BCAST, EXIT, FREE, LOOP, OP, VIEW, LoopNode, iter_events
from tracer.sim.affine.index import Affine, depends_on, same
from tracer.sim.affine.recorder import SlotInfo

_HINT = "use nc.sequential_range(...) or range(...) for a loop whose iterations depend on each other"


class _Align:
    """The correspondence between the two passes of one loop (slots, slices, nested loop variables)."""

    def __init__(self, node: LoopNode, slots: list[SlotInfo]) -> None:
        self.node = node
        self.slots = slots
        self.slot_map: dict[int, int] = {}
        self.view_map: dict[int, int] = {}
        self.var_map: dict[Any, Any] = {}
        self.pairs: list[tuple[int, int]] = []

    def in_pass1(self, slot: int) -> bool:
        anc = self.slots[slot].anc
        return any(n is self.node and p == 0 for n, p in anc)

    def fail(self, where: str, what: str) -> KernelError:
        return KernelError(f"{where}: the body of the nc.affine_range loop at {self.node.where} {what}; its "
                           f"iterations must not depend on each other ({_HINT})")


def check(node: LoopNode, slots: list[SlotInfo]) -> None:
    """Check ``node`` and every loop nested in it; fill pairs and flags (see the module docstring)."""
    if node.kind == AFFINE and len(node.bodies) == 2:
        al = _Align(node, slots)
        _align_bodies(al, node.bodies[0], node.bodies[1])
        node.pairs = al.pairs
        _check_survivors(al)
        _check_frees(al, node.bodies[1])
    _flags(node)
    for body in node.bodies:
        for ev in body:
            if ev[0] == LOOP:
                check(ev[1], slots)


def _events(body: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [ev for ev in body if ev[0] != FREE]


def _align_bodies(al: _Align, b1: list[tuple[Any, ...]], b2: list[tuple[Any, ...]]) -> None:
    e1, e2 = _events(b1), _events(b2)
    for a, b in zip(e1, e2, strict=False):
        _align_event(al, a, b)
    if len(e1) != len(e2):
        extra = (e1 if len(e1) > len(e2) else e2)[min(len(e1), len(e2))]
        where = _event_where(extra) or al.node.where
        raise al.fail(where, "did more work in one iteration than in another")


def _event_where(ev: tuple[Any, ...]) -> str | None:
    k = ev[0]
    if k == ALLOC:
        return ev[6]
    if k == OP:
        return ev[2]
    if k in (VIEW, BCAST):
        return ev[4]
    if k == LOOP:
        return ev[1].where
    return None


def _align_event(al: _Align, a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    where = _event_where(b) or _event_where(a) or al.node.where
    if a[0] != b[0]:
        raise al.fail(where, "did different things in its first and later iterations")
    k = a[0]
    if k == ALLOC:
        if a[2:] != b[2:]:
            raise al.fail(where, "allocated a different tile in its first and later iterations")
        al.slot_map[a[1]] = b[1]
        al.pairs.append((a[1], b[1]))
    elif k == OP:
        if a[1] != b[1] or a[2] != b[2] or len(a[3]) != len(b[3]):
            raise al.fail(where, "issued different operations in its first and later iterations")
        for da, db in zip(a[3], b[3], strict=True):
            _align_desc(al, da, db, where)
    elif k == VIEW:
        if a[4] != b[4] or not _same_parts(al, a[3], b[3]):
            raise al.fail(where, "sliced differently in its first and later iterations")
        _align_desc(al, a[2], b[2], where)
        al.view_map[a[1]] = b[1]
    elif k == BCAST:
        if a[3:] != b[3:] or al.view_map.get(a[2]) != b[2]:
            raise al.fail(where, "sliced differently in its first and later iterations")
        al.view_map[a[1]] = b[1]
    elif k == LOOP:
        na, nb = a[1], b[1]
        if (na.kind, na.start, na.step, na.n, na.where) != (nb.kind, nb.start, nb.step, nb.n, nb.where) or \
                len(na.bodies) != len(nb.bodies) or na.values != nb.values:
            raise al.fail(where, "ran a nested loop differently in its first and later iterations")
        if na.var is not None:
            al.var_map[na.var] = nb.var
        for ba, bb in zip(na.bodies, nb.bodies, strict=True):
            _align_bodies(al, ba, bb)
    elif a != b:  # ENTER / EXIT
        raise al.fail(where, f"{'left' if k == EXIT else 'entered'} a different scope in its first and later "
                             "iterations")


def _same_expr(al: _Align, x: Any, y: Any) -> bool:
    if isinstance(x, Affine):
        if not isinstance(y, Affine) or x.const != y.const or len(x.terms) != len(y.terms):
            return False
        return all(y.terms.get(al.var_map.get(v, v), 0) == c for v, c in x.terms.items())
    return same(x, y)


def _same_parts(al: _Align, pa: tuple[Any, ...], pb: tuple[Any, ...]) -> bool:
    if len(pa) != len(pb):
        return False
    for x, y in zip(pa, pb, strict=True):
        if x[0] != y[0] or len(x) != len(y):
            return False
        if not all(_same_expr(al, u, v) for u, v in zip(x[1:], y[1:], strict=True)):
            return False
    return True


def _align_ref(al: _Align, ra: Any, rb: Any, where: str) -> None:
    if isinstance(rb, int) and al.in_pass1(rb):
        raise al.fail(where, "uses a tile of the previous iteration")
    if isinstance(ra, int):
        if not isinstance(rb, int) or al.slot_map.get(ra, ra) != rb:
            raise al.fail(where, "used different tiles in its first and later iterations")
    elif isinstance(ra, weakref.ref) and (not isinstance(rb, weakref.ref) or ra() is not rb()):
        raise al.fail(where, "used different tiles in its first and later iterations")


def _align_desc(al: _Align, da: tuple[Any, ...], db: tuple[Any, ...], where: str) -> None:
    if da[0] != db[0]:
        raise al.fail(where, "passed different arguments in its first and later iterations")
    kind = da[0]
    if kind == "T":
        _align_ref(al, da[1], db[1], where)
    elif kind == "V":
        _align_ref(al, da[1], db[1], where)
        if da[2:] != db[2:]:
            raise al.fail(where, "sliced a tile differently in its first and later iterations")
    elif kind == "SV":
        if al.view_map.get(da[1], da[1]) != db[1]:
            raise al.fail(where, "passed different slices in its first and later iterations")
    elif kind in ("H", "HV"):
        if da[1] is not db[1] or da[2:] != db[2:]:
            raise al.fail(where, "passed different HBM slices in its first and later iterations")
    else:
        va, vb = da[1], db[1]
        if type(va) is not type(vb) or not (va is vb or _plain_equal(va, vb)):
            raise al.fail(where, "passed different values in its first and later iterations")


def _plain_equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # arrays, objects without a plain truth value: only identity counts
        return False


def _check_survivors(al: _Align) -> None:
    """Every tile of the first iteration must be dropped by the end of the second (not kept across iterations)."""
    node = al.node
    for info in al.slots:
        if not any(n is node and p == 0 for n, p in info.anc):
            continue
        if info.freed is None and info.obj() is not None:
            name, where = info.event[5], info.event[6]
            what = f"tile {name}" if name else "the tile"
            raise KernelError(f"{where}: {what} allocated in the nc.affine_range body at {node.where} is still "
                              "referenced two iterations later (kept in a list or a variable the next iteration "
                              "does not replace); tiles of an affine loop live for one iteration; use "
                              "nc.static_range(...) or range(...) for a loop that keeps its tiles, or allocate one "
                              "larger tile before the loop")


def _check_frees(al: _Align, body2: list[tuple[Any, ...]]) -> None:
    """Releases in later iterations may only drop tiles of this or the previous iteration."""
    for ev in iter_events(body2):
        if ev[0] == FREE and not isinstance(ev[1], int):
            tile = ev[1]
            raise KernelError(f"{tile.loc}: tile {tile.name} from before the nc.affine_range loop at "
                              f"{al.node.where} is released in its second iteration, so it was kept by the "
                              f"first one ({_HINT})")


def _flags(node: LoopNode) -> None:
    """Whether on-chip regions or slice sizes depend on this loop's index; the HBM tensors it touches."""
    var = node.var
    indexdep = False
    tensors: dict[int, Any] = {}
    for ev in (e for b in node.bodies for e in iter_events(b)):
        if ev[0] == VIEW:
            src, parts = ev[2], ev[3]
            if src[0] == "H":
                tensors[id(src[1])] = src[1]
            if var is not None and src[0] != "H" and any(depends_on(x, var) for p in parts for x in p[1:]):
                indexdep = True
        elif ev[0] == OP:
            for d in ev[3]:
                if d[0] in ("H", "HV"):
                    tensors[id(d[1])] = d[1]
    node.flags["indexdep"] = indexdep
    node.tensors = list(tensors.values())

