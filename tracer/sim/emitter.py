"""Trace emission: turns the core's record chunks into trace tables and hands them to a TraceWriter.

Runs on its own thread so the simulation never waits for compression or disk (most of the work here is
vectorised numpy/pyarrow, which releases the GIL).  From one :class:`~tracer.sim.core.Chunk` it builds:

* ``Instruction`` rows: static columns gathered from the templates, operand text assembled in bulk
  (:mod:`tracer.sim.operand_text`: semaphore waits from the Flow edges + the static text + the dynamic HBM slice of
  DMA triggers), per-engine ``pc``;
* ``Flow`` rows (one per semaphore wait), ``SemaphoreUpdate`` rows (each instruction increments its stream's
  semaphore at completion, each DMA transfer its group's semaphore at retirement);
* ``DmaTransfer`` rows (each transfer's per-queue start times) and, per new packet layout, ``DmaPacketLayout``
  rows: the compact form of ``DmaPacket`` (see :mod:`tracer.packets`; readers expand it);
* ``Counter``, ``Span`` and ``DmaQueuesInfo`` rows.

The emitter is bounded: the core blocks when more than a few chunks wait, so memory stays flat on long runs.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import numpy as np
import pyarrow as pa

from tracer import schema
from tracer.packets import layout_columns
from tracer.sim.columns import Interned, StringArrays, dict_column, first_seen_column, names_column
from tracer.sim.core import Core
from tracer.sim.fastpath.edges import SegmentEdges
from tracer.sim.operand_text import OperandText
from tracer.sim.records import (
    AUX_TENSOR_SHIFT,
    COUNTER_KINDS,
    ENGINE_NAMES,
    STREAM_TRACK,
    TABLE_INSTRUCTION,
    TABLE_PACKET,
    Chunk,
    DmaPlan,
    i64,
)
from tracer.sim.span_lanes import SpanLanes
from tracer.sim.tracker import DEP_NAMES
from tracer.writer import TraceWriter

TRACK_GROUP = "NeuronCore 0"
_TABLE_NAMES = (schema.INSTRUCTION.name, schema.DMA_PACKET.name)
_STR_ATTRS = ("opcode", "loc", "act_fn", "perf_mode", "tensor_type", "text_pre", "text_post")
_AXI, _SEM_INC, _COMPLETE = ("AXI",), ("sem_inc",), ("complete",)
_BYTE_COLS = ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes", "psum_read_bytes",
              "psum_write_bytes")


class Emitter:
    """Builds trace tables from core chunks and appends them to ``writer`` (on a thread when ``threaded``)."""

    def __init__(self, core: Core, writer: TraceWriter, *, threaded: bool = True, max_pending: int = 3) -> None:
        self.core = core
        self.writer = writer
        self.n_templates = 0
        self._arrays: dict[str, np.ndarray] = {}
        self.attrs = {name: Interned() for name in _STR_ATTRS}
        self.t_engine: list[int] = []
        self.t_stream: list[int] = []
        self.t_flops_raw: list[int] = []
        self.t_flops_adj: list[int] = []
        self.t_bytes: list[tuple[int, ...]] = []
        self.t_hbm_num: list[tuple[int, int, int, int, int]] = []
        self.t_dma: list[tuple[int, ...]] = []
        self.t_group: list[int] = []
        self.seg_edges = SegmentEdges()
        self.span_lanes = SpanLanes()
        self.shape_ids: dict[tuple[Any, ...], int] = {}
        self.pc = np.zeros(len(ENGINE_NAMES), np.int64)
        self.seq: dict[int, int] = {}
        self.codes: dict[str, dict[str, int]] = {"qtype": {}, "mem": {}, "var": {}, "group": {}}
        self.group_codes: dict[int, int] = {}
        self.error: BaseException | None = None
        self.strings = StringArrays()
        self.operand_text = OperandText(self.strings)
        self._queue: queue.Queue[Chunk | None] | None = None
        self._thread: threading.Thread | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=max_pending)
            self._thread = threading.Thread(target=self._run, name="trnprof-emitter", daemon=True)
            self._thread.start()

    # -- thread plumbing -------------------------------------------------------------------------------
    def submit(self, chunk: Chunk) -> None:
        """Queue ``chunk`` for emission (emits at once when not threaded)."""
        if self.error is not None:
            raise self.error
        if self._queue is None:
            self.emit(chunk)
        else:
            self._queue.put(chunk)

    def _run(self) -> None:
        assert self._queue is not None
        while True:
            chunk = self._queue.get()
            if chunk is None:
                return
            if self.error is None:
                try:
                    self.emit(chunk)
                except BaseException as exc:
                    self.error = exc

    def close(self) -> None:
        """Wait until every submitted chunk is written; re-raise an emission error."""
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self.error is not None:
            raise self.error

    # -- templates -----------------------------------------------------------------------------------------
    def _sync_templates(self, n: int) -> None:
        for tpl in self.core.templates[self.n_templates:n]:
            self.t_engine.append(tpl.engine)
            self.t_stream.append(tpl.stream)
            self.t_flops_raw.append(-1 if tpl.flops_raw is None else int(tpl.flops_raw))
            self.t_flops_adj.append(-1 if tpl.flops_adj is None else int(tpl.flops_adj))
            self.t_bytes.append(tuple(tpl.bytes))
            self.t_dma.append(self._dma_attrs(tpl.dma) if tpl.dma is not None else (0,) * 7)
            self.t_group.append(tpl.dma.group if tpl.dma is not None else -1)
            hbm = tpl.dma.hbm if tpl.dma is not None else None
            if hbm is None:
                self.t_hbm_num.append((-1, 1, 0, 0, 0))
            else:  # the tensor is each instruction's (its aux)
                _side, ncols, nrows, ncols_view, bcast = hbm
                self.t_hbm_num.append((0, ncols, nrows, ncols_view, bcast))
            for name in _STR_ATTRS:
                self.attrs[name].add(getattr(tpl, name))
        self.n_templates = max(self.n_templates, n)

    def _arr(self, name: str) -> np.ndarray:
        """Template attribute ``name`` as an int64 array indexed by template id (extended as templates grow)."""
        src = self.attrs[name].by_template if name in self.attrs else getattr(self, name)
        arr = self._arrays.get(name)
        if arr is None or len(arr) < len(src):
            tail = np.asarray(src[0 if arr is None else len(arr):], np.int64)
            arr = self._arrays[name] = tail if arr is None or not len(arr) else np.concatenate([arr, tail])
        return arr

    # -- one chunk -------------------------------------------------------------------------------------------
    def emit(self, chunk: Chunk) -> None:
        """Write the rows of one chunk.

        Rows of tables fed from two sources are ordered by instruction, so a trace's content never depends on
        where chunk boundaries fell: ``SemaphoreUpdate`` has each instruction's completion increment followed by
        its DMA transfer's retirement increment, ``Flow`` each instruction's semaphore waits followed by the edge
        from it (a DMA trigger) to the first packet of the transfer it started.
        """
        self._sync_templates(chunk.n_templates)
        self._sync_variants(chunk.n_variants)
        sem: list[tuple[np.ndarray, dict[str, Any]]] = []
        flow: list[tuple[np.ndarray, dict[str, Any]]] = []
        end = None
        xsem: list[tuple[np.ndarray, dict[str, Any]]] = []
        xf = self._transfers(chunk, xsem) if len(chunk.x_instr) else None
        if len(chunk):
            end = self._instructions(chunk, xf, sem, flow)
        sem.extend(xsem)
        if xf is not None:
            self._packets(chunk, xf, flow, end)
        self._append_merged(schema.SEMAPHORE_UPDATE.name, sem)
        self._append_merged(schema.FLOW.name, flow)
        if len(chunk.c_ts):
            self._counters(chunk)
        if len(chunk.p_id):
            self._spans(chunk)

    def _sync_variants(self, n: int) -> None:
        for var in self.core.variants[len(self.seg_edges.tables):n]:
            self.seg_edges.add(var.uid, var.emit_table)

    def _transfers(self, ch: Chunk, sem: list[tuple[np.ndarray, dict[str, Any]]]) -> dict[str, np.ndarray]:
        """Per-transfer arrays of ``ch`` (group, semaphore value, ...); queue the transfers' semaphore increments."""
        x_tid = i64(ch.x_tid)
        nx = len(x_tid)
        x_group = self._arr("t_group")[x_tid]
        seqs = np.empty(nx, np.int64)
        for g in np.unique(x_group).tolist():
            m = x_group == g
            k = int(m.sum())
            base = self.seq.get(g, 0)
            seqs[m] = base + 1 + np.arange(k)
            self.seq[g] = base + k
        x_instr = i64(ch.x_instr)
        x_retire = i64(ch.x_retire)
        sem.append((2 * x_instr + 1, {
            schema.TIMESTAMP: x_retire, schema.ID: (x_group, ch.streams), schema.VALUE: seqs,
            "update_source": (np.zeros(nx, np.int64), _AXI),
            "update_operation_type": (np.zeros(nx, np.int64), _SEM_INC),
            "update_trigger_timing": (np.zeros(nx, np.int64), _COMPLETE), schema.PCORE_IDX: np.zeros(nx, np.int64),
        }))
        return {"tid": x_tid, "instr": x_instr, "retire": x_retire, "group": x_group, "seqs": seqs,
                "out": i64(ch.x_out), "pkt": i64(ch.x_pkt)}

    def _edges(self, ch: Chunk, start: np.ndarray, end: np.ndarray, stream: np.ndarray, seqs: np.ndarray,  # noqa: PLR0917
               xf: dict[str, np.ndarray] | None) -> tuple[np.ndarray, ...]:
        """(in_id, out_id, out_table, dependency type, gap, stream, value) of the chunk's semaphore-wait edges:
        those the general path recorded and those of fast-path segments, in instruction order."""
        general = (i64(ch.f_in), i64(ch.f_out), np.frombuffer(ch.f_table, np.int8).astype(np.int64),
                   np.frombuffer(ch.f_dep, np.int8).astype(np.int64), i64(ch.f_gap),
                   np.frombuffer(ch.f_stream, np.int32).astype(np.int64), i64(ch.f_value))
        if not len(ch.s_var):
            return general
        seg = self.seg_edges.expand(ch, start, end, stream, seqs, xf)
        cols = tuple(np.concatenate([a, b]) for a, b in zip(general, seg, strict=True))
        order = np.argsort(cols[0], kind="stable")
        return tuple(c[order] for c in cols)

    def _instructions(self, ch: Chunk, xf: dict[str, np.ndarray] | None,
                      sem: list[tuple[np.ndarray, dict[str, Any]]],
                      flow: list[tuple[np.ndarray, dict[str, Any]]]) -> np.ndarray:
        """Write the Instruction rows of ``ch``; queue its semaphore increments and Flow edges; return end_ts."""
        n = len(ch)
        ids = np.arange(ch.first_id, ch.first_id + n, dtype=np.int64)
        start, end, tid = i64(ch.start), i64(ch.end), i64(ch.tid)
        wait, aux = i64(ch.wait), i64(ch.aux)
        eng = self._arr('t_engine')[tid]
        stream = self._arr('t_stream')[tid]
        pcs = np.empty(n, np.int64)
        for e in range(len(ENGINE_NAMES)):
            m = eng == e
            k = int(m.sum())
            if k:
                pcs[m] = self.pc[e] + np.arange(k)
                self.pc[e] += k
        seqs = np.empty(n, np.int64)
        for s in np.unique(stream).tolist():
            m = stream == s
            k = int(m.sum())
            base = self.seq.get(s, 0)
            seqs[m] = base + 1 + np.arange(k)
            self.seq[s] = base + k
        cols: dict[str, Any] = {
            schema.ID: ids, schema.START_TS: start, schema.END_TS: end, schema.DURATION_NS: end - start,
            schema.ENGINE: dict_column(eng, self.strings(ENGINE_NAMES)),
            schema.PC: pcs, schema.PCORE_IDX: np.zeros(n, np.int64),
            schema.TIMELINE_TRACK: dict_column(stream, self.strings(STREAM_TRACK)),
            schema.EVT_WAIT_TIME_NS: wait,
        }
        for col, attr in ((schema.OPCODE, "opcode"), (schema.NKI_SOURCE_LOCATION, "loc"), (schema.LAYER, "lyr"),
                          (schema.HLO_NAME, "hlo"), ("scalar_activation_fn", "act_fn"),
                          (schema.PERFORMANCE_MODE, "perf_mode"), (schema.TENSOR_INSTRUCTION_TYPE, "tensor_type")):
            if attr in ("lyr", "hlo"):  # recorded per instruction
                cols[col] = names_column(np.frombuffer(getattr(ch, attr), np.int32), self.core.names, self.strings)
                continue
            it = self.attrs[attr]
            cols[col] = dict_column(self._arr(attr)[tid], self.strings(it.values))
        tb = self._arr('t_bytes')[tid]
        for i, col in enumerate(_BYTE_COLS):
            v = tb[:, i]
            cols[col] = pa.array(v, mask=v <= 0)
        for col, src in ((schema.RAW_FLOPS, "t_flops_raw"), (schema.ADJUSTED_FLOPS, "t_flops_adj")):
            v = self._arr(src)[tid]
            cols[col] = pa.array(v, mask=v < 0)
        edges = self._edges(ch, start, end, stream, seqs, xf)
        static = self.operand_text.static_texts(
            self.n_templates, (self.attrs["text_pre"].values, self._arr("text_pre")),
            (self.attrs["text_post"].values, self._arr("text_post")))
        cols[schema.OPERANDS] = self.operand_text.column(
            static, tid, aux, self._arr("t_hbm_num")[tid], self.core.names,
            (edges[0] - ch.first_id, edges[5], edges[6], ch.streams))
        self.writer.append(schema.INSTRUCTION.name, cols)
        # semaphore increments at completion
        sem.append((2 * ids, {
            schema.TIMESTAMP: end, schema.ID: (stream, ch.streams), schema.VALUE: seqs,
            "update_source": (eng, ENGINE_NAMES), "update_operation_type": (np.zeros(n, np.int64), _SEM_INC),
            "update_trigger_timing": (np.zeros(n, np.int64), _COMPLETE), schema.PCORE_IDX: np.zeros(n, np.int64),
        }))
        f_in, f_out, f_table, f_dep, f_gap, _f_stream, _f_value = edges
        if len(f_in):
            m = len(f_in)
            flow.append((2 * f_in, {
                schema.IN_ID: f_in, schema.OUT_ID: f_out,
                schema.IN_TABLE: (np.full(m, TABLE_INSTRUCTION, np.int64), _TABLE_NAMES),
                schema.OUT_TABLE: (f_table, _TABLE_NAMES),
                schema.DEPENDENCY_TYPE: (f_dep, DEP_NAMES),
                schema.GAP_TIME: f_gap,
            }))
        return end

    def _append_merged(self, table: str, parts: list[tuple[np.ndarray, dict[str, Any]]]) -> None:
        """Append the rows of ``parts`` (each: per-row sort keys, columns) to ``table`` in key order (stable).

        Columns are numpy arrays, or ``(codes, values)`` pairs for dictionary-encoded strings (values: a tuple).
        """
        parts = [p for p in parts if len(p[0])]
        if not parts:
            return
        order = None if len(parts) == 1 else np.argsort(np.concatenate([p[0] for p in parts]), kind="stable")
        cols: dict[str, Any] = {}
        for name in parts[0][1]:
            first = parts[0][1][name]
            if isinstance(first, tuple):
                if all(c[name][1] is first[1] for _key, c in parts):  # one dictionary for all parts
                    code = np.concatenate([c[name][0] for _key, c in parts])
                    values = first[1]
                else:
                    codes, merged, offset = [], [], 0
                    for _key, c in parts:
                        codes.append(np.where(c[name][0] < 0, -1, c[name][0] + offset))
                        merged.extend(c[name][1])
                        offset += len(c[name][1])
                    code = np.concatenate(codes)
                    values = tuple(merged)
                cols[name] = dict_column(code if order is None else code[order], self.strings(values))
            else:
                arr = np.concatenate([c[name] for _key, c in parts])
                cols[name] = arr if order is None else arr[order]
        if schema.VALUE in cols and table == schema.SEMAPHORE_UPDATE.name:
            cols[schema.VALUE] = cols[schema.VALUE].astype(np.int32)
        self.writer.append(table, cols)

    def _packets(self, ch: Chunk, xf: dict[str, np.ndarray], flow: list[tuple[np.ndarray, dict[str, Any]]],
                 end: np.ndarray | None) -> None:
        """Write the chunk's DMA transfers as ``DmaTransfer`` rows (their packets are stored compactly, see
        :mod:`tracer.packets`); queue the transfers' trigger edges."""
        x_tid = xf["tid"]
        x_pkt = xf["pkt"]
        x_q0 = np.frombuffer(ch.x_q0, np.int32).astype(np.int64)
        nx = len(x_tid)
        nq = self.core.cm.dma_queues
        uni = np.frombuffer(ch.x_uni, np.int8).astype(bool)
        flat = i64(ch.x_qstart)
        offsets = np.zeros(nx + 1, np.int64)
        np.cumsum(np.where(uni, 1, nq), out=offsets[1:])
        attrs = self._arr("t_dma")[x_tid]  # per transfer: layout, packets, queue type, source, dest, variable, group
        codes = self.codes
        var = self._variables(ch, xf, attrs[:, 5])
        split_x = i64(ch.x_split_xfer) - ch.first_xfer
        order = np.argsort(split_x, kind="stable")
        split_offsets = np.zeros(nx + 1, np.int32)
        np.cumsum(np.bincount(split_x, minlength=nx), out=split_offsets[1:])
        split_offsets_arr = pa.array(split_offsets)
        self.writer.append(schema.DMA_TRANSFER.name, {
            "packet_aggregation_id": ch.first_xfer + np.arange(nx, dtype=np.int64), "first_packet_id": x_pkt,
            "packet_layout": attrs[:, 0].astype(np.int32), "rotation": x_q0.astype(np.int32),
            "queue_start_ts": pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat)),
            "queue_group": dict_column(attrs[:, 6], self.strings(codes["group"])),
            "split_packet": pa.ListArray.from_arrays(
                split_offsets_arr, pa.array(i64(ch.x_split_pkt)[order].astype(np.int32))),
            "split_delay_ns": pa.ListArray.from_arrays(split_offsets_arr, pa.array(i64(ch.x_split_delay)[order])),
            schema.QUEUE_TYPE: dict_column(attrs[:, 2], self.strings(codes["qtype"])),
            schema.VARIABLE: dict_column(var, self.strings(codes["var"])),
            schema.PCORE_IDX: np.zeros(nx, np.int64),
            "source": dict_column(attrs[:, 3], self.strings(codes["mem"])),
            "dest": dict_column(attrs[:, 4], self.strings(codes["mem"])),
        })
        if end is not None:
            # the trigger instruction -> the transfer's packet 0 (on queue q0, at offset 0 from its queue's start)
            first_start = flat[offsets[:-1] + np.where(uni, 0, x_q0)]
            x_instr = xf["instr"]
            flow.append((2 * x_instr + 1, {
                schema.IN_ID: x_pkt, schema.OUT_ID: x_instr,
                schema.IN_TABLE: (np.full(nx, TABLE_PACKET, np.int64), _TABLE_NAMES),
                schema.OUT_TABLE: (np.full(nx, TABLE_INSTRUCTION, np.int64), _TABLE_NAMES),
                schema.DEPENDENCY_TYPE: (np.zeros(nx, np.int64), DEP_NAMES),
                schema.GAP_TIME: first_start - end[x_instr - ch.first_id],
            }))

    def _write_layout(self, layout: int, plan: DmaPlan) -> None:
        """Write the ``DmaPacketLayout`` rows of a new packet layout, on disk before any transfer using it."""
        sub = np.arange(plan.n, dtype=np.int64) % plan.per_row
        rotations = []
        for q0 in range(self.core.cm.dma_queues):
            _totals, offsets, queue = plan.layout(q0)
            rotations.append((queue, offsets))
        self.writer.append(schema.DMA_PACKET_LAYOUT.name,
                           layout_columns(layout, rotations, plan.sub_ns[sub], plan.sub_bytes[sub], sub))
        self.writer.flush(schema.DMA_PACKET_LAYOUT.name)

    def _variables(self, ch: Chunk, xf: dict[str, np.ndarray], var: np.ndarray) -> np.ndarray:
        """Each transfer's ``variable`` code: its template's (an on-chip copy's tile), or, with an HBM side (-1
        there), the HBM tensor its trigger instruction's ``aux`` names (records.dma_aux)."""
        hbm = np.flatnonzero(var < 0)
        if not len(hbm):
            return var
        at = xf["instr"][hbm] - ch.first_id
        if at.min() < 0 or at.max() >= len(ch):
            raise RuntimeError("trnprof trace emitter: a DMA transfer's trigger is not in its chunk")
        used, inv = np.unique(i64(ch.aux)[at] >> AUX_TENSOR_SHIFT, return_inverse=True)
        names = self.core.names
        codes = np.array([_intern(self.codes["var"], names[c]) for c in used.tolist()], np.int64)
        var = var.copy()
        var[hbm] = codes[inv]
        return var

    def _dma_attrs(self, plan: DmaPlan) -> tuple[int, ...]:
        """(packet-layout shape id, packets, queue type, source, dest, variable codes, queue-name base)."""
        # Within a run the packets' sizes and durations follow from (rows, bytes per row, rate): that is the layout.
        key = (plan.n, plan.per_row, plan.chunk_bytes, plan.rate_factor)
        shape = self.shape_ids.get(key)
        if shape is None:
            shape = self.shape_ids[key] = len(self.shape_ids)
            self._write_layout(shape, plan)
        codes = self.codes
        group = plan.group
        gcode = self.group_codes.get(group)
        if gcode is None:
            gcode = self.group_codes[group] = self._group_code(self.core, group)
        return (shape, plan.n, _intern(codes["qtype"], plan.queue_type), _intern(codes["mem"], plan.src_mem),
                _intern(codes["mem"], plan.dst_mem),
                -1 if plan.variable is None else _intern(codes["var"], plan.variable), gcode)

    def _group_code(self, core: Core, group: int) -> int:
        """Code of queue group ``group`` (its queue-name prefix) in the queue_group dictionary; a new group's
        queues get their DmaQueuesInfo rows."""
        prefix = core.stream_names[group]
        if prefix not in self.codes["group"]:
            self._queue_info(core, prefix)
        return _intern(self.codes["group"], prefix)

    def _queue_info(self, core: Core, prefix: str) -> None:
        # GpSimd's queues are software DGE queues (Neuron's software_dynamic); the others carry loads and stores
        qtype = "software_dynamic" if prefix.startswith("qGpSimd") else "data"
        self.writer.append_rows(schema.DMA_QUEUES_INFO.name, [
            {schema.NAME: f"{prefix}{q}", "type": qtype, schema.PCORE_IDX: 0, "idx": q, schema.ENGINE_IDX: q}
            for q in range(core.cm.dma_queues)])

    def _spans(self, ch: Chunk) -> None:
        n = len(ch.p_id)
        start, end = i64(ch.p_start), i64(ch.p_end)
        parent = i64(ch.p_parent)
        names = self.core.names
        cat = np.frombuffer(ch.p_cat, np.int32).astype(np.int64)
        self.writer.append(schema.SPAN.name, {
            schema.ID: i64(ch.p_id), schema.START_TS: start, schema.END_TS: end, schema.DURATION_NS: end - start,
            schema.NAME: names_column(np.frombuffer(ch.p_name, np.int32).astype(np.int64), names, self.strings),
            schema.CATEGORY: names_column(cat, names, self.strings),
            schema.DEPTH: self.span_lanes.assign(cat, start, end),
            schema.PARENT_ID: pa.array(parent, mask=parent < 0),
            schema.TRACK_GROUP: dict_column(np.zeros(n, np.int64), self.strings((TRACK_GROUP,))),
            schema.TRACK_NAME: names_column(cat, names, self.strings),
            schema.PCORE_IDX: np.zeros(n, np.int64),
        })

    def _counters(self, ch: Chunk) -> None:
        n = len(ch.c_ts)
        kind = np.frombuffer(ch.c_kind, np.int8).astype(np.int64)
        self.writer.append(schema.COUNTER.name, {
            schema.TIMESTAMP: i64(ch.c_ts),
            schema.NAME: first_seen_column(kind, [k[0] for k in COUNTER_KINDS], self.strings),
            schema.VALUE: np.frombuffer(ch.c_val, np.float64),
            schema.UNIT: first_seen_column(kind, [k[1] for k in COUNTER_KINDS], self.strings),
            schema.TRACK_GROUP: dict_column(np.zeros(n, np.int64), self.strings((TRACK_GROUP,))),
            schema.PCORE_IDX: np.zeros(n, np.int64),
        })


def _intern(codes: dict[str, int], value: str) -> int:
    """The code of ``value`` in ``codes`` (value -> code, in order of first use), added when new."""
    code = codes.get(value)
    if code is None:
        code = codes[value] = len(codes)
    return code
