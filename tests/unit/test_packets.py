"""Compact DMA packet storage (tracer/packets.py): DmaTransfer + DmaPacketLayout expand to exactly the DmaPacket
rows a row-by-row oracle builds; the reader serves them as DmaPacket, survives interrupted recordings, and rejects
damaged layouts with a one-line error."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer import packets, schema
from tracer.errors import TraceFormatError, TruncatedTraceWarning
from tracer.reader import TraceReader
from tracer.writer import TraceWriter

NQ = 4  # queues in these synthetic traces
GROUPS = ["qSyncIO", "qGpSimdIO"]
MEMS = ["HBM", "SBUF", "PSUM"]


@st.composite
def traces(draw):
    """Random layouts (each: per rotation a packet order over the queues) and transfers using them."""
    layouts = []
    for lid in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 9))
        dur = np.array(draw(st.lists(st.integers(1, 500), min_size=n, max_size=n)), np.int64)
        nbytes = np.array(draw(st.lists(st.integers(1, 4096), min_size=n, max_size=n)), np.int64)
        rotations = []
        for q0 in range(NQ):
            queue = (q0 + np.arange(n)) % NQ
            offsets = np.zeros(n, np.int64)
            for q in range(NQ):
                m = queue == q
                offsets[m] = np.cumsum(dur[m]) - dur[m]
            rotations.append((queue, offsets))
        layouts.append((lid, n, rotations, dur, nbytes, np.arange(n) % 3))
    transfers = []
    first = 0
    for agg in range(draw(st.integers(0, 12))):
        lid = draw(st.integers(0, len(layouts) - 1))
        per_queue = draw(st.booleans())
        starts = draw(st.lists(st.integers(0, 10**6), min_size=NQ if per_queue else 1,
                               max_size=NQ if per_queue else 1))
        n = layouts[lid][1]
        splits = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 300)), max_size=3))
        transfers.append({"agg": agg, "first": first, "layout": lid, "rotation": draw(st.integers(0, NQ - 1)),
                          "starts": starts, "splits": splits, "group": draw(st.sampled_from(GROUPS)),
                          "src": draw(st.sampled_from(MEMS)), "dst": draw(st.sampled_from(MEMS)),
                          "var": draw(st.sampled_from(["a", "b", None]))})
        first += layouts[lid][1]
    return layouts, transfers, draw(st.booleans())


def _write(path, layouts, transfers, *, flush_layouts=True, splits=False):
    with TraceWriter(path, metadata={"is_simulation": True}) as w:
        for lid, _n, rotations, dur, nbytes, pidx in layouts:
            w.append(schema.DMA_PACKET_LAYOUT.name, packets.layout_columns(lid, rotations, dur, nbytes, pidx))
        if not flush_layouts:
            return
        if transfers:
            w.append(schema.DMA_TRANSFER.name, {
                "packet_aggregation_id": [t["agg"] for t in transfers],
                "first_packet_id": [t["first"] for t in transfers],
                "packet_layout": [t["layout"] for t in transfers],
                "rotation": [t["rotation"] for t in transfers],
                "queue_start_ts": pa.array([t["starts"] for t in transfers], pa.list_(pa.int64())),
                "queue_group": [t["group"] for t in transfers],
                schema.QUEUE_TYPE: ["data"] * len(transfers),
                schema.VARIABLE: [t["var"] for t in transfers],
                schema.PCORE_IDX: [0] * len(transfers),
                "source": [t["src"] for t in transfers], "dest": [t["dst"] for t in transfers],
                **({"split_packet": pa.array([[p for p, _d in t["splits"]] for t in transfers], pa.list_(pa.int32())),
                    "split_delay_ns": pa.array([[d for _p, d in t["splits"]] for t in transfers],
                                               pa.list_(pa.int64()))} if splits else {}),
            })


def _oracle(layouts, transfers, splits=False):
    """DmaPacket rows built one packet at a time."""
    rows = []
    for t in transfers:
        _lid, n, rotations, dur, nbytes, pidx = layouts[t["layout"]]
        queue, offsets = rotations[t["rotation"]]
        place = [sum(1 for i in range(j) if queue[i] == queue[j]) for j in range(n)]
        for j in range(n):
            q = int(queue[j])
            start = t["starts"][q] if len(t["starts"]) > 1 else t["starts"][0]
            start += int(offsets[j])
            for p, d in t["splits"] if splits else ():
                # a split delays its queue's packets from it on; with one start, every queue's from its place on
                if place[p] <= place[j] and (queue[p] == q or len(t["starts"]) == 1):
                    start += d
            rows.append({
                "id": t["first"] + j, "start_ts": start, "end_ts": start + int(dur[j]), "duration_ns": int(dur[j]),
                "queue_name": f"{t['group']}{q}", "queue_idx": q, "queue_type": "data", "engine_idx": q,
                "read_bytes": int(nbytes[j]), "write_bytes": int(nbytes[j]), "transfer_bytes": int(nbytes[j]),
                "throughput": float(np.float32(nbytes[j] / dur[j] * 1e9)), "variable": t["var"], "pcore_idx": 0,
                "packet_idx": int(pidx[j]), "packet_aggregation_id": t["agg"], "source": t["src"], "dest": t["dst"],
            })
    return rows


@settings(max_examples=40, deadline=None)
@given(traces())
def test_expansion_matches_a_packet_by_packet_oracle(tmp_path_factory, case):
    """Also with shares split around other packets (format 2.5's split_packet / split_delay_ns), and without those
    columns (older traces)."""
    layouts, transfers, splits = case
    path = tmp_path_factory.mktemp("pk") / "t.trace"
    _write(path, layouts, transfers, splits=splits)
    reader = TraceReader(path)
    assert reader.has_table("DmaPacket") == bool(transfers) or not transfers
    table = reader.read_table("DmaPacket")
    assert table.schema.equals(schema.DMA_PACKET.arrow_schema(), check_metadata=False)
    assert table.to_pylist() == _oracle(layouts, transfers, splits)


@pytest.mark.parametrize(("split_packet", "split_delay", "message"), [
    ([[7]], [[10]], "split_packet values that are not packets of their transfer"),
    ([[-1]], [[10]], "split_packet values that are not packets of their transfer"),
    ([[1]], [[-5]], "negative or null split_delay_ns values"),
    ([[1]], [[None]], "negative or null split_delay_ns values"),
    ([[1, 2]], [[3]], "split_packet and split_delay_ns lists of different lengths"),
    ([None], [[2039]], "split_packet and split_delay_ns lists of different lengths"),   # no split in the batch
    ([[]], [[5]], "split_packet and split_delay_ns lists of different lengths"),
    ([[1]], None, "split_packet and split_delay_ns lists of different lengths"),   # (the writer fills in nulls)
])
def test_damaged_splits_are_refused_in_one_line(tmp_path, split_packet, split_delay, message):
    layouts = [(0, 3, [((q0 + np.arange(3)) % NQ, np.zeros(3, np.int64)) for q0 in range(NQ)], np.full(3, 5),
                np.full(3, 64), np.zeros(3, np.int64))]
    path = tmp_path / "t.trace"
    with TraceWriter(path, metadata={"is_simulation": True}) as w:
        w.append(schema.DMA_PACKET_LAYOUT.name, packets.layout_columns(*layouts[0][:1], *layouts[0][2:]))
        w.append(schema.DMA_TRANSFER.name, {
            "packet_aggregation_id": [0], "first_packet_id": [0], "packet_layout": [0], "rotation": [0],
            "queue_start_ts": pa.array([[0]], pa.list_(pa.int64())), "queue_group": ["qSyncIO"],
            "split_packet": pa.array(split_packet, pa.list_(pa.int32())),
            **({} if split_delay is None else {"split_delay_ns": pa.array(split_delay, pa.list_(pa.int64()))})})
    with pytest.raises(TraceFormatError, match=message) as err:
        TraceReader(path).read_table("DmaPacket")
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_batches_are_bounded_and_transfers_never_split(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    layouts = []
    for lid, n in enumerate((3, 5)):
        rot = [((q0 + np.arange(n)) % NQ, np.arange(n, dtype=np.int64)) for q0 in range(NQ)]
        layouts.append((lid, n, rot, np.full(n, 7), np.full(n, 64), np.zeros(n, np.int64)))
    transfers, first = [], 0
    for agg in range(50):
        lid = int(rng.integers(0, 2))
        transfers.append({"agg": agg, "first": first, "layout": lid, "rotation": int(rng.integers(0, NQ)),
                          "starts": [int(rng.integers(0, 1000))], "group": "qSyncIO", "src": "HBM", "dst": "SBUF",
                          "var": "x"})
        first += layouts[lid][1]
    _write(tmp_path / "t.trace", layouts, transfers)
    monkeypatch.setattr(packets, "MAX_BATCH_PACKETS", 11)
    batches = list(TraceReader(tmp_path / "t.trace").batches("DmaPacket"))
    assert len(batches) > 10
    for b in batches:
        agg = b.column("packet_aggregation_id").to_pylist()
        assert b.num_rows <= 11
        assert agg.count(agg[-1]) == layouts[transfers[agg[-1]]["layout"]][1]  # whole transfers only
    rows = [r for b in batches for r in b.to_pylist()]
    assert rows == _oracle(layouts, transfers)


def test_transfers_without_their_layout_are_left_out_with_a_warning(tmp_path):
    rot = [((q0 + np.arange(2)) % NQ, np.zeros(2, np.int64)) for q0 in range(NQ)]
    layouts = [(0, 2, rot, np.full(2, 5), np.full(2, 8), np.zeros(2, np.int64))]
    transfers = [{"agg": i, "first": 2 * i, "layout": i % 2, "rotation": 0, "starts": [10 * i], "group": "qSyncIO",
                  "src": "HBM", "dst": "SBUF", "var": "x"} for i in range(4)]
    _write(tmp_path / "t.trace", layouts, transfers)  # transfers 1 and 3 use layout 1, which was never written
    with pytest.warns(TruncatedTraceWarning, match="DmaPacketLayout.arrows: packet layouts .* missing"):
        table = TraceReader(tmp_path / "t.trace").read_table("DmaPacket")
    assert table.column("packet_aggregation_id").to_pylist() == [0, 0, 2, 2]


def test_a_layout_with_gaps_is_a_one_line_format_error(tmp_path):
    rot = [((q0 + np.arange(3)) % NQ, np.zeros(3, np.int64)) for q0 in range(NQ)]
    cols = packets.layout_columns(0, rot, np.full(3, 5), np.full(3, 8), np.zeros(3, np.int64))
    cols["packet"] = np.where(cols["packet"] == 1, 5, cols["packet"]).astype(np.int32)
    with TraceWriter(tmp_path / "t.trace") as w:
        w.append(schema.DMA_PACKET_LAYOUT.name, cols)
        w.append(schema.DMA_TRANSFER.name, {
            "packet_aggregation_id": [0], "first_packet_id": [0], "packet_layout": [0], "rotation": [0],
            "queue_start_ts": pa.array([[0]], pa.list_(pa.int64())), "queue_group": ["qSyncIO"]})
    reader = TraceReader(tmp_path / "t.trace")
    with pytest.raises(TraceFormatError, match=r"DmaPacketLayout\.arrows: .*not numbered"):
        reader.read_table("DmaPacket")


def test_row_by_row_packets_are_read_as_written(tmp_path):
    """A trace holding DmaPacket rows (format 1, importers) is read as is, never expanded."""
    with TraceWriter(tmp_path / "t.trace") as w:
        w.append("DmaPacket", {"id": [0, 1], "start_ts": [5, 9], "end_ts": [7, 12], "duration_ns": [2, 3],
                               "queue_name": ["q0", "q1"],
                               "read_bytes": [1, 2], "write_bytes": [1, 2], "transfer_bytes": [1, 2]})
    reader = TraceReader(tmp_path / "t.trace")
    assert reader.table_names() == ["DmaPacket", "Metadata"]
    assert reader.table_files("DmaPacket") == [tmp_path / "t.trace" / "DmaPacket.arrows"]
    assert reader.read_table("DmaPacket").column("start_ts").to_pylist() == [5, 9]


def test_simulated_trace_stores_transfers_and_reads_packets(tmp_path):
    """A recording writes DmaTransfer/DmaPacketLayout (no DmaPacket file), and its packets make sense: ids
    0..N-1, every transfer's bytes, no two packets on one queue at once, each trigger edge names packet 0."""
    from tracer.sim.runner import run_kernel

    def uneven(nc):
        x = nc.input("x", (256, 3000), "bf16")
        for i, (p, w) in enumerate(((100, 3000), (128, 700), (37, 2500), (128, 64))):
            t = nc.sbuf_tile((p, w), "bf16", name=f"t{i}")
            nc.dma_copy(t, x[0:p, 0:w])

    run_kernel(uneven, trace_path=tmp_path / "u.trace")
    files = {p.name for p in (tmp_path / "u.trace").iterdir()}
    assert {"DmaTransfer.arrows", "DmaPacketLayout.arrows"} <= files and "DmaPacket.arrows" not in files
    reader = TraceReader(tmp_path / "u.trace")
    pk = reader.read_table("DmaPacket").to_pandas()
    assert pk["id"].tolist() == list(range(len(pk)))
    per_xfer = pk.groupby("packet_aggregation_id")["transfer_bytes"].sum().tolist()
    assert per_xfer == [100 * 3000 * 2, 128 * 700 * 2, 37 * 2500 * 2, 128 * 64 * 2]
    for _q, g in pk.sort_values("start_ts").groupby("queue_idx"):
        assert (g["start_ts"].to_numpy()[1:] >= g["end_ts"].to_numpy()[:-1]).all()
    flow = reader.read_table("Flow").to_pandas()
    trig = flow[flow["in_table"] == "DmaPacket"]
    first = pk.set_index("id")
    assert len(trig) == 4
    for row in trig.itertuples():
        assert first.loc[row.in_id, "packet_idx"] == 0
        assert first.loc[row.in_id, "start_ts"] == reader.read_table("Instruction").to_pandas().set_index(
            "id").loc[row.out_id, "end_ts"] + row.gap_time
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reader.table_names()[:2] == ["Instruction", "DmaPacket"]
