"""The DMA queues and engines of the simulated NeuronCore: when each transfer's packets move and when it retires.

Each queue group (``qSyncIO``, ``qGpSimdIO``, ...) has one FIFO queue per DMA engine; the engines' time is shared by
all groups: a transfer is cut into packets spread over the queues (:class:`~tracer.sim.records.DmaPlan`), each
queue's share waits for the queue, then its packets go in order, each into the earliest idle time of its engine from
the previous one's end (:func:`fit_packets`), filling gaps other groups left, so an engine never idles while a
packet it could move is ready -- within the reservations it remembers: past 256 separate busy stretches it forgets
the oldest 128 and counts the time before the next as busy (``_trim``; see ``docs/cost-model.md``). A share split
around other groups' packets is recorded as delays (``x_split_*``: the packet after each idle stretch and the
stretch's length; once for all queues when they all started together and split alike). While every transfer so far
loaded all queues alike, all engines and all queues of a group are in the same state, kept once (``u_*``) until a
transfer breaks the symmetry.
"""

# Hot path: `if a > b: b = a` is about twice as fast as `b = max(a, b)` in CPython.
# ruff: noqa: PLR1730

from __future__ import annotations

import bisect
from typing import Any

from tracer.sim.arch import CostModel
from tracer.sim.records import TABLE_PACKET, DmaPlan, Template


def reserve(starts: list[int], ends: list[int], s: int, d: int) -> int:
    """Reserve ``d`` ns at the earliest time >= ``s`` that is free in the sorted, disjoint reservations
    ``[starts[i], ends[i])`` (updated in place, touching reservations merged); returns the start."""
    if not ends or s >= ends[-1]:
        if ends and s == ends[-1]:
            ends[-1] = s + d
        else:
            starts.append(s)
            ends.append(s + d)
    else:
        i = bisect.bisect_right(ends, s)
        n = len(starts)
        while i < n and starts[i] < s + d:
            if ends[i] > s:
                s = ends[i]
            i += 1
        starts.insert(i, s)
        ends.insert(i, s + d)
        if i + 1 < len(starts) and starts[i + 1] == s + d:
            ends[i] = ends[i + 1]
            del starts[i + 1], ends[i + 1]
        if i > 0 and ends[i - 1] == s:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]
    return s


def idle_from(starts: list[int], ends: list[int], t: int, d: int) -> bool:
    """True when the sorted, disjoint reservations ``[starts[i], ends[i])`` leave ``[t, t + d)`` idle."""
    i = bisect.bisect_right(ends, t)
    return i == len(starts) or starts[i] >= t + d


