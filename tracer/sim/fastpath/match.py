"""Matching a running kernel against recorded segments: generated checks per trie node, and the API methods.

While a segment is matched, the kernel's calls (``nc.matmul(...)``, ``nc.sbuf_tile(...)``, a tile released) go to
the methods built here instead of the general path (a scope entered or left is matched by its category alone, in
:meth:`tracer.sim.fastpath.controller.FastPath._scope_match`).  Each method looks for the child of
the current trie node recorded at the same call site whose generated function ``fn`` accepts the arguments --
same tiles (by role: allocated in this segment, or bound to an outer role), same bounds, same HBM tensors and view
shapes, same plain values, and, for blocks and tensors touched for the first time, the same record structure and
the same outcome of every producer comparison the recording depended on (its guards).  All checks come first and
change nothing (a failed one returns None); then ``fn`` does the event's live part: binding roles, tile allocation
and release in the allocators, written-state marks, the HBM offset of DMA triggers, counter values, the new input
leaves.  The scheduling itself waits for the segment's end (:mod:`tracer.sim.fastpath.schedule`).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections import deque
from typing import TYPE_CHECKING, Any

from tracer.sim.fastpath import state
from tracer.sim.fastpath.trie import ALLOC, FREE, OP, Node
from tracer.sim.memory import SBUF, HbmTensor, HbmView, Tile, TileView
from tracer.sim.records import AUX_TENSOR_SHIFT

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from tracer.sim.fastpath.controller import FastPath

#: Operations of the kernel API and the arguments they write (by position).
OPS: dict[str, tuple[int, ...]] = {
    "dma_copy": (0,), "dma_transpose": (0,), "matmul": (0,), "transpose": (0,), "activation": (0, 5),
    "tensor_tensor": (0,), "tensor_scalar": (0,), "tensor_reduce": (0,), "tensor_copy": (0,), "memset": (0,),
    "iota": (0,), "partition_reduce": (0,), "affine_select": (0,), "bn_stats": (0,), "bn_aggr": (0,),
    "tensor_scalar_reduce": (0, 4), "scalar_tensor_tensor": (0,), "tensor_tensor_scan": (0,),
    "max8": (0,), "find_index8": (0,), "match_replace8": (0, 4), "select_reduce": (0, 4),
}
ALLOCS = {"sbuf_tile": "SBUF", "psum_tile": "PSUM"}


class Segment:
    """The matcher's state for the segment being matched."""

    __slots__ = ("aux", "blocks", "cv", "lblk", "leaves", "lnames", "n", "names", "node", "nsc", "oblk", "open0",
                 "ouids", "scopes", "tensors", "token", "ub", "vec0")

    def __init__(self, root: Node, ub: int, vec0: int, open0: list[Any]) -> None:
        self.node = root
        self.token = object()
        self.ub = ub
        self.vec0 = vec0
        self.open0 = open0
        self.blocks: list[Any] = []
        self.tensors: list[Any] = []
        self.ouids: list[int] = []
        self.names: dict[tuple[str, int], str] = {}
        #: Names of the tiles allocated in the segment, in order (role ("L", i)); see :meth:`all_names`.
        self.lnames: list[str] = []
        self.leaves: list[tuple[Any, ...]] = []
        self.aux: list[int] = []
        self.cv: list[float] = []
        self.scopes: list[tuple[int, int, Any]] = []
        self.nsc = 0
        self.lblk: list[Any] = []
        self.oblk: list[Any] = []
        self.n = 0


def all_names(m: Segment) -> dict[tuple[str, int], Any]:
    """``m.names`` with the names of the tiles allocated in the segment (kept apart while matching) added."""
    names = m.names
    for i, name in enumerate(m.lnames):
        names[("L", i)] = name
    return names


def sig_and_leaves(fast: FastPath, obj: Any) -> tuple[int, Any]:
    """Signature and leaves of a block or tensor's current records (lazy ones come from the segment that left
    them)."""
    z = obj.lz_seg
    if z is not None:
        r = obj.lz_role
        offs = z.offs
        return z.sigs[r], z.vals[offs[r]:offs[r + 1]]
    return fast.interner.id(state.struct_of(obj)), state.leaves_of(obj)


def bump_sig_and_leaves(fast: FastPath, alloc: Any) -> tuple[int, Any]:
    """Signature and leaves of the block :meth:`Allocator.alloc` would create at the free top of memory."""
    inh = alloc.bump_inherited
    struct = ("B", (), (), None if not inh else tuple((s, e[1]) for s, e in inh.items()))
    return fast.interner.id(struct), [] if not inh else [e[0] for e in inh.values()]


