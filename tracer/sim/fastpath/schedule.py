"""Straight-line scheduling code for a recorded segment (one generated function per variant).

The function performs, for every instruction of the segment in order, exactly what
:meth:`tracer.sim.core.Core.execute` does -- the start is the latest of the stream being free, the engine having
issued its previous instruction, (for MultiplyMoving) the weights being loaded and every semaphore wait being met;
busy time, frontier, last end, DMA transfers, the Trn2 throttle, usage counters in event order -- but on local
variables, with the dependency structure fixed in the code: a dependency is a local (an earlier instruction of the
segment) or an input leaf ``V[k]``.  It then writes the core's state and trace columns back in bulk and returns
the producers the segment leaves in the records of the blocks and tensors it touched.
"""

from __future__ import annotations

from typing import Any

from tracer.sim.fastpath.trie import ALLOC, FREE, SRC_DMA, SRC_INSTR, Variant
from tracer.sim.records import S_MATRIX, S_TENSOR, TABLE_INSTRUCTION

_USAGE = {"SBUF": ("sbuf_usage_bytes", "B"), "PSUM": ("psum_banks_in_use", "banks")}


def _ready(kind: int, src: int) -> str:
    if kind == SRC_INSTR:
        return f"e{src}"
    if kind == SRC_DMA:
        return f"r{src}"
    return f"V[{src}][2]"


def source(var: Variant) -> str:
    """Python source of the variant's ``run(core, ctx, V, AUX, T, TIDS, CV, SEGS, NF)`` function."""
    pos = var.positions
    streams = sorted({p.stream for p in pos})
    engines = sorted({p.engine for p in pos})
    uses_pw = any(p.stream in (S_MATRIX, S_TENSOR) for p in pos)
    lines = ["def run(core, ctx, V, AUX, T, TIDS, CV, SEGS, NF):",
             " SF = core.stream_free; EI = core.engine_issue; SQ = core.stream_seq",
             " CS = core.cur_s; CE = core.cur_e; BU = core.busy",
             " fr = core.frontier; ln = core.last_ns; i0 = core.n; x0 = core.n_xfers"]
    add = lines.append
    for s in streams:
        add(f" sf{s} = SF[{s}]; q{s} = SQ[{s}]")
    for e in engines:
        add(f" ei{e} = EI[{e}]; cs{e} = CS[{e}]; ce{e} = CE[{e}]; bu{e} = BU[{e}]")
    if uses_pw:
        add(" pw = core.pe_weights_ready")
    if any(p.dma for p in pos):
        add(" XF = core._transfer")
    if any(p.throttle for p in pos):
        add(" TH = core._throttled")
    counters = [(before, mem) for kind, before, mem in var.events if kind in (ALLOC, FREE)]
    if counters:
        add(" CA = core._counters.append")
    seq_count = dict.fromkeys(streams, 0)
    eng_count = dict.fromkeys(engines, 0)
    flops = 0
    aux_k = 0
    aux_exprs = []
    c_i = 0
    pinfo: dict[int, str] = {}
    for j, p in enumerate(pos):
        while c_i < len(counters) and counters[c_i][0] <= j:
            name, unit = _USAGE[counters[c_i][1]]
            add(f" CA((fr, {name!r}, CV[{c_i}], {unit!r}))")
            c_i += 1
        s, e = p.stream, p.engine
        add(f" r = sf{s}")
        add(f" if ei{e} > r: r = ei{e}")
        if s == S_MATRIX:
            add(" if pw > r: r = pw")
        waits = [(k, src) for k, src, _dep in p.deps]
        if waits:
            add(" w = 0")
            for k, src in waits:
                add(f" v = {_ready(k, src)}")
                add(" if v > w: w = v")
            add(f" if w > r: st = w; w{j} = w - r")
            add(f" else: st = r; w{j} = 0")
        else:
            add(f" st = r; w{j} = 0")
        if p.throttle:
            add(f" e{j} = st + TH(T[{j}], st)")
        else:
            add(f" e{j} = st + {p.dur}")
        add(f" sf{s} = e{j}; ei{e} = st; s{j} = st")
        if s == S_TENSOR:
            add(f" pw = e{j}")
        add(f" if st > ce{e}: bu{e} += ce{e} - cs{e}; cs{e} = st; ce{e} = e{j}")
        add(f" elif e{j} > ce{e}: ce{e} = e{j}")
        add(" if st > fr: fr = st")
        seq_count[s] += 1
        eng_count[e] += 1
        flops += p.flops_adj
        if p.dma:
            aux = f"AUX[{aux_k}]" if p.aux_dynamic else "-1"
            if p.aux_dynamic:
                aux_k += 1
            aux_exprs.append(aux)
            add(f" P{j} = XF(T[{j}], i0 + {j}, st, {aux}); r{j} = P{j}[2]")
            add(f" if r{j} > ln: ln = r{j}")
            pinfo[j] = f"P{j}"
        else:
            aux_exprs.append("-1")
            add(f" if e{j} > ln: ln = e{j}")
            pinfo[j] = f"({s}, q{s} + {seq_count[s]}, e{j}, {TABLE_INSTRUCTION}, i0 + {j})"
    while c_i < len(counters):
        name, unit = _USAGE[counters[c_i][1]]
        add(f" CA((fr, {name!r}, CV[{c_i}], {unit!r}))")
        c_i += 1
    n = len(pos)
    for s in streams:
        add(f" SF[{s}] = sf{s}; SQ[{s}] = q{s} + {seq_count[s]}")
    add(" IPE = core.instructions_per_engine")
    for e in engines:
        add(f" EI[{e}] = ei{e}; CS[{e}] = cs{e}; CE[{e}] = ce{e}; BU[{e}] = bu{e}; IPE[{e}] += {eng_count[e]}")
    if uses_pw:
        add(" core.pe_weights_ready = pw")
    add(f" core.frontier = fr; core.last_ns = ln; core.n = i0 + {n}")
    if flops:
        add(f" core.pe_flops += {flops}")
    add(" C = core._cols")
    add(f" C['start'].extend(({''.join(f's{j}, ' for j in range(n))}))")
    add(f" C['end'].extend(({''.join(f'e{j}, ' for j in range(n))}))")
    add(f" C['wait'].extend(({''.join(f'w{j}, ' for j in range(n))}))")
    add(f" C['aux'].extend(({''.join(f'{a}, ' for a in aux_exprs)}))")
    add(" C['tid'].extend(TIDS)")
    add(" LP = ctx.last_pinfo")
    for key, j in var.last:
        add(f" LP[{key}] = {pinfo[j]}")
    leaves = "".join(f"V[{k}], " for k in var.edge_leaves)
    add(f" if SEGS is not None: SEGS.append(({var.uid}, i0, x0, ({leaves})))")
    outs = []
    for _sig, _struct, srcs in var.outputs:
        for kind, src in srcs:
            outs.append(pinfo[src] if kind in (SRC_INSTR, SRC_DMA) else f"V[{src}]")
    out = f"({''.join(f'{o}, ' for o in outs)})"
    fins = "".join(f"r{j}, " if p.dma else f"e{j}, " for j, p in enumerate(pos))
    starts = "".join(f"s{j}, " for j in range(n))
    add(f" if NF: return {out}, ({starts}), ({fins})")
    add(f" return {out}, None, None")
    return "\n".join(lines) + "\n"


def compile_variant(var: Variant) -> Any:
    """The variant's generated ``run`` function."""
    namespace: dict[str, Any] = {}
    exec(compile(source(var), f"<trnprof segment {var.uid}>", "exec"), namespace)
    return namespace["run"]
