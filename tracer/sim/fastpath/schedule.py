"""Scheduling a matched segment in one go: a tight loop over its variant's precomputed instruction table.

For every instruction of the segment, in order, :func:`run` does exactly what
:meth:`tracer.sim.core.Core.execute` does -- the start is the latest of the stream being free, the engine having
issued its previous instruction, (for MultiplyMoving) the weights being loaded and every semaphore wait being met;
busy time, frontier, last end, DMA transfers, the Trn2 throttle, usage counters in event order -- but with the
dependency structure precomputed: a dependency is an index into one list of ready times holding the segment's
instructions then its input leaves.  Validation, template lookup and dependency resolution are gone; what is left
is a handful of list operations per instruction.  It then writes the trace columns in bulk and returns the
producers the segment leaves in the records of the blocks and tensors it touched.
"""

# Hot path: `if a > b: b = a` is about twice as fast as `b = max(a, b)` in CPython.
# ruff: noqa: PLR1730

from __future__ import annotations

from typing import Any

from tracer.sim.fastpath.trie import ALLOC, FREE, SRC_LEAF, Variant
from tracer.sim.records import S_MATRIX, S_TENSOR, TABLE_INSTRUCTION

F_MATRIX, F_TENSOR, F_THROTTLE, F_DMA, F_AUX, F_EXPORT, F_COUNTERS = 1, 2, 4, 8, 16, 32, 64
_USAGE = {"SBUF": ("sbuf_usage_bytes", "B"), "PSUM": ("psum_banks_in_use", "banks")}


class Program:
    """A variant's instruction table and what to do around it."""

    __slots__ = ("counters", "edge_leaves", "eng_counts", "flops", "last", "n", "out_src", "rows", "uid")

    def __init__(self, var: Variant) -> None:
        pos = var.positions
        n = len(pos)
        self.n = n
        self.uid = var.uid
        needed = set()
        for _sig, _struct, srcs in var.outputs:
            needed.update(src for kind, src in srcs if kind != SRC_LEAF)
        needed.update(j for _key, j in var.last)
        counters: dict[int, list[tuple[int, str, str]]] = {}
        c = 0
        for kind, before, mem in var.events:
            if kind in (ALLOC, FREE):
                counters.setdefault(before, []).append((c, *_USAGE[mem]))
                c += 1
        rows = []
        for j, p in enumerate(pos):
            flag = 0
            if p.stream == S_MATRIX:
                flag |= F_MATRIX
            if p.stream == S_TENSOR:
                flag |= F_TENSOR
            if p.throttle:
                flag |= F_THROTTLE
            if p.dma:
                flag |= F_DMA
                if p.aux_dynamic:
                    flag |= F_AUX
            if j in needed:
                flag |= F_EXPORT
            if j in counters:
                flag |= F_COUNTERS
            deps = tuple(src + (n if kind == SRC_LEAF else 0) for kind, src, _dep in p.deps)
            rows.append((p.stream, p.engine, p.dur, deps, flag))
        self.rows = rows
        self.counters = counters
        self.edge_leaves = list(var.edge_leaves)
        eng: dict[int, int] = {}
        for p in pos:
            eng[p.engine] = eng.get(p.engine, 0) + 1
        self.eng_counts = sorted(eng.items())
        self.flops = sum(p.flops_adj for p in pos)
        self.last = var.last
        self.out_src = [(kind == SRC_LEAF, src) for _sig, _struct, srcs in var.outputs for kind, src in srcs]


def run(prog: Program, core: Any, ctx: Any, leaves: list[Any], aux: list[int], tpls: list[Any],  # noqa: PLR0917
        tids: list[int], cv: list[float], segs: list[Any] | None,
        need_fins: bool) -> tuple[tuple[Any, ...], list[int] | None, list[int] | None]:
    """Schedule the segment of ``prog``; returns (producers left in records, starts, finish times)."""
    n = prog.n
    SF, EI, SQ = core.stream_free, core.engine_issue, core.stream_seq
    CS, CE, BU = core.cur_s, core.cur_e, core.busy
    fr, ln, pw = core.frontier, core.last_ns, core.pe_weights_ready
    i0, x0 = core.n, core.n_xfers
    R = [0] * n
    R.extend(lv[2] for lv in leaves)
    S: list[int] = []
    E: list[int] = []
    W: list[int] = []
    A: list[int] = []
    P: dict[int, Any] = {}
    fins: list[int] | None = [] if need_fins else None
    counters = prog.counters
    ca = core._counters.append
    xf = core._transfer
    th = core._throttled
    ai = 0
    for j, (s, e, dur, deps, flag) in enumerate(prog.rows):
        if flag & F_COUNTERS:
            for c, name, unit in counters[j]:
                ca((fr, name, cv[c], unit))
        r = SF[s]
        x = EI[e]
        if x > r:
            r = x
        if flag & F_MATRIX and pw > r:
            r = pw
        w = 0
        for d in deps:
            v = R[d]
            if v > w:
                w = v
        if w > r:
            st = w
            W.append(w - r)
        else:
            st = r
            W.append(0)
        en = st + (th(tpls[j], st) if flag & F_THROTTLE else dur)
        SF[s] = en
        EI[e] = st
        if flag & F_TENSOR:
            pw = en
        ce = CE[e]
        if st > ce:
            BU[e] += ce - CS[e]
            CS[e] = st
            CE[e] = en
        elif en > ce:
            CE[e] = en
        if st > fr:
            fr = st
        S.append(st)
        E.append(en)
        SQ[s] += 1
        if flag & F_DMA:
            if flag & F_AUX:
                a = aux[ai]
                ai += 1
            else:
                a = -1
            A.append(a)
            p = xf(tpls[j], i0 + j, st, a)
            fin = p[2]
            if flag & F_EXPORT:
                P[j] = p
        else:
            A.append(-1)
            fin = en
            if flag & F_EXPORT:
                P[j] = (s, SQ[s], en, TABLE_INSTRUCTION, i0 + j)
        R[j] = fin
        if fin > ln:
            ln = fin
        if fins is not None:
            fins.append(fin)
    if n in counters:
        for c, name, unit in counters[n]:
            ca((fr, name, cv[c], unit))
    core.frontier = fr
    core.last_ns = ln
    core.pe_weights_ready = pw
    core.n = i0 + n
    ipe = core.instructions_per_engine
    for e, k in prog.eng_counts:
        ipe[e] += k
    if prog.flops:
        core.pe_flops += prog.flops
    cols = core._cols
    cols["start"].extend(S)
    cols["end"].extend(E)
    cols["wait"].extend(W)
    cols["aux"].extend(A)
    cols["tid"].extend(tids)
    lp = ctx.last_pinfo
    for key, j2 in prog.last:
        lp[key] = P[j2]
    if segs is not None:
        segs.append((prog.uid, i0, x0, tuple([leaves[k] for k in prog.edge_leaves])))
    outs = tuple([leaves[src] if is_leaf else P[src] for is_leaf, src in prog.out_src])
    return outs, (S if need_fins else None), fins


def program(var: Variant) -> Program:
    """The variant's :class:`Program`."""
    return Program(var)
