"""The timeline's counter lanes (profiler.figures.lane_data) on a real trace, against the raw events: DMA throughput
and HFU integrate back to the trace's bytes and FLOPs, Counter lanes match the step function sample by sample."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import profiler
from profiler.figures import lane_data, lanes
from profiler.figures.raster import timeline_rows
from profiler.figures.typed_arrays import decode_typed_array
from profiler.summary import tensor_peak_flops_per_ns
from tests.browser.trace_factory import COUNTER_NAME, write_kernel_trace
from tracer import TraceReader
from tracer import schema as ts

WIDTH = 800


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    path = write_kernel_trace(tmp_path_factory.mktemp("lanes") / "k.trace", iterations=120, cores=2)
    with profiler.open(path) as trace:
        yield trace, TraceReader(path)


def _whole(trace):
    t0, t1 = trace.time_range
    return SimpleNamespace(start_ns=int(t0), end_ns=int(t1))


def _width(lane):
    return int(lane.x_ns[1] - lane.x_ns[0])


def test_every_lane_of_a_two_core_trace_in_order(kernel):
    trace, _ = kernel
    rows = timeline_rows(trace.tracks())
    got = lane_data.timeline_lanes(trace, rows, _whole(trace), WIDTH)
    assert [lane.title for lane in got] == ["NC0 busy %", "NC1 busy %", lane_data.DMA_LANE_TITLE,
                                           lane_data.HFU_LANE_TITLE, f"NC0 {COUNTER_NAME}", f"NC1 {COUNTER_NAME}"]
    assert list(got[2].series) == list(got[3].series) == ["NC0", "NC1"]
    assert list(got[4].series) == list(lane_data.COUNTER_SERIES)
    for lane in got:
        assert all(len(v) == len(lane.x_ns) for v in lane.series.values())
        assert WIDTH // lanes.PX_PER_POINT <= len(lane.x_ns) <= 2 * WIDTH // lanes.PX_PER_POINT + 2
    # No DMA rows, no Tensor rows, no counters: no such lanes.
    vector_only = [r for r in rows if r.label == "Vector"]
    assert [lane.title for lane in lane_data.timeline_lanes(trace, vector_only, _whole(trace), WIDTH, [])] == \
        ["NC0 busy %", "NC1 busy %"]


def test_lanes_submitted_to_a_pool_are_the_sequential_lanes_in_order(kernel):
    from concurrent.futures import ThreadPoolExecutor

    trace, _ = kernel
    rows = timeline_rows(trace.tracks())
    counters = lane_data.counter_tracks(trace.tracks())
    expected = lane_data.timeline_lanes(trace, rows, _whole(trace), WIDTH, counters)
    with ThreadPoolExecutor(4) as pool:
        got = lane_data.submit_timeline_lanes(pool, trace, rows, _whole(trace), WIDTH, counters=counters).result()
    assert [lane.title for lane in got] == [lane.title for lane in expected]
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a.x_ns, b.x_ns)
        assert list(a.series) == list(b.series)
        for name in a.series:
            np.testing.assert_array_equal(a.series[name], b.series[name])


def test_dma_and_hfu_lanes_integrate_to_the_traces_bytes_and_flops(kernel):
    trace, reader = kernel
    dma = reader.read_table(ts.DMA_PACKET.name).to_pydict()
    inst = reader.read_table(ts.INSTRUCTION.name).to_pydict()
    peak = tensor_peak_flops_per_ns(trace.metadata)
    dma_lane = lane_data.dma_throughput_lane(trace, _whole(trace), WIDTH)
    hfu_lane = lane_data.hfu_lane(trace, _whole(trace), WIDTH)
    for core in (0, 1):
        nbytes = sum(b for b, c in zip(dma[ts.TRANSFER_BYTES], dma[ts.PCORE_IDX], strict=True) if c == core)
        gbps = dma_lane.series[f"NC{core}"].astype(np.float64)
        assert np.nansum(gbps) * _width(dma_lane) == pytest.approx(nbytes, rel=1e-5)   # GB/s x ns = bytes
        flops = sum(f for f, e, c in zip(inst[ts.ADJUSTED_FLOPS], inst[ts.ENGINE], inst[ts.PCORE_IDX], strict=True)
                    if e == "Tensor" and c == core)
        hfu = hfu_lane.series[f"NC{core}"].astype(np.float64)
        assert np.nansum(hfu) / 100 * peak * _width(hfu_lane) == pytest.approx(flops, rel=1e-5)
        assert 0 < np.nanmax(hfu) <= 100


def test_counter_lane_is_the_step_functions_max_and_mean_per_bucket(kernel):
    trace, reader = kernel
    samples = reader.read_table(ts.COUNTER.name).to_pydict()
    lane = lane_data.counter_lanes(trace, lane_data.counter_tracks(trace.tracks()), _whole(trace), WIDTH)[0]
    t = np.array([s for s, c in zip(samples[ts.TIMESTAMP], samples[ts.PCORE_IDX], strict=True) if c == 0])
    v = np.array([s for s, c in zip(samples[ts.VALUE], samples[ts.PCORE_IDX], strict=True) if c == 0])
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    width = _width(lane)
    checked = 0
    for i, centre in enumerate(lane.x_ns.tolist()):
        a, b = centre - width // 2, centre + width // 2
        if a < t[0] or b > t[-1]:
            continue  # the counter is defined from its first sample to its last
        grid = np.arange(a, b)
        value = v[np.searchsorted(t, grid, side="right") - 1]   # the step function at every ns of the bucket
        # max: over the samples in the bucket and the value carried in (the last sample before it)
        carried = v[np.searchsorted(t, a, side="left") - 1]
        in_bucket = v[(t >= a) & (t < b)]
        assert lane.series["max"][i] == pytest.approx(max(carried, in_bucket.max(initial=carried)), rel=1e-6)
        assert lane.series["mean"][i] == pytest.approx(value.mean(), rel=1e-6)
        checked += 1
    assert checked > WIDTH // lanes.PX_PER_POINT // 2


def test_counter_lane_holds_the_last_value_to_the_end_of_the_window(kernel):
    """A counter is a step function: after its last sample its last value holds (drawn to the window's end, on
    the lane's bucket grid); a window wholly after the last sample is one flat line at that value."""
    trace, reader = kernel
    samples = reader.read_table(ts.COUNTER.name).to_pydict()
    counters = lane_data.counter_tracks(trace.tracks())
    counter = counters[0]
    core, name = counter["core"], counter["name"]
    mine = sorted((t, v) for t, v, c, n in zip(samples[ts.TIMESTAMP], samples[ts.VALUE], samples[ts.PCORE_IDX],
                                               samples[ts.NAME], strict=True) if c == core and n == name)
    last_t, last_v = mine[-1]
    t0, t1 = trace.time_range
    beyond = SimpleNamespace(start_ns=int(t0), end_ns=int(t1) + (int(t1) - int(t0)) // 2)   # window past the end
    lane = lane_data.counter_lanes(trace, [counter], beyond, WIDTH)[0]
    after = lane.x_ns > last_t + _width(lane)
    assert after.any() and lane.x_ns[-1] > beyond.end_ns - _width(lane)
    assert np.all(lane.series["max"][after] == np.float32(last_v))
    assert np.all(lane.series["mean"][after] == np.float32(last_v))
    steps = np.diff(lane.x_ns)
    assert steps.max() - steps.min() <= 1                      # one even grid: the update ships as x0/dx
    late = SimpleNamespace(start_ns=last_t + 10, end_ns=last_t + 10_010)
    flat = lane_data.counter_lanes(trace, [counter], late, WIDTH)[0]
    assert len(flat.x_ns) and np.all(flat.series["max"] == np.float32(last_v))
    early = SimpleNamespace(start_ns=int(t0) - 20_000, end_ns=int(mine[0][0]) + 20_000)
    lane_e = lane_data.counter_lanes(trace, [counter], early, WIDTH)[0]
    before = lane_e.x_ns < mine[0][0] - _width(lane_e)            # before the first sample: a gap, not held
    assert not np.isfinite(lane_e.series["max"][before]).any()


def test_lane_updates_are_keyed_by_trace_name_and_axes_start_at_zero():
    a = lanes.Lane("DMA GB/s", "", np.array([10, 20]), {"NC0": np.array([1.0, np.nan])})
    b = lanes.Lane("busy %", "%", np.array([10, 20]), {"Tensor": np.array([5.0, 6.0])}, y_range=(0, 100))
    updates = lanes.lane_updates_by_name([a, b], origin_ns=0)
    assert list(updates) == ["DMA GB/s: NC0", "busy %: Tensor"]
    assert [t.name for t in lanes.lane_traces([a, b], 0)] == list(updates)
    y = decode_typed_array(updates["DMA GB/s: NC0"]["y"])
    assert y[0] == 1.0 and np.isnan(y[1])                      # unknown values stay gaps
    axes = lanes.lane_axes([a, b])
    assert axes["yaxis2"]["rangemode"] == "tozero" and axes["yaxis3"]["range"] == [0, 100]
    assert len(decode_typed_array(lanes.EMPTY_LANE["x"])) == 0


def test_short_lanes_are_titled_horizontally_in_the_left_margin():
    """A vertical axis title longer than a 56 px lane ran into the lanes beside it: the timeline figure writes
    each lane's title as a right-aligned annotation beside its lane, wrapped to short lines."""
    long = lanes.Lane("NC1 tensor_throttle_percent", "%", np.array([10, 20]), {"v": np.array([1.0, 2.0])})
    short = lanes.Lane("busy %", "%", np.array([10, 20]), {"Tensor": np.array([5.0, 6.0])})
    notes = lanes.lane_title_annotations([long, short])
    assert [n["yref"] for n in notes] == ["y2 domain", "y3 domain"]
    assert notes[0]["text"] == "NC1 tensor_<br>throttle_percent" and notes[1]["text"] == "busy %"
    assert all(n["xref"] == "paper" and n["x"] == 0 and n["xanchor"] == "right" for n in notes)
    assert all(max(len(line) for line in n["text"].split("<br>")) <= lanes.LABEL_LINE_CHARS for n in notes)
    axes = lanes.lane_axes([long, short], titles=False)
    assert "title" not in axes["yaxis2"] and "title" in lanes.lane_axes([long])["yaxis2"]


def test_a_lane_of_several_series_names_them_in_their_colours():
    busy = lanes.Lane("busy %", "%", np.array([10, 20]),
                      {n: np.array([1.0, 2.0]) for n in ("Tensor", "Vector", "Scalar", "<b>x</b>")},
                      colours={"Tensor": "#111111", "Vector": "#222222", "Scalar": "#333333"})
    key = lanes.series_key(busy)
    assert '<span style="color:#111111">Tensor</span>' in key and '<span style="color:#333333">Scalar</span>' in key
    assert "&lt;b&gt;x&lt;/b&gt;" in key and "<b>" not in key          # names are text, never markup
    assert key.count("<br>") >= 1                                        # wrapped to short lines
    assert lanes.lane_title_annotations([busy])[0]["text"] == f"busy %<br>{key}"
    one = lanes.Lane("DMA GB/s", "", np.array([10]), {"NC0": np.array([1.0])})
    assert lanes.series_key(one) == "" and lanes.lane_title_annotations([one])[0]["text"] == "DMA GB/s"
