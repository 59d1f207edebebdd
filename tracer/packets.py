"""Compact DMA packet storage: ``DmaTransfer`` + ``DmaPacketLayout`` rows, and their expansion into ``DmaPacket``.

A simulated DMA transfer is cut into packets by a fixed rule (its packet layout, rotated so its packet 0 lands on
queue ``rotation``), and every queue runs its share back to back from the moment it started the transfer.  So a
transfer's packets are fully described by one ``DmaTransfer`` row (ids, layout, rotation, each queue's start) and
the layout's rows in ``DmaPacketLayout`` (per packet: queue, offset from that queue's start, duration, bytes).
Storing that instead of one row per packet makes tracing a DMA-heavy kernel ~40x cheaper to write (a kernel moves
10-60 packets per instruction) and its trace ~10x smaller; :class:`tracer.reader.TraceReader` expands the rows
back into exactly the ``DmaPacket`` table (:func:`expand`), batch by batch, so every consumer sees packets.

This module owns that encoding both ways: :func:`layout_columns` (what the simulator writes for a new layout)
and :class:`PacketExpander` (what the reader does).  Column names come from :mod:`tracer.schema`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracer import schema

#: Most packets in one expanded record batch (bounds the reader's memory; a transfer is never split).
MAX_BATCH_PACKETS = 262_144


def layout_columns(layout: int, rotations: list[tuple[np.ndarray, np.ndarray]], durations: np.ndarray,
                   nbytes: np.ndarray, packet_idx: np.ndarray) -> dict[str, np.ndarray]:
    """``DmaPacketLayout`` columns of one packet layout.

    Args:
        layout: the layout id transfers refer to.
        rotations: per rotation (queue of packet 0), each packet's (queue, offset from its queue's start).
        durations: each packet's duration (the same for every rotation).
        nbytes: each packet's bytes.
        packet_idx: each packet's index within its partition row's descriptor.
    """
    n = len(durations)
    k = len(rotations)
    return {
        "packet_layout": np.full(n * k, layout, np.int32),
        "rotation": np.repeat(np.arange(k, dtype=np.int32), n),
        "packet": np.tile(np.arange(n, dtype=np.int32), k),
        schema.QUEUE_IDX: np.concatenate([q for q, _off in rotations]).astype(np.int32),
        "offset_ns": np.concatenate([off for _q, off in rotations]).astype(np.int64),
        schema.DURATION_NS: np.tile(durations.astype(np.int64), k),
        schema.TRANSFER_BYTES: np.tile(nbytes.astype(np.int64), k),
        "packet_idx": np.tile(packet_idx.astype(np.int32), k),
    }


class PacketExpander:
    """Expands ``DmaTransfer`` record batches into ``DmaPacket`` record batches, given every layout row.

    Raises:
        ValueError: a layout's rows are not numbered 0..n-1 in order (the reader reports it as a format error).
    """

    def __init__(self, layouts: pa.Table) -> None:
        lay = layouts.combine_chunks()
        lid = np.asarray(lay.column("packet_layout"), np.int64)
        rot = np.asarray(lay.column("rotation"), np.int64)
        pkt = np.asarray(lay.column("packet"), np.int64)
        order = np.lexsort((pkt, rot, lid))
        lid, rot, pkt = lid[order], rot[order], pkt[order]
        self.queue = np.asarray(lay.column(schema.QUEUE_IDX), np.int64)[order]
        self.offset = np.asarray(lay.column("offset_ns"), np.int64)[order]
        self.duration = np.asarray(lay.column(schema.DURATION_NS), np.int64)[order]
        self.nbytes = np.asarray(lay.column(schema.TRANSFER_BYTES), np.int64)[order]
        self.packet_idx = np.asarray(lay.column("packet_idx"), np.int32)[order]
        self.rotations = int(rot.max()) + 1 if len(rot) else 1
        key = lid * self.rotations + rot
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, np.int64)
        counts = np.diff(np.r_[starts, len(key)])
        if len(key) and not np.array_equal(pkt, np.arange(len(key)) - np.repeat(starts, counts)):
            raise ValueError("DmaPacketLayout rows of a layout are not numbered 0, 1, ... without gaps")
        size = int(key.max()) + 1 if len(key) else 0
        self.base = np.full(size, -1, np.int64)
        self.count = np.zeros(size, np.int64)
        self.base[key[starts]] = starts
        self.count[key[starts]] = counts

    def known(self, layout: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        """Mask of the transfers whose (layout, rotation) has rows."""
        key = layout * self.rotations + rotation
        ok = (layout >= 0) & (rotation >= 0) & (rotation < self.rotations) & (key < len(self.base))
        ok[ok] = self.base[key[ok]] >= 0
        return ok

    def packets(self, batch: pa.RecordBatch) -> int:
        """How many packets the transfers in ``batch`` expand to (their layouts known, see :meth:`known`)."""
        key = np.asarray(batch.column("packet_layout"), np.int64) * self.rotations + np.asarray(
            batch.column("rotation"), np.int64)
        return int(self.count[key].sum())

    def expand(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """The ``DmaPacket`` batches of the transfers in ``batch`` (transfers of unknown layout must be removed
        first, see :meth:`known`), at most :data:`MAX_BATCH_PACKETS` packets each unless one transfer has more."""
        layout = np.asarray(batch.column("packet_layout"), np.int64)
        rotation = np.asarray(batch.column("rotation"), np.int64)
        key = layout * self.rotations + rotation
        sizes = self.count[key]
        ends = np.cumsum(sizes)
        lo = 0
        while lo < len(sizes):
            done = int(ends[lo - 1]) if lo else 0
            hi = int(np.searchsorted(ends, done + MAX_BATCH_PACKETS, side="right"))
            hi = max(hi, lo + 1)
            yield self._expand(batch.slice(lo, hi - lo), key[lo:hi], sizes[lo:hi])
            lo = hi

    def _expand(self, batch: pa.RecordBatch, key: np.ndarray, sizes: np.ndarray) -> pa.RecordBatch:
        nx = len(sizes)
        total = int(sizes.sum())
        xi = np.repeat(np.arange(nx, dtype=np.int64), sizes)
        first = np.cumsum(sizes) - sizes
        j = np.arange(total, dtype=np.int64) - first[xi]
        at = self.base[key][xi] + j
        queue = self.queue[at]
        starts = batch.column("queue_start_ts")
        flat = np.asarray(starts.values, np.int64)
        offs = np.asarray(starts.offsets, np.int64)
        per_queue = (offs[1:] - offs[:-1]) > 1
        pos = offs[:-1][xi] + np.where(per_queue[xi], queue, 0)
        start = flat[pos] + self.offset[at]
        delays = _split_delays(batch, first, xi, j, queue, per_queue)
        if delays is not None:
            start += delays
        dur = self.duration[at]
        nbytes = self.nbytes[at]
        pcore = batch.column(schema.PCORE_IDX)
        cols: dict[str, pa.Array] = {
            schema.ID: pa.array(np.asarray(batch.column("first_packet_id"), np.int64)[xi] + j),
            schema.START_TS: pa.array(start),
            schema.END_TS: pa.array(start + dur),
            schema.DURATION_NS: pa.array(dur),
            schema.QUEUE_NAME: _queue_names(batch.column("queue_group"), xi, queue),
            schema.QUEUE_IDX: pa.array(queue),
            schema.QUEUE_TYPE: _take_dict(batch.column(schema.QUEUE_TYPE), xi),
            schema.ENGINE_IDX: pa.array(queue),
            schema.READ_BYTES: pa.array(nbytes),
            schema.WRITE_BYTES: pa.array(nbytes),
            schema.TRANSFER_BYTES: pa.array(nbytes),
            schema.THROUGHPUT: pa.array((nbytes / dur * 1e9).astype(np.float32)),
            schema.VARIABLE: _take_dict(batch.column(schema.VARIABLE), xi),
            schema.PCORE_IDX: pcore.take(pa.array(xi)),
            "packet_idx": pa.array(self.packet_idx[at]),
            "packet_aggregation_id": pa.array(np.asarray(batch.column("packet_aggregation_id"), np.int64)[xi]),
            "source": _take_dict(batch.column("source"), xi),
            "dest": _take_dict(batch.column("dest"), xi),
        }
        out = schema.DMA_PACKET.arrow_schema()
        return pa.RecordBatch.from_arrays([cols[f.name] for f in out], schema=out)


def split_rows(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The splits of the transfers in ``batch`` (format 2.5's ``split_packet`` / ``split_delay_ns``): per split, its
    transfer's row, packet and delay; None when there are none.  Null values are the reader's to refuse."""
    names = batch.schema.names
    if "split_packet" not in names and "split_delay_ns" not in names:
        return None
    if "split_packet" not in names or "split_delay_ns" not in names:
        raise ValueError("split_packet without split_delay_ns, or the other way round")
    packets, delays = batch.column("split_packet"), batch.column("split_delay_ns")
    if not pc.equal(pc.list_value_length(packets).fill_null(0),   # (checked first: a delay without its packet)
                    pc.list_value_length(delays).fill_null(0)).to_numpy(zero_copy_only=False).all():
        raise ValueError("split_packet and split_delay_ns lists of different lengths")
    if not len(packets.flatten()):
        return None
    rows = np.asarray(pc.list_parent_indices(packets), np.int64)
    return (rows, np.asarray(packets.flatten().fill_null(-1), np.int64),
            np.asarray(delays.flatten().fill_null(-1), np.int64))


