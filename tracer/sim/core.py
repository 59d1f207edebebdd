"""The engine scheduler of the simulated NeuronCore: timing of every instruction and DMA transfer, as issued.

Each operation is scheduled the moment the kernel issues it.  Dependencies always point back in program order
and every engine runs its own stream in order, so an instruction's start is known at once:
``start = max(its stream is free, its engine issued the previous instruction, every semaphore wait is met)``.
The trace *is* the core's state: per instruction the scheduler appends ``start``, ``end``, the template id (the
static description: engine, opcode, operand text, FLOPs, bytes, source line), the semaphore-wait time, one
dynamic operand (an HBM offset) and the layer / operator name codes to ``array`` columns, and per resolved wait one
Flow edge.  Full chunks go to a sink (the trace emitter, or nowhere with ``--no-trace``) as zero-copy buffers.
The loop fast path (:mod:`tracer.sim.fastpath`) appends whole segments to the same columns; busy time per engine
is accumulated from the columns at each handoff.  DMA queues and engines are :mod:`tracer.sim.dma`.

Streams (one semaphore each): ``S[0]`` Tensor (LoadStationary), ``S[1]`` TensorMatrix (MultiplyMoving),
``S[2]`` Vector, ``S[3]`` Scalar, ``S[4]`` GpSimd, ``S[5]`` Sync, then one per DMA queue group (``qSyncIO``...),
incremented when a transfer retires (transfers of a group retire in trigger order).
"""

# Hot path: `if a > b: b = a` is about twice as fast as `b = max(a, b)` in CPython.
# ruff: noqa: PLR1730

from __future__ import annotations

import math
import time
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from tracer.sim.arch import CostModel
from tracer.sim.dma import DmaQueues
from tracer.sim.fastpath.schedule_kernel import place_lists
from tracer.sim.records import (
    C_THROTTLE,
    CHUNK_INSTRUCTIONS,
    COMPUTE_STREAMS,
    COUNTER_KINDS,
    END_HANDOFF_INTERVAL_S,
    END_WINDOW_S,
    HANDOFF_INTERVAL_S,
    KIND_DMA,
    KIND_MATMUL,
    S_MATRIX,
    S_TENSOR,
    STREAM_ENGINE,
    TABLE_INSTRUCTION,
    Chunk,
    Template,
    new_columns,
)
from tracer.sim.templates import build as build_template


