"""Scheduling a matched segment in one go: a tight loop over its variant's precomputed instruction table.

For every instruction of the segment, in order, :func:`run` does what :meth:`tracer.sim.core.Core.execute` does
-- the start is the latest of the stream being free, the engine having issued its previous instruction, (for
MultiplyMoving) the weights being loaded and every semaphore wait being met; frontier, last end, DMA transfers,
the Trn2 throttle, usage counters in event order -- with the dependency structure precomputed: a dependency is an
index into one list of ready times holding the segment's instructions then its input leaves.  Validation, template
lookup and dependency resolution are gone.  DMA transfers that load every queue alike while the DMA state
is uniform (:meth:`Core._transfer_uniform`, shares split around other packets alike on every queue included) and
the Trn2 throttle (:meth:`Core._throttled`) are computed inline, on local copies of the core's state, with the same
arithmetic.  The trace columns are written in bulk.

The loop itself runs compiled (:mod:`tracer.sim.fastpath.schedule_jit`, numba) once a run has enough fast-path work
to repay loading numba; :func:`_schedule` here is the same loop in Python, used before that, for short segments,
with ``TRNPROF_JIT=0`` and without numba.  Everything around the loop (producers, columns, counters) is shared.
"""

# Hot path: `if a > b: b = a` is about twice as fast as `b = max(a, b)` in CPython.
# ruff: noqa: PLR1730

from __future__ import annotations

import marshal
import math
from array import array
from itertools import accumulate
from operator import itemgetter
from typing import Any

import numpy as np

from tracer.sim.fastpath import schedule_jit
from tracer.sim.fastpath.schedule_kernel import K_DMA, K_MATRIX, K_PLAIN, K_TENSOR, K_THROTTLE, place_lists
from tracer.sim.fastpath.trie import ALLOC, FREE, SRC_LEAF, Variant
from tracer.sim.records import C_PSUM, C_SBUF, C_THROTTLE, S_MATRIX, S_TENSOR, TABLE_INSTRUCTION, TABLE_PACKET

# Kinds of instruction rows (the scheduling loop branches on them; defined with the compiled loop): K_PLAIN any
# other engine, K_TENSOR LoadStationary (loads the weights MultiplyMoving waits for), K_MATRIX MultiplyMoving /
# transpose, K_THROTTLE the same under the Trn2 throttle, K_DMA a DMA trigger.
_USAGE = {"SBUF": C_SBUF, "PSUM": C_PSUM}