def _split_delays(batch: pa.RecordBatch, first: np.ndarray, xi: np.ndarray, j: np.ndarray,  # noqa: PLR0917
                  queue: np.ndarray, per_queue: np.ndarray) -> np.ndarray | None:
    """Per expanded packet (transfer ``xi``, packet ``j`` within it, the transfer's packets from ``first[xi]``),
    the delays of its transfer's splits at or before it in its queue (``per_queue[xi]`` False: the transfer's
    queues started together, and a split delays every queue from the same place on); None without splits."""
    split = split_rows(batch)
    if split is None:
        return None
    rows, packets, delays = split
    width = int(queue.max()) + 1
    # the packets of the transfers with splits, in (transfer, queue, packet) order, and each one's place in its queue
    sel = np.flatnonzero(np.isin(xi, np.unique(rows)))
    order = sel[np.lexsort((j[sel], xi[sel] * width + queue[sel]))]
    key = xi[order] * width + queue[order]
    group_start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    sizes = np.diff(np.r_[group_start, len(order)])
    place = np.zeros(len(xi), np.int64)
    place[order] = np.arange(len(order)) - np.repeat(group_start, sizes)
    at = first[rows] + packets
    extra = np.zeros(len(xi), np.int64)
    alone = per_queue[rows]
    np.add.at(extra, at[alone], delays[alone])
    if not alone.all():  # together: the packet in the split's place of every queue of the transfer
        depth = int(place.max()) + 1
        by_place = np.zeros(int(xi.max()) * depth + depth, np.int64)
        np.add.at(by_place, rows[~alone] * depth + place[at[~alone]], delays[~alone])
        together = order[~per_queue[xi[order]]]
        extra[together] += by_place[xi[together] * depth + place[together]]
    summed = np.cumsum(extra[order])
    base = np.repeat(np.r_[0, summed][group_start], sizes)
    out = np.zeros(len(xi), np.int64)
    out[order] = summed - base
    return out


def _take_dict(col: pa.Array, rows: np.ndarray) -> pa.Array:
    """``col`` (a dictionary column) at ``rows``, as a dictionary<int32, string> array."""
    taken = col.take(pa.array(rows))
    if not pa.types.is_dictionary(taken.type):
        return taken.dictionary_encode().cast(pa.dictionary(pa.int32(), pa.string()))
    return taken


def _queue_names(groups: pa.Array, rows: np.ndarray, queue: np.ndarray) -> pa.DictionaryArray:
    """queue_name = the transfer's queue group + the packet's queue index, dictionary-encoded."""
    if not pa.types.is_dictionary(groups.type):
        groups = groups.dictionary_encode()
    gcode = np.asarray(groups.indices.fill_null(-1), np.int64)[rows]
    width = int(queue.max()) + 1 if len(queue) else 1
    code = gcode * width + queue
    used, inverse = np.unique(code, return_inverse=True)
    names = groups.dictionary.to_pylist()
    values = [f"{names[c // width]}{c % width}" for c in used.tolist()]
    idx = pa.array(inverse.astype(np.int32), mask=gcode < 0)
    return pa.DictionaryArray.from_arrays(idx, pa.array(values, pa.string()))
