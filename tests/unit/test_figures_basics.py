"""Palette codes, typed arrays, time formatting, lanes and summary charts."""

import numpy as np
import pytest

from profiler.figures import palette as pal
from profiler.figures import summary as sfig
from profiler.figures.lanes import Lane, decode_x, lane_traces, lane_updates, x_attributes
from profiler.figures.timefmt import axis_to_ns, format_duration, format_time, ns_to_axis
from profiler.figures.typed_arrays import decode_typed_array, typed_array


def test_codes_round_trip_and_fit_a_byte():
    slots = np.arange(pal.N_SLOTS).repeat(3)
    busy = np.tile([0.01, 0.5, 1.0], pal.N_SLOTS)
    codes = pal.encode(slots, busy)
    assert codes.dtype == np.uint8 and codes.max() <= pal.MAX_CODE <= 255
    got_slot, got_shade = pal.decode(codes)
    np.testing.assert_array_equal(got_slot, slots)
    assert got_shade[:3].tolist() == [0, 3, pal.BUSY_SHADES - 1]
    assert pal.encode(np.array([4]), np.array([0.0]))[0] == 0     # idle


def test_strip_png_round_trips_every_code_with_a_distinct_colour_each():
    from profiler.figures import strip_png

    colours = strip_png.code_colours()
    assert len(colours) == pal.MAX_CODE + 1 and len(set(colours)) == len(colours)
    assert colours[0] == (255, 255, 255)
    code = 1 + 3 * pal.SHADES + pal.EDGE_SHADE      # edge shade of slot 3
    assert "rgb({},{},{})".format(*colours[code]) == pal.shade_colour(pal.PALETTE[3], pal.EDGE_SHADE)
    rng = np.random.default_rng(1)
    codes = rng.integers(0, pal.MAX_CODE + 1, size=(7, 3001)).astype(np.uint8)
    uri = strip_png.strip_data_uri(codes)
    np.testing.assert_array_equal(strip_png.decode_strip_png(uri), codes)
    runs = np.repeat(codes[:, :30], 100, axis=1)             # strips are runs of equal codes: they compress
    assert len(strip_png.encode_strip_png(runs)) < runs.size / 10
    for bad in (np.zeros((0, 3)), np.zeros(5), np.full((2, 2), pal.MAX_CODE + 1)):
        with pytest.raises(ValueError):
            strip_png.encode_strip_png(bad)


def test_palette_is_stable_and_ranked_names_are_distinct():
    names = [f"OP{i}" for i in range(len(pal.PALETTE))]
    p = pal.CategoryPalette(names)
    assert len({p.slot(n) for n in names}) == len(names)
    assert p.slot("never-seen") == pal.CategoryPalette(names).slot("never-seen")
    assert p.slot(None) == pal.OTHER_SLOT
    few = pal.CategoryPalette(["A", "B"])
    assert few.slot("C") not in (few.slot("A"), few.slot("B"))   # hashed into the free slots


@pytest.mark.parametrize("arr", [np.arange(6, dtype=np.uint8).reshape(2, 3), np.linspace(0, 1, 5),
                                 np.array([1, -2], dtype=np.int16), np.array([3, 4], dtype=np.int64)])
def test_typed_array_round_trip(arr):
    spec = typed_array(arr)
    np.testing.assert_array_equal(decode_typed_array(spec), arr)
    assert ("shape" in spec) == (arr.ndim == 2)


def test_typed_array_rejects_what_plotly_cannot_decode():
    with pytest.raises(ValueError):
        typed_array(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError):
        typed_array(np.array(["a"]))


def test_time_units():
    assert format_duration(850) == "850 ns"
    assert format_duration(1250) == "1.25 µs"
    assert format_duration(3_400_000) == "3.4 ms"
    assert format_time(1_000_500, 500) == "+1 ms"
    assert axis_to_ns(ns_to_axis(123_456_789_012, 1_000), 1_000) == 123_456_789_012


def test_lanes_share_x_and_go_on_their_own_axes():
    lanes = [Lane("busy %", "%", np.array([10, 20]), {"Tensor": np.array([50.0, 100.0]),
                                                      "Vector": np.array([0.0, 25.0])}),
             Lane("GB/s", "", np.array([10, 20]), {"dma": np.array([1.0, 2.0])})]
    traces = lane_traces(lanes, origin_ns=0, grid_x=True)
    assert [t.yaxis for t in traces] == ["y2", "y2", "y3"]
    updates = lane_updates(lanes, origin_ns=0, grid_x=True)
    np.testing.assert_allclose(decode_typed_array(updates[1]["y"]), [0.0, 25.0])
    # Evenly spaced bucket centres travel as x0/dx (x unset), others as an explicit typed array.
    assert updates[2]["x"] is None and traces[2].x is None
    np.testing.assert_allclose(decode_x(updates[2], 2), [1e-8, 2e-8])
    np.testing.assert_allclose(decode_x(traces[2].to_plotly_json(), 2), [1e-8, 2e-8])
    explicit = lane_updates(lanes, origin_ns=0)   # the default (notebooks): an x array
    np.testing.assert_allclose(decode_typed_array(explicit[2]["x"]), [1e-8, 2e-8])


def test_lane_x_is_a_grid_only_when_the_points_are_evenly_spaced():
    near_grid = x_attributes(np.array([1_000, 1_334, 1_667, 2_000]), origin_ns=1_000)   # centres rounded to ns
    assert near_grid["x"] is None and near_grid["x0"] == 0.0
    np.testing.assert_allclose(decode_x(near_grid, 4), np.array([0, 334, 667, 1000]) / 1e9, atol=1.5e-9)
    gap = np.array([10, 20, 40, 50])   # a bucket missing: not a grid
    uneven = x_attributes(gap, origin_ns=0)
    assert uneven["x"] is not None
    np.testing.assert_allclose(decode_x(uneven, 4), gap / 1e9)
    single = x_attributes(np.array([70]), origin_ns=0)
    np.testing.assert_allclose(decode_x(single, 1), [7e-8])


