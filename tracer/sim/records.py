"""The records of the simulated NeuronCore: engine/stream numbering, instruction templates, DMA packet plans,
and the chunks of column data the core hands to the trace emitter.

A :class:`Template` holds everything static about an instruction (interned, so a loop body's instructions share
a few); a :class:`DmaPlan` says how one transfer splits into packets over the DMA queues; a :class:`Chunk` is a
slice of the core's per-instruction ``array`` columns.  Owned here so the scheduler (:mod:`tracer.sim.core`), the
kernel API (:mod:`tracer.sim.ops`) and the emitters share one definition.
"""

from __future__ import annotations

import marshal
import sys
from array import array
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np

from tracer.sim.arch import CostModel

#: The operand text marking the kernel-end barrier (Sync waiting until every engine and DMA queue has finished).
END_BARRIER = "barrier=kernel_end"

ENGINE_NAMES = ("Tensor", "Vector", "Scalar", "GpSimd", "Sync")
E_TENSOR, E_VECTOR, E_SCALAR, E_GPSIMD, E_SYNC = range(5)
S_TENSOR, S_MATRIX, S_VECTOR, S_SCALAR, S_GPSIMD, S_SYNC = range(6)
COMPUTE_STREAMS = ("S[0]", "S[1]", "S[2]", "S[3]", "S[4]", "S[5]")
STREAM_ENGINE = (E_TENSOR, E_TENSOR, E_VECTOR, E_SCALAR, E_GPSIMD, E_SYNC)
STREAM_TRACK = ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")
ENGINE_STREAM = {E_VECTOR: S_VECTOR, E_SCALAR: S_SCALAR, E_GPSIMD: S_GPSIMD, E_SYNC: S_SYNC}

KIND_COMPUTE, KIND_MATMUL, KIND_DMA = 0, 1, 2
#: NeuronCore-v2 access conflicts (``CostModel.access_conflicts``): the engines' accesses to one memory port are
#: kept in four lists, one per engine and port -- Vector's and GpSimd's SBUF accesses, Vector's and Scalar's PSUM
#: accesses.  List ``l ^ 1`` is the other engine's on the same port: an access in list ``l`` must not overlap one
#: in list ``l ^ 1``.  A template's ``ports`` is the bit mask of the lists its instruction joins
#: (:func:`tracer.sim.fastpath.schedule_kernel.place`).
PORT_VECTOR_SBUF, PORT_GPSIMD_SBUF, PORT_VECTOR_PSUM, PORT_SCALAR_PSUM = range(4)
#: The stream of each list's engine.
PORT_STREAM = (S_VECTOR, S_GPSIMD, S_VECTOR, S_SCALAR)
#: The counters the core samples: (name, unit), stored per sample as an index into this tuple.
COUNTER_KINDS = (("sbuf_usage_bytes", "B"), ("psum_banks_in_use", "banks"), ("tensor_throttle_percent", "%"))
C_SBUF, C_PSUM, C_THROTTLE = range(3)
TABLE_INSTRUCTION, TABLE_PACKET = 0, 1

#: A chunk goes to the trace writer every HANDOFF_INTERVAL_S seconds of simulation or CHUNK_INSTRUCTIONS
#: instructions, whichever comes first: often enough that the writer's work at the end (the last chunk) is short,
#: seldom enough that the hand-over costs little (DMA packets no longer count: transfers are stored compactly).
CHUNK_INSTRUCTIONS = 65_536
HANDOFF_INTERVAL_S = 0.05
#: ... and every END_HANDOFF_INTERVAL_S once the run is predicted to end within END_WINDOW_S (the loop fast path's
#: prediction of its length, at the current speed): the last chunk, which the run waits for the writer to finish,
#: stays small.  The window is long enough for the writer to finish its big pieces of work before the end (the
#: last full chunk, ~25 ms, and compressing every buffered row, ~15 ms): with 0.1 s it was often still busy with
#: them when the run ended (BENCHMARKS.md, "Tracer", round 12).
END_HANDOFF_INTERVAL_S = 0.01
END_WINDOW_S = 0.25


class VKey(NamedTuple):
    """An on-chip operand in a template key: memory, block address, dtype name and the view's bounds."""

    mem: str
    addr: Any
    dtype: str
    p0: int
    p1: int
    f0: int
    f1: int


