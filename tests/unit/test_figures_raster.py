"""Rasterising Trace.window results into strip codes: exact busy fractions, colours, collapsing, hover data."""

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler import db_schema as dbs
from profiler.figures import palette as pal
from profiler.figures.raster import legend_label, rasterize, timeline_rows
from profiler.figures.strip_png import decode_strip_png
from profiler.figures.timeline import timeline_figure


def _tracks(*rows):
    keys = ("track_id", "core", "kind", "name", "group_name", "sort_order", "table_name", "span_depth")
    return pa.Table.from_pylist([dict(zip(keys, r, strict=False)) for r in rows], schema=dbs.TRACK)


TRACKS = _tracks(
    (1, 0, "engine", "Tensor", "NeuronCore 0", 0, "Instruction"),
    (2, 0, "engine", "Vector", "NeuronCore 0", 1, "Instruction"),
    (3, 0, "dma_queue", "qSyncIO0", "NeuronCore 0", 10, "DmaPacket"),
    (4, 0, "dma_queue", "qSyncIO1", "NeuronCore 0", 11, "DmaPacket"),
    (5, 0, "span", "layer", "NeuronCore 0", 20, "slice"),
    (6, 0, "counter", "sbuf", "NeuronCore 0", 30, "Counter"),
)


def _events(rows):
    base = {"table_name": "Instruction", "layer": None, "operator": None, "source": None, "depth": 0}
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=dbs.WINDOW_EVENTS)


def _buckets(rows):
    return pa.Table.from_pylist(rows, schema=dbs.WINDOW_BUCKETS)


def _window(start, end, res, events=(), buckets=()):
    return SimpleNamespace(start_ns=start, end_ns=end, width_px=(end - start) // res, resolution_ns=res,
                           events=_events(list(events)), buckets=_buckets(list(buckets)))


def test_rows_order_collapse_and_counters_left_out():
    rows = timeline_rows(TRACKS, collapse_dma=False)
    assert [r.label for r in rows] == ["Tensor", "Vector", "qSyncIO0", "qSyncIO1", "layer"]
    collapsed = timeline_rows(TRACKS, collapse_dma=True)
    assert [r.label for r in collapsed] == ["Tensor", "Vector", "DMA (2 queues)", "layer"]
    assert collapsed[2].track_ids == (3, 4)


def test_events_drawn_exactly_with_edges_and_hover():
    rows = timeline_rows(TRACKS)
    w = _window(0, 100, 10, events=[
        {"track_id": 1, "id": 1, "start_ts": 0, "end_ts": 50, "name": "MATMUL", "source": "k.py:3"},
        {"track_id": 1, "id": 2, "start_ts": 60, "end_ts": 65, "name": "LDWEIGHTS"},
    ])
    palette = pal.CategoryPalette(["MATMUL", "LDWEIGHTS"])
    frame = rasterize(w, rows, palette, "opcode")
    slot, shade = pal.decode(frame.codes[0])
    assert slot.tolist() == [0, 0, 0, 0, 0, -1, 1, -1, -1, -1]
    assert shade[0] == pal.EDGE_SHADE            # a 5-pixel bar marks its start
    assert shade[1] == pal.BUSY_SHADES - 1       # fully busy
    assert shade[6] == 3                         # 50 % busy -> middle shade
    assert frame.legend == {0: "MATMUL", 1: "LDWEIGHTS"}
    assert frame.exact[0] and frame.hover_events["id"] == [1, 2]
    assert frame.hover_events["source"][0] == "k.py:3"


def test_a_colour_shared_by_several_names_in_view_is_labelled_with_all_of_them():
    """More names than colours: names past the palette share a slot; the legend (and the coarse hover, which reads
    it) must not give the colour to one of them alone."""
    ranked = [f"OP{i}" for i in range(len(pal.PALETTE))]
    palette = pal.CategoryPalette(ranked)
    extra = next(f"X{i}" for i in range(1000) if palette.slot(f"X{i}") == 0)    # shares OP0's slot
    rows = timeline_rows(TRACKS)
    w = _window(0, 100, 10, events=[
        {"track_id": 1, "id": 1, "start_ts": 0, "end_ts": 40, "name": "OP0"},
        {"track_id": 2, "id": 2, "start_ts": 50, "end_ts": 90, "name": extra},
        {"track_id": 2, "id": 3, "start_ts": 0, "end_ts": 20, "name": "OP1"},
    ])
    frame = rasterize(w, rows, palette, "opcode")
    assert frame.legend == {0: f"OP0 / {extra}", 1: "OP1"}
    many = [f"N{i}" for i in range(5)]
    assert legend_label(many) == "N0 / N1 / N2 +2 more" and legend_label(["A"]) == "A"


