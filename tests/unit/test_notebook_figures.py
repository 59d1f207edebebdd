"""Trace.timeline / utilization_figure / summary_figures: the dashboard's builders over Trace.window, checked
against the data path they must follow and against exact answers (busy time, summary values)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import profiler
from profiler import db_schema as dbs
from profiler.analyses import queue_table, time_by
from profiler.errors import QueryError
from profiler.figures.palette import CategoryPalette
from profiler.figures.raster import rasterize, row_labels, timeline_rows
from profiler.figures.strip_png import decode_strip_png
from profiler.figures.timefmt import ns_to_axis
from profiler.figures.typed_arrays import decode_typed_array
from profiler.notebook.timeline import HOVER_TRACE_NAME, ranked_names
from tracer import schema as ts


@pytest.fixture(scope="module")
def trace(notebook_synth_trace):
    with profiler.open(notebook_synth_trace) as t:
        yield t


def _expected_frame(trace, start, end, width, *, colour="opcode", expand_dma=False):
    rows = timeline_rows(trace.tracks(), collapse_dma=not expand_dma)
    window = trace.window(start, end, width, tracks=[tid for r in rows for tid in r.track_ids])
    return rows, rasterize(window, rows, CategoryPalette(ranked_names(trace)), colour)


@pytest.mark.parametrize("colour", ["opcode", "engine"])
def test_whole_trace_timeline_is_the_dashboard_raster_of_trace_window(trace, colour):
    t0, t1 = trace.time_range
    fig = trace.timeline(width_px=800, color_by=colour)
    rows, frame = _expected_frame(trace, t0, t1, 800, colour=colour)
    np.testing.assert_array_equal(decode_strip_png(fig.data[0].source), frame.codes)
    assert fig.data[0].dx == pytest.approx(frame.resolution_ns / 1e9)
    assert list(fig.layout.yaxis.ticktext) == row_labels(rows)
    assert list(fig.layout.xaxis.range) == pytest.approx([0.0, ns_to_axis(t1, t0)])
    assert not frame.exact.all(), "the fixture is meant to be drawn from index buckets when zoomed out"
    assert "per-pixel summaries" in fig.layout.title.text
    legend = {d.name for d in fig.data if d.type == "scatter" and d.showlegend and d.mode == "markers"}
    assert legend == set(frame.legend.values())
    lanes = [d.name for d in fig.data if d.type == "scatter" and d.mode == "lines"]     # the dashboard's lanes
    assert {"NC0 busy %: Tensor", "DMA GB/s: NC0", "DMA GB/s: NC1", "HFU %: NC1"} <= set(lanes), lanes
    if colour == "engine":
        assert {"Tensor", "Vector", "DMA"} <= legend


def test_zoomed_timeline_is_exact_and_its_hover_names_every_event_in_place(trace):
    t0, _ = trace.time_range
    start, end = t0 + 2_000_000, t0 + 2_012_000
    fig = trace.timeline(start, end, width_px=400, lanes=False, expand_dma=True)
    rows, frame = _expected_frame(trace, start, end, 400, expand_dma=True)
    assert frame.exact.all()
    np.testing.assert_array_equal(decode_strip_png(fig.data[0].source), frame.codes)
    hover = fig.data[-1]
    assert hover.name == HOVER_TRACE_NAME
    window = trace.window(start, end, 400, tracks=[tid for r in rows for tid in r.track_ids])
    row_of = {tid: i for i, r in enumerate(rows) for tid in r.track_ids}
    events = {(e[dbs.TABLE], e[ts.ID]): e for e in window.events.to_pylist()}
    assert 0 < len(events) <= 1500
    seen = set()
    for x, y, text in zip(hover.x, hover.y, hover.text, strict=True):
        table, ident = re.search(r"(Instruction|DmaPacket|slice) id (\d+)", text).groups()
        e = events[(table, int(ident))]
        seen.add((table, int(ident)))
        assert y == row_of[e[dbs.TRACK_ID]]
        lo = max(e[ts.START_TS], frame.start_ns)
        hi = min(max(e[ts.END_TS], e[ts.START_TS]), frame.end_ns)
        assert ns_to_axis(lo, t0) - 1e-12 <= x <= ns_to_axis(hi, t0) + 1e-12
        assert e[ts.NAME] in text
    assert seen == set(events)
    assert f"{len(events):,} events drawn exactly" in fig.layout.title.text


def test_critical_path_overlay_is_added(trace):
    t0, _ = trace.time_range
    plain = trace.timeline(t0, t0 + 50_000, width_px=300)
    with_path = trace.timeline(t0, t0 + 50_000, width_px=300, critical_path=True)
    assert len(with_path.data) == len(plain.data) + 2
    assert any(d.name == "critical path" for d in with_path.data)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"color_by": "rainbow"}, "color_by must be one of"),
    ({"start_ns": 10, "end_ns": 10}, "empty"),
    ({"start_ns": 5, "end_ns": 2}, "empty"),
    ({"width_px": 0}, "width_px"),
    ({"start_ns": "0"}, "integer"),
    ({"end_ns": 2.5e6}, "integer"),
    ({"start_ns": True}, "integer"),
    ({"start_ns": -(2**63), "end_ns": 0}, "2\\*\\*62"),
    ({"span_levels": 0}, "span_levels must be a positive integer"),
    ({"span_levels": "2"}, "span_levels must be a positive integer"),
    ({"span_levels": True}, "span_levels must be a positive integer"),
    ({"select": "Instruction:3"}, "select must be \\(table, id\\)"),
    ({"select": ("Instruction",)}, "select must be"),
    ({"select": (5, 1)}, "select must be"),
    ({"select": ("Instruction", 10**12)}, "no row with id"),
    ({"select": ("Nope", 1)}, "no table 'Nope'"),
    ({"rows": "/(/"}, "row filter: bad regular expression"),
    ({"rows": "zzz"}, "no timeline row matches the row filter 'zzz'; the rows are: "),
    ({"rows": 3}, "row filter must be text"),
])
def test_bad_timeline_arguments_are_one_line_query_errors(trace, kwargs, message):
    with pytest.raises(QueryError, match=message) as info:
        trace.timeline(**kwargs)
    assert "\n" not in str(info.value)


def test_span_levels_limit_a_threads_rows_in_the_notebook_timeline(tmp_path):
    import json

    import profiler

    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}]
    events += [{"ph": "X", "name": f"f{d}", "pid": 1, "tid": 2, "ts": d, "dur": 100 - 2 * d} for d in range(5)]
    (tmp_path / "t.json").write_text(json.dumps(events))
    with profiler.open(tmp_path / "t.json") as nested:
        every = nested.timeline(width_px=200)
        two = nested.timeline(width_px=200, span_levels=2)
    assert list(every.layout.yaxis.ticktext) == ["main"] + [f"main ›{d}" for d in range(1, 5)]
    assert list(two.layout.yaxis.ticktext) == ["main", "main ›1"]


def test_utilization_figure_adds_up_to_the_exact_busy_time(trace):
    t0, t1 = trace.time_range
    fig = trace.utilization_figure(width_px=400)
    tracks = [r for r in trace.tracks().to_pylist() if r[dbs.KIND] == "engine"]
    assert len(tracks) == 10
    by_name = {d.name: d for d in fig.data}
    assert len(by_name) == len(tracks)
    for r in tracks:
        d = by_name[f"NC{r[dbs.CORE]} busy %: {r[ts.NAME]}"]
        x = decode_typed_array(d.x) if isinstance(d.x, dict) else np.asarray(d.x)
        y = decode_typed_array(d.y) if isinstance(d.y, dict) else np.asarray(d.y)
        res_ns = round((x[1] - x[0]) * 1e9)
        assert res_ns & (res_ns - 1) == 0, "buckets are a power of two wide"
        busy = float(np.sum(y.astype(np.float64) / 100.0) * res_ns)
        assert busy == pytest.approx(trace.busy_ns(r[dbs.TRACK_ID], t0, t1), rel=1e-5)
        assert np.all((y >= 0) & (y <= 100))
    assert fig.layout.yaxis2.range is not None  # one panel per core


def test_utilization_figure_rejects_an_empty_range(trace):
    with pytest.raises(QueryError, match="empty"):
        trace.utilization_figure(100, 100)


def test_summary_figures_show_the_summary_and_breakdowns(trace):
    figs = trace.summary_figures()
    titles = [f.layout.title.text.split(" (the ")[0] for f in figs]  # (less a cut's note)
    assert titles[:4] == ["Engine utilization", "Top opcodes by busy time", "Top operators by busy time",
                          "DMA bytes per queue"]
    summary = trace.summary()
    util = dict(zip(figs[0].data[0].y, figs[0].data[0].x, strict=True))
    assert util == {e: pytest.approx(v["utilization_pct"]) for e, v in summary["engines"].items()}
    top = time_by(trace, "opcode").slice(0, 1).to_pylist()[0]
    assert figs[1].data[0].y[0] == f"{top['engine']} {top['opcode']}"
    assert figs[1].data[0].x[0] == pytest.approx(top["busy_ns"] / 1e9)
    queues = {r["queue_name"]: r["bytes"] for r in queue_table(trace).to_pylist()}
    shown = dict(zip(figs[3].data[0].y, figs[3].data[0].x, strict=True))
    assert shown and all(queues[q] == v for q, v in shown.items())


def test_summary_figures_of_a_window_differ_from_the_whole(trace):
    t0, t1 = trace.time_range
    whole = trace.summary_figures()[0].data[0].x
    part = trace.summary_figures(t0, t0 + (t1 - t0) // 10)[0].data[0].x
    assert list(whole) != list(part)


def test_the_row_filter_picks_the_notebook_timelines_rows_and_lanes(trace):
    """``rows=`` draws the rows it keeps and their lanes; the counter lanes it keeps are redrawn by the widget's
    zooms (``TimelineBuild.counters``)."""
    from profiler.notebook.timeline import build_timeline

    every = build_timeline(trace, width_px=300)
    cores = sorted({r.core for r in every.rows if r.core is not None})
    assert len(cores) >= 2 and {"Tensor", "Vector"} <= {r.label for r in every.rows}
    tensor = build_timeline(trace, width_px=300, rows="tensor")
    assert [(r.core, r.label) for r in tensor.rows] == [(c, "Tensor") for c in cores]
    assert list(tensor.figure.layout.yaxis.ticktext) == [f"NC{c} · Tensor" for c in cores]
    assert tensor.lane_names and all("Vector" not in name for name in tensor.lane_names)
    assert any("Tensor" in name for name in tensor.lane_names)
    one_core = build_timeline(trace, width_px=300, rows=f"NC{cores[1]}")
    assert [r.label for r in one_core.rows] == [r.label for r in every.rows if r.core == cores[1]]
    no_dma = build_timeline(trace, width_px=300, rows="-DMA")
    assert [r.label for r in no_dma.rows] == [r.label for r in every.rows if r.kind != "dma_queue"]
    assert not any("DMA" in name for name in no_dma.lane_names)
    assert list(trace.timeline(width_px=300, rows=f"/^(Tensor|Vector)$/, -NC{cores[0]}").layout.yaxis.ticktext) \
        == [f"NC{c} · {e}" for c in cores[1:] for e in ("Tensor", "Vector")]


def test_the_notebook_timeline_draws_an_events_dependency_chain(trace):
    from profiler.analyses import chain_to

    last = trace.sql("SELECT id FROM Instruction ORDER BY end_ts DESC, id LIMIT 1").fetchall()[0][0]
    fig = trace.timeline(width_px=400, chain=("Instruction", last))
    names = [d.name for d in fig.data]
    assert f"chain to Instruction {last}" in names and "critical path" not in names
    segments = next(d for d in fig.data if d.name == f"chain to Instruction {last}")
    assert len([x for x in segments.x if x is not None]) >= 2
    assert chain_to(trace, "Instruction", last).num_rows >= 1
    with pytest.raises(QueryError, match=r"chain must be \(table, id\)"):
        trace.timeline(chain="Instruction:5")
    with pytest.raises(QueryError, match="leads to instructions and DMA packets"):
        trace.timeline(chain=("Span", 1))


def test_a_static_timelines_critical_path_is_drawn_at_its_resolution(mlp_sample):
    """Every step went into the figure as it was (a 769,234-step path made a 119 MB HTML file no browser opened):
    steps of a row closer than a pixel now merge, as in the dashboard."""
    import profiler
    from profiler.analyses import critical_path

    with profiler.open(mlp_sample) as t:
        steps = critical_path(t).num_rows
        fig = t.timeline(width_px=8, critical_path=True)
    segments = next(d for d in fig.data if d.name == "critical path")
    drawn = sum(1 for x in segments.x if x is None)      # one None after each segment
    rows = len({y for y in segments.y if y is not None})
    assert steps > 100 and drawn <= rows * 9 < steps
    assert any("steps" in (text or "") for text in segments.text)   # merged ones say how many