def test_summary_charts_read_trace_summary_fields_and_skip_what_is_missing():
    import pyarrow as pa

    from profiler.analyses import schema as rs

    summary = {"total_time_ns": 2_000_000,
               "engines": {"Tensor": {"active_time_ns": 1_600_000, "utilization_pct": 80.0, "instruction_count": 3},
                           "Vector": {"active_time_ns": 400_000, "utilization_pct": 20.0, "instruction_count": 4}},
               "hfu_pct": 41.5, "mfu_pct": None,
               "dma": {"active_time_ns": 500_000, "transfer_bytes": 4096, "throughput_gbps": 0.008192,
                       "utilization_pct": 25.0}}
    heads = {label: (v, unit) for label, v, unit in sfig.headline_numbers(summary)}
    assert heads == {"total time": (2_000_000, "ns"), "instructions": (7, ""), "HFU": (41.5, "%"),
                     "DMA bytes": (4096, "B"), "DMA throughput while active": (pytest.approx(8.192e6), "B/s"),
                     "DMA active": (25.0, "%")}                       # MFU unknown: no card
    opcodes = pa.table({rs.ENGINE: ["Tensor", "Scalar", "Vector"], rs.OPCODE: ["MATMUL", "ACTIVATE", "IOTA"],
                        rs.BUSY_NS: [900, 1200, 0]})
    figs = sfig.summary_figures(sfig.SummaryInputs(summary, opcodes=opcodes))
    assert [f.layout.title.text for f in figs] == [sfig.ENGINE_TITLE, sfig.OPCODES_TITLE]
    assert list(figs[0].data[0].y) == ["Tensor", "Vector"] and list(figs[0].data[0].x) == [80.0, 20.0]
    # a percentage hovers as a number (0.75%), an amount with an SI prefix (900 ns): d3's ".4s" read "750.3m%"
    assert figs[0].data[0].hovertemplate == "%{y}: %{x:.2f}%<extra></extra>"
    assert figs[1].data[0].hovertemplate == "%{y}: %{x:.4s}s<extra></extra>"
    assert list(figs[1].data[0].y) == ["Scalar ACTIVATE", "Tensor MATMUL"]     # largest first, zeros dropped
    assert list(figs[1].data[0].x) == pytest.approx([1.2e-6, 0.9e-6])         # seconds (axis reads µs)
    no_ops = pa.table({rs.LAYER: ["a"], rs.OPERATOR: pa.array([None], pa.string()), rs.BUSY_NS: [5],
                       rs.ADJUSTED_FLOPS: [7]})
    assert sfig.operators_figure(no_ops) is None and sfig.flops_figure(no_ops) is None
    assert sfig.summary_figures(sfig.SummaryInputs({})) == [] and sfig.headline_numbers(None) == []


def test_breakdown_bars_are_largest_first_and_ties_in_natural_order():
    import pyarrow as pa

    from profiler.analyses import schema as rs
    from profiler.figures.summary import natural_key, queues_figure

    names = ["qSyncIO10", "qSyncIO2", "qSyncIO1", "qBig"]
    fig = queues_figure(pa.table({rs.QUEUE: names, rs.BYTES: [5, 5, 5, 9]}))
    assert list(fig.data[0].y) in (["qBig", "qSyncIO1", "qSyncIO2", "qSyncIO10"],
                                   ["qSyncIO10", "qSyncIO2", "qSyncIO1", "qBig"])   # (bars may be drawn bottom-up)
    assert sorted(["a10b", "a9b", "a10a"], key=natural_key) == ["a9b", "a10a", "a10b"]
    # a core's 16 queues are all drawn (15 were, under a title that said "per queue"); a cut says so
    sixteen = queues_figure(pa.table({rs.QUEUE: [f"qSyncIO{i}" for i in range(16)], rs.BYTES: [1] * 16}))
    assert len(sixteen.data[0].y) == 16 and sixteen.layout.title.text == "DMA bytes per queue"
    many = queues_figure(pa.table({rs.QUEUE: [f"q{i}" for i in range(40)], rs.BYTES: list(range(1, 41))}))
    assert len(many.data[0].y) == 32 and many.layout.title.text == "DMA bytes per queue (the 32 largest of 40)"
    assert many.layout.height > sixteen.layout.height
    assert sorted(["²", "q10", "q\u0663"], key=natural_key) == ["q\u0663", "q10", "²"]   # (int("²") fails)


def test_the_opcode_chart_colours_each_opcode_as_the_timeline_does():
    import pyarrow as pa

    from profiler.analyses import schema as rs
    from profiler.figures.summary import opcodes_figure

    names = ("LDWEIGHTS", "MATMUL", "ACTIVATE")           # the trace's ranking: the timeline's palette
    table = pa.table({rs.ENGINE: ["Tensor", "Tensor", "Scalar"], rs.OPCODE: ["MATMUL", "LDWEIGHTS", "ACTIVATE"],
                      rs.BUSY_NS: [30, 20, 10]})
    fig = opcodes_figure(table, names)
    timeline = pal.CategoryPalette(names)
    assert list(fig.data[0].marker.color) == [timeline.colour("MATMUL"), timeline.colour("LDWEIGHTS"),
                                              timeline.colour("ACTIVATE")]
    assert fig.data[0].marker.color[0] == pal.PALETTE[1]   # MATMUL is second in the ranking