def test_buckets_give_busy_shading_and_dominant_name():
    rows = timeline_rows(TRACKS)
    w = _window(1000, 1040, 10, buckets=[
        {"track_id": 2, "start_ts": 1000 + 10 * i, "end_ts": 1010 + 10 * i, "busy_ns": 10 * i // 3,
         "count": 9, "longest_id": 7, "top_name": "ACTIVATE"} for i in range(4)])
    frame = rasterize(w, rows, pal.CategoryPalette(["X", "ACTIVATE"]), "opcode")
    slot, _ = pal.decode(frame.codes[1])
    assert slot.tolist() == [-1, 1, 1, 1]      # bucket 0 idle (busy 0)
    assert not frame.exact[1] and frame.exact[0]
    assert frame.hover_events is None


def test_engine_colour_mode_colours_whole_rows():
    rows = timeline_rows(TRACKS)
    w = _window(0, 40, 10, events=[{"track_id": 2, "id": 1, "start_ts": 0, "end_ts": 40, "name": "A"},
                                   {"track_id": 3, "id": 2, "start_ts": 0, "end_ts": 40, "name": "q",
                                    "table_name": "DmaPacket"}])
    frame = rasterize(w, rows, pal.CategoryPalette(), "engine")
    eng = pal.CategoryPalette.for_engines()
    assert set(pal.decode(frame.codes[1])[0].tolist()) == {eng.slot("Vector")}
    assert set(pal.decode(frame.codes[2])[0].tolist()) == {eng.slot("DMA")}
    assert set(frame.legend.values()) == {"Vector", "DMA"}


def test_layer_mode_uses_event_layer_and_layer_track_for_buckets():
    rows = timeline_rows(TRACKS)
    w = _window(0, 40, 10,
                events=[{"track_id": 1, "id": 1, "start_ts": 0, "end_ts": 40, "name": "MATMUL", "layer": "mlp"},
                        {"track_id": 5, "id": 9, "start_ts": 0, "end_ts": 20, "name": "attn", "table_name": "slice"},
                        {"track_id": 5, "id": 10, "start_ts": 20, "end_ts": 40, "name": "mlp", "table_name": "slice"}],
                buckets=[{"track_id": 2, "start_ts": 10 * i, "end_ts": 10 * i + 10, "busy_ns": 10, "count": 5,
                          "longest_id": 1, "top_name": "ACT"} for i in range(4)])
    palette = pal.CategoryPalette(["attn", "mlp"])
    frame = rasterize(w, rows, palette, "layer")
    assert set(pal.decode(frame.codes[0])[0].tolist()) == {palette.slot("mlp")}
    # Vector only has buckets: coloured by the layer running at each pixel on the layer track.
    assert pal.decode(frame.codes[1])[0].tolist() == [palette.slot("attn")] * 2 + [palette.slot("mlp")] * 2


def test_a_rows_span_depths_are_rows_of_their_own_labelled_below_the_first():
    tracks = _tracks(
        (1, None, "span", "thread 7", "trainer", 0, "slice", 0),
        (2, None, "span", "thread 7", "trainer", 1, "slice", 1),
        (3, None, "span", "thread 7", "trainer", 2, "slice", 2),
        (4, None, "span", "thread 8", "trainer", 3, "slice", 0),
        (5, 0, "span", "operator", "NeuronCore 0", 4, "slice", 1),   # an older trace: one depth, not the first
        (6, 0, "engine", "Tensor", "NeuronCore 0", 5, "Instruction"),
    )
    rows = timeline_rows(tracks)
    by_id = {r.track_ids[0]: r.label for r in rows}
    assert by_id == {1: "thread 7", 2: "thread 7 ›1", 3: "thread 7 ›2", 4: "thread 8", 5: "operator",
                     6: "Tensor"}


def test_span_levels_limit_each_span_rows_levels():
    tracks = _tracks(
        (1, None, "span", "thread 7", "trainer", 0, "slice", 0),
        (2, None, "span", "thread 7", "trainer", 1, "slice", 1),
        (3, None, "span", "thread 7", "trainer", 2, "slice", 2),
        (4, None, "span", "thread 8", "trainer", 3, "slice", 0),
        (5, 0, "span", "operator", "NeuronCore 0", 4, "slice", 1),   # one level, its first is depth 1
        (8, 0, "span", "operator", "NeuronCore 0", 5, "slice", 2),
        (6, 0, "engine", "Tensor", "NeuronCore 0", 6, "Instruction"),
    )
    # (rows by core: core 0's first, host rows last)
    assert [r.track_ids[0] for r in timeline_rows(tracks, span_levels=2)] == [5, 8, 6, 1, 2, 4]
    one = timeline_rows(tracks, span_levels=1)
    assert [r.track_ids[0] for r in one] == [5, 6, 1, 4] and all(r.level == 0 for r in one)
    assert len(timeline_rows(tracks)) == 7