class Program:
    """A variant's instruction table and what to do around it."""

    __slots__ = ("aux", "aux_rows", "counter_before", "counter_kind", "counters", "edge_pick", "eng_counts",
                 "exports", "flops", "has_dma", "has_ports", "has_throttle", "jit", "last", "n", "out_src", "rows",
                 "scope_lengths", "scope_sources", "seq_counts", "transpose_flops", "uid")

    def __init__(self, var: Variant) -> None:
        pos = var.positions
        n = len(pos)
        self.n = n
        self.uid = var.uid
        needed = set()
        for _sig, _struct, srcs in var.outputs:
            needed.update(src for kind, src in srcs if kind != SRC_LEAF)
        needed.update(j for _key, j in var.last)
        #: Usage counters, in event order: (instructions before it, counter kind).
        counters: list[tuple[int, int]] = []
        for kind, before, mem in var.events:
            if kind in (ALLOC, FREE):
                counters.append((before, _USAGE[mem]))
        rows = []
        #: Instructions whose producer tuple is needed afterwards: (position, stream, seq offset).
        exports: list[tuple[int, int, int]] = []
        seq: dict[int, int] = {}
        for j, p in enumerate(pos):
            if p.dma:
                kind = K_DMA
            elif p.stream == S_TENSOR:
                kind = K_TENSOR
            elif p.stream == S_MATRIX:
                kind = K_THROTTLE if p.throttle else K_MATRIX
            else:
                kind = K_PLAIN
            seq[p.stream] = seq.get(p.stream, 0) + 1
            deps = tuple(src + (n if k == SRC_LEAF else 0) for k, src, _dep in p.deps)
            rows.append((p.stream, p.engine, p.dur, deps, kind, p.aux_dynamic, p.ports))
            if j in needed and not p.dma:
                exports.append((j, p.stream, seq[p.stream]))
        self.rows = rows
        self.exports = exports
        runs: list[list[Any]] = []
        for p in pos:
            if runs and runs[-1][1] == p.lsrc and runs[-1][2] == p.osrc:
                runs[-1][0] += 1
            else:
                runs.append([1, p.lsrc, p.osrc])
        #: Runs of instructions with the same layer and operator, in order: their layer and operator name sources,
        #: and their lengths (numpy repeats the runs' name codes when there are several).
        self.scope_sources = ([r[1] for r in runs], [r[2] for r in runs])
        self.scope_lengths = np.array([r[0] for r in runs], np.int64)
        self.seq_counts = sorted(seq.items())
        self.aux = array("q", [-1]) * n
        self.has_dma = any(p.dma for p in pos)
        self.has_throttle = any(p.throttle for p in pos)
        self.has_ports = any(p.ports for p in pos)
        self.counters = counters
        #: The same as columns: instructions before each usage sample, and its counter kind.
        self.counter_before = [before for before, _k in counters]
        self.counter_kind = [k for _before, k in counters]
        #: ``leaves`` -> the leaves the segment's edges name (producer tuples), in order, for ``s_leaf`` (None: none).
        self.edge_pick = _picker(list(var.edge_leaves))
        eng: dict[int, int] = {}
        for p in pos:
            eng[p.engine] = eng.get(p.engine, 0) + 1
        self.eng_counts = sorted(eng.items())
        self.flops = sum(p.flops_adj for p in pos)
        self.transpose_flops = sum(p.transpose_flops for p in pos)
        self.last = var.last
        self.out_src = [(kind == SRC_LEAF, src) for _sig, _struct, srcs in var.outputs for kind, src in srcs]
        #: The DMA rows that take the segment's dynamic aux values, in order.
        self.aux_rows = [j for j, r in enumerate(rows) if r[4] == K_DMA and r[5]]
        #: The compiled loop's arrays (:class:`tracer.sim.fastpath.schedule_jit.ProgramArrays`), made on first use.
        self.jit: Any = None


