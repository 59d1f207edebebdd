"""Figure builders of the analyses and of two-trace comparisons, on the hand-made trace."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

import profiler
from profiler.analyses import (
    critical_path,
    critical_path_breakdown,
    diff,
    idle_gaps,
    performance_bounds,
    size_histogram,
    time_by,
    wait_summary,
)
from profiler.analyses import schema as rs
from profiler.figures import analyses as fa
from profiler.figures import compare as fc
from profiler.figures.raster import timeline_rows
from profiler.figures.timefmt import ns_to_axis
from tests.golden.handmade import write_handmade


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("fig")
    with profiler.open(write_handmade(root / "a.trace")) as a, \
            profiler.open(write_handmade(root / "b.trace", spill_reload_bytes=400)) as b:
        yield a, b


def test_bounds_and_engine_figures(pair):
    b = performance_bounds(pair[0])
    fig = fa.bounds_figure(b)
    bar = fig.data[0]
    # the total is the bounds' window (first DMA start to last DMA end), not the trace's first event to last
    assert "first DMA transfer's start" in bar.hovertext[0] and "first event" not in bar.hovertext[0]
    assert list(bar.y) == ["total_time", *(k.removesuffix("_ns") for k in rs.BOUND_KEYS)]
    # seconds on an axis whose ticks read ns, µs, ms or s (a µs axis read "10k µs" for 10 ms)
    assert list(bar.x) == pytest.approx([v * 1e-6 for v in (0.370, 0.115, 0.0625, 0.0375, 0.150, 0.070, 0.050, 0.150)])
    assert fig.layout.xaxis.ticksuffix == "s" and "~s" in fig.layout.xaxis.tickformat
    assert "bottleneck: Tensor" in fig.layout.title.text
    assert "DMA idle time" in bar.hovertext[1]
    active = fa.engine_active_figure(b).data[0]
    assert dict(zip(active.y, active.x, strict=True))["Tensor"] == pytest.approx(100 * 150 / 370)


def test_table_figures(pair):
    t = pair[0]
    waits = fa.waits_figure(wait_summary(t))
    assert {tr.name for tr in waits.data} == {"qSyncIO1", "Tensor"}
    cp = fa.critical_path_figure(critical_path_breakdown(critical_path(t)))
    assert cp.data[0].y[0] == "Tensor MATMUL" and cp.data[0].x[0] == pytest.approx(100 * 150 / 370)
    gaps = fa.idle_gaps_figure(idle_gaps(t), top=3)
    assert list(gaps.data[0].x) == pytest.approx([0.35e-6, 0.30e-6, 0.24e-6])
    ops = fa.operator_figure(time_by(t, "operator")).data[0]
    values = dict(zip(ops.ids, ops.values, strict=True))
    assert values["L0"] == values["L0/mm"] + values["L0/store"] + values["L0/load"] == 240
    hist = fa.dma_histogram_figure(size_histogram(t)).data[0]
    assert list(hist.y) == [1, 1, 2]


def test_critical_path_overlay_sits_on_the_timeline_rows(pair):
    t = pair[0]
    path = critical_path(t)
    rows = timeline_rows(t.tracks())
    links, segments = fa.critical_path_overlay(path, rows, origin_ns=0)
    row_of = {tid: i for i, r in enumerate(rows) for tid in r.track_ids}
    steps = path.to_pylist()
    for k, step in enumerate(steps):
        assert segments.y[3 * k] == segments.y[3 * k + 1] == row_of[step[rs.TRACK_ID]]
        assert segments.x[3 * k] == pytest.approx(ns_to_axis(step[rs.START_NS], 0))
        assert segments.x[3 * k + 1] == pytest.approx(ns_to_axis(step[rs.END_NS], 0))
        assert segments.x[3 * k + 2] is None            # a gap between segments
    assert len(links.x) == 3 * (len(steps) - 1)
    assert fa.critical_path_overlay(path.slice(0, 0), rows, 0) == []


@pytest.mark.parametrize("width", [3, 40, 4000])
def test_a_windowed_critical_path_overlay_draws_what_the_window_shows_at_its_resolution(pair, width):
    """Against the steps themselves: every step overlapping the window lies inside one drawn segment of its row,
    the segments of a row are more than a pixel apart, their step counts add up, and links only when few."""
    t = pair[0]
    path = critical_path(t)
    rows = timeline_rows(t.tracks())
    row_of = {tid: i for i, r in enumerate(rows) for tid in r.track_ids}
    steps = [s for s in path.to_pylist() if s[rs.TRACK_ID] in row_of]
    t0, t1 = t.time_range
    w0, w1 = t0 + (t1 - t0) // 4, t0 + 3 * (t1 - t0) // 4
    links, segments = fa.critical_path_overlay_data(path, rows, t0, (w0, w1, width))
    inside = [s for s in steps if s[rs.END_NS] > w0 and s[rs.START_NS] < w1]
    assert inside and len(segments["x"]) == len(segments["y"]) == len(segments["text"])
    segs = [(segments["y"][k], segments["x"][k], segments["x"][k + 1], segments["text"][k])
            for k in range(0, len(segments["x"]), 3)]
    res_s = (w1 - w0) / width / 1e9
    for s in inside:
        a, b = ns_to_axis(s[rs.START_NS], t0), ns_to_axis(s[rs.END_NS], t0)
        assert any(row == row_of[s[rs.TRACK_ID]] and x0 <= a + 1e-15 and b <= x1 + 1e-15
                   for row, x0, x1, _ in segs), s
    for row in {r for r, *_ in segs}:
        spans = sorted((x0, x1) for r, x0, x1, _ in segs if r == row)
        assert all(nxt[0] > prev[1] + res_s * 0.999 for prev, nxt in itertools.pairwise(spans))
    counted = sum(int(text.split()[2].replace(",", "")) if " steps, " in text else 1 for *_, text in segs)
    assert counted == len(inside)
    assert len(segs) <= len(rows) * (width + 1)
    assert (len(links["x"]) == 3 * (len(inside) - 1)) == (len(inside) <= fa.MAX_LINKED_STEPS)


def test_compare_figures(pair):
    d = diff(*pair)
    engines = fc.metrics_figure(d[rs.DIFF_ENGINES], "engines", ("base", "spill"))
    assert [tr.name for tr in engines.data] == ["base", "spill"]
    assert list(engines.data[0].x) == list(engines.data[1].x)  # identical timing
    deltas = d[rs.DIFF_BY]["opcode"]
    fig = fc.delta_figure(deltas, "opcode")
    assert len(fig.data[0].y) == deltas.num_rows and set(fig.data[0].x) == {0}
    # nothing changed: grey bars (not the "slower" red) and a title saying so
    assert set(fig.data[0].marker.color) == {fc.SAME_COLOUR} and fig.layout.title.text == "No time change per opcode"
    moved = deltas.set_column(deltas.schema.get_field_index(rs.DELTA_NS), rs.DELTA_NS,
                              pa.array([(-1) ** i * (i + 1) for i in range(deltas.num_rows)], pa.int64()))
    fig = fc.delta_figure(moved, "opcode")
    assert list(fig.data[0].marker.color) == [fc.FASTER_COLOUR if i % 2 else fc.SLOWER_COLOUR
                                             for i in range(moved.num_rows)]
    assert fig.layout.title.text == "Time change per opcode (B - A)"