# -- code generation for one node ------------------------------------------------------------------------------

class _Gen:
    def __init__(self, node: Node, n_leaves_before: int) -> None:
        self.node = node
        self.k0 = n_leaves_before
        self.chk = [" u = M.ub + 1", " nv = ()"]
        self.app: list[str] = []
        self.params: list[Any] = []
        self.n_new = 0
        self.bound_o: dict[int, str] = {}   # outer roles bound earlier in this event -> local holding the tile
        self.bound_h: dict[int, str] = {}   # tensor roles bound earlier in this event -> local holding the tensor

    def p(self, value: Any) -> str:
        """A node constant, as ``P[k]`` in the generated code."""
        self.params.append(value)
        return f"P[{len(self.params) - 1}]"

    def fail(self, cond: str) -> None:
        self.chk.append(f" if {cond}: return None")

    def tile(self, i: int, spec: tuple[Any, ...]) -> None:
        kind, cls = spec[0], spec[1]
        a = f"a{i}"
        if cls == "T":
            self.fail(f"{a}.__class__ is not Tile")
            self.chk.append(f" t{i} = {a}")
        else:
            self.fail(f"{a}.__class__ is not TileView")
            self.chk.append(f" t{i} = {a}.tile")
            b = spec[3]
            self.fail(f"{a}.p0 != {self.p(b[0])} or {a}.p1 != {self.p(b[1])} or {a}.f0 != {self.p(b[2])} "
                      f"or {a}.f1 != {self.p(b[3])}")
        if kind == "L":
            self.fail(f"t{i}.uid != u + {self.p(spec[2])}")
        elif kind == "O":
            held = self.bound_o.get(spec[2])
            self.fail(f"t{i}.uid != " + (f"{held}.uid" if held else f"M.ouids[{self.p(spec[2])}]"))
        else:  # O1: an outer tile used for the first time
            _k, _c, idx, _b, shape, dt, mem, wsig, bsig = spec
            self.fail(f"t{i}.uid >= u or t{i}.block.touch is M.token")
            self.fail(f"t{i}.shape != {self.p(shape)} or t{i}.dtype.name != {self.p(dt)} or t{i}.mem != {self.p(mem)}")
            self.fail(f"WSIG(t{i}) != {self.p(wsig)}")
            self.first_touch(f"t{i}.block", bsig)
            self.bound_o[idx] = f"t{i}"
            self.app.append(f" t = a{i}" + (".tile" if cls == "V" else ""))
            self.app.append(" M.names[('O', len(M.ouids))] = t.name; M.ouids.append(t.uid); b = t.block")
            self.app.append(" b.touch = M.token; M.blocks.append(b); M.oblk.append(b)")

    def first_touch(self, obj: str, sig: int) -> None:
        self.chk.append(f" sg, lv = SIGLV(FP, {obj})")
        self.fail(f"sg != {self.p(sig)}")
        self.chk.append(" nv = (*nv, *lv)")
        self.n_new += 1

    def hbm(self, i: int, spec: tuple[Any, ...]) -> None:
        kind, cls, idx, nrows, ncols, bcast = spec[:6]
        a = f"a{i}"
        if cls == "HT":
            self.fail(f"{a}.__class__ is not HbmTensor")
            self.chk.append(f" h{i} = {a}")
        else:
            self.fail(f"{a}.__class__ is not HbmView")
            self.chk.append(f" h{i} = {a}.tensor")
            self.fail(f"{a}.r1 - {a}.r0 != {self.p(nrows)} or {a}.c1 - {a}.c0 != {self.p(ncols)} "
                      f"or {a}.bcast != {self.p(bcast)}")
        if kind == "H":
            held = self.bound_h.get(idx)
            self.fail(f"h{i} is not " + (held or f"M.tensors[{self.p(idx)}]"))
        else:
            tshape, dt, tkind, tsig = spec[6:]
            self.fail(f"h{i}.touch is M.token or h{i}.shape != {self.p(tshape)} or h{i}.dtype.name != {self.p(dt)} "
                      f"or h{i}.kind != {self.p(tkind)}")
            self.first_touch(f"h{i}", tsig)
            self.bound_h[idx] = f"h{i}"
            self.app.append(f" h = a{i}" + (".tensor" if cls == "HV" else ""))
            self.app.append(" h.touch = M.token; M.tensors.append(h)")

    def value(self, i: int, spec: tuple[Any, ...]) -> None:
        _v, typ, value = spec
        v = self.p(value)  # identity first: the same object again (a constant of the call site) needs no other test
        self.fail(f"a{i} is not {v} and (a{i}.__class__ is not {self.p(typ)} or a{i} != {v})")

    def guards(self) -> None:
        def leaf(k: int) -> str:
            return f"M.leaves[{self.p(k)}]" if k < self.k0 else f"nv[{self.p(k - self.k0)}]"

        for g in self.node.guards:
            if g[0] == "CMP":
                self.fail(f"({leaf(g[1])}[1] > {leaf(g[2])}[1]) != {self.p(g[3])}")
            else:
                self.fail(f"({leaf(g[1])}[0] == 2 and {leaf(g[1])}[1] == M.vec0) != {self.p(g[2])}")

    def finish(self, fast: FastPath, nargs: int, result: str) -> tuple[Any, tuple[Any, ...]]:
        """Compile ``fn(M, a0, ..., P)``: every check, then (all passed) the event's live part; returns None when
        the event does not match, else ``result``."""
        self.guards()
        if self.n_new:
            self.app.append(" M.leaves.extend(nv)")
        args = "".join(f"a{i}, " for i in range(nargs))
        body = [f"def fn(M, {args}P):", *self.chk, *self.app, f" return {result}"]
        # nodes of the same shape share code (their constants come in ``P``); the cache belongs to the run's FastPath,
        # which the code refers to (a module-wide cache kept every finished run alive).  Keyed by the untrimmed
        # source: a shape seen before skips the searches below (a recording of a few thousand events builds one
        # function per event, most of them shapes seen before)
        key = "\n".join(body)
        code = fast.match_code.get(key)
        if code is None:
            used = "\n".join(body[3:])
            if not _U.search(used):
                body.remove(" u = M.ub + 1")
            if not _NV.search(used):
                body.remove(" nv = ()")
            src = "\n".join(body) + "\n"
            ns: dict[str, Any] = {"Tile": Tile, "TileView": TileView, "HbmView": HbmView, "HbmTensor": HbmTensor,
                                  "SIGLV": sig_and_leaves, "BUMP": bump_sig_and_leaves, "WSIG": _wsig, "FP": fast,
                                  "CTX": fast.ctx, "SBUF": SBUF, "TNEW": Tile.__new__, "DEQUE": deque}
            exec(compile(src, "<trnprof fast-path match>", "exec"), ns)
            code = fast.match_code[key] = ns["fn"]
        return code, tuple(self.params)