def run(prog: Program, core: Any, ctx: Any, leaves: list[Any], aux: list[int], tpls: list[Any],  # noqa: PLR0917
        tids: list[int], cv: list[float], segs: dict[str, Any] | None, need_fins: bool,
        names: dict[tuple[str, int], Any]) -> tuple[tuple[Any, ...], list[int] | None, list[int] | None]:
    """Schedule the segment of ``prog``; returns (producers left in records, starts, finish times)."""
    n = prog.n
    SQ = core.stream_seq
    q_base = list(SQ)
    fr0 = core.frontier
    i0, x0 = core.n, core.n_xfers
    A = prog.aux[:]
    for j, a in zip(prog.aux_rows, aux):  # noqa: B905  (aux may hold more values than the rows take)
        A[j] = a
    P: dict[int, Any] = {}
    if schedule_jit.use(n):  # arrays: S, E, W, R (and the column writes below take them as they are)
        S, E, W, R = schedule_jit.schedule(prog, core, leaves, A, tpls, tids, cv, P, put, _flush_dma)
    else:
        S, E, W, R, TC = _schedule(prog, core, leaves, A, tpls, P)
        if prog.counters or TC[0]:
            front = list(accumulate(S, max, initial=fr0))
            _counters(core._cols, prog, cv, TC, [front[before] for before in prog.counter_before])
    Ex = E if type(E) is list else E.tolist()
    for j2, s, k in prog.exports:
        P[j2] = (s, q_base[s] + k, Ex[j2], TABLE_INSTRUCTION, i0 + j2)
    core.n = i0 + n
    for s, k in prog.seq_counts:
        SQ[s] += k
    ipe = core.instructions_per_engine
    for e, k in prog.eng_counts:
        ipe[e] += k
    if prog.flops:
        core.pe_flops += prog.flops
    if prog.transpose_flops:
        core.pe_transpose_flops += prog.transpose_flops
    cols = core._cols
    put(cols["start"], S)
    put(cols["end"], E)
    put(cols["wait"], W)
    put(cols["aux"], A)
    put(cols["tid"], tids if type(S) is list else prog.jit.tid_array(tids)[0])
    code = core.name_code
    ly, hl = cols["lyr"], cols["hlo"]
    lsrc, osrc = prog.scope_sources
    if len(lsrc) == 1:  # every instruction has the same layer and operator
        ly.extend(array(ly.typecode, (code(names[lsrc[0]]),)) * n)
        hl.extend(array(hl.typecode, (code(names[osrc[0]]),)) * n)
    elif lsrc:
        put(ly, np.repeat(np.array([code(names[r]) for r in lsrc], np.int64), prog.scope_lengths))
        put(hl, np.repeat(np.array([code(names[r]) for r in osrc], np.int64), prog.scope_lengths))
    lp = ctx.last_pinfo
    for key, j2 in prog.last:
        lp[key] = P[j2]
    if segs is not None:
        segs["s_var"].append(prog.uid)
        segs["s_i0"].append(i0)
        segs["s_x0"].append(x0)
        if prog.edge_pick is not None:  # the producers its edges name, marshalled (Chunk.s_leaf)
            segs["s_leaf"].append(marshal.dumps(prog.edge_pick(leaves), 2))
    outs = tuple([leaves[src] if is_leaf else P[src] for is_leaf, src in prog.out_src])
    if need_fins:
        if type(S) is not list:
            return outs, S.tolist(), R[:n].tolist()
        return outs, S, R[:n]
    return outs, None, None


def _picker(idx: list[int]) -> Any:
    """A function: list -> tuple of its items at ``idx`` (a tuple even for one index; ``None`` for none)."""
    if not idx:
        return None
    if len(idx) == 1:
        k = idx[0]
        return lambda values: (values[k],)
    return itemgetter(*idx)


def put(col: array, values: Any) -> None:
    """Append ``values`` (a list, an array, or a numpy array: copied as bytes, in the column's type) to the array
    ``col``."""
    tv = type(values)
    if tv is np.ndarray:
        col.frombytes(memoryview(np.ascontiguousarray(values, col.typecode)).cast("B"))
    elif tv is array and values.typecode != col.typecode:
        col.extend(values.tolist())
    else:
        col.extend(values)