class HKey(NamedTuple):
    """The HBM side of a DMA in a template key: side (src/dst), tensor columns, view rows and columns, broadcast
    partitions (0: none).  Not the tensor: the instruction's ``aux`` names it (:func:`dma_aux`), so one template
    serves every tensor of a shape (each layer's weights)."""

    side: str
    ncols: int
    nrows: int
    ncols_view: int
    bcast: int


#: ``aux`` of a DMA trigger with an HBM side: the HBM tensor's code (its name's in ``Core.names``) shifted by this
#: many bits, plus the view's first element's offset in the tensor (tensors have fewer than 2**40 elements).
AUX_TENSOR_SHIFT = 40
AUX_OFFSET_MASK = (1 << AUX_TENSOR_SHIFT) - 1
#: Name codes a tensor's can be below (``aux`` is an int64).
AUX_MAX_TENSOR_CODE = 1 << (63 - AUX_TENSOR_SHIFT)


def dma_aux(code: int, offset: int) -> int:
    """``aux`` of a DMA trigger reading or writing the HBM tensor of name code ``code`` from element ``offset``."""
    return (code << AUX_TENSOR_SHIFT) | offset


def i64(buf: Any) -> np.ndarray:
    """A raw int64 buffer (a chunk's ``array.array`` column, or bytes) as a numpy array without copying."""
    return np.frombuffer(buf, dtype=np.int64) if len(buf) else np.zeros(0, np.int64)


#: The template fields the simulation sends the writer process (``tracer.sim.emit_process.encode_template``), in
#: order; the DMA plan's description follows them.
WIRE_FIELDS = ("engine", "stream", "flops_raw", "flops_adj", "bytes", "opcode", "loc", "act_fn",
               "perf_mode", "tensor_type", "text_pre", "text_post")


class Template:
    """Everything static about an instruction; interned, so a loop body's instructions share a few templates.

    ``key`` is the descriptor it was built from (see :mod:`tracer.sim.ops`): the same key always builds the same
    template, which is how the loop fast path rebuilds templates for a new set of tile addresses.  Layer and
    operator names are recorded per instruction by the core, not here.
    """

    __slots__ = (
        "act_fn", "bytes", "clock", "cycles", "dma", "dur", "engine", "flops_adj", "flops_raw", "id", "key",
        "kind", "loc", "opcode", "perf_mode", "ports", "stream", "tensor_type", "text_post", "text_pre",
    )

    def __init__(self, **kw: Any) -> None:
        get = kw.get
        self.key = get("key")
        self.act_fn = get("act_fn")
        self.bytes = get("bytes")
        self.clock = get("clock")
        self.cycles = get("cycles")
        self.dma = get("dma")
        self.dur = get("dur")
        self.engine = get("engine")
        self.flops_adj = get("flops_adj")
        self.flops_raw = get("flops_raw")
        self.id = get("id")
        self.kind = get("kind")
        self.loc = get("loc")
        self.opcode = get("opcode")
        self.perf_mode = get("perf_mode")
        #: Access-conflict lists the instruction joins (a bit per PORT_* list; 0: none).
        self.ports = get("ports") or 0
        self.stream = get("stream")
        self.tensor_type = get("tensor_type")
        self.text_post = get("text_post")
        self.text_pre = get("text_pre")


#: Per-rotation DMA layouts shared by the plans of one packet geometry: (packets, packets per row, queues,
#: per-row packet durations) -> the five caches of :class:`DmaPlan`.
_GEOMETRY_CACHE: dict[tuple[Any, ...], tuple[dict[int, Any], ...]] = {}
#: Geometries kept at most (the cache outlives runs: a session recording many shapes must not grow without bound;
#: plans keep the layouts they already share).
_GEOMETRY_CACHE_MAX = 1024
#: A row's packets by (id of the cost model, row bytes): the model, the packets' sizes and durations (read-only
#: arrays) and the durations as a tuple.
_ROW_PACKETS: dict[tuple[int, int, float], tuple[Any, np.ndarray, np.ndarray, tuple[int, ...]]] = {}