#: Whether a generated body uses ``u`` / ``nv`` (their set-up lines are dropped when not).
_U = re.compile(r"\bu\b")
_NV = re.compile(r"\bnv\b")


def _wsig(tile: Tile) -> Any:
    if tile.full_written:
        return "F"
    if tile.written is None:
        return "N"
    return ("M", tile.written.tobytes())


def build(fast: FastPath, node: Node, n_leaves_before: int) -> None:
    """Generate ``node.chk``, ``node.apply`` and their constants ``node.params``."""
    g = _Gen(node, n_leaves_before)
    spec = node.spec
    kind = node.kind
    if kind == OP:
        name, specs = spec
        for i, s in enumerate(specs):
            if s[0] in ("L", "O", "O1"):
                g.tile(i, s)
            elif s[0] in ("H", "H1"):
                g.hbm(i, s)
            else:
                g.value(i, s)
        for i in OPS[name]:
            if i < len(specs) and specs[i][0] in ("L", "O", "O1"):
                if specs[i][1] == "V":
                    g.app.append(f" t = a{i}.tile")
                    g.app.append(f" if not t.full_written: t.mark_written(a{i})")
                else:  # the whole tile written: what Tile.mark_written does for it, inline
                    g.app.append(f" t = a{i}")
                    g.app.append(" if not t.full_written: t.full_written = True; t.written = None")
        if any(p.aux_dynamic for p in node.positions):
            for i, s in enumerate(specs):
                if s[0] in ("H", "H1"):
                    if s[1] == "HV":  # the tensor's code, then the view's offset (records.dma_aux)
                        g.app.append(f" v = a{i}; h = v.tensor; M.aux.append((h.code << {AUX_TENSOR_SHIFT}) | "
                                     "(v.r0 * h.shape[1] + v.c0))")
                    else:
                        g.app.append(f" M.aux.append(a{i}.code << {AUX_TENSOR_SHIFT})")
        g.app.append(f" M.n += {g.p(len(node.positions))}")
    elif kind == ALLOC:
        from tracer.sim.dtypes import dtype

        mem, tshape, shape, tdt, dt, tname, named, prov, where = spec
        d = dtype(dt)
        nbytes = int(shape[1]) * d.itemsize
        alloc = fast.ctx.sbuf if mem == "SBUF" else fast.ctx.psum
        size = alloc.round_size(nbytes)
        al = "CTX.sbuf" if mem == "SBUF" else "CTX.psum"
        psh = g.p(shape)  # identity first, as for values
        g.fail(f"a0 is not {psh} and (a0.__class__ is not {g.p(tshape)} or a0 != {psh})")
        pdt = g.p(dt)
        g.fail(f"a1 is not {pdt} and (a1.__class__ is not {g.p(tdt)} or a1 != {pdt})")
        g.fail(f"a2.__class__ is not {g.p(tname)} or (not a2) is {g.p(named)}")
        key = g.p((size, where))
        g.chk.append(f" al = {al}")
        g.chk.append(f" q = al.free_by_key.get({key})")
        g.chk.append(" if q is not None and len(q) > al.spare: b = q[0]")
        g.chk.append(" else:")
        g.chk.append(f"  b = al.peek({g.p(nbytes)}, {g.p(where)})")
        g.chk.append("  if b is None: return None")
        if prov[0] == "again":
            g.fail(f"b is not M.blocks[{g.p(prov[1])}]")
        else:
            g.chk.append(" if b is True:")
            g.chk.append("  sg, lv = BUMP(FP, al)")
            g.chk.append(" else:")
            g.chk.append("  if b.touch is M.token: return None")
            g.chk.append("  sg, lv = SIGLV(FP, b)")
            g.fail(f"sg != {g.p(prov[1])}")
            g.chk.append(" nv = (*nv, *lv)")
            g.n_new += 1
        wh = g.p(where)
        g.app += [
            " c = CTX",
            " uid = c._n_tiles = c._n_tiles + 1",
            f" name = a2 or {g.p(mem.lower())} + str(uid)",
            " if b is True:",
            f"  b = al.alloc({g.p(nbytes)}, {wh}, name)",
            " else:",
            "  if q is None or q[0] is not b:",
            f"   q = al.free_by_key[{key}]",
            "  q.popleft()",
            f"  b.owner_parts = (name, {wh})",
            f"  n = al.in_use = al.in_use + {g.p(size)}",
            "  if n > al.peak: al.peak = n",
            "  al.live[id(b)] = b",
            # usage counter values as ints (exact; the counter columns are float64 and take them as they are)
            (f" M.cv.append(al.in_use * {g.p(fast.ctx.cm.partitions)})" if mem == "SBUF"
             else " M.cv.append(al.in_use // al.unit)"),
            " M.lnames.append(name)",
            " t = TNEW(Tile); t.uid = uid; t.ctx = c; t.name = name; t.block = b; t.data = None; t.written = None",
            f" t.shape = {g.p((int(shape[0]), int(shape[1])))}; t.p1 = {g.p(int(shape[0]))}; "
            f"t.f1 = {g.p(int(shape[1]))}; t.dtype = {g.p(d)}",
            f" t.mem = {g.p(mem)}; t.loc = {wh}; t.full_written = False",
        ]
        if prov[0] != "again":
            g.app.append(" b.touch = M.token; M.blocks.append(b)")
        g.app.append(" M.lblk.append(b)")
    elif kind == FREE:
        mem, tspec = spec
        if tspec[0] == "L":
            g.fail(f"a0.uid != u + {g.p(tspec[1])}")
        elif tspec[0] == "O":
            g.fail(f"a0.uid != M.ouids[{g.p(tspec[1])}]")
        else:
            g.fail("a0.uid >= u or a0.block.touch is M.token")
            g.first_touch("a0.block", tspec[3])
            g.app.append(" M.names[('O', len(M.ouids))] = a0.name; M.ouids.append(a0.uid); b = a0.block")
            g.app.append(" b.touch = M.token; M.blocks.append(b); M.oblk.append(b)")
        g.app += [
            " b = a0.block",
            f" al = {'CTX.sbuf' if mem == 'SBUF' else 'CTX.psum'}",
            " if al.live.pop(id(b), None) is not None:",
            "  s = b.size",
            "  al.in_use -= s",
            "  k = (s, b.site)",
            "  q = al.free_by_key.get(k)",
            "  if q is None: q = al.free_by_key[k] = DEQUE()",
            "  q.append(b)",
            # usage counter values as ints (exact; the counter columns are float64 and take them as they are)
            (f" M.cv.append(al.in_use * {g.p(fast.ctx.cm.partitions)})" if mem == "SBUF"
             else " M.cv.append(al.in_use // al.unit)"),
        ]
    if kind == OP:
        node.fn, node.params = g.finish(fast, len(spec[1]), "True")
    elif kind == ALLOC:
        node.fn, node.params = g.finish(fast, 3, "t")
    elif kind == FREE:
        node.fn, node.params = g.finish(fast, 1, "True")
    else:  # scope events are matched by FastPath._scope_match itself
        raise ValueError(f"trnprof fast path: no generated check for a node of kind {kind}")


