"""Recording a segment: the general path runs every event, and the recorder notes what it did in role terms.

While a segment runs through the general path (validation, template keys, dependency tracking, scheduling), the
recorder keeps, per event, a *spec* that says exactly what the kernel passed (tile roles and bounds, HBM roles and
shapes, plain values, the calling line) and what the dependency records it first touched looked like, and per
instruction issued a :class:`~tracer.sim.fastpath.trie.Position`: its template as a recipe, and where each of its
dependencies came from (an earlier instruction of the segment, or an input *leaf*).  At the segment's end it notes
the records every touched block and tensor was left with.  The result is a path of trie nodes and a variant.

Roles: tiles allocated in the segment are *local* (``L``, by allocation order), tiles that already existed are
*outer* (``O``, by first use); blocks and tensors are numbered by first touch.  A producer found in a record at
first touch becomes a leaf; the recorder replaces it by a distinct copy so dependencies can be traced to it by
identity.  Comparisons the tracker makes between two leaves become guards of the event that made them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tracer.sim import tracker
from tracer.sim.fastpath import state
from tracer.sim.fastpath.trie import (
    ALLOC,
    COMMIT,
    ENTER,
    EXIT,
    FREE,
    OP,
    SRC_DMA,
    SRC_INSTR,
    SRC_LEAF,
    Node,
    Position,
    Variant,
)
from tracer.sim.memory import HbmTensor, HbmView, Tile, TileView
from tracer.sim.records import KIND_DMA, KIND_MATMUL, S_VECTOR, VKey

#: Plain argument types an event spec can hold (matched by type and value).
VALUE_TYPES = (str, bool, int, float, type(None), np.floating, np.integer)


class Unrecordable(Exception):
    """The segment did something the fast path does not replay; the recording is dropped."""


def written_sig(tile: Tile) -> Any:
    """What is known to be written in ``tile``: all, nothing, or the mask."""
    if tile.full_written:
        return "F"
    if tile.written is None:
        return "N"
    return ("M", tile.written.tobytes())


class Recorder:
    """Records one segment as it runs through the general path (see the module docstring)."""

    def __init__(self, fast: Any, root: Node, ub: int, ambient: tuple[Any, Any] | None = None) -> None:
        self.fast = fast
        self.ctx = fast.ctx
        self.core = fast.core
        self.root = root
        self.token = object()
        self.ub = ub
        self.blocks: list[Any] = []
        self.tensors: list[Any] = []
        self.obj_role: dict[int, tuple[str, int]] = {}
        self.tile_roles: dict[int, tuple[str, int]] = {}
        self.n_local = 0
        self.n_outer = 0
        self.names: dict[tuple[str, int], str] = {}
        self.leaves: list[tuple[Any, ...]] = []
        self.leaf_id: dict[int, int] = {}
        self.internal: dict[int, int] = {}
        self.keep: list[Any] = []           # keeps internal producers alive so their ids stay unique
        self.positions: list[Position] = []
        self.events: list[list[Any]] = []   # [kind, spec, guards, first position, n positions, code, lasti]
        self.cur: list[Any] | None = None
        self.vec_internal = False
        self.ambient_vec = self.core.stream_seq[S_VECTOR]
        self.dst_role: tuple[str, int] | None = None
        # layer / operator names: the ones in force when the segment starts, then each scope entered in it
        if ambient is None:
            ambient = (self.ctx.cur_layer, self.ctx.cur_operator)
        self.names[("A", 0)], self.names[("A", 1)] = ambient
        self.layer_src: tuple[str, int] = ("A", 0)
        self.op_src: tuple[str, int] = ("A", 1)
        self.src_stack: list[tuple[tuple[str, int], tuple[str, int]]] = []
        self.n_scopes = 0

    # -- first touches and roles ------------------------------------------------------------------------------
    def touch(self, obj: Any) -> int:
        """First touch of a block or tensor in this segment: its signature (its records become leaves)."""
        if obj.touch is self.token:
            raise Unrecordable("a block was touched twice as new")
        obj.touch = self.token
        if isinstance(obj, HbmTensor):
            self.obj_role[id(obj)] = ("T", len(self.tensors))
            self.tensors.append(obj)
        else:
            self.obj_role[id(obj)] = ("B", len(self.blocks))
            self.blocks.append(obj)
        sig = self.fast.interner.id(state.struct_of(obj))
        for p in state.copy_leaves(obj):
            self.leaf_id[id(p)] = len(self.leaves)
            self.leaves.append(p)
        return sig

    def tile_spec(self, x: Any) -> tuple[Any, ...]:
        """Spec of a tile or tile view argument (binding an outer tile on first use)."""
        if type(x) is Tile:
            t, cls, bounds = x, "T", None
        else:
            t, cls, bounds = x.tile, "V", (x.p0, x.p1, x.f0, x.f1)
        role = self.tile_roles.get(t.uid)
        if role is not None:
            return (role[0], cls, role[1], bounds)
        if t.uid > self.ub:
            raise Unrecordable("a tile allocated in the segment was not recorded")
        idx = self.n_outer
        self.n_outer += 1
        self.tile_roles[t.uid] = ("O", idx)
        self.names[("O", idx)] = t.name
        sig = self.touch(t.block)
        return ("O1", cls, idx, bounds, t.shape, t.dtype.name, t.mem, written_sig(t), sig)

    def hbm_spec(self, x: Any) -> tuple[Any, ...]:
        """Spec of an HBM tensor or view argument."""
        if type(x) is HbmTensor:
            t, cls = x, "HT"
            shape = (t.shape[0], t.shape[1], 0)
        else:
            t, cls = x.tensor, "HV"
            shape = (x.r1 - x.r0, x.c1 - x.c0, x.bcast)
        role = self.obj_role.get(id(t))
        if role is not None:
            return ("H", cls, role[1], *shape)
        sig = self.touch(t)
        return ("H1", cls, self.obj_role[id(t)][1], *shape, t.shape, t.dtype.name, t.kind, sig)

    def arg_spec(self, x: Any) -> tuple[Any, ...]:
        """Spec of one operation argument."""
        tx = type(x)
        if tx is Tile or tx is TileView:
            return self.tile_spec(x)
        if tx is HbmView or tx is HbmTensor:
            return self.hbm_spec(x)
        if isinstance(x, VALUE_TYPES):
            if isinstance(x, (float, np.floating)) and math.isnan(x):
                raise Unrecordable("NaN argument")
            return ("V", tx, x)
        raise Unrecordable(f"argument of type {tx.__name__}")

    # -- events ------------------------------------------------------------------------------------------------
    def begin(self, kind: int, spec: tuple[Any, ...], code: Any = None, lasti: int = -1) -> None:
        """Start recording an event."""
        self.cur = [kind, spec, [], len(self.positions), 0, code, lasti]
        self.events.append(self.cur)

    def end(self) -> None:
        """The current event is complete."""
        cur = self.cur
        assert cur is not None
        cur[4] = len(self.positions) - cur[3]
        self.cur = None

    def op(self, name: str, frame: Any, args: tuple[Any, ...]) -> None:
        """Begin an operation event with the (normalised) arguments the kernel passed."""
        specs = tuple(self.arg_spec(x) for x in args)
        dst = args[0] if args else None
        self.dst_role = self.tile_roles.get(dst.tile.uid) if type(dst) in (Tile, TileView) else None
        self.begin(OP, (name, specs), frame.f_code, frame.f_lasti)

    def alloc(self, frame: Any, mem: str, args: tuple[Any, ...], tile: Tile) -> None:
        """Record an allocation the general path just made."""
        shape, dt, name = args
        try:
            hash((shape, dt))
        except TypeError:
            raise Unrecordable("unhashable tile arguments") from None
        blk = tile.block
        role = self.obj_role.get(id(blk)) if blk.touch is self.token else None
        prov = ("again", role[1]) if role is not None else ("new", self.touch(blk))
        idx = self.n_local
        if tile.uid != self.ub + 1 + idx:
            raise Unrecordable("tiles were allocated outside the recorded events")
        self.n_local += 1
        self.tile_roles[tile.uid] = ("L", idx)
        self.names[("L", idx)] = tile.name
        if name is not None and type(name) is not str:
            raise Unrecordable("a tile name that is not a string")
        # the name itself is a parameter of the segment; only whether one was given matters
        self.begin(ALLOC, (mem, type(shape), shape, type(dt), dt, type(name), bool(name), prov, tile.loc), frame.f_code,
                   frame.f_lasti)
        self.end()

    def free(self, tile: Tile) -> None:
        """Record a tile release (before the general path folds its records)."""
        role = self.tile_roles.get(tile.uid)
        if role is None:
            if tile.uid > self.ub:
                raise Unrecordable("a tile allocated in the segment was not recorded")
            idx = self.n_outer
            self.n_outer += 1
            self.tile_roles[tile.uid] = ("O", idx)
            spec: tuple[Any, ...] = ("O1", idx, tile.mem, self.touch(tile.block))
        else:
            spec = role
        self.begin(FREE, (tile.mem, spec))  # the caller ends the event after the release

    def adopt(self, node: Node, m: Any) -> None:
        """Begin an event that was matched before the segment fell back (its roles come from the matcher)."""
        kind, spec = node.kind, node.spec
        if kind == OP:
            for s in spec[1]:
                if s[0] == "O1":
                    idx = s[2]
                    self.tile_roles[m.ouids[idx]] = ("O", idx)
                    self.names[("O", idx)] = m.names[("O", idx)]
                    self.n_outer += 1
                    if self.touch(m.oblk[idx]) != s[8]:
                        raise Unrecordable("an outer block changed while falling back")
                elif s[0] == "H1" and self.touch(m.tensors[s[2]]) != s[9]:
                    raise Unrecordable("an HBM tensor changed while falling back")
            first = spec[1][0] if spec[1] else None
            self.dst_role = (("L" if first[0] == "L" else "O"), first[2]) if first and first[0] in ("L", "O", "O1") \
                else None
        elif kind == ALLOC:
            idx = self.n_local
            self.n_local += 1
            self.tile_roles[self.ub + 1 + idx] = ("L", idx)
            self.names[("L", idx)] = m.names[("L", idx)]
            if spec[7][0] == "new" and self.touch(m.lblk[idx]) != spec[7][1]:
                raise Unrecordable("a block changed while falling back")
        elif kind in (ENTER, EXIT):
            self.scope(kind, spec[0], m.names[("S", self.n_scopes)] if kind == ENTER else "")
        elif kind == FREE and spec[1][0] == "O1":
            idx = spec[1][1]
            self.tile_roles[m.ouids[idx]] = ("O", idx)
            self.names[("O", idx)] = m.names[("O", idx)]
            self.n_outer += 1
            if self.touch(m.oblk[idx]) != spec[1][3]:
                raise Unrecordable("an outer block changed while falling back")
        self.begin(kind, spec, node.code, node.lasti)
        self.cur[2].extend(g for g in node.guards if g[0] == "VEQ")

    def scope(self, kind: int, category: str, name: str) -> None:
        """A layer or operator scope entered or left (its name is a parameter of the segment)."""
        if kind == ENTER:
            self.src_stack.append((self.layer_src, self.op_src))
            k = self.n_scopes
            self.n_scopes += 1
            self.names[("S", k)] = name
            if category == "layer":
                self.layer_src = ("S", k)
            else:
                self.op_src = ("S", k)
        else:
            if not self.src_stack:
                raise Unrecordable("a scope left that was entered before the segment")
            self.layer_src, self.op_src = self.src_stack.pop()

    def simple(self, kind: int, spec: tuple[Any, ...]) -> None:
        """A scope entered or left, or an inner loop step."""
        self.begin(kind, spec)
        self.end()

    # -- instruction issue (replaces KernelContext.issue while recording) ----------------------------------------
    def _rw(self, v: Any) -> tuple[Any, ...]:
        if v.mem == "HBM":
            t = v.tensor
            if t.touch is not self.token:
                raise Unrecordable("an HBM tensor was used before its first touch")
            return ("H", self.obj_role[id(t)][1])
        blk = v.tile.block
        if blk.touch is not self.token:
            raise Unrecordable("a block was used before its first touch")
        return ("B", self.obj_role[id(blk)][1], v.p0, v.p1, v.f0, v.f1, bool(v.is_full))

    def _source(self, p: tuple[Any, ...]) -> tuple[int, int]:
        pos = self.internal.get(id(p))
        if pos is not None:
            return (SRC_DMA if self.positions[pos].dma else SRC_INSTR, pos)
        leaf = self.leaf_id.get(id(p))
        if leaf is None:
            raise Unrecordable("a dependency came from an unrecorded producer")
        return (SRC_LEAF, leaf)

    def issue(self, tid: int, reads: list[Any], writes: list[Any], aux: int = -1) -> tuple[Any, ...]:
        """Resolve, schedule and record one instruction (as KernelContext.issue), noting its position."""
        if self.cur is None or self.cur[0] != OP:
            raise Unrecordable("an instruction outside an operation")
        rd = tuple(self._rw(v) for v in reads)
        wr = tuple(self._rw(v) for v in writes)
        core = self.core
        tpl = core.templates[tid]
        deps = tracker.resolve(reads, writes)
        srcs = tuple((*self._source(p), kind) for s, (p, kind) in deps.items() if s != tpl.stream)
        pinfo = core.execute(tid, deps, aux)
        tracker.update(reads, writes, pinfo)
        self.ctx.last_pinfo[pinfo[0]] = pinfo
        self.internal[id(pinfo)] = len(self.positions)
        self.keep.append(pinfo)
        if tpl.stream == S_VECTOR:
            self.vec_internal = True
        self.positions.append(Position(
            stream=tpl.stream, engine=tpl.engine, kind=tpl.kind, dur=tpl.dur,
            flops_adj=0 if tpl.tensor_type == "TRANSPOSE" else tpl.flops_adj or 0,
            transpose_flops=(tpl.flops_adj or 0) if tpl.tensor_type == "TRANSPOSE" else 0,
            throttle=tpl.kind == KIND_MATMUL and core.cm.throttle_enabled, dma=tpl.kind == KIND_DMA,
            aux_dynamic=aux != -1, ports=tpl.ports,
            group=tpl.dma.group if tpl.dma is not None else -1, recipe=self.recipe(tpl.key),
            deps=srcs, reads=rd, writes=wr, lsrc=self.layer_src, osrc=self.op_src))
        core = self.core
        if core.lyr_code != core.name_code(self.names[self.layer_src]) or \
                core.hlo_code != core.name_code(self.names[self.op_src]):
            raise Unrecordable("layer or operator name out of step with the scopes")
        return pinfo

    def recipe(self, key: Any) -> Any:
        """``key`` with block addresses, tensor names and SBUF->SBUF tile names replaced by role references."""
        if key[0] == "DMA" and key[10] is not None:
            if self.dst_role is None:
                raise Unrecordable("an SBUF to SBUF copy without a tile destination")
            key = (*key[:10], ("@N", self.dst_role), *key[11:])
        return self._refs(key)

    def _refs(self, x: Any) -> Any:
        tx = type(x)
        if tx is VKey:
            for r, blk in enumerate(self.blocks):
                if blk.addr == x.addr and blk.mem == x.mem and blk.touch is self.token:
                    return x._replace(addr=("@B", r))
            raise Unrecordable("a template names a block outside the segment")
        if tx is tuple:
            if len(x) == 2 and x[0] == "@N":
                return x
            return tuple(self._refs(y) for y in x)
        return x

    # -- guards --------------------------------------------------------------------------------------------------
    def compared(self, new: tuple[Any, ...], cur: tuple[Any, ...]) -> None:
        """The tracker compared two producers of one stream (tracker.COMPARE_HOOK)."""
        a = self.leaf_id.get(id(new))
        b = self.leaf_id.get(id(cur))
        if a is not None and b is not None and self.cur is not None:
            self.cur[2].append(("CMP", a, b, new[1] > cur[1]))

    def vector_check(self, p: tuple[Any, ...], last: int) -> None:
        """An element-wise Vector operation asked whether producer ``p`` was the last Vector instruction."""
        if p[0] != S_VECTOR or self.vec_internal or self.cur is None:
            return
        leaf = self.leaf_id.get(id(p))
        if leaf is not None:
            self.cur[2].append(("VEQ", leaf, p[1] == last))

    # -- the end -------------------------------------------------------------------------------------------------
    def finish(self, spec: tuple[Any, ...], code: Any, lasti: int) -> Node:
        """Close the segment at a commit point: insert its path into the trie; returns the COMMIT node."""
        self.begin(COMMIT, spec, code, lasti)
        self.end()
        outputs = []
        for obj in (*self.blocks, *self.tensors):
            struct = state.struct_of(obj)
            srcs = tuple(self._source(p) for p in state.leaves_of(obj))
            outputs.append((self.fast.interner.id(struct), struct, srcs))
        node = self.root
        for kind, spec_e, guards, first, n, code_e, lasti_e in self.events:
            child = Node(kind, spec_e, tuple(guards), tuple(self.positions[first:first + n]), node)
            child.code, child.lasti = code_e, lasti_e
            node = node.add_child(child)
        if node.variant is None:
            node.variant = self._variant(outputs)
        return node

    def _variant(self, outputs: list[Any]) -> Variant:
        events = []
        scope_events = (ALLOC, FREE, ENTER, EXIT)
        for kind, spec, _g, first, _n, _c, _l in self.events:
            if kind in scope_events:
                mem = spec[0] if kind in (ALLOC, FREE) else None
                events.append((kind, first, mem))
        last: dict[int, int] = {}
        order: list[int] = []
        edges = []
        edge_leaves: list[int] = []
        for j, p in enumerate(self.positions):
            key = p.group if p.dma else p.stream
            if key not in last:
                order.append(key)
            last[key] = j
            for kind, src, dep in p.deps:
                edges.append((j, kind, src, dep))
                if kind == SRC_LEAF and src not in edge_leaves:
                    edge_leaves.append(src)
        name_roles = sorted({ref for p in self.positions for ref in _name_refs(p.recipe)})
        return Variant(uid=-1, positions=list(self.positions), events=events,
                       n_blocks=len(self.blocks), n_tensors=len(self.tensors), n_leaves=len(self.leaves),
                       outputs=outputs, last=[(s, last[s]) for s in order], edges=edges, edge_leaves=edge_leaves,
                       name_roles=name_roles)


def _name_refs(x: Any) -> list[tuple[str, int]]:
    if type(x) is tuple:
        if len(x) == 2 and x[0] == "@N":
            return [x[1]]
        out = []
        for y in x:
            out.extend(_name_refs(y))
        return out
    return []