class Core(DmaQueues):
    """Schedules instructions on the engines and DMA queues of one NeuronCore and records them.

    Args:
        cm: the cost model.
        sink: receives each full :class:`Chunk` (``None``: records are dropped, as with ``--no-trace``).
        progress: called with (instructions so far, simulated ns) at each handoff; a callback taking a third
            argument also gets :attr:`expected_n` (None while there is no prediction), one with four named
            parameters also :attr:`expected_low`.

    ``pump`` (set by whoever owns the sink, default None) is called at every hand-off check -- every 256
    instructions and every loop fast-path segment -- so a sink that queues data can keep it moving between
    chunks.
    """

    def __init__(self, cm: CostModel, sink: Callable[[Chunk], None] | None = None,
                 progress: Callable[..., None] | None = None) -> None:
        self.cm = cm
        self.sink = sink
        self.pump: Callable[[], None] | None = None
        self.progress = progress
        self._progress_args = _positional_capacity(progress) if progress is not None else 0
        #: Instructions the run is expected to reach: the loop fast path predicts it from the iterations of its
        #: outermost running loop so far (``FastPath._repredict``), or an affine nest's exact count; None until then.
        self.expected_n: int | None = None
        #: A lower estimate of the same (equal to it for uniform loops and affine nests; lower where the prediction
        #: extrapolates a trend that may stop): for callbacks that must not act on a high prediction (four
        #: parameters: ``trnprof record``'s disk guard).
        self.expected_low: int | None = None
        self.templates: list[Template] = []
        self.template_ids: dict[tuple[Any, ...], int] = {}
        self.stream_names: list[str] = list(COMPUTE_STREAMS)
        self.stream_engine: list[int] = list(STREAM_ENGINE)
        self.dma_groups: dict[str, int] = {}
        self.stream_free = [0] * 6
        self.stream_seq = [0] * 6
        self.engine_issue = [0] * 5
        self.pe_weights_ready = 0
        #: NeuronCore-v2 access conflicts: each conflict list's access starts and ends and its floor (place_lists),
        #: unless the compiled scheduling loop's arrays hold the current state (``port_arrays``, which gives it
        #: back with ``port_arrays.ports_out(core)``).
        self.port_s: list[list[int]] = [[], [], [], []]
        self.port_e: list[list[int]] = [[], [], [], []]
        self.port_f = [0, 0, 0, 0]
        self.port_arrays: Any = None
        # busy time (union of instruction intervals) per engine, accumulated at each handoff from the chunk's
        # columns (starts are non-decreasing per engine), with the latest end seen so far per engine
        self.busy = [0] * 5
        self.busy_end = [0] * 5
        self.tpl_engine = array("b")
        self.instructions_per_engine = [0] * 5
        self._init_dma(cm)
        self.last_ns = 0
        self.frontier = 0
        # Tensor engine throttle (Trn2)
        self.thr_window: deque[tuple[int, int]] = deque()
        self.thr_busy = 0
        self.thr_ramp_start = -1
        self.thr_level_pct = -1
        self.pe_flops = 0.0               # matmuls' adjusted (bf16-equivalent) FLOPs: fp32 4x, fp8 x its factor
        self.pe_transpose_flops = 0.0     # PE transposes' (the array is busy, but it is not the model's work)
        # spans open at the moment: [min start, max end]
        self.open_spans: list[list[int]] = []
        self.n = 0
        self._cols = new_columns()
        self._chunk_first = 0
        self._chunk_first_xfer = 0
        #: The variants the loop fast path's segments refer to (the emitter rebuilds their Flow edges from these
        #: and the segments recorded in the chunk columns ``s_*``, see tracer.sim.fastpath).
        self.variants: list[Any] = []
        # layer / operator names, recorded per instruction as codes into ``names`` (-1: none)
        self.names: list[str] = []
        self.name_codes: dict[str, int] = {}
        self.lyr_code = -1
        self.hlo_code = -1
        self._last_handoff = self._started = time.monotonic()
        self._handoff_interval = HANDOFF_INTERVAL_S
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
            self.dma_retire_out[g] = -1
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
        if tpl.ports:
            if self.port_arrays is not None:
                self.port_arrays.ports_out(self)
            start = place_lists(self.port_s, self.port_e, self.port_f, tpl.ports, start, tpl.dur, self.stream_free)
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
            if tpl.tensor_type == "TRANSPOSE":
                self.pe_transpose_flops += tpl.flops_adj
            else:
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
            c = self._cols
            c["c_ts"].append(start)
            c["c_kind"].append(C_THROTTLE)
            c["c_val"].append(float(pct))
        win.append((start, start + dur))
        self.thr_busy += dur
        return dur

    # -- side records ------------------------------------------------------------------------------------
    def counter(self, name: str, value: float, unit: str, ts: int | None = None) -> None:
        """Record a counter sample (``ts`` defaults to the issue frontier: the latest instruction start)."""
        c = self._cols
        c["c_ts"].append(self.frontier if ts is None else ts)
        c["c_kind"].append(COUNTER_KINDS.index((name, unit)))
        c["c_val"].append(float(value))

    def spans(self, rows: list[tuple[Any, ...]]) -> None:
        """Record Span rows (each as :meth:`span` takes it), several at once."""
        ids, starts, ends, names, cats, depths, parents = zip(*rows, strict=True)
        code = self.name_code
        c = self._cols
        c["p_id"].extend(ids)
        c["p_start"].extend(starts)
        c["p_end"].extend(ends)
        c["p_name"].extend([code(x) for x in names])
        c["p_cat"].extend([code(x) for x in cats])
        c["p_depth"].extend(depths)
        c["p_parent"].extend([-1 if x is None else x for x in parents])

    def span(self, row: tuple[Any, ...]) -> None:
        """Record a Span row: (id, start, end, name, category, depth, parent id or None)."""
        self.spans([row])

    # -- chunks -----------------------------------------------------------------------------------------
    def _maybe_handoff(self) -> None:
        if self.n - self._chunk_first >= CHUNK_INSTRUCTIONS \
                or time.monotonic() - self._last_handoff >= self._handoff_interval:
            self.handoff()
        elif self.pump is not None:
            self.pump()

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
        now = time.monotonic()
        if self.expected_n is not None and self.n and self.sink is not None:  # near the predicted end: small chunks
            # (a prediction already passed says nothing about the end: iterations may have grown)
            # at the faster of the run's average speed and this chunk's: the start of a run is slower, so the average
            # alone put the end later than it came, and the writer got a full chunk just before it
            per_s = (now - self._started) / self.n
            k = self.n - self._chunk_first
            if k > 0 and now > self._last_handoff:
                per_s = min(per_s, (now - self._last_handoff) / k)
            left_s = (self.expected_n - self.n) * per_s
            near = self.expected_n > self.n and left_s < END_WINDOW_S
            self._handoff_interval = END_HANDOFF_INTERVAL_S if near else HANDOFF_INTERVAL_S
        chunk = Chunk(first_id=self._chunk_first, first_xfer=self._chunk_first_xfer, n_templates=len(self.templates),
                      streams=tuple(self.stream_names), n_variants=len(self.variants), n_names=len(self.names),
                      ending=self._handoff_interval == END_HANDOFF_INTERVAL_S, **c)
        self._chunk_first = self.n
        self._chunk_first_xfer = self.n_xfers
        self._cols = new_columns()
        self._bind()
        self._last_handoff = now
        if self.sink is not None and (len(chunk) or len(chunk.c_ts) or len(chunk.p_id) or len(chunk.s_var)):
            self.sink(chunk)
        if self.progress is not None:
            if 4 <= self._progress_args < _VARARGS:
                self.progress(self.n, self.last_ns, self.expected_n, self.expected_low)
            elif self._progress_args >= 3:
                self.progress(self.n, self.last_ns, self.expected_n)
            else:
                self.progress(self.n, self.last_ns)

    def finish_busy(self) -> list[int]:
        """Busy ns per engine (union of its instructions' intervals), after the last handoff."""
        return list(self.busy)


#: :func:`_positional_capacity` of a callback taking ``*args`` (which gets three arguments, as before the fourth).
_VARARGS = 1 << 30


def _positional_capacity(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` accepts (a large number for ``*args``; 2 when it cannot be told)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return _VARARGS
    return sum(p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params)