def new_leaves(fast: FastPath, node: Node) -> int:
    """Input leaves the node's first touches add (the leaves before the next node: :func:`build`'s
    ``n_leaves_before``)."""
    spec = node.spec
    sigs = []
    if node.kind == OP:
        for s in spec[1]:
            if s[0] == "O1":
                sigs.append(s[8])
            elif s[0] == "H1":
                sigs.append(s[9])
    elif node.kind == ALLOC and spec[7][0] == "new":
        sigs.append(spec[7][1])
    elif node.kind == FREE and spec[1][0] == "O1":
        sigs.append(spec[1][3])
    return sum(state.n_leaves(fast.interner.structs[s]) for s in sigs)


# -- the API methods used while matching ---------------------------------------------------------------------------
def make_methods(fast: FastPath) -> dict[str, Any]:
    """Bound replacements for the kernel API methods, with the same signatures."""
    from tracer.sim.context import KernelContext

    def body(name: str, args: str) -> str:
        kind = ALLOC if name in ALLOCS else OP
        tag = name if kind == OP else ALLOCS[name]
        return "\n".join([
            " f = GF(1)",
            " M = FP.m",
            " c = f.f_code",
            " l = f.f_lasti",
            " node = M.node.first",
            " while node is not None:",
            f"  if node.code is c and node.lasti == l and node.op == {tag!r}:",
            f"   r = node.fn(M, {args}node.params)",
            "   if r is not None:",
            "    M.node = node",
            "    return r" if kind == ALLOC else "    return None",
            "  node = node.sib",
            f" return FP.mismatch({name!r}, f, ({args}))",
        ]) + "\n"

    ns = {"GF": sys._getframe, "FP": fast}
    methods = {name: _define(KernelContext, name, "match", body, ns) for name in [*OPS, *ALLOCS]}

    def release_tile(tile: Tile) -> None:
        M = fast.m
        node = M.node.first
        while node is not None:
            if node.kind == FREE and node.fn(M, tile, node.params) is not None:
                M.node = node
                return
            node = node.sib
        fast.free_mismatch(tile)

    methods["release_tile"] = release_tile
    return methods


