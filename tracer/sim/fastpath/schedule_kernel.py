"""Source of the compiled scheduling loop: :func:`schedule_rows` does, row by row, what the Python loop of
:func:`tracer.sim.fastpath.schedule.run` does, on numpy copies of the core's state.

These are plain Python functions; :mod:`tracer.sim.fastpath.schedule_jit` compiles them with numba (the names in
:data:`COMPILED`) and owns the arrays they work on.  The arithmetic is the Python loop's, operation for operation
(int64 nanoseconds; the Trn2 throttle's level in float64, in the same order), so the trace is the same row for row.

:func:`schedule_rows` runs from row ``j`` until the segment ends or it meets something only Python can do, and
returns the row it stopped at with the reason in ``st[REASON]``:

* ``DONE``: every row is scheduled.
* ``NEED``: DMA row ``j``'s transfer layout for the current queue rotation is not in the template table yet
  (nothing of row ``j`` is done; the caller fills the entry and resumes at ``j``).
* ``GROW``: the throttle window buffer is full (nothing of row ``j`` is done; the caller grows it and resumes).
* ``TRANSFER``: DMA row ``j``'s trigger instruction is scheduled (start, end, wait, stream and engine state) but
  its transfer does not load every queue alike, the DMA state is no longer uniform, or the engines are not idle
  long enough for its shares to move in one run (they split around other packets): the caller schedules the
  transfer with :meth:`tracer.sim.core.Core._transfer` and resumes at ``j + 1``.
"""

# Hot path, compiled: plain comparisons are kept as in the Python loop.
# ruff: noqa: PLR1730, PLR0917

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from tracer.sim.records import C_THROTTLE, PORT_STREAM

#: Row kinds (the same values as :mod:`tracer.sim.fastpath.schedule`).
K_PLAIN, K_TENSOR, K_MATRIX, K_THROTTLE, K_DMA = range(5)
#: Columns of a program's row table.
R_STREAM, R_ENGINE, R_DUR, R_KIND, R_DEP0, R_DEP1, R_PORTS = range(7)
N_ROW = 7
#: Rows of the per-row output table (O_SEQ, O_OUT: for DMA rows the kernel placed).
O_START, O_END, O_WAIT, O_SEQ, O_OUT = range(5)
N_OUT = 5
#: Rows of the table of transfers the kernel placed, in order (the DmaPacket columns of tracer.sim.dma):
#: instruction index, template, first packet, queue start, retire time, last packet, queue rotation.
X_INSTR, X_TID, X_PKT, X_QSTART, X_RETIRE, X_OUT, X_Q0 = range(7)
N_X = 7
#: Slots of the int64 state vector.
(FR, LN, PW, Q0, NPK, NX, QBUSY, DBYTES, UL, UFLOOR, UNIFORM, T_BUSY, T_RS, T_PCT, WH, WK, WPOP, NAPP, REASON,
 LAT, WIN_NS, RAMP_NS, UTRIM, UMOD, NXI, I0, CI, NC, NSX) = range(29)
N_STATE = 29
#: Slots of the float64 parameter vector: throttle reset utilisation, throttle start fraction.
F_TR, F_F0 = range(2)
#: Columns of the table of DMA templates (row ``tslot[template id]``): queue group, packets, bytes, queues, the
#: duration of every packet when they all take the same time and every queue gets as many (else -1: a share that
#: would split is Python's); then per queue rotation q0 the busy time of every queue (UNKNOWN: not computed yet,
#: NOT_UNIFORM) and the last packet's index.
T_GROUP, T_NPKT, T_BYTES, T_NQ, T_PKT_NS, T_UNI = range(6)
UNKNOWN, NOT_UNIFORM = -2, -1
#: Columns of the per-template float table: cycles and clock (the throttle's stretched duration).
TF_CYCLES, TF_CLOCK = range(2)
#: Columns of the per-group table: queue free time, retire time, transfer sequence number.
G_QF, G_RETIRE, G_SEQ, G_ROUT = range(4)
#: Stop reasons.
DONE, NEED, GROW, TRANSFER = range(4)
#: Reservations the uniform DMA state keeps before forgetting the oldest half (tracer.sim.dma).
TRIM_AT = 256
TRIM_BY = 128
#: Most runs a share split around other packets may take here (more: Python places it); the reservation buffers
#: hold TRIM_AT + 2 + RUNS_MAX entries.
RUNS_MAX = 64
#: Rows of the table of splits the kernel recorded (the x_split_* columns of tracer.sim.dma): transfer, packet,
#: delay; while a share is placed, its runs (first packet's place in its queue, start, end) stand in them.
S_XFER, S_PKT, S_DELAY = range(3)