def fit_packets(starts: list[int], ends: list[int], s: int, durations: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """Where packets of ``durations`` go, in order, on an engine with the sorted, disjoint reservations
    ``[starts[i], ends[i])`` (not changed): each at the earliest idle time at or after ``s`` and the previous
    packet's end that holds it.  Returns the runs of packets placed back to back: (index of the run's first packet,
    start, end); one run when the engine is idle long enough from ``s`` on."""
    runs = []
    n = len(durations)
    m = len(starts)
    i = bisect.bisect_right(ends, s)  # the first reservation ending after s
    t = s
    k = 0
    while k < n:
        if i < m and starts[i] <= t:  # t is inside reservation i
            t = ends[i]
            i += 1
            continue
        k0, e = k, t
        if i == m:
            e += sum(durations[k:])
            k = n
        else:
            limit = starts[i]
            while k < n and e + durations[k] <= limit:
                e += durations[k]
                k += 1
        if k > k0:
            runs.append((k0, t, e))
        if k < n:  # the rest waits for the end of the reservation the gap ends at
            t = ends[i]
            i += 1
    return runs


class DmaQueues:
    """The DMA part of :class:`~tracer.sim.core.Core` (a mixin: it uses the core's trace columns)."""

    _cols: dict[str, Any]
    cm: CostModel

    def _init_dma(self, cm: CostModel) -> None:
        """DMA state: per group and queue the time it is free, per engine its reservations."""
        # DMA: each queue group has one FIFO queue per DMA engine; the engines' time is shared by all groups
        self.queue_free: dict[int, list[int]] = {}
        self.eng_starts: list[list[int]] = [[] for _ in range(cm.dma_queues)]
        self.eng_ends: list[list[int]] = [[] for _ in range(cm.dma_queues)]
        self.eng_floor = [0] * cm.dma_queues
        # While every transfer so far gave all queues the same work, all DMA engines and all queues of a group are
        # in the same state: it is kept once (u_*) until a transfer breaks the symmetry (see _leave_uniform).
        self.uniform = True
        self.u_starts: list[int] = []
        self.u_ends: list[int] = []
        self.u_floor = 0
        self.u_qf: dict[int, int] = {}
        self.q0 = 0
        self.dma_retire: dict[int, int] = {}
        #: Per group, the packet whose end is the group's retire time (consumers' Flow edges name it).
        self.dma_retire_out: dict[int, int] = {}
        self.dma_seq: dict[int, int] = {}
        self.queue_busy_ns = 0
        self.dma_bytes = 0
        self.n_packets = 0
        self.n_xfers = 0

    def _transfer(self, tpl: Template, idx: int, start: int, aux: int) -> tuple[Any, ...]:
        """Schedule the DMA transfer a trigger instruction starting at ``start`` starts; returns its producer
        (group, sequence number, retire time, DmaPacket, its last packet)."""
        plan: DmaPlan = tpl.dma
        g = plan.group
        q0 = self.q0
        totals, _offsets, _queues = plan.layout(q0)
        ready = start + self.cm.dma_start_latency_ns
        if self.uniform:
            tot = totals[0]
            if tot and plan.equal_totals(q0):
                done = self._transfer_uniform(plan, tpl.id, idx, ready, tot, q0, g)
                if done is not None:
                    return done
            self._leave_uniform()
        qf = self.queue_free[g]
        starts_all, ends_all, floor = self.eng_starts, self.eng_ends, self.eng_floor
        nq = plan.nqueues
        qs = [0] * nq
        qe = [0] * nq
        end_max = -1
        for q in range(nq):
            tot = totals[q]
            s = qf[q] if qf[q] > ready else ready
            e = s + tot
            if tot:
                ends = ends_all[q]
                if ends and s >= ends[-1] and s >= floor[q]:  # common case: the engine is idle from s on
                    if s == ends[-1]:
                        ends[-1] = e
                    else:
                        starts_all[q].append(s)
                        ends.append(e)
                        if len(ends) > 256:
                            self._trim(q)
                else:
                    runs = self._place(q, s, plan.queue_packets(q0)[q], tot)
                    s, e = runs[0][1], runs[-1][2]
                    if len(runs) > 1:
                        self._record_split(runs, (q - q0) % nq, nq, self.n_xfers)
                qf[q] = e
                if e > end_max:
                    end_max = e
            qs[q] = s
            qe[q] = e
        self._cols["x_qstart"].extend(qs)
        self._cols["x_uni"].append(0)
        # the transfer's last packet: highest index among the queues finishing last
        last = max(plan.last_packet(q, q0) for q in range(nq) if totals[q] and qe[q] == end_max)
        self.queue_busy_ns += sum(totals)
        return self._commit_transfer(plan, tpl.id, idx, q0, g, end_max, last)

    def _record_split(self, runs: list[tuple[int, int, int]], r: int, nq: int, x: int) -> None:
        """Record that the share of transfer number ``x`` on the queue whose first packet is the transfer's packet
        ``r`` (so its k-th is ``r + k * nq``) moved in ``runs`` (see :func:`fit_packets`): each later run's first
        packet and how long it waited after the run before it ended."""
        c = self._cols
        for (k, s, _e), (_k, _s, prev_end) in zip(runs[1:], runs, strict=False):
            c["x_split_xfer"].append(x)
            c["x_split_pkt"].append(r + k * nq)
            c["x_split_delay"].append(s - prev_end)

    def _transfer_uniform(self, plan: DmaPlan, tid: int, idx: int, ready: int, tot: int, q0: int,  # noqa: PLR0917
                          g: int) -> tuple[Any, ...] | None:
        """A transfer giving every queue the same work while every DMA engine and queue of each group is in the
        same state: one reservation stands for all 16 (the same arithmetic as the per-queue loop).  None (nothing
        done) when its queues' shares would split around other packets differently (their packets differ)."""
        qf = self.u_qf[g]
        s = qf if qf > ready else ready
        ends = self.u_ends
        if ends and s >= ends[-1] and s >= self.u_floor:
            if s == ends[-1]:
                ends[-1] = s + tot
            else:
                self.u_starts.append(s)
                ends.append(s + tot)
                if len(ends) > 256:
                    self._trim_uniform()
            e = s + tot
        elif self.uniform_fits(s, tot):
            s = self._reserve_uniform(s, tot)
            e = s + tot
        else:
            span = self.split_uniform(plan, q0, s, self.n_xfers)
            if span is None:
                return None
            s, e = span
        self.u_qf[g] = e
        nq = plan.nqueues
        c = self._cols
        c["x_qstart"].append(s)
        c["x_uni"].append(1)
        last = plan.last_all(q0)
        self.queue_busy_ns += tot * nq
        return self._commit_transfer(plan, tid, idx, q0, g, e, last)

    def split_uniform(self, plan: DmaPlan, q0: int, t: int, x: int) -> tuple[int, int] | None:
        """Place the shares of transfer number ``x`` (loading every queue alike, rotation ``q0``, ready at ``t``) in
        the uniform state, packet by packet: reserve their runs, record their splits, return (start, end).  None
        (nothing done) when the queues' shares would not split alike (their packets differ)."""
        if t < self.u_floor:
            t = self.u_floor
        shares = plan.queue_packets(q0)
        runs = fit_packets(self.u_starts, self.u_ends, t, shares[0])
        if any(fit_packets(self.u_starts, self.u_ends, t, d) != runs for d in set(shares[1:]) if d != shares[0]):
            return None
        for _k, rs, re in runs:
            reserve(self.u_starts, self.u_ends, rs, re - rs)
        while len(self.u_ends) > 256:
            self._trim_uniform()
        if len(runs) > 1:  # recorded once, for the queue of packet 0: the split is the same on every queue
            self._record_split(runs, 0, plan.nqueues, x)
        return runs[0][1], runs[-1][2]

    def _commit_transfer(self, plan: DmaPlan, tid: int, idx: int, q0: int, g: int, end: int,  # noqa: PLR0917
                         last: int) -> tuple[Any, ...]:
        """Number a placed transfer's packets, retire it in its group and record its columns; its completion."""
        pkt_base = self.n_packets
        self.n_packets += plan.n
        self.q0 = (q0 + plan.n) % plan.nqueues
        # in-order retirement: a transfer finishing before an earlier one of its group retires with that one, and
        # its consumers' edges name the packet that ended last (the transfer that held them back)
        if end >= self.dma_retire[g]:
            retire, rout = end, pkt_base + last
        else:
            retire, rout = self.dma_retire[g], self.dma_retire_out[g]
        self.dma_retire[g] = retire
        self.dma_retire_out[g] = rout
        seq = self.dma_seq[g] = self.dma_seq[g] + 1
        c = self._cols
        c["x_instr"].append(idx)
        c["x_tid"].append(tid)
        c["x_pkt"].append(pkt_base)
        c["x_q0"].append(q0)
        c["x_retire"].append(retire)
        c["x_out"].append(rout)
        self.n_xfers += 1
        self.dma_bytes += plan.rows * plan.chunk_bytes
        return (g, seq, retire, TABLE_PACKET, rout)

    def uniform_fits(self, t: int, d: int) -> bool:
        """True when, in the uniform state, every engine is idle for ``d`` ns from ``t`` (or from the time before
        which the engines count as busy, if later): a share of that length starting then moves in one run."""
        if t < self.u_floor:
            t = self.u_floor
        return idle_from(self.u_starts, self.u_ends, t, d)

    def _reserve_uniform(self, t: int, d: int) -> int:
        """Reserve ``d`` ns of every engine in the uniform state at the earliest idle time >= ``t`` holding it;
        returns the start (``t``, or the floor if later, when :meth:`uniform_fits`)."""
        starts, ends = self.u_starts, self.u_ends
        s = reserve(starts, ends, t if t > self.u_floor else self.u_floor, d)
        if len(starts) > 256:
            self._trim_uniform()
        return s

    def _trim_uniform(self) -> None:
        self.u_floor = self.u_ends[127]
        del self.u_starts[:128], self.u_ends[:128]

    def _leave_uniform(self) -> None:
        """From now on every DMA engine and queue keeps its own state (a transfer loads queues unevenly)."""
        self.uniform = False
        nq = self.cm.dma_queues
        self.eng_starts = [list(self.u_starts) for _ in range(nq)]
        self.eng_ends = [list(self.u_ends) for _ in range(nq)]
        self.eng_floor = [self.u_floor] * nq
        for g, v in self.u_qf.items():
            self.queue_free[g] = [v] * nq

    def _place(self, q: int, t: int, durations: tuple[int, ...], tot: int) -> list[tuple[int, int, int]]:
        """Reserve DMA engine ``q`` for packets of ``durations`` (``tot`` ns in all), in order, from ``t`` on (see
        :func:`fit_packets`); returns their runs.

        Engines serve the queues of every group: a share fills the idle gaps left around transfers of other
        groups that were issued earlier but had to wait, packet by packet.
        """
        starts, ends = self.eng_starts[q], self.eng_ends[q]
        floor = self.eng_floor[q]
        if t < floor:
            t = floor
        # idle long enough from t on: one run (no packet walk)
        runs = [(0, t, t + tot)] if idle_from(starts, ends, t, tot) else fit_packets(starts, ends, t, durations)
        for _k, s, e in runs:
            reserve(starts, ends, s, e - s)
        while len(starts) > 256:
            self._trim(q)
        return runs

    def _trim(self, q: int) -> None:
        """Forget the oldest reservations of engine ``q``; the time before them counts as busy."""
        self.eng_floor[q] = self.eng_ends[q][127]
        del self.eng_starts[q][:128], self.eng_ends[q][:128]
