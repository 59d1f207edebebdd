"""The DMA queues and engines of the simulated NeuronCore: when each transfer's packets move and when it retires.

Each queue group (``qSyncIO``, ``qGpSimdIO``, ...) has one FIFO queue per DMA engine; the engines' time is shared by
all groups: a transfer is cut into packets spread over the queues (:class:`~tracer.sim.records.DmaPlan`), each
queue's share waits for the queue and then for an idle stretch of its engine, filling gaps other groups left
(see ``docs/cost-model.md``).  While every transfer so far loaded all queues alike, all engines and all queues of a
group are in the same state, kept once (``u_*``) until a transfer breaks the symmetry.
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
                return self._transfer_uniform(plan, tpl.id, idx, ready, tot, q0, g)
            self._leave_uniform()
        qf = self.queue_free[g]
        starts_all, ends_all, floor = self.eng_starts, self.eng_ends, self.eng_floor
        qs = [0] * plan.nqueues
        end_max = -1
        for q in range(plan.nqueues):
            tot = totals[q]
            s = qf[q] if qf[q] > ready else ready
            if tot:
                ends = ends_all[q]
                if ends and s >= ends[-1] and s >= floor[q]:  # common case: the engine is idle from s on
                    if s == ends[-1]:
                        ends[-1] = s + tot
                    else:
                        starts_all[q].append(s)
                        ends.append(s + tot)
                        if len(ends) > 256:
                            self._trim(q)
                else:
                    s = self._place(q, s, tot)
                e = s + tot
                qf[q] = e
                if e > end_max:
                    end_max = e
            qs[q] = s
        self._cols["x_qstart"].extend(qs)
        self._cols["x_uni"].append(0)
        # the transfer's last packet: highest index among the queues finishing last
        last = max(plan.last_packet(q, q0) for q in range(plan.nqueues) if totals[q] and qs[q] + totals[q] == end_max)
        self.queue_busy_ns += sum(totals)
        return self._commit_transfer(plan, tpl.id, idx, q0, g, end_max, last)

    def _transfer_uniform(self, plan: DmaPlan, tid: int, idx: int, ready: int, tot: int, q0: int,  # noqa: PLR0917
                          g: int) -> tuple[Any, ...]:
        """A transfer giving every queue the same work while every DMA engine and queue of each group is in the
        same state: one reservation stands for all 16 (the same arithmetic as the per-queue loop)."""
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
        else:
            s = self._place_uniform(s, tot)
        e = s + tot
        self.u_qf[g] = e
        nq = plan.nqueues
        c = self._cols
        c["x_qstart"].append(s)
        c["x_uni"].append(1)
        last = plan.last_all(q0)
        self.queue_busy_ns += tot * nq
        return self._commit_transfer(plan, tid, idx, q0, g, e, last)

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

    def _place_uniform(self, t: int, d: int) -> int:
        """:meth:`_place` on the shared reservations of the uniform state."""
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

    def _place(self, q: int, t: int, d: int) -> int:
        """Reserve ``d`` ns of DMA engine ``q`` at the earliest idle time >= ``t``; returns the start.

        Engines serve the queues of every group: a transfer fills an idle gap left by transfers of other
        groups that were issued earlier but had to wait (the engine round-robins between its queues).
        """
        starts, ends = self.eng_starts[q], self.eng_ends[q]
        s = reserve(starts, ends, t if t > self.eng_floor[q] else self.eng_floor[q], d)
        if len(starts) > 256:
            self._trim(q)
        return s

    def _trim(self, q: int) -> None:
        """Forget the oldest reservations of engine ``q``; the time before them counts as busy."""
        self.eng_floor[q] = self.eng_ends[q][127]
        del self.eng_starts[q][:128], self.eng_ends[q][:128]