#: Access-conflict lists (tracer.sim.records.PORT_*): entries each list holds at most, and how many of the oldest
#: are forgotten when it is full (their last end becomes a floor for the other engine's accesses on that port).
PORT_CAP = 1024
PORT_TRIM = 512
#: Columns of the per-list state: first entry, entries, floor.
PN_HEAD, PN_COUNT, PN_FLOOR = range(3)
COMPILED = ("reserve", "missing_layouts", "place", "schedule_rows")
#: The exported functions' argument types for the ahead-of-time build (:mod:`tracer.aot`): i8 = int64, f8 = float64,
#: ``[:]`` / ``[:,:]`` arrays of any layout; a call with other types raises TypeError.
_I1, _I2, _F1, _F2 = "i8[:]", "i8[:,:]", "f8[:]", "f8[:,:]"
AOT_SIGNATURES = {
    "reserve": f"UniTuple(i8, 3)({_I1}, {_I1}, i8, i8, i8)",
    "missing_layouts": f"i8({_I1}, {_I1}, {_I1}, {_I2}, i8, i8, {_I2})",
    "place": f"i8(i8[:,:,:], {_I2}, i8, i8, i8, {_I1})",
    "schedule_rows": (f"i8(i8, i8, {_I2}, {_I1}, {_I1}, {_I1}, {_I2}, {_I2}, {_I2}, {_I1}, {_I1}, {_I1}, {_F1}, {_I2}, "
                      f"{_I1}, "
                      f"{_I1}, {_I1}, {_I2}, {_F2}, {_I2}, {_I2}, {_F1}, {_I2}, {_F1}, i8[:,:,:], {_I2})"),
}


def reserve(us: np.ndarray, ue: np.ndarray, n: int, s: int, d: int) -> tuple[int, int, int]:
    """:func:`tracer.sim.dma.reserve` on the first ``n`` entries of ``us`` / ``ue``; returns (start, new length,
    lowest index changed)."""
    if n == 0 or s >= ue[n - 1]:
        if n > 0 and s == ue[n - 1]:
            ue[n - 1] = s + d
            return s, n, n - 1
        us[n] = s
        ue[n] = s + d
        return s, n + 1, n
    lo = 0
    hi = n
    while lo < hi:  # bisect_right(ue[:n], s)
        mid = (lo + hi) // 2
        if s < ue[mid]:
            hi = mid
        else:
            lo = mid + 1
    i = lo
    while i < n and us[i] < s + d:
        if ue[i] > s:
            s = ue[i]
        i += 1
    for k in range(n, i, -1):
        us[k] = us[k - 1]
        ue[k] = ue[k - 1]
    us[i] = s
    ue[i] = s + d
    n += 1
    low = i
    if i + 1 < n and us[i + 1] == s + d:
        ue[i] = ue[i + 1]
        for k in range(i + 1, n - 1):
            us[k] = us[k + 1]
            ue[k] = ue[k + 1]
        n -= 1
    if i > 0 and ue[i - 1] == s:
        ue[i - 1] = ue[i]
        for k in range(i, n - 1):
            us[k] = us[k + 1]
            ue[k] = ue[k + 1]
        n -= 1
        low = i - 1
    return s, n, low


