"""The engine scheduler of the simulated NeuronCore: timing of every instruction and DMA transfer, as issued.

Each operation is scheduled the moment the kernel issues it.  Dependencies always point back in program order
and every engine runs its own stream in order, so an instruction's start is known at once:
``start = max(its stream is free, its engine issued the previous instruction, every semaphore wait is met)``.
The trace *is* the core's state: per instruction the scheduler appends ``start``, ``end``, the template id (the
static description: engine, opcode, operand text, FLOPs, bytes, source line), the semaphore-wait time and one
dynamic operand (an HBM offset) to preallocated ``array`` columns, and per resolved wait one Flow edge.  Full
chunks go to a sink (the trace emitter thread, or nowhere with ``--no-trace``) as zero-copy buffers.

Streams (one semaphore each): ``S[0]`` Tensor (LoadStationary), ``S[1]`` TensorMatrix (MultiplyMoving),
``S[2]`` Vector, ``S[3]`` Scalar, ``S[4]`` GpSimd, ``S[5]`` Sync, then one per DMA queue group (``qSyncIO``...),
incremented when a transfer retires (transfers of a group retire in trigger order).
"""

# Hot path: `if a > b: b = a` is about twice as fast as `b = max(a, b)` in CPython.
# ruff: noqa: PLR1730

from __future__ import annotations

import bisect
import math
import time
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from tracer.sim.arch import CostModel
from tracer.sim.records import (
    CHUNK_INSTRUCTIONS,
    CHUNK_PACKETS,
    COMPUTE_STREAMS,
    HANDOFF_INTERVAL_S,
    KIND_DMA,
    KIND_MATMUL,
    S_MATRIX,
    S_TENSOR,
    STREAM_ENGINE,
    TABLE_INSTRUCTION,
    TABLE_PACKET,
    Chunk,
    DmaPlan,
    Template,
    new_columns,
)
from tracer.sim.templates import build as build_template