def _schedule(prog: Program, core: Any, leaves: list[Any], A: list[int], tpls: list[Any],  # noqa: PLR0917
              P: dict[int, Any]) -> tuple[list[int], list[int], list[int], list[int], tuple[list[int], ...]]:
    """The Python scheduling loop: returns (starts, ends, waits, ready times of the rows then the leaves, throttle
    level changes), fills ``P`` with the DMA rows' producers and updates the core's state."""
    n = prog.n
    SF, EI = core.stream_free, core.engine_issue
    fr, ln, pw = core.frontier, core.last_ns, core.pe_weights_ready
    i0 = core.n
    R = [0] * n
    R.extend([lv[2] for lv in leaves])
    S: list[int] = []
    E: list[int] = []
    W: list[int] = []
    TJ: list[int] = []  # throttle level changes: position, time, percent
    TT: list[int] = []
    TP: list[int] = []
    # DMA state (uniform transfers are done here; others by core._transfer after writing this back)
    dma = prog.has_dma
    if dma:
        lat = core.cm.dma_start_latency_ns
        u_qf, u_starts, u_ends = core.u_qf, core.u_starts, core.u_ends
        d_retire, d_rout, d_seq = core.dma_retire, core.dma_retire_out, core.dma_seq
        q0, npk, nx = core.q0, core.n_packets, core.n_xfers
        qbusy, dbytes = core.queue_busy_ns, core.dma_bytes
        XI: list[int] = []
        XT: list[int] = []
        XP: list[int] = []
        XQ: list[int] = []
        XR: list[int] = []
        XO: list[int] = []
        XS: list[int] = []
    # throttle state
    thr = prog.has_throttle
    if thr:
        tcm = core.cm
        TW, TR, TRAMP = tcm.throttle_window_ns, tcm.throttle_reset_utilization, tcm.throttle_ramp_ns
        f0 = tcm.throttle_start_fraction
        win = core.thr_window
        t_busy, t_rs, t_pct = core.thr_busy, core.thr_ramp_start, core.thr_level_pct
    if prog.has_ports and core.port_arrays is not None:
        core.port_arrays.ports_out(core)
    ps, pe, pf = core.port_s, core.port_e, core.port_f
    for j, (s, e, dur0, deps, kind, _auxd, ports) in enumerate(prog.rows):
        r = SF[s]
        x = EI[e]
        if x > r:
            r = x
        if kind >= K_MATRIX and kind != K_DMA and pw > r:
            r = pw
        w = 0
        for d in deps:
            v = R[d]
            if v > w:
                w = v
        if w > r:
            W.append(w - r)
            r = w
        else:
            W.append(0)
        if ports:
            r = place_lists(ps, pe, pf, ports, r, dur0, SF)
        dur = dur0
        if kind == K_THROTTLE:
            tpl = tpls[j]
            dur = tpl.dur
            if t_rs < 0:
                reset = True
            else:
                lo = r - TW
                while win and win[0][1] <= lo:
                    s0, e0 = win.popleft()
                    t_busy -= e0 - s0
                busy = t_busy
                if win and win[0][0] < lo:
                    busy -= lo - win[0][0]
                span = r - t_rs
                if span > TW:
                    span = TW
                reset = span > 0 and busy < TR * span
            if reset:
                t_rs = r
                win.clear()
                t_busy = 0
            if r - t_rs >= TRAMP:  # the ramp is over: full speed (f0 + (1 - f0) * x / ramp >= 1.0 exactly)
                pct = 100
            else:
                level = f0 + (1.0 - f0) * (r - t_rs) / TRAMP
                if level > 1.0:
                    level = 1.0
                if level < 1.0:
                    dur = max(dur, math.ceil(tpl.cycles / (level * tpl.clock) - 1e-9))
                pct = round(level * 100)
            if pct != t_pct:
                t_pct = pct
                TJ.append(j)
                TT.append(r)
                TP.append(pct)
            win.append((r, r + dur))
            t_busy += dur
        en = r + dur
        SF[s] = en
        EI[e] = r
        if r > fr:
            fr = r
        S.append(r)
        E.append(en)
        if kind == K_TENSOR:
            pw = en
        elif kind == K_DMA:
            tpl = tpls[j]
            plan = tpl.dma
            uni = plan.uniform(q0) if core.uniform else None
            if uni is not None:
                tot, last = uni
                g = plan.group
                ready = r + lat
                qf = u_qf[g]
                q = qf if qf > ready else ready
                if u_ends and q >= u_ends[-1] and q >= core.u_floor:
                    en = q + tot
                    if q == u_ends[-1]:
                        u_ends[-1] = en
                    else:
                        u_starts.append(q)
                        u_ends.append(en)
                        if len(u_ends) > 256:
                            core._trim_uniform()
                elif core.uniform_fits(q, tot):
                    q = core._reserve_uniform(q, tot)
                    en = q + tot
                else:  # the shares split around other packets
                    span = core.split_uniform(plan, q0, q, nx)
                    if span is None:
                        uni = None  # they would split unalike: Core._transfer places them per queue
                    else:
                        q, en = span
            if uni is not None:
                u_qf[g] = en
                XQ.append(q)
                nq = plan.nqueues
                qbusy += tot * nq
                out = npk + last
                XP.append(npk)
                XS.append(q0)
                npk += plan.n
                q0 = (q0 + plan.n) % nq
                rt = d_retire[g]
                if en < rt:  # retires with the earlier transfer that ends later: its packet is named
                    en = rt
                    out = d_rout[g]
                d_retire[g] = en
                d_rout[g] = out
                sq = d_seq[g] = d_seq[g] + 1
                XI.append(i0 + j)
                XT.append(tpl.id)
                XR.append(en)
                XO.append(out)
                nx += 1
                dbytes += plan.bytes
                P[j] = (g, sq, en, TABLE_PACKET, out)
            else:
                _flush_dma(core, q0, npk, nx, qbusy, dbytes, XI, XT, XP, XQ, XR, XO, XS)
                XI, XT, XP, XQ, XR, XO, XS = [], [], [], [], [], [], []
                p = P[j] = core._transfer(tpl, i0 + j, r, A[j])
                q0, npk, nx, qbusy, dbytes = core.q0, core.n_packets, core.n_xfers, core.queue_busy_ns, core.dma_bytes
                en = p[2]
        R[j] = en
        if en > ln:
            ln = en
    if dma:
        _flush_dma(core, q0, npk, nx, qbusy, dbytes, XI, XT, XP, XQ, XR, XO, XS)
    if thr:
        core.thr_busy, core.thr_ramp_start, core.thr_level_pct = t_busy, t_rs, t_pct
    core.frontier = fr
    core.last_ns = ln
    core.pe_weights_ready = pw
    return S, E, W, R, (TJ, TT, TP)