def new_ports() -> tuple[np.ndarray, np.ndarray]:
    """Empty access-conflict lists: (entries: list x (start, end) x PORT_CAP, state: list x (head, count, floor))."""
    return np.zeros((4, 2, PORT_CAP), np.int64), np.zeros((4, 3), np.int64)


def place(pa: np.ndarray, pn: np.ndarray, own: int, s: int, d: int, sf: np.ndarray) -> int:
    """The start of an access of ``d`` ns that may start at ``s`` and joins the access-conflict lists of the bit
    mask ``own``: the earliest time from ``s`` on that overlaps no access of the other engine on each port (nor
    that port's floor); the access is appended to its lists.  ``sf`` holds the streams' free times.

    An engine runs in order, so its accesses start in order: each list is sorted, and the other engine's next
    access starts no earlier than its stream is free; entries ending by then are dropped.  A list that still holds
    ``PORT_CAP`` entries forgets its ``PORT_TRIM`` oldest and their last end becomes the port's floor for the other
    engine (an approximation only when one engine runs that far ahead of the other).  :func:`place_lists` is the
    same on Python lists."""
    moved = True
    while moved:
        moved = False
        for b in range(4):
            if (own >> b) & 1 == 0:
                continue
            o = b ^ 1  # the other engine's list on this port
            if pn[o, PN_FLOOR] > s:
                s = pn[o, PN_FLOOR]
                moved = True
            h = pn[o, PN_HEAD]
            for i in range(h, h + pn[o, PN_COUNT]):
                if pa[o, 1, i] <= s:
                    continue
                if pa[o, 0, i] >= s + d:
                    break
                s = pa[o, 1, i]
                moved = True
    for b in range(4):
        if (own >> b) & 1 == 0:
            continue
        o = b ^ 1
        lim = sf[PORT_STREAM[o]]
        h = pn[b, PN_HEAD]
        c = pn[b, PN_COUNT]
        while c > 0 and pa[b, 1, h] <= lim:
            h += 1
            c -= 1
        if c >= PORT_CAP:
            if pa[b, 1, h + PORT_TRIM - 1] > pn[b, PN_FLOOR]:
                pn[b, PN_FLOOR] = pa[b, 1, h + PORT_TRIM - 1]
            h += PORT_TRIM
            c -= PORT_TRIM
        if h + c >= PORT_CAP:  # room at the end: move the entries to the start
            for i in range(c):
                pa[b, 0, i] = pa[b, 0, h + i]
                pa[b, 1, i] = pa[b, 1, h + i]
            h = 0
        pa[b, 0, h + c] = s
        pa[b, 1, h + c] = s + d
        pn[b, PN_HEAD] = h
        pn[b, PN_COUNT] = c + 1
    return s


def place_lists(ps: list[list[int]], pe: list[list[int]], pf: list[int], own: int, s: int, d: int,
                sf: list[int]) -> int:
    """:func:`place` on Python lists (starts ``ps``, ends ``pe`` and floor ``pf`` per list), for the general path
    and the Python scheduling loop: the same rule, the same result (Python, never compiled)."""
    bits = _BITS[own]
    moved = True
    while moved:
        moved = False
        for b in bits:
            o = b ^ 1
            if pf[o] > s:
                s = pf[o]
                moved = True
            es = pe[o]
            if es and es[-1] > s:
                ss = ps[o]
                i = bisect_right(es, s)
                n = len(es)
                while i < n and ss[i] < s + d:
                    s = es[i]
                    moved = True
                    i += 1
    for b in bits:
        es, ss = pe[b], ps[b]
        if es and es[0] <= sf[PORT_STREAM[b ^ 1]]:
            k = bisect_right(es, sf[PORT_STREAM[b ^ 1]])
            del es[:k], ss[:k]
        if len(es) >= PORT_CAP:
            if es[PORT_TRIM - 1] > pf[b]:
                pf[b] = es[PORT_TRIM - 1]
            del es[:PORT_TRIM], ss[:PORT_TRIM]
        ss.append(s)
        es.append(s + d)
    return s


