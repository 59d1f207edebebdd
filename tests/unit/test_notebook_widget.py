"""Trace.widget(): a FigureWidget that re-queries Trace.window on zoom and pan, driven here without a notebook front
end (setting the x-axis range is what a zoom in the browser does to the widget's model)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import profiler
from profiler.errors import CommandError
from profiler.figures.palette import CategoryPalette
from profiler.figures.raster import rasterize, timeline_rows
from profiler.figures.strip_png import decode_strip_png
from profiler.figures.typed_arrays import decode_typed_array
from profiler.notebook.timeline import ranked_names
from profiler.notebook.widget import update_widget
from profiler.synth import synth_trace

pytest.importorskip("anywidget")


@pytest.fixture(scope="module")
def trace(notebook_synth_trace):
    with profiler.open(notebook_synth_trace) as t:
        yield t


def _codes(widget):
    return decode_strip_png(widget.data[0].source)


def _raster_of(trace, buffer):
    rows = timeline_rows(trace.tracks(), collapse_dma=True)
    window = trace.window(buffer.start_ns, buffer.end_ns, buffer.width_px,
                          tracks=[tid for r in rows for tid in r.track_ids])
    return rasterize(window, rows, CategoryPalette(ranked_names(trace)), "opcode").codes


def test_zoom_requeries_at_a_finer_level_pan_inside_the_buffer_does_not_and_double_click_resets(trace):
    widget = trace.widget(width_px=600)
    live = widget.trnprof_live
    assert live.fetches == 1
    coarse_dx = widget.data[0].dx
    assert not live.frame.exact.all()
    np.testing.assert_array_equal(_codes(widget), _raster_of(trace, live.buffer))
    full_range = tuple(widget.layout.xaxis.range)
    lane_before = decode_typed_array(widget.data[1].y)

    a, b = full_range
    zoom = [a + (b - a) * 0.4, a + (b - a) * 0.4 + (b - a) / 2000]
    widget.layout.xaxis.range = zoom                       # the user drags a zoom box
    assert live.fetches == 2
    assert widget.data[0].dx < coarse_dx / 100
    assert live.frame.exact.all(), "zoomed in this far every row is drawn from raw events"
    np.testing.assert_array_equal(_codes(widget), _raster_of(trace, live.buffer))
    assert widget.data[0].x0 <= zoom[0] and zoom[1] <= widget.data[0].x0 + widget.data[0].dx * _codes(widget).shape[1]
    assert len(widget.data[-1].x) > 0, "hover points for the exact events in view"
    assert "events drawn exactly" in widget.layout.title.text
    lane_x = decode_typed_array(widget.data[1].x)              # the busy % lanes follow the zoom too
    assert len(lane_x) > 0 and not np.array_equal(lane_before, decode_typed_array(widget.data[1].y))
    assert (live.buffer.start_ns - live.origin_ns) / 1e9 <= lane_x.min()
    assert lane_x.max() <= (live.buffer.end_ns - live.origin_ns) / 1e9

    span = zoom[1] - zoom[0]
    widget.layout.xaxis.range = [zoom[0] + span * 0.2, zoom[1] + span * 0.2]   # a small pan stays in the buffer
    assert live.fetches == 2
    widget.layout.xaxis.range = [zoom[0] + span * 5, zoom[1] + span * 5]       # a long pan leaves it
    assert live.fetches == 3

    widget.plotly_relayout({"xaxis.autorange": True})     # double click
    assert live.fetches == 4
    assert tuple(widget.layout.xaxis.range) == pytest.approx(full_range)
    assert widget.data[0].dx == pytest.approx(coarse_dx)
    assert live.view == tuple(int(t) for t in trace.time_range)


def test_update_widget_ignores_what_is_not_a_range(trace):
    widget = trace.widget(width_px=300, lanes=False)
    live = widget.trnprof_live
    for junk in (None, "abc", [1], [float("nan"), 1.0], [0.5, 0.5]):
        assert update_widget(widget, live, junk) is False
    assert live.fetches == 1


def test_a_failed_requery_is_shown_in_the_title_not_raised(tmp_path):
    path = synth_trace(tmp_path / "small.trace", events=5_000, tracks=6)
    t = profiler.open(path)
    widget = t.widget(width_px=200)
    t.close()
    a, b = widget.layout.xaxis.range
    widget.layout.xaxis.range = [a, a + (b - a) / 1000]
    assert "cannot redraw this view" in widget.layout.title.text
    assert "closed" in widget.trnprof_live.error


def test_widget_without_the_widget_libraries_says_what_to_install(trace, monkeypatch):
    monkeypatch.setitem(sys.modules, "anywidget", None)
    with pytest.raises(CommandError, match=r"trnprof\[notebook\]"):
        trace.widget()