class Core:
    """Schedules instructions on the engines and DMA queues of one NeuronCore and records them.

    Args:
        cm: the cost model.
        sink: receives each full :class:`Chunk` (``None``: records are dropped, as with ``--no-trace``).
        progress: called with (instructions so far, simulated ns) at each handoff.
    """

    def __init__(self, cm: CostModel, sink: Callable[[Chunk], None] | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.cm = cm
        self.sink = sink
        self.progress = progress
        self.templates: list[Template] = []
        self.template_ids: dict[tuple[Any, ...], int] = {}
        self.stream_names: list[str] = list(COMPUTE_STREAMS)
        self.stream_engine: list[int] = list(STREAM_ENGINE)
        self.dma_groups: dict[str, int] = {}
        self.stream_free = [0] * 6
        self.stream_seq = [0] * 6
        self.engine_issue = [0] * 5
        self.pe_weights_ready = 0
        # busy time (union of instruction intervals) per engine, accumulated at each handoff from the chunk's
        # columns (starts are non-decreasing per engine), with the latest end seen so far per engine
        self.busy = [0] * 5
        self.busy_end = [0] * 5
        self.tpl_engine = array("b")
        self.instructions_per_engine = [0] * 5
        # DMA state
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
        self.dma_seq: dict[int, int] = {}
        self.queue_busy_ns = 0
        self.dma_bytes = 0
        self.n_packets = 0
        self.n_xfers = 0
        self.last_ns = 0
        self.frontier = 0
        # Tensor engine throttle (Trn2)
        self.thr_window: deque[tuple[int, int]] = deque()
        self.thr_busy = 0
        self.thr_ramp_start = -1
        self.thr_level_pct = -1
        self.pe_flops = 0.0
        # spans open at the moment: [min start, max end]
        self.open_spans: list[list[int]] = []
        self.n = 0
        self._cols = new_columns()
        self._chunk_first = 0
        self._chunk_first_xfer = 0
        self._chunk_packets = 0
        self._counters: list[tuple[int, str, float, str]] = []
        self._spans: list[dict[str, Any]] = []
        #: Segments scheduled by the loop fast path since the last handoff (see tracer.sim.fastpath), and the
        #: variants they refer to (the emitter rebuilds their Flow edges from these).
        self.segs: list[tuple[Any, ...]] = []
        self.variants: list[Any] = []
        # layer / operator names, recorded per instruction as codes into ``names`` (-1: none)
        self.names: list[str] = []
        self.name_codes: dict[str, int] = {}
        self.lyr_code = -1
        self.hlo_code = -1
        self._last_handoff = time.monotonic()
        self._bind()

    def _bind(self) -> None:
        c = self._cols
        self._a_start, self._a_end, self._a_tid = c["start"].append, c["end"].append, c["tid"].append
        self._a_wait, self._a_aux = c["wait"].append, c["aux"].append
        self._a_lyr, self._a_hlo = c["lyr"].append, c["hlo"].append
        self._flow = tuple(c[k].append for k in ("f_in", "f_out", "f_table", "f_dep", "f_gap", "f_stream", "f_value"))

    # -- templates and streams ------------------------------------------------------------------------
    def template(self, key: tuple[Any, ...]) -> int:
        """Id of the template for ``key`` (see :mod:`tracer.sim.templates`), building it on first use."""
        tid = self.template_ids.get(key)
        if tid is None:
            tpl = build_template(self.cm, self, key)
            tid = tpl.id = len(self.templates)
            self.tpl_engine.append(tpl.engine)
            self.templates.append(tpl)
            self.template_ids[key] = tid
        return tid

    def name_code(self, name: str | None) -> int:
        """Code of a layer or operator name in :attr:`names` (-1 for none)."""
        if name is None:
            return -1
        code = self.name_codes.get(name)
        if code is None:
            code = self.name_codes[name] = len(self.names)
            self.names.append(name)
        return code

    def set_scope(self, layer: str | None, operator: str | None) -> None:
        """The layer and operator names of the instructions issued from now on."""
        self.lyr_code = self.name_code(layer)
        self.hlo_code = self.name_code(operator)

    def dma_group(self, prefix: str) -> int:
        """Stream id of the DMA queue group ``prefix`` (e.g. ``qSyncIO``), created on first use."""
        g = self.dma_groups.get(prefix)
        if g is None:
            g = len(self.stream_names)
            self.dma_groups[prefix] = g
            self.stream_names.append(prefix)
            self.stream_engine.append(-1)
            self.queue_free[g] = [0] * self.cm.dma_queues
            self.u_qf[g] = 0
            self.dma_retire[g] = 0
            self.dma_seq[g] = 0
        return g

    # -- execution ------------------------------------------------------------------------------------------
    def execute(self, tid: int, deps: dict[int, tuple[tuple[Any, ...], int]], aux: int = -1) -> tuple[Any, ...]:
        """Schedule one instruction (and its DMA transfer); returns its producer info (see tracer.sim.tracker)."""
        tpl = self.templates[tid]
        stream = tpl.stream
        eng = tpl.engine
        ready = self.stream_free[stream]
        issue = self.engine_issue[eng]
        if issue > ready:
            ready = issue
        if stream == S_MATRIX and self.pe_weights_ready > ready:
            ready = self.pe_weights_ready
        idx = self.n
        wait_until = 0
        edges = None
        if deps:
            edges = []
            for s, (p, kind) in deps.items():
                if s == stream:
                    continue  # same in-order stream: no semaphore needed
                if p[2] > wait_until:
                    wait_until = p[2]
                edges.append((p, kind))
        start = wait_until if wait_until > ready else ready
        kind = tpl.kind
        dur = self._throttled(tpl, start) if kind == KIND_MATMUL and self.cm.throttle_enabled else tpl.dur
        end = start + dur
        self.stream_free[stream] = end
        self.engine_issue[eng] = start
        if stream == S_TENSOR:
            self.pe_weights_ready = end
        seq = self.stream_seq[stream] = self.stream_seq[stream] + 1
        self._a_start(start)
        self._a_end(end)
        self._a_tid(tid)
        self._a_wait(wait_until - ready if wait_until > ready else 0)
        self._a_aux(aux)
        self._a_lyr(self.lyr_code)
        self._a_hlo(self.hlo_code)
        self.n = idx + 1
        if edges:
            f_in, f_out, f_table, f_dep, f_gap, f_stream, f_value = self._flow
            for p, dkind in edges:
                f_in(idx)
                f_out(p[4])
                f_table(p[3])
                f_dep(dkind)
                f_gap(start - p[2])
                f_stream(p[0])
                f_value(p[1])
        self.instructions_per_engine[eng] += 1
        if start > self.frontier:
            self.frontier = start
        if tpl.flops_adj:
            self.pe_flops += tpl.flops_adj
        if kind == KIND_DMA:
            pinfo = self._transfer(tpl, idx, start, aux)
            fin = pinfo[2]
        else:
            pinfo = (stream, seq, end, TABLE_INSTRUCTION, idx)
            fin = end
        if fin > self.last_ns:
            self.last_ns = fin
        for sp in self.open_spans:
            if start < sp[0]:
                sp[0] = start
            if fin > sp[1]:
                sp[1] = fin
        if (idx & 255) == 0 and idx:
            self._maybe_handoff()
        return pinfo

    def _throttled(self, tpl: Template, start: int) -> int:
        """Duration of a MultiplyMoving under the Trn2 dI/dt throttle ramp (see docs/cost-model.md)."""
        cm = self.cm
        win = self.thr_window
        reset = self.thr_ramp_start < 0
        if not reset:
            lo = start - cm.throttle_window_ns
            while win and win[0][1] <= lo:
                s, e = win.popleft()
                self.thr_busy -= e - s
            busy = self.thr_busy
            if win and win[0][0] < lo:
                busy -= lo - win[0][0]
            span = min(cm.throttle_window_ns, start - self.thr_ramp_start)
            reset = span > 0 and busy < cm.throttle_reset_utilization * span
        if reset:
            self.thr_ramp_start = start
            win.clear()
            self.thr_busy = 0
        f0 = cm.throttle_start_fraction
        level = min(1.0, f0 + (1.0 - f0) * (start - self.thr_ramp_start) / cm.throttle_ramp_ns)
        dur = tpl.dur if level >= 1.0 else max(tpl.dur, math.ceil(tpl.cycles / (level * tpl.clock) - 1e-9))
        pct = round(level * 100)
        if pct != self.thr_level_pct:
            self.thr_level_pct = pct
            self._counters.append((start, "tensor_throttle_percent", float(pct), "%"))
        win.append((start, start + dur))
        self.thr_busy += dur
        return dur

    def _transfer(self, tpl: Template, idx: int, start: int, aux: int) -> tuple[Any, ...]:
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
        pkt_base = self.n_packets
        self.n_packets += plan.n
        self.q0 = (q0 + plan.n) % plan.nqueues
        retire = end_max if end_max > self.dma_retire[g] else self.dma_retire[g]
        self.dma_retire[g] = retire
        seq = self.dma_seq[g] = self.dma_seq[g] + 1
        c = self._cols
        c["x_instr"].append(idx)
        c["x_tid"].append(tpl.id)
        c["x_pkt"].append(pkt_base)
        c["x_q0"].append(q0)
        c["x_retire"].append(retire)
        c["x_out"].append(pkt_base + last)
        self.n_xfers += 1
        self.dma_bytes += plan.rows * plan.chunk_bytes
        return (g, seq, retire, TABLE_PACKET, pkt_base + last)

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
        pkt_base = self.n_packets
        self.n_packets += plan.n
        self.q0 = (q0 + plan.n) % nq
        retire = e if e > self.dma_retire[g] else self.dma_retire[g]
        self.dma_retire[g] = retire
        seq = self.dma_seq[g] = self.dma_seq[g] + 1
        c["x_instr"].append(idx)
        c["x_tid"].append(tid)
        c["x_pkt"].append(pkt_base)
        c["x_q0"].append(q0)
        c["x_retire"].append(retire)
        c["x_out"].append(pkt_base + last)
        self.n_xfers += 1
        self.dma_bytes += plan.rows * plan.chunk_bytes
        return (g, seq, retire, TABLE_PACKET, pkt_base + last)

    def _place_uniform(self, t: int, d: int) -> int:
        """:meth:`_place` on the shared reservations of the uniform state."""
        starts, ends = self.u_starts, self.u_ends
        s = t if t > self.u_floor else self.u_floor
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
        s = t if t > self.eng_floor[q] else self.eng_floor[q]
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
        if len(starts) > 256:
            self._trim(q)
        return s

    def _trim(self, q: int) -> None:
        """Forget the oldest reservations of engine ``q``; the time before them counts as busy."""
        self.eng_floor[q] = self.eng_ends[q][127]
        del self.eng_starts[q][:128], self.eng_ends[q][:128]

    # -- side records ------------------------------------------------------------------------------------
    def counter(self, name: str, value: float, unit: str, ts: int | None = None) -> None:
        """Record a counter sample (``ts`` defaults to the issue frontier: the latest instruction start)."""
        self._counters.append((self.frontier if ts is None else ts, name, float(value), unit))

    def span(self, row: dict[str, Any]) -> None:
        """Record a Span row."""
        self._spans.append(row)

    # -- chunks -----------------------------------------------------------------------------------------
    def _maybe_handoff(self) -> None:
        if self.n - self._chunk_first >= CHUNK_INSTRUCTIONS or self.n_packets - self._chunk_packets >= CHUNK_PACKETS \
                or time.monotonic() - self._last_handoff >= HANDOFF_INTERVAL_S:
            self.handoff()

    def _account_busy(self, c: dict[str, array]) -> None:
        """Add the chunk's instruction intervals to each engine's busy time (union of intervals)."""
        if not len(c["start"]):
            return
        start = np.frombuffer(c["start"], np.int64)
        end = np.frombuffer(c["end"], np.int64)
        eng = np.frombuffer(self.tpl_engine, np.int8)[np.frombuffer(c["tid"], np.int64)]
        for e in range(len(self.busy)):
            m = eng == e
            if not m.any():
                continue
            s, en = start[m], end[m]
            # an interval adds what lies beyond the latest end before it (starts never decrease per engine)
            prev = np.maximum.accumulate(np.concatenate(([self.busy_end[e]], en[:-1])))
            self.busy[e] += int(np.maximum(en - np.maximum(s, prev), 0).sum())
            last = int(en.max())
            if last > self.busy_end[e]:
                self.busy_end[e] = last

    def handoff(self) -> None:
        """Hand the records gathered so far to the sink and start a new chunk."""
        c = self._cols
        self._account_busy(c)
        chunk = Chunk(first_id=self._chunk_first, first_xfer=self._chunk_first_xfer, counters=self._counters,
                      spans=self._spans, n_templates=len(self.templates), streams=tuple(self.stream_names),
                      segs=self.segs, n_variants=len(self.variants), n_names=len(self.names), **c)
        self._chunk_first = self.n
        self._chunk_first_xfer = self.n_xfers
        self._chunk_packets = self.n_packets
        self._cols = new_columns()
        self._counters = []
        self._spans = []
        self.segs = []
        self._bind()
        self._last_handoff = time.monotonic()
        if self.sink is not None and (len(chunk) or chunk.counters or chunk.spans or chunk.segs):
            self.sink(chunk)
        if self.progress is not None:
            self.progress(self.n, self.last_ns)

    def finish_busy(self) -> list[int]:
        """Busy ns per engine (union of its instructions' intervals), after the last handoff."""
        return list(self.busy)