#: The list indices of each bit mask.
_BITS = tuple(tuple(b for b in range(4) if (m >> b) & 1) for m in range(16))


def missing_layouts(tids: np.ndarray, dma_rows: np.ndarray, tslot: np.ndarray, ti: np.ndarray, q0: int, nq: int,
                    miss: np.ndarray) -> int:
    """The DMA rows of a segment whose layout for the queue rotation they will meet is not in ``ti`` yet (the
    rotation before each transfer is known in advance: every transfer advances it by its packets): their row
    indices and rotations go to ``miss`` (2 x rows); returns how many."""
    k = 0
    for j in dma_rows:
        d = tslot[tids[j]]
        if ti[d, T_UNI + q0] == UNKNOWN:
            miss[0, k] = j
            miss[1, k] = q0
            k += 1
        q0 = (q0 + ti[d, T_NPKT]) % nq
    return k


def schedule_rows(j: int, n: int, rows: np.ndarray, dep_idx: np.ndarray, tids: np.ndarray, R: np.ndarray,
                  out: np.ndarray, X: np.ndarray, SX: np.ndarray, SF: np.ndarray, EI: np.ndarray, st: np.ndarray,
                  fp: np.ndarray, grp: np.ndarray, us: np.ndarray, ue: np.ndarray, tslot: np.ndarray, ti: np.ndarray,
                  tf: np.ndarray, win: np.ndarray, cnt: np.ndarray, cval: np.ndarray, C: np.ndarray, Cv: np.ndarray,
                  pa: np.ndarray, pn: np.ndarray) -> int:
    """Schedule rows ``j``, ``j + 1``, ... of a segment (see the module docstring); returns the row it stopped at.

    Counter samples go to ``C`` (time, kind) and ``Cv`` (value) in the general path's order: the usage samples
    ``cnt`` (instructions before each, kind; values ``cval``), each stamped with the latest start before it, and
    the throttle level changes at their instructions.  ``pa`` and ``pn`` are the core's access-conflict lists
    (:func:`place`, rows with ports).  Transfers go to ``X``, the splits of their shares to ``SX``.
    """
    fr, ln, pw = st[FR], st[LN], st[PW]
    q0, npk, nx, qbusy, dbytes = st[Q0], st[NPK], st[NX], st[QBUSY], st[DBYTES]
    ul, ufloor, uniform = st[UL], st[UFLOOR], st[UNIFORM]
    t_busy, t_rs, t_pct = st[T_BUSY], st[T_RS], st[T_PCT]
    wh, wk, wpop, napp = st[WH], st[WK], st[WPOP], st[NAPP]
    ci, nc = st[CI], st[NC]
    nu = cnt.shape[1]
    lat, TW, TRAMP = st[LAT], st[WIN_NS], st[RAMP_NS]
    utrim, umod = st[UTRIM], st[UMOD]
    nxi, i0, nsx = st[NXI], st[I0], st[NSX]
    sx_cap = SX.shape[1]
    TR, f0 = fp[F_TR], fp[F_F0]
    cap = win.shape[1]
    reason = DONE
    while j < n:
        while ci < nu and cnt[0, ci] <= j:
            C[0, nc] = fr
            C[1, nc] = cnt[1, ci]
            Cv[nc] = cval[ci]
            nc += 1
            ci += 1
        s = rows[j, R_STREAM]
        e = rows[j, R_ENGINE]
        dur = rows[j, R_DUR]
        kind = rows[j, R_KIND]
        tid = tids[j]
        tot = NOT_UNIFORM
        d = -1
        if kind == K_DMA and uniform:
            d = tslot[tid]
            tot = ti[d, T_UNI + q0]
            if tot == UNKNOWN:
                reason = NEED
                break
        elif kind == K_THROTTLE and wh + wk >= cap:
            if wk >= cap:
                reason = GROW
                break
            for k in range(wk):
                win[0, k] = win[0, wh + k]
                win[1, k] = win[1, wh + k]
            wh = 0
        r = SF[s]
        x = EI[e]
        if x > r:
            r = x
        if kind >= K_MATRIX and kind != K_DMA and pw > r:
            r = pw
        w = 0
        for k in range(rows[j, R_DEP0], rows[j, R_DEP1]):
            v = R[dep_idx[k]]
            if v > w:
                w = v
        if w > r:
            out[O_WAIT, j] = w - r
            r = w
        else:
            out[O_WAIT, j] = 0
        if rows[j, R_PORTS] != 0:
            r = place(pa, pn, rows[j, R_PORTS], r, dur, SF)
        if kind == K_THROTTLE:
            if t_rs < 0:
                reset = True
            else:
                lo = r - TW
                while wk > 0 and win[1, wh] <= lo:
                    t_busy -= win[1, wh] - win[0, wh]
                    wh += 1
                    wk -= 1
                    wpop += 1
                busy = t_busy
                if wk > 0 and win[0, wh] < lo:
                    busy -= lo - win[0, wh]
                span = r - t_rs
                if span > TW:
                    span = TW
                reset = span > 0 and busy < TR * span
            if reset:
                t_rs = r
                wh += wk
                wpop += wk
                wk = 0
                t_busy = 0
            if r - t_rs >= TRAMP:
                pct = 100
            else:
                level = f0 + (1.0 - f0) * (r - t_rs) / TRAMP
                if level > 1.0:
                    level = 1.0
                if level < 1.0:
                    d2 = math.ceil(tf[tid, TF_CYCLES] / (level * tf[tid, TF_CLOCK]) - 1e-9)
                    if d2 > dur:
                        dur = d2
                pct = int(np.rint(level * 100))
            if pct != t_pct:
                t_pct = pct
                C[0, nc] = r
                C[1, nc] = C_THROTTLE
                Cv[nc] = pct
                nc += 1
            win[0, wh + wk] = r
            win[1, wh + wk] = r + dur
            wk += 1
            napp += 1
            t_busy += dur
        en = r + dur
        SF[s] = en
        EI[e] = r
        if r > fr:
            fr = r
        out[O_START, j] = r
        out[O_END, j] = en
        if kind == K_TENSOR:
            pw = en
        elif kind == K_DMA:
            if tot < 0:  # not uniform: Python schedules this transfer
                reason = TRANSFER
                break
            g = ti[d, T_GROUP]
            ready = r + lat
            q = grp[g, G_QF]
            if ready > q:
                q = ready
            if ul > 0 and q >= ue[ul - 1] and q >= ufloor:
                if q == ue[ul - 1]:
                    ue[ul - 1] = q + tot
                    if ul - 1 < umod:
                        umod = ul - 1
                else:
                    us[ul] = q
                    ue[ul] = q + tot
                    if ul < umod:
                        umod = ul
                    ul += 1
                qe = q + tot
            else:
                if ufloor > q:
                    q = ufloor
                lo = 0
                hi = ul
                while lo < hi:  # bisect_right(ue[:ul], q): the first reservation ending after q
                    mid = (lo + hi) // 2
                    if q < ue[mid]:
                        hi = mid
                    else:
                        lo = mid + 1
                if lo == ul or us[lo] >= q + tot:  # idle long enough from q on: the shares move in one run
                    q, ul, low = reserve(us, ue, ul, q, tot)
                    if low < umod:
                        umod = low
                    qe = q + tot
                else:  # the shares split around other packets (tracer.sim.dma.fit_packets, packets of one length)
                    pd = ti[d, T_PKT_NS]
                    if pd <= 0:
                        reason = TRANSFER
                        break
                    m = tot // pd
                    t = q
                    i = lo
                    k = 0
                    nr = 0
                    while k < m:  # the runs, into SX from nsx on (nothing changed yet)
                        if i < ul and us[i] <= t:
                            t = ue[i]
                            i += 1
                            continue
                        c = m - k
                        if i < ul and (us[i] - t) // pd < c:
                            c = (us[i] - t) // pd
                        if c > 0:
                            if nr == RUNS_MAX or nsx + nr == sx_cap:
                                break
                            SX[0, nsx + nr] = k
                            SX[1, nsx + nr] = t
                            SX[2, nsx + nr] = t + c * pd
                            nr += 1
                            k += c
                        if k < m:
                            t = ue[i]
                            i += 1
                    if k < m:  # too many runs: Python's
                        reason = TRANSFER
                        break
                    for r_ in range(nr):
                        _q, ul, low = reserve(us, ue, ul, SX[1, nsx + r_], SX[2, nsx + r_] - SX[1, nsx + r_])
                        if low < umod:
                            umod = low
                    q = SX[1, nsx]
                    qe = SX[2, nsx + nr - 1]
                    nqd = ti[d, T_NQ]
                    for r_ in range(nr - 1):  # each later run: a split at its first packet on queue q0
                        k1, s1, e0 = SX[0, nsx + r_ + 1], SX[1, nsx + r_ + 1], SX[2, nsx + r_]
                        SX[S_XFER, nsx + r_] = nx
                        SX[S_PKT, nsx + r_] = k1 * nqd
                        SX[S_DELAY, nsx + r_] = s1 - e0
                    nsx += nr - 1
            while ul > TRIM_AT:
                ufloor = ue[TRIM_BY - 1]
                for k in range(ul - TRIM_BY):
                    us[k] = us[k + TRIM_BY]
                    ue[k] = ue[k + TRIM_BY]
                ul -= TRIM_BY
                utrim = 1
            en = qe
            grp[g, G_QF] = en
            nq = ti[d, T_NQ]
            qbusy += tot * nq
            last = npk + ti[d, T_UNI + nq + q0]
            X[X_INSTR, nxi] = i0 + j
            X[X_TID, nxi] = tid
            X[X_QSTART, nxi] = q
            X[X_PKT, nxi] = npk
            X[X_Q0, nxi] = q0
            npk += ti[d, T_NPKT]
            q0 = (q0 + ti[d, T_NPKT]) % nq
            rt = grp[g, G_RETIRE]
            if en < rt:  # retires with the earlier transfer that ends later: its packet is named
                en = rt
                last = grp[g, G_ROUT]
            grp[g, G_RETIRE] = en
            grp[g, G_ROUT] = last
            X[X_OUT, nxi] = last
            out[O_OUT, j] = last
            X[X_RETIRE, nxi] = en
            nxi += 1
            grp[g, G_SEQ] += 1
            out[O_SEQ, j] = grp[g, G_SEQ]
            nx += 1
            dbytes += ti[d, T_BYTES]
        R[j] = en
        if en > ln:
            ln = en
        j += 1
    if reason == DONE:
        while ci < nu:
            C[0, nc] = fr
            C[1, nc] = cnt[1, ci]
            Cv[nc] = cval[ci]
            nc += 1
            ci += 1
    st[FR], st[LN], st[PW] = fr, ln, pw
    st[Q0], st[NPK], st[NX], st[QBUSY], st[DBYTES] = q0, npk, nx, qbusy, dbytes
    st[UL], st[UFLOOR] = ul, ufloor
    st[T_BUSY], st[T_RS], st[T_PCT] = t_busy, t_rs, t_pct
    st[WH], st[WK], st[WPOP], st[NAPP] = wh, wk, wpop, napp
    st[CI], st[NC] = ci, nc
    st[UTRIM], st[UMOD], st[NXI], st[NSX] = utrim, umod, nxi, nsx
    st[REASON] = reason
    return j