def test_layer_mode_reads_every_lane_of_the_layer_row():
    """Pipelined layers overlap, so the layer row has two lanes (tracks): a pixel with only buckets takes the layer
    of the first lane busy there."""
    tracks = _tracks(
        (1, 0, "engine", "Tensor", "NeuronCore 0", 0, "Instruction"),
        (2, 0, "engine", "Vector", "NeuronCore 0", 1, "Instruction"),
        (5, 0, "span", "layer", "NeuronCore 0", 20, "slice", 0),
        (7, 0, "span", "layer", "NeuronCore 0", 21, "slice", 1),
    )
    rows = timeline_rows(tracks)
    assert [r.label for r in rows] == ["Tensor", "Vector", "layer", "layer ›1"]
    w = _window(0, 40, 10,
                events=[{"track_id": 5, "id": 9, "start_ts": 0, "end_ts": 10, "name": "attn", "table_name": "slice"},
                        {"track_id": 7, "id": 10, "start_ts": 5, "end_ts": 40, "name": "mlp", "table_name": "slice"}],
                buckets=[{"track_id": 2, "start_ts": 10 * i, "end_ts": 10 * i + 10, "busy_ns": 10, "count": 5,
                          "longest_id": 1, "top_name": "ACT"} for i in range(4)])
    palette = pal.CategoryPalette(["attn", "mlp"])
    frame = rasterize(w, rows, palette, "layer")
    assert pal.decode(frame.codes[1])[0].tolist() == [palette.slot("attn")] + [palette.slot("mlp")] * 3


def test_collapsed_dma_row_shows_busiest_queue():
    rows = timeline_rows(TRACKS, collapse_dma=True)
    w = _window(0, 20, 10, events=[
        {"track_id": 3, "id": 1, "start_ts": 0, "end_ts": 5, "name": "a", "table_name": "DmaPacket"},
        {"track_id": 4, "id": 2, "start_ts": 10, "end_ts": 20, "name": "b", "table_name": "DmaPacket"}])
    palette = pal.CategoryPalette(["a", "b"])
    frame = rasterize(w, rows, palette, "opcode")
    slot, shade = pal.decode(frame.codes[2])
    assert slot.tolist() == [palette.slot("a"), palette.slot("b")]
    assert shade[1] == pal.BUSY_SHADES - 1


interval = st.tuples(st.integers(0, 999), st.integers(0, 300))


@settings(max_examples=60, deadline=None)
@given(st.lists(interval, min_size=1, max_size=30), st.sampled_from([1, 7, 16, 64]), st.integers(0, 500))
def test_busy_fraction_matches_brute_force(intervals, res, w_start):
    rows = timeline_rows(TRACKS)
    lo, hi = w_start, w_start + 20 * res
    # the events Trace.window returns: those overlapping the window (a zero-length one inside it too)
    evs = [{"track_id": 1, "id": i, "start_ts": s, "end_ts": s + d, "name": "X"} for i, (s, d) in enumerate(intervals)
           if s < hi and (s + d > lo or s >= lo)]
    w = _window(lo, hi, res, events=evs)
    frame = rasterize(w, rows, pal.CategoryPalette(["X"]), "opcode")
    w0 = (w_start // res) * res
    n = frame.width_px
    # the union (overlapping events count once, as in the index's buckets), each pixel measured over its part
    # inside the window (a pixel sticking out of it: the events outside are not fetched)
    covered = np.zeros(w0 + n * res + 1400, dtype=np.int64)
    for s, d in intervals:
        covered[s:s + d] = 1
    parts = [(max(w0 + i * res, lo), min(w0 + (i + 1) * res, hi)) for i in range(n)]
    brute = np.array([covered[a:b].sum() / max(b - a, 1) for a, b in parts])
    _slot, shade = pal.decode(frame.codes[0])
    expected_shade = np.where(brute > 0, np.clip(np.ceil(brute * pal.BUSY_SHADES) - 1, 0, pal.BUSY_SHADES - 1), -1)
    zero_len = np.zeros(n, bool)
    for s, d in intervals:
        if d == 0 and lo <= s < hi:
            zero_len[(s - w0) // res] = True
    ok = (shade == expected_shade) | (shade == pal.EDGE_SHADE) | (zero_len & (brute == 0))
    assert ok.all(), (brute, shade)


def test_unknown_colour_mode_is_rejected():
    with pytest.raises(ValueError, match="colour_by"):
        rasterize(_window(0, 10, 1), timeline_rows(TRACKS), pal.CategoryPalette(), "rainbow")


def test_figure_carries_codes_as_a_palette_png():
    rows = timeline_rows(TRACKS)
    w = _window(0, 100, 10, events=[{"track_id": 1, "id": 1, "start_ts": 0, "end_ts": 50, "name": "MATMUL"}])
    frame = rasterize(w, rows, pal.CategoryPalette(["MATMUL"]), "opcode")
    fig = timeline_figure(frame, rows, origin_ns=0)
    assert fig.data[0].type == "image" and fig.data[0].source.startswith("data:image/png;base64,")
    np.testing.assert_array_equal(decode_strip_png(fig.data[0].source), frame.codes)
    assert fig.data[0].x0 == pytest.approx(frame.resolution_ns / 2 / 1e9) and fig.data[0].dy == 1
    assert list(fig.layout.yaxis.ticktext) == [r.label for r in rows]
    assert [t.name for t in fig.data[1:]] == ["MATMUL"]   # legend entry