def _counters(cols: dict[str, Any], prog: Program, cv: list[float], throttle: tuple[Any, Any, Any],
              rts: Any) -> None:
    """Append the segment's counter samples in the order the general path would: each usage sample (stamped with
    the latest start issued before it, ``rts``) before the instruction it precedes, each throttle level change
    (``throttle``: positions, times, percents) at its instruction."""
    ts, kind, val = cols["c_ts"], cols["c_kind"], cols["c_val"]
    tj, tt, tp = throttle
    if not len(tj):
        put(ts, rts)
        kind.extend(prog.counter_kind)
        val.extend(cv)
        return
    # usage samples issued before (or just before) instruction j come before its throttle sample
    nu, nt = len(prog.counter_before), len(tj)
    at = np.searchsorted(prog.counter_before, tj, side="right") + np.arange(nt)
    usage = np.ones(nu + nt, bool)
    usage[at] = False
    t = np.empty(nu + nt, np.int64)
    t[at] = tt
    t[usage] = rts
    k = np.empty(nu + nt, np.int64)
    k[at] = C_THROTTLE
    k[usage] = prog.counter_kind
    v = np.empty(nu + nt, np.float64)
    v[at] = tp
    v[usage] = cv
    put(ts, t)
    put(kind, k)
    put(val, v)


def _flush_dma(core: Any, q0: int, npk: int, nx: int, qbusy: int, dbytes: int,  # noqa: PLR0917
               xi: Any, xt: Any, xp: Any, xq: Any, xr: Any, xo: Any, xs: Any) -> None:
    """Write the DMA state and the columns of the transfers scheduled inline (lists, or arrays from the compiled
    loop) back to the core."""
    core.q0, core.n_packets, core.n_xfers, core.queue_busy_ns, core.dma_bytes = q0, npk, nx, qbusy, dbytes
    if len(xi):
        c = core._cols
        put(c["x_instr"], xi)
        put(c["x_tid"], xt)
        put(c["x_pkt"], xp)
        put(c["x_q0"], xs)
        put(c["x_retire"], xr)
        put(c["x_out"], xo)
        put(c["x_qstart"], xq)
        put(c["x_uni"], np.ones(len(xi), np.int8))


def program(var: Variant) -> Program:
    """The variant's :class:`Program`."""
    return Program(var)
