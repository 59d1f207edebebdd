"""The compiled scheduling loop of the loop fast path: when to use it, the arrays it works on, and the hand-over
between it and Python.

:func:`tracer.sim.fastpath.schedule.run` schedules a matched segment; with the compiled loop on it calls
:func:`schedule`, which runs :func:`tracer.sim.fastpath.schedule_kernel.schedule_rows` (numba) over the segment's
rows and does in Python only what the kernel hands back: filling a template's entry in the per-template tables,
growing the throttle window buffer, and DMA transfers that do not load every queue alike (or once the DMA state is
no longer uniform), which :meth:`tracer.sim.core.Core._transfer` schedules as on the general path.  The trace is
identical with the kernel on and off (``tests/unit/test_sim_jit.py``).

What lives where:

* per :class:`~tracer.sim.fastpath.schedule.Program` (:class:`ProgramArrays`, built once per variant): the row
  table (stream, engine, duration, kind, dependency range), the dependency indices, and per set of templates the
  template ids as an array;
* per core (:class:`CoreArrays`): per template its throttle cycles and clock and, for DMA triggers, a row of the DMA
  template table (group, packets, bytes, queues, and per queue rotation the uniform layout, filled on first use);
  the uniform DMA reservations and the per-group queue state; the throttle window.  The DMA arrays stay valid while
  no transfer is scheduled outside the kernel (the core's transfer count is unchanged) and the window while its
  last entry is the one written back; otherwise they are rebuilt from the core.  After every segment the core's own
  lists and dicts are brought up to date (only the part that changed), so the general path never sees a difference.

numba costs ~0.27 CPU-s to import plus ~0.17 s to start LLVM and load the cached kernels (~1.6 s to compile them the
first time on a machine), so by default the kernel is only loaded once the run is known to be long enough to repay
that: when a loop's first iteration times its remaining iterations predicts :data:`EXPECT_ROWS` more instructions
(:func:`expect`, called by the fast path after each loop's first iteration), or else once this process has
scheduled :data:`ENGAGE_ROWS` instructions in Python fast-path segments.  Segments shorter than :data:`MIN_ROWS`
always stay in Python.  ``TRNPROF_JIT=0`` turns it off (the Python loop does everything), ``TRNPROF_JIT=1`` loads it at
the first segment.  When numba is missing or fails, a warning says so and the Python loop is used.

When trnprof's cache holds an ahead-of-time build of the kernel (:mod:`tracer.aot`), loading it costs ~1 ms and no
numba, so it is used from the first segment of :data:`MIN_ROWS` or more; a process that finds no build starts one
in the background for later runs.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Any

import numpy as np

from tracer import aot
from tracer.jit import compile_functions
from tracer.sim.fastpath import schedule_kernel as K
from tracer.sim.records import TABLE_PACKET

#: ``TRNPROF_JIT=0``: never use the compiled loop; ``=1``: load it at the first segment; unset: once the process
#: has scheduled :data:`ENGAGE_ROWS` instructions in Python (enough work to repay loading numba).
ENV_SWITCH = "TRNPROF_JIT"
#: Fast-path instructions scheduled in Python before numba is loaded: loading costs ~0.45 CPU-s and the kernel saves
#: ~0.3-1 us per instruction, so a run that has done this much is likely to repay it (see BENCHMARKS.md).
ENGAGE_ROWS = 500_000
#: A loop whose remaining iterations are predicted to hold at least this many instructions loads the kernel at the
#: next segment: at ~0.3-1 us saved per instruction, loading is repaid after ~0.5-1.5 M instructions.
EXPECT_ROWS = 1_000_000
#: Template-id arrays cached per program (one per set of templates the variant met; forgotten all at once beyond).
_TIDS_CACHE = 1024
#: Segments shorter than this are scheduled by the Python loop: handing the state to the kernel and back costs more
#: than the loop (~15 us more for a 4-instruction segment, about even at 16).
MIN_ROWS = 16
#: Initial capacity of the throttle window buffer (grown on demand).
_WINDOW = 1024

_lock = threading.Lock()
_loaded: dict[str, Any] = {}
_python_rows = [0]
_expected = [False]


def expect(rows: int) -> None:
    """A loop predicts ``rows`` more instructions: with at least :data:`EXPECT_ROWS`, the next segment scheduled
    loads the kernel (a prediction only decides when numba loads, never what is scheduled)."""
    if rows >= EXPECT_ROWS:
        _expected[0] = True


def use(n: int) -> bool:
    """Whether the segment about to be scheduled (``n`` instructions) goes through the compiled loop."""
    mode = os.environ.get(ENV_SWITCH)
    if mode == "0" or n < MIN_ROWS:
        return False
    ok = _loaded.get("ok")
    if ok is None:
        if mode != "1" and not _expected[0] and not _built():
            _python_rows[0] += n
            if _python_rows[0] < ENGAGE_ROWS:
                return False
        ok = _load()
    return ok


def _built() -> bool:
    """Whether an ahead-of-time build of the kernel is in the cache (looked up once per process; when there is
    none, its build is started in the background for later runs)."""
    have = _loaded.get("built")
    if have is None:
        have = _loaded["built"] = aot.enabled() and aot.build_path(K).exists()
        if not have:
            aot.start_build(K)
    return bool(have)


def _load() -> bool:
    """Install the kernel: its ahead-of-time build when the cache has one (:mod:`tracer.aot`), else numba's JIT
    (compiled, or loaded from numba's cache); False, with a warning, when neither works."""
    with _lock:
        if "ok" in _loaded:
            return bool(_loaded["ok"])
        if _install_built():
            _loaded["ok"] = True
            return True
        aot.start_build(K)
        _loaded["ok"] = compile_functions([K], smoke_test=_smoke_test, what="the compiled scheduling loop",
                                          fallback="the simulator uses the slower Python loop")
        if _loaded["ok"]:
            _loaded["via"] = "jit"
        return bool(_loaded["ok"])


def _install_built() -> bool:
    """Put the functions of the kernel's ahead-of-time build in place of the Python ones, checked by the smoke
    test; False (the Python functions back, a failing build moved aside) when there is none or it fails."""
    built = aot.load(K)
    if built is None:
        return False
    python = {name: getattr(K, name) for name in K.COMPILED}
    for name in K.AOT_SIGNATURES:
        setattr(K, name, getattr(built, name))
    try:
        _smoke_test()
    except Exception as exc:
        for name, fn in python.items():
            setattr(K, name, fn)
        aot.discard(aot.build_path(K), f"{type(exc).__name__}: {exc}")
        return False
    _loaded["via"] = "aot"
    return True


def _smoke_test() -> None:
    """Compile (or load) the kernel and check it on a two-row program (a wait, an engine conflict), two accesses of
    one memory port and a DMA reservation."""
    rows = np.array([[0, 0, 10, K.K_PLAIN, 0, 0, 0], [1, 0, 5, K.K_PLAIN, 0, 1, 0]], np.int64)
    out = np.zeros((K.N_OUT, 2), np.int64)
    R = np.array([0, 0, 30], np.int64)
    st = np.zeros(K.N_STATE, np.int64)
    one = np.zeros((1, 1), np.int64)
    C, Cv = np.zeros((2, 3), np.int64), np.zeros(3)
    j = K.schedule_rows(0, 2, rows, np.array([2], np.int64), np.zeros(2, np.int64), R, out,
                        np.zeros((K.N_X, 1), np.int64), np.zeros((3, 1), np.int64), np.zeros(2, np.int64),
                        np.zeros(1, np.int64), st, np.zeros(2), one, np.zeros(1, np.int64), np.zeros(1, np.int64),
                        np.full(2, -1, np.int64), one, np.zeros((1, 2)), np.zeros((2, 1), np.int64),
                        np.array([[1], [7]], np.int64), np.array([2.5]), C, Cv, *K.new_ports())
    if j != 2 or out[K.O_START].tolist() != [0, 30] or out[K.O_WAIT].tolist() != [0, 30] or R[:2].tolist() != [10, 35]:
        raise RuntimeError("kernel self-check failed")
    if st[K.NC] != 1 or C[:, 0].tolist() != [0, 7] or Cv[0] != 2.5:
        raise RuntimeError("kernel self-check failed")
    pa, pn = K.new_ports()  # Vector on SBUF from 0 to 10, then GpSimd, ready at 4, waits for it
    if K.place(pa, pn, 1, 0, 10, np.zeros(6, np.int64)) != 0 or K.place(pa, pn, 2, 4, 5, np.zeros(6, np.int64)) != 10:
        raise RuntimeError("kernel self-check failed")
    us, ue = np.array([0, 100, 0, 0], np.int64), np.array([50, 200, 0, 0], np.int64)
    if K.reserve(us, ue, 2, 40, 60) != (200, 2, 1) or ue[:2].tolist() != [50, 260]:
        raise RuntimeError("kernel self-check failed")


class ProgramArrays:
    """A program's rows as arrays, and its template ids per set of templates."""

    __slots__ = ("counters", "dep_idx", "dma_needed", "dma_rows", "n_dma", "rows", "tids")

    def __init__(self, prog: Any) -> None:
        rows = np.empty((prog.n, K.N_ROW), np.int64)
        deps: list[int] = []
        for j, (s, e, dur, dj, kind, _auxd, ports) in enumerate(prog.rows):
            rows[j, :5] = (s, e, dur, kind, len(deps))
            deps.extend(dj)
            rows[j, K.R_DEP1] = len(deps)
            rows[j, K.R_PORTS] = ports
        self.rows = rows
        self.dep_idx = np.array(deps or [0], np.int64)
        #: DMA rows whose producer is needed after the segment (the others' producers are never built).
        needed = {j for _key, j in prog.last} | {src for leaf, src in prog.out_src if not leaf}
        self.dma_needed = sorted(needed & {j for j, r in enumerate(prog.rows) if r[4] == K.K_DMA})
        self.tids: dict[int, tuple[list[int], np.ndarray, int]] = {}
        #: Usage counter samples: instructions before each, counter kind.
        self.counters = np.array([prog.counter_before, prog.counter_kind], np.int64).reshape(2, -1)
        self.dma_rows = np.array([j for j, r in enumerate(prog.rows) if r[4] == K.K_DMA], np.int64)
        self.n_dma = len(self.dma_rows)

    def tid_array(self, tids: list[int]) -> tuple[np.ndarray, int, bool]:
        """``tids`` as an array (cached while the same list comes back), its largest id, and whether it is new."""
        hit = self.tids.get(id(tids))
        if hit is not None and hit[0] is tids:
            return hit[1], hit[2], False
        arr = np.array(tids, np.int64)
        top = int(arr.max()) if len(arr) else 0
        if len(self.tids) >= _TIDS_CACHE:
            self.tids.clear()
        self.tids[id(tids)] = (tids, arr, top)
        return arr, top, True


class CoreArrays:
    """The kernel's copy of one core's per-template tables, DMA state and throttle window."""

    def __init__(self, core: Any) -> None:
        cm = core.cm
        self.nq = cm.dma_queues
        self.tslot = np.zeros(0, np.int64)  # per template: its row in ti (DMA triggers) or -1
        self.tf = np.zeros((0, 2), np.float64)  # per template: cycles, clock
        self.n_templates = 0  # templates with an entry in tslot / tf
        self.ti = np.zeros((0, K.T_UNI + 2 * self.nq), np.int64)  # per DMA template (see schedule_kernel)
        self.n_dma = 0  # rows of ti in use
        self.st = np.zeros(K.N_STATE, np.int64)
        self.st[K.LAT], self.st[K.WIN_NS], self.st[K.RAMP_NS] = (cm.dma_start_latency_ns, cm.throttle_window_ns,
                                                             cm.throttle_ramp_ns)
        self.fp = np.array([cm.throttle_reset_utilization, cm.throttle_start_fraction], np.float64)
        self.us = np.zeros(K.TRIM_AT + 2 + K.RUNS_MAX, np.int64)
        self.ue = np.zeros(K.TRIM_AT + 2 + K.RUNS_MAX, np.int64)
        self.grp = np.zeros((0, 4), np.int64)
        self.groups: list[int] = []
        self.dma_sync = -1  # core.n_xfers when us/ue/grp were last in step with the core (-1: never)
        self.win = np.zeros((2, _WINDOW), np.int64)
        self.win_last: Any = None  # the last entry of the core's window as written back (None: rebuild)
        self.win_len = -1
        self.no_c = np.zeros((2, 1), np.int64)
        self.no_cv = np.zeros(1, np.float64)
        self.no_x = np.zeros((K.N_X, 1), np.int64)
        self.pa, self.pn = K.new_ports()  # the access-conflict lists, while the core's port_arrays is this

    def grow_templates(self, core: Any, top: int) -> None:
        """Table entries for templates up to ``top`` (and every other template the core has by now)."""
        old = self.n_templates
        new = max(top + 1, len(core.templates))
        if new > len(self.tslot):  # capacities double: a run may add templates with every segment
            size = max(new, 2 * len(self.tslot), 256)
            self.tslot = np.concatenate([self.tslot[:old], np.full(size - old, -1, np.int64)])
            self.tf = np.concatenate([self.tf[:old], np.zeros((size - old, 2), np.float64)])
        floats: list[float] = []
        dma: list[int] = []
        plans: list[int] = []
        for tpl in core.templates[old:new]:
            plan = tpl.dma
            if plan is not None:
                dma.append(tpl.id)
                same = plan.n % plan.nqueues == 0 and int(plan.sub_ns.min()) == int(plan.sub_ns.max())
                plans += (plan.group, plan.n, plan.bytes, plan.nqueues, int(plan.sub_ns[0]) if same else -1)
            if tpl.cycles is not None and tpl.clock:
                floats += (tpl.cycles, tpl.clock)
            else:
                floats += (0.0, 0.0)
        if floats:
            self.tf[old:new] = np.array(floats, np.float64).reshape(-1, 2)
        if dma:
            d0, d1 = self.n_dma, self.n_dma + len(dma)
            if d1 > len(self.ti):
                ti = np.full((max(d1, 2 * len(self.ti), 64), self.ti.shape[1]), K.UNKNOWN, np.int64)  # not computed
                ti[:d0] = self.ti[:d0]
                self.ti = ti
            self.ti[d0:d1, :K.T_UNI] = np.array(plans, np.int64).reshape(-1, K.T_UNI)
            self.tslot[dma] = np.arange(d0, d1)
            self.n_dma = d1
        self.n_templates = new

    def prefill_uniform(self, pa: ProgramArrays, tarr: np.ndarray, tpls: list[Any], q0: int) -> None:
        """Fill the layouts the segment's DMA rows will look up, so that the kernel does not stop for them."""
        miss = np.empty((2, pa.n_dma), np.int64)
        k = K.missing_layouts(tarr, pa.dma_rows, self.tslot, self.ti, q0, self.nq, miss)
        if k:
            for j, q in zip(*miss[:, :k].tolist(), strict=True):
                self.fill_uniform(tpls[j], q)

    def fill_uniform(self, tpl: Any, q0: int) -> None:
        """The template's layout for queue rotation ``q0``: every queue's busy time and the last packet, or
        NOT_UNIFORM."""
        uni = tpl.dma.uniform(q0)
        row = self.ti[self.tslot[tpl.id]]
        if uni is None:
            row[K.T_UNI + q0] = K.NOT_UNIFORM
        else:
            row[K.T_UNI + q0], row[K.T_UNI + self.nq + q0] = uni

    # -- DMA state ----------------------------------------------------------------------------------------
    def dma_in(self, core: Any) -> None:
        """Load the core's DMA state into ``st``, rebuilding the arrays if a transfer was scheduled elsewhere."""
        st = self.st
        uniform = core.uniform
        if core.n_xfers != self.dma_sync or len(core.u_qf) != len(self.groups):
            if uniform:
                n = len(core.u_ends)
                if n > K.TRIM_AT:  # tracer.sim.dma trims at the same length: the buffers hold one more
                    raise RuntimeError("trnprof fast path: more uniform DMA reservations than tracer.sim.dma keeps")
                self.us[:n] = core.u_starts
                self.ue[:n] = core.u_ends
            self.groups = sorted(core.u_qf)
            self.grp = np.zeros((max(self.groups, default=0) + 1, 4), np.int64)
            for g in self.groups:
                self.grp[g] = (core.u_qf[g], core.dma_retire[g], core.dma_seq[g], core.dma_retire_out[g])
        st[K.UL] = len(core.u_ends) if uniform else 0
        st[K.UFLOOR] = core.u_floor
        st[K.UNIFORM] = 1 if uniform else 0
        st[K.Q0], st[K.NPK], st[K.NX], st[K.QBUSY], st[K.DBYTES] = (core.q0, core.n_packets, core.n_xfers,
                                                                    core.queue_busy_ns, core.dma_bytes)
        st[K.UTRIM] = 0
        st[K.UMOD] = st[K.UL]

    def dma_out(self, core: Any) -> None:
        """Write the DMA state the kernel changed back to the core."""
        st = self.st
        v = st.tolist()
        core.q0, core.n_packets, core.n_xfers, core.queue_busy_ns, core.dma_bytes = (
            v[K.Q0], v[K.NPK], v[K.NX], v[K.QBUSY], v[K.DBYTES])
        if v[K.UNIFORM]:
            ul, lo = v[K.UL], (0 if v[K.UTRIM] else v[K.UMOD])
            if lo < ul or len(core.u_ends) != ul:
                del core.u_starts[lo:], core.u_ends[lo:]
                core.u_starts.extend(self.us[lo:ul].tolist())
                core.u_ends.extend(self.ue[lo:ul].tolist())
            core.u_floor = v[K.UFLOOR]
            st[K.UTRIM] = 0
            st[K.UMOD] = ul
        qf, rt, sq, ro = core.u_qf, core.dma_retire, core.dma_seq, core.dma_retire_out
        grp = self.grp.tolist()
        for g in self.groups:
            qf[g], rt[g], sq[g], ro[g] = grp[g]
        self.dma_sync = core.n_xfers

    # -- access-conflict lists ---------------------------------------------------------------------------
    def ports_in(self, core: Any) -> None:
        """Take the core's access-conflict lists over (the general path gives them back, :meth:`ports_out`)."""
        for b in range(4):
            n = len(core.port_e[b])
            self.pa[b, 0, :n] = core.port_s[b]
            self.pa[b, 1, :n] = core.port_e[b]
            self.pn[b] = (0, n, core.port_f[b])
        core.port_arrays = self

    def ports_out(self, core: Any) -> None:
        """Give the access-conflict lists back to the core (before Python places an access)."""
        for b, (h, c, f) in enumerate(self.pn.tolist()):
            core.port_s[b] = self.pa[b, 0, h:h + c].tolist()
            core.port_e[b] = self.pa[b, 1, h:h + c].tolist()
            core.port_f[b] = f
        core.port_arrays = None

    # -- throttle window -----------------------------------------------------------------------------------
    def window_in(self, core: Any) -> None:
        """Load the throttle state, rebuilding the window buffer if the general path changed the window."""
        win = core.thr_window
        st = self.st
        if len(win) != self.win_len or (win and win[-1] is not self.win_last):
            k = len(win)
            if k + 1 > self.win.shape[1]:  # the kernel doubles it when it fills up (GROW)
                self.win = np.zeros((2, k + 1), np.int64)
            if k:
                self.win[:, :k] = np.array(win, np.int64).T
            st[K.WH] = 0
            st[K.WK] = k
        st[K.WPOP] = 0
        st[K.NAPP] = 0
        st[K.T_BUSY], st[K.T_RS], st[K.T_PCT] = core.thr_busy, core.thr_ramp_start, core.thr_level_pct

    def window_grow(self) -> None:
        """Twice the window buffer, entries moved to its start."""
        st = self.st
        wh, wk = int(st[K.WH]), int(st[K.WK])
        new = np.zeros((2, 2 * self.win.shape[1]), np.int64)
        new[:, :wk] = self.win[:, wh:wh + wk]
        self.win = new
        st[K.WH] = 0

    def window_out(self, core: Any, k0: int) -> None:
        """Bring the core's window deque (``k0`` entries before the segment) and throttle state up to date."""
        st = self.st
        wh, wk, pops, napp = int(st[K.WH]), int(st[K.WK]), int(st[K.WPOP]), int(st[K.NAPP])
        win: deque[tuple[int, int]] = core.thr_window
        if pops >= k0:
            win.clear()
            first = wh
        else:
            for _ in range(pops):
                win.popleft()
            first = wh + wk - napp
        if first < wh + wk:
            win.extend(zip(self.win[0, first:wh + wk].tolist(), self.win[1, first:wh + wk].tolist(), strict=True))
        self.win_len = len(win)
        self.win_last = win[-1] if win else None
        core.thr_busy, core.thr_ramp_start, core.thr_level_pct = int(st[K.T_BUSY]), int(st[K.T_RS]), int(st[K.T_PCT])


def core_arrays(core: Any) -> CoreArrays:
    """The core's :class:`CoreArrays` (made on first use)."""
    ca = getattr(core, "_fastpath_jit", None)
    if ca is None:
        ca = core._fastpath_jit = CoreArrays(core)
    return ca


def schedule(prog: Any, core: Any, leaves: list[Any], A: list[int], tpls: list[Any], tids: list[int],  # noqa: PLR0917
             cv: list[float], P: dict[int, Any], put: Any, flush_dma: Any) -> tuple[np.ndarray, ...]:
    """Schedule the segment of ``prog`` with the compiled loop and write its counter samples (usage values ``cv``).

    Returns (starts, ends, waits, ready times of the rows then the leaves) as arrays; fills ``P`` with the
    producers of the DMA rows needed afterwards."""
    pa: ProgramArrays | None = prog.jit
    if pa is None:
        pa = prog.jit = ProgramArrays(prog)
    ca = core_arrays(core)
    n = prog.n
    tarr, top, fresh = pa.tid_array(tids)
    if top >= ca.n_templates:
        ca.grow_templates(core, top)
    R = np.empty(n + len(leaves), np.int64)
    R[n:] = [lv[2] for lv in leaves]
    out = np.empty((K.N_OUT, n), np.int64)
    SF, EI = core.stream_free, core.engine_issue
    sf, ei = np.array(SF, np.int64), np.array(EI, np.int64)
    st = ca.st
    st[K.FR], st[K.LN], st[K.PW] = core.frontier, core.last_ns, core.pe_weights_ready
    st[K.CI] = st[K.NC] = 0
    dma, thr = prog.has_dma, prog.has_throttle
    if dma:
        ca.dma_in(core)
        if fresh and core.uniform:
            ca.prefill_uniform(pa, tarr, tpls, core.q0)
    else:
        st[K.UNIFORM] = 0
    if thr:
        k0 = len(core.thr_window)
        ca.window_in(core)
    if prog.has_ports and core.port_arrays is not ca:
        ca.ports_in(core)
    nu = len(cv)
    if nu or thr:
        C = np.empty((2, nu + n), np.int64)
        Cv = np.empty(nu + n, np.float64)
    else:
        C, Cv = ca.no_c, ca.no_cv
    i0 = core.n
    st[K.I0] = i0
    st[K.NXI] = st[K.NSX] = 0
    X = np.empty((K.N_X, pa.n_dma), np.int64) if dma else ca.no_x
    SX = np.empty((3, pa.n_dma + K.RUNS_MAX), np.int64) if dma else ca.no_x
    cva = np.array(cv, np.float64) if nu else ca.no_cv
    j = 0
    flushed = (0, 0)
    kernel = K.schedule_rows
    while True:
        j = kernel(j, n, pa.rows, pa.dep_idx, tarr, R, out, X, SX, sf, ei, st, ca.fp, ca.grp, ca.us, ca.ue, ca.tslot,
                   ca.ti, ca.tf, ca.win, pa.counters, cva, C, Cv, ca.pa, ca.pn)
        reason = st[K.REASON]
        if reason == K.DONE:
            break
        if reason == K.NEED:
            ca.fill_uniform(tpls[j], int(st[K.Q0]))
        elif reason == K.GROW:
            ca.window_grow()
        else:  # TRANSFER: row j's trigger is scheduled, its transfer is Python's
            flushed = _flush_inline(core, ca, X, SX, flushed, flush_dma, put)
            p = P[j] = core._transfer(tpls[j], i0 + j, int(out[K.O_START, j]), A[j])
            R[j] = p[2]
            st[K.LN] = max(st[K.LN], p[2])
            ca.dma_in(core)
            j += 1
    if dma:
        _flush_inline(core, ca, X, SX, flushed, flush_dma, put)
        for jd in pa.dma_needed:
            if jd not in P:
                P[jd] = (int(ca.ti[ca.tslot[tarr[jd]], K.T_GROUP]), int(out[K.O_SEQ, jd]), int(R[jd]), TABLE_PACKET,
                         int(out[K.O_OUT, jd]))
    if thr:
        ca.window_out(core, k0)
    v = st.tolist()
    nc = v[K.NC]
    if nc:
        cols = core._cols
        put(cols["c_ts"], C[0, :nc])
        put(cols["c_kind"], C[1, :nc])
        put(cols["c_val"], Cv[:nc])
    SF[:] = sf.tolist()
    EI[:] = ei.tolist()
    core.frontier, core.last_ns, core.pe_weights_ready = v[K.FR], v[K.LN], v[K.PW]
    return out[K.O_START], out[K.O_END], out[K.O_WAIT], R


def _flush_inline(core: Any, ca: CoreArrays, X: np.ndarray, SX: np.ndarray, done: tuple[int, int],  # noqa: PLR0917
                  flush_dma: Any, put: Any) -> tuple[int, int]:
    """Write the DMA state back to the core with the columns of the transfers and splits the kernel placed since
    ``done`` (how many of each were written); returns how many it has placed."""
    v = ca.st.tolist()
    a, sa = done
    b, sb = v[K.NXI], v[K.NSX]
    ca.dma_out(core)
    if b > a:
        flush_dma(core, v[K.Q0], v[K.NPK], v[K.NX], v[K.QBUSY], v[K.DBYTES], X[K.X_INSTR, a:b], X[K.X_TID, a:b],
                  X[K.X_PKT, a:b], X[K.X_QSTART, a:b], X[K.X_RETIRE, a:b], X[K.X_OUT, a:b], X[K.X_Q0, a:b])
    if sb > sa:
        c = core._cols
        put(c["x_split_xfer"], SX[K.S_XFER, sa:sb])
        put(c["x_split_pkt"], SX[K.S_PKT, sa:sb])
        put(c["x_split_delay"], SX[K.S_DELAY, sa:sb])
    return b, sb
