"""Synthetic traces for benchmarks and demos: realistic structure, any size, generated vectorised in chunks.

``synth_trace(path, events=N, tracks=T)`` writes a trace directory through :class:`tracer.TraceWriter`:

* per NeuronCore, 5 engine tracks of sequential instructions (Tensor, Vector, Scalar, GpSimd, Sync) with
  opcode-dependent durations, short issue gaps and rare long idle gaps, and 16 DMA queues whose packets
  overlap (transfers are split into packets issued faster than they complete), in bursts with idle gaps;
* layers and operators change with time (``layer``, ``hlo_name``, ``nki_source_location`` columns and one
  ``layer`` Span per phase), Tensor instructions carry FLOPs, DMA packets bytes;
* ``T`` tracks fill cores in order (21 per core: 5 engines, then 16 queues), so ``--tracks 42`` is two cores.

Memory is bounded by ``chunk_events`` whatever ``N``: each chunk continues every track's clock.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from tracer import schema as ts
from tracer.errors import ConfigError, TraceExistsError
from tracer.trace_dir import check_trace_directory
from tracer.writer import TraceWriter

ENGINE_TRACKS = len(ts.ENGINES)
DMA_QUEUES = 16
TRACKS_PER_CORE = ENGINE_TRACKS + DMA_QUEUES
DEFAULT_CHUNK_EVENTS = 1 << 20

#: Opcodes per engine with (probability, median duration ns).
ENGINE_OPCODES: dict[str, tuple[tuple[str, float, int], ...]] = {
    "Tensor": (("MATMUL", 0.7, 420), ("LDWEIGHTS", 0.3, 110)),
    "Vector": (("TENSOR_TENSOR", 0.4, 260), ("TENSOR_SCALAR", 0.3, 150), ("TENSOR_REDUCE", 0.2, 300),
               ("TENSOR_COPY", 0.1, 90)),
    "Scalar": (("ACTIVATE", 0.8, 230), ("ACTIVATE_QUANTIZE", 0.2, 260)),
    "GpSimd": (("IOTA", 0.3, 180), ("TENSOR_PARTITION_REDUCE", 0.4, 520), ("MEMSET", 0.3, 120)),
    "Sync": (("DMA_TRIGGER", 0.6, 60), ("EVENT_SEMAPHORE", 0.3, 40), ("NOP", 0.1, 20)),
}
LAYERS = tuple(f"layers.{i}.{part}" for i in range(4) for part in ("attn", "mlp"))
OPERATORS = ("dot.1", "add.3", "exp.7", "reduce.2", "copy.5", "transpose.4")
TENSORS = ("q_proj.w", "k_proj.w", "v_proj.w", "hidden", "kv_cache", "mlp.up.w", "mlp.down.w", "out")
#: Length of one layer phase.
LAYER_PHASE_NS = 200_000
#: Probability that an instruction is followed by an idle gap, and the gap's mean.
IDLE_PROBABILITY = 0.002
IDLE_MEAN_NS = 40_000

#: Mean packets per DMA transfer, and the mean idle gap between transfers.
PACKETS_PER_TRANSFER = 8
DMA_BREAK_MEAN_NS = 5_000

SynthProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class TrackSlot:
    """One synthetic track: an engine or a DMA queue of a core."""

    core: int
    engine: str | None     # set for engine tracks
    queue: int | None      # set for DMA queues


def track_slots(tracks: int) -> list[TrackSlot]:
    """The first ``tracks`` slots, 21 per core: 5 engines then 16 DMA queues."""
    slots = []
    for i in range(tracks):
        core, j = divmod(i, TRACKS_PER_CORE)
        if j < ENGINE_TRACKS:
            slots.append(TrackSlot(core, ts.ENGINES[j], None))
        else:
            slots.append(TrackSlot(core, None, j - ENGINE_TRACKS))
    return slots


def _dict(codes: np.ndarray, values: tuple[str, ...]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(values, pa.string()))


class _Generator:
    def __init__(self, slots: list[TrackSlot], seed: int) -> None:
        self.slots = slots
        self.rng = np.random.default_rng(seed)
        self.clock = np.zeros(len(slots), np.int64)
        self.next_id = {ts.INSTRUCTION.name: 0, ts.DMA_PACKET.name: 0}
        weights = np.array([1.0 if s.engine else 0.5 for s in slots])
        self.share = weights / weights.sum()

    def _engine(self, slot: TrackSlot, i: int, n: int) -> dict[str, object]:
        rng = self.rng
        table = ENGINE_OPCODES[slot.engine or "Sync"]
        names = tuple(o[0] for o in table)
        op = rng.choice(len(table), size=n, p=[o[1] for o in table])
        median = np.array([o[2] for o in table], np.float64)[op]
        dur = np.maximum(1, rng.lognormal(np.log(median), 0.35)).astype(np.int64)
        gap = rng.integers(5, 60, n)
        idle = rng.random(n) < IDLE_PROBABILITY
        gap = gap + np.where(idle, rng.exponential(IDLE_MEAN_NS, n).astype(np.int64), 0)
        end = self.clock[i] + np.cumsum(gap + dur)
        start = end - dur
        self.clock[i] = int(end[-1])
        ids = np.arange(self.next_id[ts.INSTRUCTION.name], self.next_id[ts.INSTRUCTION.name] + n, dtype=np.int64)
        self.next_id[ts.INSTRUCTION.name] += n
        phase = (start // LAYER_PHASE_NS) % len(LAYERS)
        operator = (phase + op) % len(OPERATORS)
        cols: dict[str, object] = {
            ts.ID: ids, ts.START_TS: start, ts.END_TS: end, ts.DURATION_NS: dur,
            ts.ENGINE: _dict(np.zeros(n, np.int32), (slot.engine or "Sync",)),
            ts.OPCODE: _dict(op, names),
            ts.OPERANDS: pa.array([f"S[{k}]>=1 S[{k + 1}]++@complete" for k in range(8)]).take(
                pa.array(rng.integers(0, 8, n))),
            ts.PC: ids,
            ts.PCORE_IDX: np.full(n, slot.core, np.int64),
            ts.EVT_WAIT_TIME_NS: np.where(rng.random(n) < 0.1, rng.integers(10, 500, n), 0),
            ts.HLO_NAME: _dict(operator, OPERATORS),
            ts.LAYER: _dict(phase, LAYERS),
            ts.NKI_SOURCE_LOCATION: _dict(op, tuple(f"kernel.py:{40 + 3 * k}" for k in range(len(names)))),
            "sbuf_read_bytes": rng.integers(1, 64, n) * 1024,
            "sbuf_write_bytes": rng.integers(1, 64, n) * 1024,
        }
        if slot.engine == "Tensor":
            moving = np.where(op == 0, rng.choice([128, 256, 512], n), 0)
            flops = 2 * 128 * 128 * moving
            transpose = (op == 0) & (rng.random(n) < 0.05)
            cols[ts.RAW_FLOPS] = flops
            cols[ts.ADJUSTED_FLOPS] = flops
            cols[ts.TENSOR_INSTRUCTION_TYPE] = _dict(transpose.astype(np.int32), ("REGULAR", "TRANSPOSE"))
        return cols

    def _dma(self, slot: TrackSlot, i: int, n: int) -> dict[str, object]:
        rng = self.rng
        q = slot.queue or 0
        size = rng.choice([512, 2048, 4096, 16384], n, p=[0.2, 0.3, 0.3, 0.2]).astype(np.int64)
        dur = np.maximum(1, (size / 23.0 * rng.lognormal(0, 0.25, n))).astype(np.int64) + 64
        # Packets of one transfer issue faster than they complete, so they overlap; transfers come in bursts
        # separated by idle gaps sized so that every queue keeps pace with the engines.
        gap = rng.integers(10, 120, n)
        breaks = rng.random(n) < 1 / PACKETS_PER_TRANSFER
        gap = gap + np.where(breaks, rng.exponential(DMA_BREAK_MEAN_NS, n).astype(np.int64), 0)
        start = self.clock[i] + np.cumsum(gap)
        end = start + dur
        self.clock[i] = int(start[-1])
        ids = np.arange(self.next_id[ts.DMA_PACKET.name], self.next_id[ts.DMA_PACKET.name] + n, dtype=np.int64)
        self.next_id[ts.DMA_PACKET.name] += n
        phase = (start // LAYER_PHASE_NS) % len(LAYERS)
        return {
            ts.ID: ids, ts.START_TS: start, ts.END_TS: end, ts.DURATION_NS: dur,
            ts.QUEUE_NAME: _dict(np.zeros(n, np.int32), (f"qSyncIO{q}",)),
            ts.QUEUE_IDX: np.full(n, q, np.int64),
            ts.QUEUE_TYPE: _dict(np.zeros(n, np.int32), ("data" if q % 4 else "input",)),
            ts.ENGINE_IDX: np.full(n, q, np.int64),
            ts.READ_BYTES: size, ts.WRITE_BYTES: size, ts.TRANSFER_BYTES: size,
            ts.THROUGHPUT: (size / dur * 1e9).astype(np.float32),
            ts.VARIABLE: _dict((phase + q) % len(TENSORS), TENSORS),
            ts.PCORE_IDX: np.full(n, slot.core, np.int64),
        }

    def chunk(self, writer: TraceWriter, events: int) -> None:
        counts = np.floor(self.share * events).astype(np.int64)
        counts[: events - int(counts.sum())] += 1
        for i, (slot, n) in enumerate(zip(self.slots, counts.tolist(), strict=True)):
            if n <= 0:
                continue
            if slot.engine is not None:
                writer.append(ts.INSTRUCTION.name, self._engine(slot, i, n))
            else:
                writer.append(ts.DMA_PACKET.name, self._dma(slot, i, n))


def _layer_spans(end_ns: int, cores: int) -> dict[str, object]:
    phases = max(1, -(-end_ns // LAYER_PHASE_NS))
    start = np.arange(phases, dtype=np.int64) * LAYER_PHASE_NS
    starts = np.tile(start, cores)
    core = np.repeat(np.arange(cores, dtype=np.int64), phases)
    names = [LAYERS[i % len(LAYERS)] for i in range(phases)] * cores
    return {
        ts.ID: np.arange(len(starts), dtype=np.int64), ts.START_TS: starts,
        ts.END_TS: np.minimum(starts + LAYER_PHASE_NS, max(end_ns, 1)),
        ts.DURATION_NS: np.minimum(starts + LAYER_PHASE_NS, max(end_ns, 1)) - starts,
        ts.NAME: names, ts.CATEGORY: ["layer"] * len(starts), ts.DEPTH: np.zeros(len(starts), np.int32),
        ts.TRACK_NAME: ["layer"] * len(starts), ts.PCORE_IDX: core,
    }


def synth_trace(path: str | os.PathLike[str], events: int, tracks: int = TRACKS_PER_CORE, seed: int = 0, *,
                overwrite: bool = False, chunk_events: int = DEFAULT_CHUNK_EVENTS,
                progress: SynthProgress | None = None) -> Path:
    """Write a synthetic trace of ``events`` Instruction + DmaPacket rows on ``tracks`` tracks to ``path``.

    Args:
        path: trace directory to create.
        events: number of interval events (instructions and DMA packets).
        tracks: number of engine + DMA queue tracks (21 per core).
        seed: random seed; the same arguments give the same trace.
        overwrite: replace an existing trace at ``path`` (only once the new one is complete: the trace is written
            beside ``path`` and moved into place at the end, so an interrupted run leaves an existing trace as it
            was).
        chunk_events: events generated per chunk (bounds memory).
        progress: called with (events written, events) after each chunk.
    """
    if not isinstance(events, int) or events < 1:
        raise ConfigError(f"--events must be a positive integer, not {events!r}")
    if not isinstance(tracks, int) or tracks < 1 or tracks > 100_000:
        raise ConfigError(f"--tracks must be between 1 and 100000, not {tracks!r}")
    slots = track_slots(tracks)
    cores = slots[-1].core + 1
    gen = _Generator(slots, seed)
    metadata = {
        "arch": "trn2", "is_simulation": True, "profile_name": f"synth-{events}-{tracks}-{seed}",
        "num_physical_cores": cores, "tensor_engine_num_rows": 128, "tensor_engine_num_cols": 128,
        "tensor_engine_clock_freq": 2.4, "neuroncore_clock_freq": 1.2, "dma_ddr_bandwidth": 368e9,
        "num_dma_engines_per_neuroncore": DMA_QUEUES,
    }
    target = Path(path)
    _check_target(target, overwrite)
    # written beside the target and moved into place once complete: an interrupted run leaves an existing trace
    # as it was and nothing that looks like a trace
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        tmp.mkdir()
    except OSError as exc:
        raise TraceExistsError(f"{target}: cannot write in {target.parent} ({exc.strerror or exc}); choose another "
                               "output path") from None
    try:
        with TraceWriter(tmp, metadata=metadata, background_flush=False, batch_rows=1 << 17) as writer:
            done = 0
            while done < events:
                n = min(chunk_events, events - done)
                gen.chunk(writer, n)
                done += n
                if progress is not None:
                    progress(done, events)
            writer.append(ts.SPAN.name, _layer_spans(int(gen.clock.max()), cores))
        _move_into_place(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _check_target(target: Path, overwrite: bool) -> None:
    """What writing a trace at ``target`` would refuse (:func:`tracer.trace_dir.check_trace_directory`), and a missing
    parent directory, checked without touching anything."""
    check_trace_directory(target, overwrite=overwrite)
    if not target.parent.is_dir():
        raise TraceExistsError(f"{target}: {target.parent} is not an existing directory; create it or choose "
                               "another output path")


def _move_into_place(tmp: Path, target: Path) -> None:
    """Replace the trace files at ``target`` (other files there are kept) with the complete trace in ``tmp``."""
    if not target.exists():
        os.replace(tmp, target)
        return
    for f in check_trace_directory(target, overwrite=True):  # the old trace's table files
        f.unlink()
    for f in tmp.iterdir():
        os.replace(f, target / f.name)