class DmaPlan:
    """How one DMA transfer splits into packets over the queues of its group (see docs/cost-model.md).

    Rows (partition rows) are cut into packets of at most ``dma_packet_bytes``; packet ``j`` (row-major) goes to
    queue ``(q0 + j) % Q`` where ``q0`` rotates from transfer to transfer, so the queues stay balanced.
    """

    __slots__ = ("_cache", "_equal", "_last", "_qpk", "_uni", "bytes", "chunk_bytes", "dst_mem", "group", "hbm", "n",
                 "nqueues", "per_row", "prefix", "queue_type", "rate_factor", "rows", "src_mem", "sub_bytes", "sub_ns",
                 "variable")

    def __init__(self, cm: CostModel, *, rows: int, chunk_bytes: int, group: int, prefix: str, queue_type: str,
                 src_mem: str, dst_mem: str, variable: str | None, hbm: tuple[Any, ...] | None,
                 rate_factor: float = 1.0) -> None:
        self.rows = rows
        self.chunk_bytes = chunk_bytes
        #: Share of the queues' rate the transfer keeps (below 1 for a DMA transpose: see
        #: ``CostModel.dma_transpose_factor``).
        self.rate_factor = rate_factor
        self.group = group
        self.prefix = prefix
        self.queue_type = queue_type
        self.src_mem = src_mem
        self.dst_mem = dst_mem
        #: The trace's ``variable`` of an on-chip copy (its destination tile); None with an HBM side, whose tensor
        #: is the instruction's (:func:`dma_aux`).
        self.variable = variable
        #: (side, tensor columns, view rows, view columns, broadcast) when one side is HBM (the tensor is the
        #: instruction's: see :func:`dma_aux`).
        self.hbm = hbm
        self.nqueues = cm.dma_queues
        # keyed by the cost model's id (hashing the frozen dataclass costs ~1.6 us); the entry holds the model, so
        # the id cannot be reused while the entry exists
        row = _ROW_PACKETS.get((id(cm), chunk_bytes, rate_factor))
        if row is None or row[0] is not cm:  # a row's packets depend only on the cost model, its bytes and rate
            pkt = cm.dma_packet_bytes
            full, rem = divmod(chunk_bytes, pkt)
            sizes = [pkt] * full + ([rem] if rem else [])
            sub_ns = [cm.dma_packet_ns(s, chunk_bytes, rate_factor) for s in sizes]
            if len(_ROW_PACKETS) >= _GEOMETRY_CACHE_MAX:
                _ROW_PACKETS.clear()
            arrays = np.array(sizes, np.int64), np.array(sub_ns, np.int64)
            for a in arrays:
                a.setflags(write=False)  # shared by every plan of this geometry
            row = _ROW_PACKETS[(id(cm), chunk_bytes, rate_factor)] = (cm, *arrays, tuple(sub_ns))
        _cm, self.sub_bytes, self.sub_ns, sub_ns_key = row
        self.per_row = len(sub_ns_key)
        self.n = rows * self.per_row
        # the per-rotation results depend only on the packet geometry: plans with the same one share them
        geometry = (self.n, self.per_row, self.nqueues, sub_ns_key)
        shared = _GEOMETRY_CACHE.get(geometry)
        if shared is None:
            if len(_GEOMETRY_CACHE) >= _GEOMETRY_CACHE_MAX:
                _GEOMETRY_CACHE.clear()
            shared = _GEOMETRY_CACHE[geometry] = ({}, {}, {}, {}, {})
        #: Per rotation q0: layout, equal totals, last packet, uniform (busy time, last packet) or None, each
        #: queue's packet durations in order.
        self._cache: dict[int, tuple[tuple[int, ...], np.ndarray, np.ndarray]] = shared[0]
        self._equal: dict[int, bool] = shared[1]
        self._last: dict[int, int] = shared[2]
        self._uni: dict[int, Any] = shared[3]
        self._qpk: dict[int, tuple[tuple[int, ...], ...]] = shared[4]
        #: Bytes the transfer moves.
        self.bytes = rows * chunk_bytes

    def layout(self, q0: int) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
        """(per-queue busy ns, per-packet offset from its queue's start, per-packet queue) for rotation ``q0``."""
        hit = self._cache.get(q0)
        if hit is not None:
            return hit
        j = np.arange(self.n, dtype=np.int64)
        dur = self.sub_ns[j % self.per_row]
        queue = (q0 + j) % self.nqueues
        offsets = np.zeros(self.n, np.int64)
        totals = [0] * self.nqueues
        for q in range(self.nqueues):
            r = (q - q0) % self.nqueues
            if r >= self.n:
                continue
            d = dur[r::self.nqueues]
            csum = np.cumsum(d)
            offsets[r::self.nqueues] = csum - d
            totals[q] = int(csum[-1]) if len(csum) else 0
        hit = (tuple(totals), offsets, queue)
        self._cache[q0] = hit
        return hit

    def uniform(self, q0: int) -> tuple[int, int] | None:
        """(busy time of every queue, index of the last packet) when rotation ``q0`` loads every queue alike,
        else None."""
        hit = self._uni.get(q0, False)
        if hit is False:
            hit = self._uni[q0] = (self.layout(q0)[0][0], self.last_all(q0)) \
                if self.equal_totals(q0) and self.layout(q0)[0][0] else None
        return hit

    def equal_totals(self, q0: int) -> bool:
        """True when rotation ``q0`` gives every queue the same busy time."""
        eq = self._equal.get(q0)
        if eq is None:
            totals = self.layout(q0)[0]
            eq = self._equal[q0] = all(t == totals[0] for t in totals)
        return eq

    def last_all(self, q0: int) -> int:
        """Index of the transfer's last packet when every queue finishes at the same time."""
        last = self._last.get(q0)
        if last is None:
            totals = self.layout(q0)[0]
            last = self._last[q0] = max(self.last_packet(q, q0) for q in range(self.nqueues) if totals[q])
        return last

    def queue_packets(self, q0: int) -> tuple[tuple[int, ...], ...]:
        """Per queue, the durations of its packets in the order it moves them (packet ``r``, ``r + Q``, ... of the
        transfer, ``r = (q - q0) % Q``), for rotation ``q0``."""
        hit = self._qpk.get(q0)
        if hit is None:
            dur = self.sub_ns[np.arange(self.n, dtype=np.int64) % self.per_row]
            hit = self._qpk[q0] = tuple(tuple(dur[(q - q0) % self.nqueues::self.nqueues].tolist())
                                        for q in range(self.nqueues))
        return hit

    def repeat(self, value: int) -> list[int]:
        """``value`` once per queue."""
        return [value] * self.nqueues

    def last_packet(self, q: int, q0: int) -> int:
        """Index (within the transfer) of the last packet on queue ``q``."""
        r = (q - q0) % self.nqueues
        return r + self.nqueues * ((self.n - 1 - r) // self.nqueues)


@dataclass
class Chunk:
    """A slice of the core's records handed to the trace emitter."""

    first_id: int
    start: array
    end: array
    tid: array
    wait: array
    aux: array
    #: Layer and operator name codes (into Core.names, -1: none).
    lyr: array
    hlo: array
    # Flow edges (one per resolved semaphore wait)
    f_in: array
    f_out: array
    f_table: array
    f_dep: array
    f_gap: array
    f_stream: array
    f_value: array
    # DMA transfers
    x_instr: array
    x_tid: array
    x_pkt: array
    x_q0: array
    x_retire: array
    x_qstart: array
    x_out: array
    #: 1 when the transfer's queues all started together (x_qstart then holds one value, else one per queue).
    x_uni: array
    #: Shares split around other packets (tracer.sim.dma), one entry per idle stretch: the transfer (absolute
    #: number), the packet (within it) after the stretch, which with the later packets of its queue (of every queue,
    #: from the same place in each, when the queues started together: x_uni) starts that many ns later than back to
    #: back.
    x_split_xfer: array
    x_split_pkt: array
    x_split_delay: array
    # Counter samples: time, kind (index into COUNTER_KINDS), value
    c_ts: array
    c_kind: array
    c_val: array
    #: Loop fast path segments: variant id, first instruction, first transfer, and per segment the producers its
    #: edges name (five ints each: stream, value, ready time, table, id), as one marshalled tuple of the producer
    #: tuples (bytes, which the garbage collector does not track): marshalling each segment's at once costs ~3 us
    #: where copying the int objects into a list then marshalling them all at the hand-over cost ~7 us (~1.5% of a
    #: traced matmul_rowload run). :func:`leaf_values` makes the int64 array where the chunk is emitted.
    s_var: array
    s_i0: array
    s_x0: array
    s_leaf: list[bytes]
    #: Span rows of the scopes closed: id, start, end, name and category (codes into Core.names), depth, parent
    #: span id (-1: none).
    p_id: array
    p_start: array
    p_end: array
    p_name: array
    p_cat: array
    p_depth: array
    p_parent: array
    first_xfer: int
    n_templates: int = 0
    streams: tuple[str, ...] = ()
    n_variants: int = 0
    n_names: int = 0
    #: The run is predicted to end soon (chunks come every END_HANDOFF_INTERVAL_S): the writer writes every row out
    #: while it waits for the next chunk, so that little is left for the end.
    ending: bool = False

    def __len__(self) -> int:
        return len(self.start)

    def absorb(self, later: Chunk) -> None:
        """Append the records of ``later``, the chunk handed over right after this one: ids in a chunk's columns are
        absolute, so the two then read as one chunk (the trace writer process merges chunks that wait for it, and
        pays its per-chunk costs once).

        Raises:
            ValueError: ``later`` does not follow this chunk.
        """
        if later.first_id != self.first_id + len(self) or later.first_xfer != self.first_xfer + len(self.x_instr):
            raise ValueError(f"chunk at instruction {later.first_id} does not follow the one at {self.first_id}")
        for name in _ARRAY_FIELDS:
            getattr(self, name).extend(getattr(later, name))
        self.s_leaf.extend(later.s_leaf)
        for name in CHUNK_SCALARS:  # the later chunk's counts, streams and flag (the first ids stay this chunk's)
            if name not in ("first_id", "first_xfer"):
                setattr(self, name, getattr(later, name))

    def header(self) -> tuple[Any, ...]:
        """The chunk's fields that are not columns (:data:`CHUNK_SCALARS`), as a plain tuple: with its array columns
        and ``s_leaf`` it is what the trace writer process is sent (:meth:`from_parts` puts them together again).
        Pickling the chunk with its ~45 columns emptied instead cost ~90 us more per chunk."""
        return tuple(getattr(self, name) for name in CHUNK_SCALARS)

    @classmethod
    def from_parts(cls, header: tuple[Any, ...], columns: dict[str, array], s_leaf: list[bytes]) -> Chunk:
        """The chunk of :meth:`header`, its array ``columns`` (every one of :data:`CHUNK_COLUMNS`) and ``s_leaf``.

        Raises:
            ValueError: the header or the columns are not those of a chunk.
        """
        if not isinstance(header, tuple) or len(header) != len(CHUNK_SCALARS) or columns.keys() != _ARRAY_SET:
            raise ValueError("not the parts of a trace chunk")
        return cls(**dict(zip(CHUNK_SCALARS, header, strict=True)), s_leaf=s_leaf, **columns)


def new_columns() -> dict[str, Any]:
    """Empty columns of a :class:`Chunk` (arrays, but ``s_leaf``: a list of bytes)."""
    cols: dict[str, Any] = {name: array("q") for name in ("start", "end", "tid", "wait", "aux", "f_in", "f_out",
                                                          "f_gap", "f_value", "x_instr", "x_tid", "x_pkt", "x_retire",
                                                          "x_qstart", "x_out", "x_split_xfer", "x_split_pkt",
                                                          "x_split_delay", "c_ts", "s_var", "s_i0", "s_x0",
                                                          "p_id", "p_start", "p_end", "p_parent")}
    cols["s_leaf"] = []
    cols.update({name: array("b") for name in ("f_table", "f_dep", "x_uni", "c_kind")})
    cols["c_val"] = array("d")
    cols.update({name: array("i") for name in ("f_stream", "x_q0", "lyr", "hlo", "p_name", "p_cat", "p_depth")})
    return cols


def leaf_values(segments: list[bytes]) -> np.ndarray:
    """``Chunk.s_leaf`` (each segment's producer tuples, marshalled) as one int64 array of their fields, in order.

    Fields are ints; one that was a numpy integer comes back from marshal as its raw native-endian bytes (marshal
    writes any buffer as bytes), and is read back as the integer it was.
    """
    values = [v for blob in segments for producer in marshal.loads(blob) for v in producer]
    try:
        return np.fromiter(values, np.int64, count=len(values))
    except (TypeError, ValueError):
        return np.fromiter((v if type(v) is not bytes else int.from_bytes(v, sys.byteorder, signed=True)
                            for v in values), np.int64, count=len(values))


#: The array columns of a :class:`Chunk` with their ``array`` type codes, in the order they travel to the trace
#: writer process.
CHUNK_COLUMNS: tuple[tuple[str, str], ...] = tuple((name, col.typecode) for name, col in new_columns().items()
                                                  if name != "s_leaf")
_ARRAY_FIELDS = tuple(name for name, _typecode in CHUNK_COLUMNS)
_ARRAY_SET = frozenset(_ARRAY_FIELDS)
#: The fields of a :class:`Chunk` that are neither array columns nor ``s_leaf`` (see :meth:`Chunk.header`).
CHUNK_SCALARS = tuple(f.name for f in fields(Chunk) if f.name not in _ARRAY_SET and f.name != "s_leaf")