def forwarders(cls: type, names: Iterable[str], target: Any, call: Callable[[str], str]) -> dict[str, Any]:
    """Functions with the signatures of ``cls``'s methods ``names`` (after ``self``) that return
    ``target.<call(name)>(name, the caller's frame, (their arguments,))``: what the fast path's recording and the
    affine tracer install on a kernel context in place of its API methods."""
    ns = {"GF": sys._getframe, "T": target}
    return {name: _define(cls, name, f"forward to {call(name)}",
                          lambda n, args: f" return T.{call(n)}({n!r}, GF(1), ({args}))\n", ns)
            for name in names}


#: Generated methods compiled once per process: (class, method, its function, body kind) -> (code, defaults).  Each
#: fast path and affine tracer of a run used to write and compile ~80 of them (5 ms of a small kernel's ~15 ms).
_COMPILED: dict[tuple[Any, ...], tuple[Any, dict[str, Any]]] = {}


def _define(cls: type, name: str, kind: str, body: Callable[[str, str], str], ns: dict[str, Any]) -> Any:
    """A function with the signature of ``cls``'s method ``name`` (after ``self``, defaults as ``D_<name>``
    globals) and the source ``body(name, "its, arguments, ")``, with ``ns`` as its other globals."""
    fn = getattr(cls, name)
    key = (cls, name, fn, kind)
    got = _COMPILED.get(key)
    if got is None:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())[1:]
        src = f"def {name}{signature_text(sig)}:\n" + body(name, "".join(p.name + ", " for p in params))
        defaults = {f"D_{p.name}": p.default for p in params if p.default is not inspect.Parameter.empty}
        got = _COMPILED[key] = (compile(src, f"<trnprof {kind}: {name}>", "exec"), defaults)
    code, defaults = got
    g = {**ns, **defaults}
    exec(code, g)
    return g[name]


def signature_text(sig: inspect.Signature) -> str:
    """A method's parameters after ``self`` as source text, defaults as ``D_<name>`` globals."""
    parts = []
    star = False
    for p in list(sig.parameters.values())[1:]:
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}=D_{p.name}")
    return f"({', '.join(parts)})"
