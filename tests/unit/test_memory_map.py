"""The memory map (profiler.analyses.memory_map): live ranges, the live-bytes profile and the raster against
byte-by-byte, nanosecond-by-nanosecond brute force; the operand parse on real recordings."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import profiler
from profiler.analyses import memory_map as mmap
from profiler.errors import QueryError
from tests.golden.handmade import write_handmade
from tracer import TraceWriter
from tracer import schema as ts

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
ACCESS = st.tuples(st.integers(0, 60), st.integers(1, 20), st.integers(0, 40), st.integers(1, 24), st.booleans())


def make(items: list[tuple[int, int, int, int, bool]]) -> mmap.Accesses:
    a = np.array([(s, s + d, lo, lo + n, w) for s, d, lo, n, w in items], np.int64).reshape(-1, 5)
    return mmap.Accesses(np.arange(len(a)), a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4].astype(bool))


def brute_live(items, context_start: int) -> Counter:
    """Per byte: its accesses in (start, reads first) order; a write or the first access opens a live range that
    lasts to the end of the last access before the next write (from the context start when a read opens it)."""
    out: Counter = Counter()
    top = max((lo + n for _s, _d, lo, n, _w in items), default=0)
    for b in range(top):
        acc = sorted(((s, s + d, w) for s, d, lo, n, w in items if lo <= b < lo + n), key=lambda a: (a[0], a[2]))
        groups: list[list] = []
        for a in acc:
            if a[2] or not groups:
                groups.append([a])
            else:
                groups[-1].append(a)
        ranges = [(g[0][0] if g[0][2] else min(context_start, g[0][0]), max(a[1] for a in g)) for g in groups]
        for k, (start, end) in enumerate(ranges):  # one datum per byte at a time: cut at the next write's start
            out[(b, start, min(end, ranges[k + 1][0]) if k + 1 < len(ranges) else end)] += 1
    return out


def level(per_byte: Counter, t: int) -> int:
    return sum(k for (_b, s, e), k in per_byte.items() if s <= t < e)


@settings(max_examples=150, deadline=None)
@given(st.lists(ACCESS, min_size=0, max_size=25), st.integers(0, 30))
def test_live_intervals_match_byte_by_byte_brute_force(items, context_start):
    live = mmap.live_intervals(make(items), context_start)
    got: Counter = Counter()
    for a, b, c, d in zip(live.lo.tolist(), live.hi.tolist(), live.start.tolist(), live.end.tolist(), strict=True):
        for byte in range(a, b):
            got[(byte, c, d)] += 1
    assert got == brute_live(items, context_start)


@settings(max_examples=150, deadline=None)
@given(st.lists(ACCESS, min_size=0, max_size=20), st.integers(0, 40), st.integers(1, 50), st.integers(1, 12))
def test_live_profile_peak_and_columns_match_brute_force(items, t0, span, width):
    t1 = t0 + span
    per_byte = brute_live(items, 0)
    cols, peak, peak_at = mmap.live_profile(mmap.live_intervals(make(items), 0), t0, t1, width)
    levels = [level(per_byte, t) for t in range(t0, t1)]
    assert peak == max(levels)
    assert peak_at == (None if peak == 0 else t0 + levels.index(peak))
    for c in range(width):  # column c is the time [c * span / width, (c + 1) * span / width) after t0
        first, end = c * span // width, -(-(c + 1) * span // width)
        assert cols[c] == max(levels[first:end]), c


@settings(max_examples=100, deadline=None)
@given(st.lists(ACCESS, min_size=1, max_size=15), st.integers(0, 30), st.integers(1, 40), st.integers(1, 9),
       st.integers(1, 9))
def test_raster_states_match_brute_force(items, t0, span, width, height):
    t1 = t0 + span
    acc = make(items)
    cap = 70
    mm = mmap.map_of_accesses(acc, "SBUF", cap, (t0, t1), (0, 100), width=width, height=height)
    per_byte = brute_live(items, 0)

    # the rows cover the addresses up to the power of two at or above the highest one used (at most cap)
    used = max(lo + n for _s, _d, lo, n, _w in items)
    top = min(cap, 1 << (used - 1).bit_length()) if used > 1 else min(cap, 2)
    assert mm.top == top and mm.capacity == cap

    def cells(b: int, t: int) -> list[tuple[int, int]]:
        """The cells byte b during the nanosecond [t, t + 1) lies in (a column is span / width ns)."""
        return [(b * height // top, c) for c in range(width)
                if c * span < (t + 1 - t0) * width and (c + 1) * span > (t - t0) * width]

    read, written, live = set(), set(), set()
    for s, d, lo, n, w in items:
        for b in range(lo, min(lo + n, top)):
            for t in range(max(s, t0), min(s + d, t1)):
                (written if w else read).update(cells(b, t))
    for (b, s, e), _k in per_byte.items():
        for t in range(max(s, t0), min(e, t1)):
            if b < top:
                live.update(cells(b, t))
    for r in range(height):
        for c in range(width):
            want = (mmap.READ_WRITTEN if (r, c) in read and (r, c) in written else mmap.WRITTEN
                    if (r, c) in written else mmap.READ if (r, c) in read else mmap.LIVE if (r, c) in live
                    else mmap.FREE)
            assert mm.state[r, c] == want, (r, c)
    inside = [(lo, lo + n) for s, d, lo, n, _w in items if s < t1 and s + d > t0]
    assert mm.accesses == len(inside)
    assert mm.accessed_bytes == len({b for lo, hi in inside for b in range(lo, hi)})


def test_a_read_before_any_write_holds_data_from_the_context_start():
    live = mmap.live_intervals(make([(10, 5, 0, 8, False)]), 3)
    assert (live.lo.tolist(), live.hi.tolist(), live.start.tolist(), live.end.tolist()) == ([0], [8], [3], [15])


def test_an_in_place_update_reads_the_old_data_then_writes_the_new():
    # written at 0-2, read at 10-12 while written in place, read again at 20-21: the old datum's range ends where
    # the new one's starts (the bytes are live once, not twice, during the update)
    acc = make([(0, 2, 0, 4, True), (10, 2, 0, 4, False), (10, 2, 0, 4, True), (20, 1, 0, 4, False)])
    live = mmap.live_intervals(acc, 0)
    assert sorted(zip(live.start.tolist(), live.end.tolist(), strict=True)) == [(0, 10), (10, 21)]
    _cols, peak, _at = mmap.live_profile(live, 0, 30, 3)
    assert peak == 4


def test_too_many_pieces_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(mmap, "MAX_EXPANDED", 10)
    with pytest.raises(QueryError, match="too many for live ranges .* zoom in"):
        mmap.live_intervals(make([(0, 5, i, 2, True) for i in range(0, 30, 1)]), 0)


# -- real recordings ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def samples_root(tmp_path_factory):
    """Copies of two bundled samples (their databases are made in the copy)."""
    root = tmp_path_factory.mktemp("samples")
    for name in ("softmax-trn1.trace", "matmul_rowload-trn2.trace"):
        shutil.copytree(SAMPLES / name, root / name)
    return root


@pytest.fixture(scope="module")
def softmax(samples_root):
    with profiler.open(samples_root / "softmax-trn1.trace") as t:
        yield t


def test_softmax_accesses_are_the_kernels_operands(softmax):
    acc = mmap.accesses(softmax, "SBUF", *softmax.time_range)
    # per 128-row tile: load (w x), reduce (w max, r x), exp (w exp, r x, r max, w row sum),
    # reciprocal (w inv, r sum), multiply (w y, r exp, r inv), store (r y): 13, over 8 tiles
    assert len(acc) == 13 * 8
    assert int(acc.write.sum()) == 6 * 8
    sizes = Counter((acc.hi - acc.lo).tolist())
    # x and y (bf16 rows: 5 accesses), exp (fp32 rows: 2), the three [128, 1] fp32 tiles (6)
    assert sizes == {2048 * 2: 8 * 5, 2048 * 4: 8 * 2, 4: 8 * 6}


def test_a_window_too_wide_for_the_columns_times_is_a_query_error(softmax):
    # both bounds are valid times (+-2**62), but the columns' times overflowed int64: a raw OverflowError
    for call in (lambda: mmap.memory_map(softmax, "SBUF", -2**62, 2**62),
                 lambda: mmap.memory_summary(softmax, -2**62, 2**62)):
        with pytest.raises(QueryError, match=r"too wide to map \(at most [0-9,]+ ns at [0-9,]+ columns?\)"):
            call()
    assert mmap.memory_summary(softmax, -2**40, 2**40).num_rows == 2


def test_a_dma_access_spans_its_transfers_packets(softmax):
    acc = mmap.accesses(softmax, "SBUF", *softmax.time_range)
    triggers = softmax.sql_arrow("SELECT id FROM Instruction WHERE opcode = 'DMA_TRIGGER'").column(0).to_numpy()
    loads = np.flatnonzero(acc.write & np.isin(acc.instruction, triggers))
    assert len(loads) == 8  # one load per tile
    first_load = int(loads[np.argmin(acc.start[loads])])
    trigger = int(acc.instruction[first_load])
    packets = softmax.sql_arrow(
        "SELECT min(p.start_ts) AS s, max(p.end_ts) AS e FROM DmaPacket p WHERE p.packet_aggregation_id IN ("
        "SELECT q.packet_aggregation_id FROM Flow f JOIN DmaPacket q ON q.id = f.in_id "
        "WHERE f.out_table = 'Instruction' AND f.in_table = 'DmaPacket' AND f.out_id = $id)",
        params={"id": trigger}).to_pylist()[0]
    assert (int(acc.start[first_load]), int(acc.end[first_load])) == (packets["s"], packets["e"])


def test_a_trigger_is_no_access_before_its_transfer_runs(softmax):
    acc = mmap.accesses(softmax, "SBUF", *softmax.time_range)
    first = int(np.argmin(acc.start))
    trigger, packets_start = int(acc.instruction[first]), int(acc.start[first])
    t_start = softmax.event("Instruction", trigger)["start_ts"]
    assert t_start < packets_start  # the trigger runs, then its packets (the DMA start latency)
    early = mmap.accesses(softmax, "SBUF", t_start, packets_start)
    assert trigger not in early.instruction.tolist()


def test_peak_live_is_within_what_was_accessed_and_the_capacity(samples_root):
    with profiler.open(samples_root / "matmul_rowload-trn2.trace") as t:
        for mem in mmap.MEMORIES:
            mm = mmap.memory_map(t, mem, width=50, height=16)
            assert 0 < mm.peak_live_bytes <= mm.accessed_bytes <= mm.capacity
            assert mm.whole_trace and mm.context_ns == t.time_range
            assert mm.live_bytes.max() == mm.peak_live_bytes
            assert set(np.unique(mm.state).tolist()) >= ({mmap.LIVE, mmap.READ, mmap.WRITTEN} if mem == "SBUF"
                                                          else {mmap.READ_WRITTEN})
        # the moving operands' matmuls accumulate: their PSUM destination is read too
        psum = mmap.accesses(t, "PSUM", *t.time_range)
        assert (~psum.write).any() and psum.write.any()


def test_a_window_is_the_same_map_as_the_whole_traces_cut(samples_root):
    with profiler.open(samples_root / "matmul_rowload-trn2.trace") as t:
        t0, t1 = t.time_range
        whole = mmap.memory_map(t, "SBUF", width=100, height=32)
        half = mmap.memory_map(t, "SBUF", t0, t0 + (t1 - t0) // 2, width=50, height=32)
        assert half.context_ns == whole.context_ns
        assert np.array_equal(half.state, whole.state[:, :50])


def test_traces_without_on_chip_operands_say_so(tmp_path):
    with profiler.open(write_handmade(tmp_path / "h.trace")) as t, \
            pytest.raises(QueryError, match=r"no instruction names an on-chip operand .* record it again"):
        mmap.memory_map(t, "SBUF")  # the hand-made trace's operands have the pre-2.2 form


def test_an_unknown_dtype_is_a_one_line_error(tmp_path):
    with TraceWriter(tmp_path / "odd.trace", metadata={"arch": "trn2", "is_simulation": True}) as w:
        w.append(ts.INSTRUCTION.name, {
            ts.ID: np.arange(2, dtype=np.int64), ts.START_TS: np.array([0, 10]), ts.END_TS: np.array([5, 15]),
            ts.DURATION_NS: np.array([5, 5]), ts.ENGINE: ["Vector"] * 2, ts.OPCODE: ["TENSOR_COPY"] * 2,
            ts.OPERANDS: ["dst=fp32[4]@SBUF[0:128]+0x0 src=-",
                          "dst=fp99[4]@SBUF[0:128]+0x10 src=fp32[4]@SBUF[0:128]+0x0"],
            ts.PC: np.arange(2, dtype=np.int64)})
    with profiler.open(tmp_path / "odd.trace") as t, pytest.raises(QueryError, match=r"unknown dtypes fp99; this"):
        mmap.memory_map(t, "SBUF")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"mem": "HBM"}, "mem must be one of SBUF, PSUM"),
    ({"mem": 3}, "mem must be one of"),
    ({"width": 0}, "width must be an integer from 1"),
    ({"height": True}, "height must be an integer from 1"),
    ({"start_ns": 50, "end_ns": 10}, "empty window"),
])
def test_bad_arguments_are_one_line_errors(softmax, kwargs, message):
    with pytest.raises(QueryError, match=message):
        mmap.memory_map(softmax, **kwargs)
