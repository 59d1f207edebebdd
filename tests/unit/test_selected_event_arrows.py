"""The selected event's dependency arrows (profiler/figures/selected_event.py): geometry, colours and dashes, what is
left out, and the arrows of a real trace's instruction through the timeline's logic."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from dashboard import timeline_logic as tl
from dashboard import timeline_picks as picks
from dashboard import timeline_state as tls
from profiler import db_schema as dbs
from profiler.figures import selected_event as fa
from tests.browser.trace_factory import write_kernel_trace
from tracer import schema as ts

ORIGIN = 1_000_000
ROWS = [[10], [11], [12, 13]]   # row 2 draws two tracks (a collapsed DMA row)


def _ends(rows: list[dict]) -> pa.Table:
    full = [{dbs.TABLE: "Instruction", ts.ID: 0, dbs.TRACK_ID: None, ts.START_TS: None, ts.END_TS: None,
             ts.NAME: "X", ts.DEPENDENCY_TYPE: "flow", ts.GAP_TIME: 0, **r} for r in rows]
    return pa.Table.from_pylist(full, schema=dbs.FLOW_ENDS)


def _points(path: str) -> list[tuple[float, float]]:
    """The (x, y) pairs of an SVG path of M / C / L commands."""
    return [(float(x), float(y)) for x, y in re.findall(r"(-?[\d.e+-]+),(-?[\d.e+-]+)", path)]


def _ax(ns: int) -> float:
    return (ns - ORIGIN) / 1e9


SELECTED = {dbs.TRACK_ID: 11, "start_ns": ORIGIN + 5_000, "end_ns": ORIGIN + 6_000}


def test_arrows_run_from_predecessor_end_to_start_and_from_end_to_successor_start():
    preds = _ends([{ts.ID: 1, dbs.TRACK_ID: 10, ts.START_TS: ORIGIN + 1_000, ts.END_TS: ORIGIN + 4_000}])
    succs = _ends([{ts.ID: 2, dbs.TRACK_ID: 13, ts.START_TS: ORIGIN + 9_000, ts.END_TS: ORIGIN + 9_500,
                    ts.DEPENDENCY_TYPE: "anti"}])
    shapes = fa.flow_arrow_shapes(ROWS, SELECTED, (preds, succs), ORIGIN)
    assert [s["name"] for s in shapes] == ["waited for"] * 2 + ["waited on it"] * 2
    into, into_head, out, out_head = shapes
    pts = _points(into["path"])
    assert pts[0] == pytest.approx((_ax(ORIGIN + 4_000), 0)) and pts[-1] == pytest.approx((_ax(ORIGIN + 5_000), 1))
    # it leaves and arrives horizontally: the control points share the ends' rows
    assert pts[1][1] == 0 and pts[2][1] == 1 and pts[1][0] > pts[0][0] and pts[2][0] < pts[-1][0]
    assert into_head["xanchor"] == pytest.approx(_ax(ORIGIN + 5_000)) and into_head["yanchor"] == 1
    assert into_head["xsizemode"] == into_head["ysizemode"] == "pixel"
    assert into["line"]["color"] == into_head["fillcolor"] == fa.PRED_COLOUR and into["line"]["dash"] == "solid"
    pts = _points(out["path"])
    assert pts[0] == pytest.approx((_ax(ORIGIN + 6_000), 1)) and pts[-1] == pytest.approx((_ax(ORIGIN + 9_000), 2))
    assert out["line"]["color"] == fa.SUCC_COLOUR and out["line"]["dash"] == "dash"     # write after read
    assert out_head["xanchor"] == pytest.approx(_ax(ORIGIN + 9_000)) and out_head["yanchor"] == 2
    # the head's triangle points right from its tip: its other corners lie to the left
    head = _points(out_head["path"])
    assert head[0] == (0, 0) and all(x < 0 for x, _y in head[1:])


def test_touching_events_get_an_s_curve_and_same_row_events_an_arc_above_the_row():
    pred = _ends([{dbs.TRACK_ID: 10, ts.START_TS: ORIGIN + 4_000, ts.END_TS: ORIGIN + 5_000}])   # no gap
    curve = fa.flow_arrow_shapes(ROWS, SELECTED, (pred, None), ORIGIN)[0]
    pts = _points(curve["path"])
    # half the shorter event (1,000 ns) out and back: not a vertical line along the events' edges
    assert pts[1][0] - pts[0][0] == pytest.approx(500e-9) and pts[-1][0] - pts[2][0] == pytest.approx(500e-9)
    same = _ends([{dbs.TRACK_ID: 11, ts.START_TS: ORIGIN + 1_000, ts.END_TS: ORIGIN + 2_000,
                   ts.DEPENDENCY_TYPE: "output"}])
    arc = fa.flow_arrow_shapes(ROWS, SELECTED, (same, None), ORIGIN)[0]
    pts = _points(arc["path"])
    assert pts[0][1] == pts[-1][1] == 1 and pts[1][1] == pts[2][1] == pytest.approx(1 - fa.SAME_ROW_ARC)
    assert arc["line"]["dash"] == "dot"


def test_hidden_rows_missing_times_and_beyond_the_limit_get_no_arrow():
    preds = _ends([
        {dbs.TRACK_ID: 99, ts.START_TS: ORIGIN, ts.END_TS: ORIGIN + 10},      # a track no row draws
        {dbs.TRACK_ID: None, ts.START_TS: None, ts.END_TS: None},             # an end the trace does not place
        *({dbs.TRACK_ID: 12, ts.START_TS: ORIGIN + k, ts.END_TS: ORIGIN + k + 10} for k in range(5)),
    ])
    shapes = fa.flow_arrow_shapes(ROWS, SELECTED, (preds, None), ORIGIN, limit=5)
    # the first five rows are looked at: two of them cannot be drawn
    assert len(shapes) == 2 * 3
    assert fa.flow_arrow_shapes(ROWS, {**SELECTED, dbs.TRACK_ID: 99}, (preds, None), ORIGIN) == []
    assert fa.flow_arrow_shapes(ROWS, {**SELECTED, "start_ns": None}, (preds, None), ORIGIN) == []
    assert fa.flow_arrow_shapes(ROWS, SELECTED, (None, None), ORIGIN) == []


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    import profiler

    t = profiler.open(write_kernel_trace(tmp_path_factory.mktemp("arrows") / "k.trace", iterations=40))
    yield t
    t.close()


def _selected(trace, opcode="MATMUL"):
    ev = trace.search(opcode, limit=1).to_pylist()[0]
    fields = trace.event("Instruction", ev["id"])
    return {"table": "Instruction", "id": ev["id"], dbs.TRACK_ID: fields[dbs.TRACK_ID],
            "start_ns": fields["start_ts"], "end_ns": fields["end_ts"]}


def _named(shapes):
    """The names of the named shapes (the outline, the arrows), in order; plotly Shape objects or dicts."""
    plain = [s.to_plotly_json() if hasattr(s, "to_plotly_json") else s for s in shapes]
    return [s.get("name") for s in plain if s.get("name")]


def test_a_selected_instructions_arrows_join_it_to_what_it_waited_for(trace):
    """Through the timeline's logic: selecting an instruction patches its outline and one arrow per dependency into
    the drawn figure, from each predecessor's row and end (the trace factory's MATMUL waits for its LDWEIGHTS) to
    its start."""
    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=1000)
    assert _named(first.figure.layout.shapes) == []   # nothing selected: the row separators only
    selected = _selected(trace)
    selection = picks.Selection.from_store(trace, selected)
    preds, succs = trace.flows("Instruction", selected["id"])
    assert preds.num_rows >= 1
    patch = picks.decoration_layout(first.view, selection)
    assert list(patch) == ["shapes"]     # a layout change: nothing fetched, nothing else redrawn
    shapes = patch["shapes"]
    assert _named(shapes)[0] == "selected"
    arrows = [s for s in shapes if s.get("name") == "waited for" and "xanchor" not in s]
    assert len(arrows) == preds.num_rows
    labels = list(first.figure.layout.yaxis.ticktext)
    origin = first.view["origin"]
    for arrow, pred in zip(arrows, preds.to_pylist(), strict=True):
        pts = _points(arrow["path"])
        assert pts[-1] == pytest.approx(((selected["start_ns"] - origin) / 1e9, labels.index("Tensor")))
        assert pts[0][0] == pytest.approx((pred[ts.END_TS] - origin) / 1e9)
    assert len([s for s in shapes if s.get("name") == "waited on it" and "xanchor" not in s]) == min(
        succs.num_rows, fa.MAX_ARROWS)
    # the separators are the figure's own: the patch replaces its shapes without losing them
    separators = [s.to_plotly_json() for s in first.figure.layout.shapes]
    assert [s for s in shapes if not s.get("name")] == separators
    # deselected (a store that names nothing): the outline and arrows go; before a figure, nothing to patch
    assert picks.decoration_layout(first.view, None)["shapes"] == separators
    assert picks.decoration_layout(None, selection) is None
    assert picks.decoration_layout({"rows": "x"}, selection) is None


def test_every_rebuilt_figure_keeps_the_selection_drawn(trace):
    """A new colour mode or a DMA expansion rebuilds the figure: the outline and arrows are in it, on the rows it
    has; so is the first figure when the selection came before it (a link, or a search the URL runs)."""
    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=1000)
    selection = picks.Selection.from_store(trace, _selected(trace))
    for options in (tls.TimelineOptions("engine"), tls.TimelineOptions(expand_dma=True)):
        up = tl.update_timeline(trace, "t0", state=first.state, trigger="options", width_px=1000, options=options,
                                selection=selection)
        assert up.figure is not None
        names = _named(up.figure.layout.shapes)
        assert names[0] == "selected" and "waited for" in names
    early = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=1000, selection=selection)
    assert "waited for" in _named(early.figure.layout.shapes)
    assert early.state["selected"] == ["Instruction", selection.id]


def test_a_search_before_the_first_figure_opens_it_at_the_match(trace):
    """?search= selects its first match as the page opens, maybe before the timeline is drawn: the first figure
    is then drawn around the match, not over the whole trace."""
    ev = _selected(trace, "ACTIVATE")
    nav = tl.update_timeline(trace, "t0", state=None, trigger="nav", width_px=1000,
                             nav={"start_ns": ev["start_ns"], "end_ns": ev["end_ns"]})
    v0, v1 = nav.state["view"]
    assert v0 <= ev["start_ns"] < ev["end_ns"] <= v1 and (v1 - v0) < (trace.time_range[1] - trace.time_range[0]) / 4


def test_broken_selections_draw_nothing_and_never_raise(trace):
    assert picks.Selection.from_store(trace, None) is None
    assert picks.Selection.from_store(trace, {"table": "Instruction", "id": "x"}) is None
    ghost = picks.Selection.from_store(trace, {"table": "Instruction", "id": 10**12, dbs.TRACK_ID: 1,
                                               "start_ns": 0, "end_ns": 1})
    assert ghost.flows() == (None, None)        # an event the trace does not have: no arrows, no exception
    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=1000)
    patch = picks.decoration_layout(first.view, ghost)
    assert not any(n in ("waited for", "waited on it") for n in _named(patch["shapes"]))


def test_a_notebook_timeline_outlines_the_selected_event_and_draws_its_arrows(trace):
    """``Trace.timeline(select=...)`` draws the dashboard's shapes: the outline on the event's row and one arrow
    per dependency, ending at its start."""
    selected = _selected(trace)
    preds, succs = trace.flows("Instruction", selected["id"])
    fig = trace.timeline(selected["start_ns"] - 2_000, selected["end_ns"] + 2_000, width_px=400,
                         select=("Instruction", selected["id"]))
    names = _named(fig.layout.shapes)
    assert names[0] == "selected"
    assert names.count("waited for") == 2 * preds.num_rows and names.count("waited on it") == 2 * min(
        succs.num_rows, fa.MAX_ARROWS)
    origin = trace.time_range[0]
    outline = next(s for s in fig.layout.shapes if s.name == "selected")
    assert outline.x0 == pytest.approx((selected["start_ns"] - origin) / 1e9)
    labels = list(fig.layout.yaxis.ticktext)
    assert outline.y0 == labels.index("Tensor") - 0.5
    plain = trace.timeline(selected["start_ns"] - 2_000, selected["end_ns"] + 2_000, width_px=400)
    assert _named(plain.layout.shapes) == []
