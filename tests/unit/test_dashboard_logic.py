"""The dashboard's callback logic as plain functions, on a real ingested trace (no server, no browser)."""

from __future__ import annotations

import json
import warnings

import dash
import numpy as np
import plotly.graph_objects as go
import pytest

from dashboard import details as det
from dashboard import search_logic as srch
from dashboard import sql_logic
from dashboard import timeline_logic as tl
from dashboard import timeline_picks as picks
from dashboard import timeline_state as tls
from profiler.figures import lanes as lanes_mod
from profiler.figures import viewport as vp
from profiler.figures.palette import decode
from profiler.figures.strip_png import decode_strip_png
from profiler.figures.timefmt import format_duration
from profiler.selection import selection_summary
from tests.browser.trace_factory import write_kernel_trace

WIDTH = 1000


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    import profiler

    t = profiler.open(write_kernel_trace(tmp_path_factory.mktemp("logic") / "k.trace", iterations=200))
    yield t
    t.close()


# -- the level-of-detail loop ------------------------------------------------------------------------------------
def test_first_view_is_a_whole_figure_then_zooms_are_small_patches(trace):
    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH)
    assert isinstance(first.figure, go.Figure) and first.fetched
    labels = list(first.figure.layout.yaxis.ticktext)
    assert labels[:5] == ["Tensor", "Vector", "Scalar", "GpSimd", "Sync"]
    t0, t1 = trace.time_range
    assert first.state["view"] == [t0, t1]

    # A pan inside the buffer at the same resolution fetches nothing: the view longer than the trace is slid
    # back into it, so only the range goes back.
    span = t1 - t0
    buf = first.state["buffer"]
    pan = (t0 + span // 50 - t0) / 1e9
    still = tl.update_timeline(trace, "t0", state=first.state, trigger="relayout", width_px=WIDTH,
                               relayout={"xaxis.range[0]": pan, "xaxis.range[1]": pan + span / 1e9})
    assert still.figure is None and not still.fetched and still.state["buffer"] == buf
    assert still.changes == {"data": {}, "layout": {"xaxis.range": [0.0, span / 1e9]}}
    assert still.draw_payload()["kind"] == "update" and still.graph_output() is not dash.no_update
    assert still.state["lanes"] == first.state["lanes"] and still.state["legend_key"] == first.state["legend_key"]
    # a zoom the drawn frame serves still updates the status line's span (it kept the old one)
    for factor in (0.97, 0.94, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6):   # a zoom at the same resolution
        narrower = tl.update_timeline(trace, "t0", state=first.state, trigger="relayout", width_px=WIDTH,
                                      relayout={"xaxis.range[0]": 0.0, "xaxis.range[1]": span * factor / 1e9})
        if not narrower.fetched:
            break
    assert not narrower.fetched and narrower.status != first.status
    assert narrower.status.startswith(f"view {format_duration(narrower.state['view'][1] - t0)} · ")
    assert narrower.status.split(" · ", 1)[1] == first.status.split(" · ", 1)[1]
    # ... and the next fetch after it still updates every lane.
    after = tl.update_timeline(trace, "t0", state=still.state, trigger="relayout", width_px=WIDTH,
                               relayout={"xaxis.range[0]": 0.0, "xaxis.range[1]": span / 64 / 1e9})
    assert after.fetched and sorted(after.changes["data"]) == list(range(1 + len(first.state["lanes"])))
    assert after.legend is dash.no_update or after.state["legend_key"] != first.state["legend_key"]

    # Zooming in 64x: only the changed arrays, finer codes, one byte per pixel per row, a few tens of KB; the
    # browser already shows the range it asked for, so no range comes back.
    zoom = tl.update_timeline(trace, "t0", state=first.state, trigger="relayout", width_px=WIDTH,
                              relayout={"xaxis.range[0]": 0.0, "xaxis.range[1]": span / 64 / 1e9})
    assert zoom.figure is None and zoom.fetched and zoom.changes["layout"] == {}
    strips = zoom.changes["data"][0]
    codes = decode_strip_png(strips["source"])
    assert codes.shape[0] == len(labels) and codes.shape[1] <= vp.PREFETCH_FACTOR * WIDTH + 2
    assert strips["dx"] < first.figure.data[0].dx / 32
    # the strips and every lane; the last trace is the invisible one that makes Box Select available
    assert first.figure.data[-1].name == "range select" and first.figure.layout.selectdirection == "h"
    assert set(zoom.changes["data"]) == set(range(len(first.figure.data) - 1))
    payload = zoom.draw_payload()
    assert payload["kind"] == "update" and payload["seq"] == first.state["seq"] + 1
    assert len(json.dumps(payload)) < 200_000
    # The same changes as a dcc.Graph Patch (the compare page).
    ops = {tuple(op["location"]): op["params"]["value"] for op in zoom.graph_output().to_plotly_json()["operations"]}
    assert ops[("data", 0, "source")] == strips["source"]
    # In this narrow view the Tensor row shows exact MATMUL / LDWEIGHTS bars.
    slots, _ = decode(codes[0])
    assert (slots >= 0).any() and zoom.view["events"] is not None
    assert {"MATMUL", "LDWEIGHTS"} <= set(tl.hover_strings(zoom.view["events"], "name"))
    events = zoom.view["events"]       # strings travel once, as a table the columns index
    assert len(events["strings"]) == len(set(events["strings"])) < len(events["name"])
    tables = tl.hover_strings(events, "table")
    assert len(tables) == len(events["id"]) and "Instruction" in tables
    # Lanes are matched by name: busy %, DMA throughput, HFU and the Counter lanes are drawn; a lane series the
    # figure has but this zoom lacks is emptied rather than shifting the others.
    names = [t.name for t in first.figure.data[1:-1]]   # (the last: the range select trace)
    assert first.state["lanes"] == names and {"DMA GB/s: DMA", "HFU %: HFU", "sbuf_usage_bytes: max"} <= set(names)
    stale = {**first.state, "lanes": ["gone: lane", *names]}
    shifted = tl.update_timeline(trace, "t0", state=stale, trigger="relayout", width_px=WIDTH,
                                 relayout={"xaxis.range[0]": 0.0, "xaxis.range[1]": span / 64 / 1e9})
    assert shifted.changes["data"][1] == lanes_mod.EMPTY_LANE
    assert shifted.changes["data"][2] == zoom.changes["data"][1]
    # A follower graph (set_range) gets the range even for its own kind of relayout.
    follow = tl.update_timeline(trace, "t0", state=first.state, trigger="relayout", width_px=WIDTH, set_range=True,
                                relayout={"xaxis.range[0]": 0.0, "xaxis.range[1]": span / 64 / 1e9})
    assert follow.changes["layout"]["xaxis.range"] == pytest.approx([0.0, span / 64 / 1e9], abs=1e-9)

    reset = tl.update_timeline(trace, "t0", state=zoom.state, trigger="reset", width_px=WIDTH)
    assert reset.state["view"] == [t0, t1]
    assert tl.update_timeline(trace, "t0", state=zoom.state, trigger="relayout", relayout={"autosize": True},
                              width_px=WIDTH) is None


def test_after_a_hover_sized_window_a_pan_or_zoom_in_reads_its_window_in_one_query(trace, monkeypatch):
    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH)
    assert not first.state["few_events"]                       # the whole trace: too many events to list
    calls = []
    window = type(trace).window

    def counting_window(self, *args, **kwargs):
        calls.append(kwargs.get("attributes"))
        return window(self, *args, **kwargs)

    monkeypatch.setattr(type(trace), "window", counting_window)
    near = tl.update_timeline(trace, "t0", state=first.state, trigger="relayout", width_px=WIDTH,
                              relayout={"xaxis.range[0]": 0.0, "xaxis.range[1]": 2e-6})
    assert near.state["few_events"] and near.view["events"] is not None
    assert calls == [False, True]                              # no hint yet: names first, then the attributes
    calls.clear()
    span = 2e-6
    panned = tl.update_timeline(trace, "t0", state=near.state, trigger="relayout", width_px=WIDTH,
                                relayout={"xaxis.range[0]": 3 * span, "xaxis.range[1]": 4 * span})
    assert panned.fetched and calls == [True]                  # the hint: one query with the attributes
    events = panned.view["events"]
    assert events is not None and any(tl.hover_strings(events, "source"))   # hover still lists source lines
    calls.clear()
    out = tl.update_timeline(trace, "t0", state=panned.state, trigger="relayout", width_px=WIDTH,
                             relayout={"xaxis.range[0]": 0.0, "xaxis.range[1]": 1e-3})
    assert out.fetched and calls[0] is False                   # zooming out: no guess


def test_option_changes_rebuild_and_other_traces_state_is_ignored(trace):
    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH)
    expanded = tl.update_timeline(trace, "t0", state=first.state, trigger="options", width_px=WIDTH,
                                  options=tls.TimelineOptions("engine", expand_dma=True))
    assert isinstance(expanded.figure, go.Figure)
    assert "qSyncIO0" in list(expanded.figure.layout.yaxis.ticktext)
    assert {item["name"] for item in expanded.legend} <= {"Tensor", "Vector", "Scalar", "GpSimd", "Sync", "DMA",
                                                          "Span"}
    foreign = {**first.state, "trace": "t9"}
    again = tl.update_timeline(trace, "t0", state=foreign, trigger="relayout", width_px=WIDTH,
                               relayout={"xaxis.range[0]": 0, "xaxis.range[1]": 1e-6})
    assert isinstance(again.figure, go.Figure)


def test_span_levels_option_rebuilds_with_fewer_rows(tmp_path):
    """A nested Chrome trace: every level of its thread is a row; limiting the levels rebuilds the figure with the
    first ones only, and a hostile value falls back to all of them."""
    import profiler

    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}]
    events += [{"ph": "X", "name": f"f{d}", "pid": 1, "tid": 2, "ts": d, "dur": 100 - 2 * d} for d in range(6)]
    (tmp_path / "t.json").write_text(json.dumps(events))
    with profiler.open(tmp_path / "t.json") as trace:
        first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH)
        assert list(first.figure.layout.yaxis.ticktext) == ["main"] + [f"main ›{d}" for d in range(1, 6)]
        two = tls.TimelineOptions.parse("opcode", False, False, 2)
        limited = tl.update_timeline(trace, "t0", state=first.state, trigger="options", width_px=WIDTH, options=two)
        assert isinstance(limited.figure, go.Figure) and limited.state["span_levels"] == 2
        assert list(limited.figure.layout.yaxis.ticktext) == ["main", "main ›1"]
    for hostile in ("all", "2", True, 5, -1, None, 10**9):
        assert tls.TimelineOptions.parse("opcode", False, False, hostile).span_levels is None
    assert tls.clean_state({**first.state, "span_levels": "DROP"}, "t0")["span_levels"] is None


def test_hostile_width_is_bounded(trace):
    up = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=10**9)
    assert up.state["width"] == tls.MAX_WIDTH_PX
    assert tls.clamp_width("nonsense") == tls.DEFAULT_WIDTH_PX


def test_nav_focuses_on_an_event_and_click_finds_it(trace):
    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH)
    t0 = trace.time_range[0]
    mm_start, mm_end = t0 + 10 * 1450 + 490, t0 + 10 * 1450 + 790      # iteration 10's MATMUL
    nav = tl.update_timeline(trace, "t0", state=first.state, trigger="nav", width_px=WIDTH,
                             nav={"start_ns": mm_start, "end_ns": mm_end})
    v0, v1 = nav.state["view"]
    assert v0 < mm_start < mm_end < v1 and v1 - v0 < 10 * (mm_end - mm_start)
    row = list(first.figure.layout.yaxis.ticktext).index("Tensor")
    click = {"points": [{"curveNumber": 0, "x": (mm_start + 100 - t0) / 1e9, "y": row}]}
    picked = picks.event_at_click(trace, click, nav.view, nav.state)
    assert picked["table"] == "Instruction" and picked["start_ns"] == mm_start
    assert trace.event("Instruction", picked["id"])["opcode"] == "MATMUL"
    assert picks.event_at_click(trace, {"points": [{"x": "bad", "y": 0}]}, nav.view, nav.state) is None
    assert picks.event_at_click(trace, {"points": [{"x": 0.0, "y": 999}]}, nav.view, nav.state) is None


def test_details_panel_lists_fields_and_dependencies(trace):
    mm = trace.search("MATMUL", limit=1).to_pylist()[0]
    panel = det.event_details(trace, mm["table_name"], mm["id"])
    text = str(panel.to_plotly_json())
    assert "kernel.py:11" in text and "LDWEIGHTS" in text and "ACTIVATE" in text
    assert "Waited for" in text
    bad = det.event_details(trace, "Instruction", 10**12)
    assert "no row" in str(bad.children)


def test_jump_links_round_trip_and_reject_garbage():
    idx = det.jump_index("Instruction", 7, 100, 200, 3)
    assert det.parse_jump_index(idx) == {"table": "Instruction", "id": 7, "start_ns": 100, "end_ns": 200,
                                         "track_id": 3}
    for bad in (None, 5, "x", "a:b:c:d:e", ":1:2:3:4", "T::1:2:3", "T:1:2:3:4:5", "T:" + "9" * 300):
        assert det.parse_jump_index(bad) is None


def test_search_and_stepping(trace):
    result = srch.run_search(trace, "activate")
    assert result.matches and all(m["name"] == "ACTIVATE" for m in result.matches)
    starts = [m["start_ns"] for m in result.matches]
    assert starts == sorted(starts)
    n = len(result.matches)
    assert srch.step_match(result.matches, -1, 1)[0] == 0
    assert srch.step_match(result.matches, -1, -1)[0] == n - 1
    assert srch.step_match(result.matches, n - 1, 1)[0] == 0
    assert srch.step_match([], 0, 1) is None
    assert srch.run_search(trace, "   ").matches == []
    assert "no match" in srch.run_search(trace, "NO_SUCH_OPCODE").message
    ranked = srch.names_by_time(trace)
    assert ranked[0] in {"MATMUL", "attn", "mlp"} and "MATMUL" in ranked
    # a match picked from the results list is "k of n" (the list's jump link selects it by table and id)
    third = result.matches[2]
    assert srch.match_of(result.matches, {"table": third["table"], "id": third["id"], "start_ns": 0}) == \
        (2, f"match 3 of {n:,}")
    assert srch.match_of(result.matches, {"table": "Instruction", "id": -5}) is None
    assert srch.match_of(result.matches, {"table": None, "id": 1}) is None and srch.match_of(None, {}) is None
    assert all(m["track"] for m in result.matches)  # the row each is on tells equal-looking matches apart


def test_a_cut_search_says_its_count_is_a_lower_bound(trace, monkeypatch):
    # "match 1 of 500" when there were thousands: stepping stopped at the 500th without a word
    full = srch.run_search(trace, "activate")
    monkeypatch.setattr(srch, "SEARCH_LIMIT", 3)
    cut = srch.run_search(trace, "activate")
    assert len(full.matches) > 3 and len(cut.matches) == 3
    assert cut.message == "3+ matches (the first 3 in time are listed)"
    assert srch.step_match(cut.matches, -1, 1)[2] == "match 1 of 3+"
    assert srch.match_of(cut.matches, cut.matches[1])[1] == "match 2 of 3+"
    assert srch.step_match(full.matches, -1, 1)[2] == f"match 1 of {len(full.matches):,}"


def test_selection_summary_is_exact_for_engines(trace):
    t0 = trace.time_range[0]
    s = selection_summary(trace, t0, t0 + 1450)        # the first iteration
    tensor = next(e for e in s.engines if e[0] == "Tensor")
    assert tensor[2] == 60 + 300 and tensor[3] == pytest.approx(360 / 1450)
    assert s.top_names and s.top_names[0][0] in {"MATMUL", "ACTIVATE", "TENSOR_TENSOR"}
    assert picks.selection_range({"range": {"x": [2e-6, 1e-6]}}, {"origin": 10, "view": [0, 5]}) == (1010, 2010)
    assert picks.selection_range(None, {"origin": 0, "view": [3, 9]}) == (3, 9)
    assert picks.selection_range(None, None) is None


# -- SQL ----------------------------------------------------------------------------------------------------
def test_sql_rows_limit_and_js_safe_values(trace):
    res = sql_logic.run_query(trace, "SELECT id, start_ts, opcode FROM Instruction ORDER BY id", row_limit=5)
    assert res.error is None and len(res.rows) == 5 and res.truncated
    assert res.columns == ["id", "start_ts", "opcode"]
    big = sql_logic.run_query(trace, "SELECT 9007199254740993 AS big, 1 AS big, 'x'::BLOB AS b")
    row = dict(zip(big.columns, (big.rows[0][f] for f in big.fields), strict=True))
    assert row["big"] == "9007199254740993" and row["b"] == "78"
    assert len(big.columns) == len(set(big.columns)) == 3
    # BIT and INTERVAL as DuckDB writes them (their Arrow forms: padded bytes, a struct)
    kinds = sql_logic.run_query(trace, "SELECT bit '0101' AS bt, INTERVAL 90 MINUTE AS i")
    assert [kinds.rows[0][f] for f in kinds.fields] == ["0101", "01:30:00"]


def test_sql_page_fetches_no_more_than_the_row_limit(trace, monkeypatch):
    """The result beyond the row limit is never built in the server's memory (a 10^9-row query is answered from
    its first rows)."""
    asked = []
    real = type(trace).sql_arrow

    def spy(self, query, timeout_s=30.0, params=None, **caps):
        asked.append(caps)
        return real(self, query, timeout_s, params, **caps)

    monkeypatch.setattr(type(trace), "sql_arrow", spy)
    res = sql_logic.run_query(trace, "SELECT range AS r FROM range(1000000000)", row_limit=7)
    assert res.error is None and len(res.rows) == 7 and res.truncated and "row limit" in res.note
    assert asked == [{"max_rows": 8, "max_bytes": sql_logic.MAX_RESULT_BYTES, "text_types": ("BIT", "INTERVAL")}]


@pytest.mark.parametrize("query", ["", "SELEC 1", "SELECT * FROM no_such_table", "x" * 200_000])
def test_sql_errors_are_one_line(trace, query):
    res = sql_logic.run_query(trace, query)
    assert res.error and "\n" not in res.error and not res.rows


def test_sql_limits_are_bounded():
    assert sql_logic.bounded("1e9", 10, 1, 100) == 100
    assert sql_logic.bounded(float("nan"), 10, 1, 100) == 10
    assert sql_logic.bounded(None, 10, 1, 100) == 10


def test_rasterised_codes_match_the_engine_busy_time(trace):
    """The busy shading the browser gets agrees with the database's exact busy time (within a shade)."""
    t0, t1 = trace.time_range
    up = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH)
    codes = decode_strip_png(up.figure.data[0].source)
    _slots, shade = decode(codes[0])
    frac = np.where(shade < 0, 0, (np.minimum(shade, 6) + 0.5) / 7).mean()
    exact = trace.busy_ns(int(trace.tracks().to_pylist()[0]["track_id"]), t0, t1) / (t1 - t0)
    assert abs(frac - exact) < 0.15


def test_a_link_to_a_view_opens_at_that_view(trace):
    """The URL's start and end (ns) give the first view; the page's link carries the current view."""
    from dashboard.pages.timeline import url_view

    t0, t1 = trace.time_range
    a, b = t0 + (t1 - t0) // 4, t0 + (t1 - t0) // 2
    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH, initial_view=(a, b))
    assert first.state["view"] == [a, b]
    assert tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH,
                              initial_view=("x", b)).state["view"] == [t0, t1]      # malformed: the whole trace
    far = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH, initial_view=(a, t1 + 10**12))
    assert t0 <= far.state["view"][0] < far.state["view"][1] <= t1                 # cut to the trace
    later = tl.update_timeline(trace, "t0", state=first.state, trigger="size", width_px=WIDTH, initial_view=(t0, t1))
    assert later.state["view"] == [a, b]                                           # only the first view
    link = tls.view_link("?trace=t0&b=t1", first.state)
    assert url_view(link) == (a, b) and "trace=t0" in link and "b=t1" in link
    assert url_view("?trace=t0&start=5") is None and url_view("?start=9&end=3") is None
    assert url_view("?start=1e3&end=2000") is None and url_view(None) is None
    assert tls.view_link("?trace=t0", None) is None


def test_a_link_to_a_view_keeps_its_options_and_selected_event(trace):
    """The link carries the colour mode, DMA expansion, critical path, span levels and the selected event (each
    only when not the default); opening it sets the same controls and selects the same event."""
    from urllib.parse import parse_qs

    from dashboard import links
    from dashboard.pages.timeline import options_from_url

    options = tls.TimelineOptions("layer", True, True, 4)
    mm = trace.search("MATMUL", limit=1).to_pylist()[0]
    selected = picks.linked_selection(trace, f"Instruction:{mm['id']}")
    fields = trace.event("Instruction", mm["id"])
    assert selected == {"table": "Instruction", "id": mm["id"], "track_id": fields["track_id"],
                        "start_ns": fields["start_ts"], "end_ns": fields["end_ts"]}
    up = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH, options=options,
                            selection=picks.Selection.from_store(trace, selected))
    # a stale value of the URL the page was opened with is replaced, others are kept
    link = tls.view_link("?trace=t0&colour=engine&select=Instruction:1", up.state)
    query = {k: v[0] for k, v in parse_qs(link.lstrip("?")).items()}
    assert query == {"trace": "t0", "start": str(up.state["view"][0]), "end": str(up.state["view"][1]),
                     "colour": "layer", "dma": "expanded", "critical": "on", "levels": "4",
                     "select": f"Instruction:{mm['id']}"}
    assert options_from_url(query) == options
    assert picks.linked_selection(trace, query["select"]) == selected
    # the last search that found something travels too
    with_search = tls.view_link("?trace=t0&search=old", {**up.state, "search": '"kernel.py:11"'})
    assert parse_qs(with_search.lstrip("?"))["search"] == ['"kernel.py:11"']
    # defaults are left out of the link
    plain = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH)
    assert set(parse_qs(tls.view_link("?trace=t0&levels=2", plain.state).lstrip("?"))) == {"trace", "start", "end"}
    # hostile or broken values fall back to the defaults / select nothing
    assert options_from_url({"colour": "<script>", "dma": "1", "critical": "yes", "levels": "-3"}) \
        == tls.TimelineOptions()
    assert options_from_url({"levels": "5"}).span_levels is None           # not an offered choice
    for bad in ("Instruction", "Instruction:x", "Flow:1", ":5", "Instruction:99999999999", "a" * 200, None, 7):
        assert picks.linked_selection(trace, bad) is None, bad
    assert links.parse_select("DmaPacket:12") == ("DmaPacket", 12)


def test_a_slices_details_name_the_slices_it_lies_in(tmp_path):
    """A nested Chrome trace: a slice's details list its enclosing slices, outermost first, each a jump link; a
    top-level slice has none; a hostile parent cycle ends after MAX_ANCESTORS."""
    import profiler
    from tracer import TraceWriter
    from tracer import schema as ts

    events = [{"ph": "X", "name": n, "pid": 1, "tid": 2, "ts": d, "dur": 100 - 2 * d}
              for d, n in enumerate(["step", "fwd", "linear", "addmm"])]
    (tmp_path / "t.json").write_text(json.dumps(events))
    with profiler.open(tmp_path / "t.json") as trace:
        ids = dict(trace.sql("SELECT name, id FROM slice").fetchall())
        panel = det.event_details(trace, "slice", ids["addmm"])
        line = [c for c in panel.children if getattr(c, "id", None) == "details-ancestors"]
        assert len(line) == 1
        links = [c for c in line[0].children if not isinstance(c, str)]
        assert [b.children for b in links] == ["step", "fwd", "linear"]
        target = det.parse_jump_index(links[0].id["index"])
        assert target["table"] == "slice" and target["id"] == ids["step"] and target["start_ns"] == 0
        top = det.event_details(trace, "slice", ids["step"])
        assert not [c for c in top.children if getattr(c, "id", None) == "details-ancestors"]
    n = 3  # three spans, each the parent of the next, the first the parent of the last: a cycle
    with TraceWriter(tmp_path / "cycle.trace", metadata={"arch": "trn2"}) as w:
        w.append(ts.SPAN.name, {ts.ID: np.arange(n), ts.START_TS: np.zeros(n, np.int64),
                                ts.END_TS: np.full(n, 10, np.int64), ts.DURATION_NS: np.full(n, 10, np.int64),
                                ts.NAME: ["a", "b", "c"], ts.PARENT_ID: np.array([2, 0, 1])})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cyc = profiler.open(tmp_path / "cycle.trace")
    try:
        assert len(det.slice_ancestors(cyc, 0)) == det.MAX_ANCESTORS
    finally:
        cyc.close()


def test_a_regular_expression_search_and_a_bad_one(trace):
    """/.../ searches by regular expression (the page lists the matches, stepping works as for text); a pattern RE2
    cannot read is the page's one-line message, not an error banner."""
    found = srch.run_search(trace, "/^(MATMUL|LDWEIGHTS)$/")
    names = {m["name"] for m in found.matches}
    assert names == {"MATMUL", "LDWEIGHTS"} and found.message.endswith("matches")
    assert srch.run_search(trace, "/(/").message.startswith("invalid regular expression /(/")


def test_the_details_panel_copies_the_event_and_its_dependencies_as_json(trace):
    """"Copy as JSON" (Neuron Explorer's Dependencies tab): the panel's clipboard holds every field and each
    dependency, parseable, equal to what the API returns."""
    mm = trace.search("MATMUL", limit=1).to_pylist()[0]
    panel = det.event_details(trace, "Instruction", mm["id"])

    def find(node):
        if getattr(node, "id", None) == "details-copy":
            return node
        children = getattr(node, "children", None)
        for child in children if isinstance(children, list) else [children] if children is not None else []:
            if (found := find(child)) is not None:
                return found
        return None

    copied = json.loads(find(panel).content)
    fields = trace.event("Instruction", mm["id"])
    preds, succs = trace.flows("Instruction", mm["id"])
    assert copied["table"] == "Instruction" and copied["fields"]["id"] == mm["id"]
    assert copied["fields"]["opcode"] == fields["opcode"] == "MATMUL"
    assert [(d["table_name"], d["id"]) for d in copied["waited_for"]] == [(r["table_name"], r["id"])
                                                                          for r in preds.to_pylist()]
    assert len(copied["waited_on_it"]) == succs.num_rows
    assert any(d["name"] == "LDWEIGHTS" for d in copied["waited_for"])


def test_stepping_along_a_row_visits_its_events_in_start_order(trace):
    """. and , : from any event, the next and previous on its track are its neighbours in (start, id) order (a
    brute-force walk of the track); none past either end; nothing for a malformed selection or step."""
    mm = trace.search("MATMUL", limit=1).to_pylist()[0]
    track = mm["track_id"]
    rows = sorted((r["start_ts"], r["id"]) for r in trace.sql_arrow(
        f"SELECT id, start_ts FROM Instruction WHERE track_id = {int(track)}", max_rows=None).to_pylist())
    def store(start, ident):
        return {"table": "Instruction", "id": ident, "track_id": track, "start_ns": start, "end_ns": start + 1}
    for k in (0, 1, len(rows) // 2, len(rows) - 1):
        here = store(*rows[k])
        after, before = picks.adjacent_event(trace, here, 1), picks.adjacent_event(trace, here, -1)
        assert (after["start_ns"], after["id"]) == rows[k + 1] if k + 1 < len(rows) else after is None
        assert (before["start_ns"], before["id"]) == rows[k - 1] if k > 0 else before is None
    good = store(*rows[1])
    for step in (True, 2, "1", None, 0):
        assert picks.adjacent_event(trace, good, step) is None, step
    for bad in (None, "x", {**good, "table": "Flow"}, {**good, "id": "1"}, {**good, "track_id": None},
                {**good, "start_ns": 1e300}):
        assert picks.adjacent_event(trace, bad, 1) is None, bad
    # the view moves only when the event is outside it
    inside = {"view": [rows[1][0] - 10, rows[1][0] + 10]}
    assert picks.nav_if_outside(good, inside) is dash.no_update
    assert picks.nav_if_outside(good, {"view": [0, 5]})["start_ns"] == rows[1][0]


def test_the_row_filter_draws_the_rows_it_keeps_and_says_so(trace):
    """A row filter rebuilds the figure with the rows it keeps (their lanes too), names the count in the status
    line, travels in the link; a malformed one or one that keeps nothing draws every row and says why."""
    from urllib.parse import parse_qs

    from dashboard.pages.timeline import options_from_url

    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH)
    every = list(first.figure.layout.yaxis.ticktext)
    assert "Tensor" in every and any(label.startswith("DMA") for label in every)
    tensor = tls.TimelineOptions.parse("opcode", False, False, None, row_filter=" Tensor ")
    assert tensor.row_filter == "Tensor"
    only = tl.update_timeline(trace, "t0", state=first.state, trigger="options", width_px=WIDTH, options=tensor)
    assert isinstance(only.figure, go.Figure)
    assert list(only.figure.layout.yaxis.ticktext) == ["Tensor"]
    assert only.view["labels"] == ["Tensor"] and len(only.view["rows"]) == 1     # what hover and clicks use
    lanes = [t.name for t in only.figure.data[1:] if t.name]
    assert any("Tensor" in name for name in lanes) and not any("Vector" in name or "DMA" in name for name in lanes)
    assert f"1 of {len(every)} rows match 'Tensor'" in only.status
    # a zoom keeps the filter (a patch, the same rows) and its note
    zoom = tl.update_timeline(trace, "t0", state=only.state, trigger="relayout", width_px=WIDTH, options=tensor,
                              relayout={"xaxis.range[0]": 0, "xaxis.range[1]": 2e-6})
    assert zoom.figure is None and zoom.info["rows"] == 1 and "rows match 'Tensor'" in zoom.status
    # excluding
    no_dma = tl.update_timeline(trace, "t0", state=only.state, trigger="options", width_px=WIDTH,
                                options=tls.TimelineOptions.parse("opcode", False, False, None, row_filter="-DMA"))
    assert list(no_dma.figure.layout.yaxis.ticktext) == [lab for lab in every if not lab.startswith("DMA")]
    # the link carries it, and opening the link sets it again
    link = tls.view_link("?trace=t0&tracks=old", only.state)
    query = {k: v[0] for k, v in parse_qs(link.lstrip("?")).items()}
    assert query["tracks"] == "Tensor" and options_from_url(query).row_filter == "Tensor"
    assert tls.clean_state(only.state, "t0")["row_filter"] == "Tensor"
    assert tls.clean_state({**only.state, "row_filter": ["x"]}, "t0")["row_filter"] == ""
    # malformed, or keeping nothing: every row, and why
    for text, why in (("/(/", "bad regular expression"), ("zzz", "no timeline row matches the row filter 'zzz'")):
        up = tl.update_timeline(trace, "t0", state=only.state, trigger="options", width_px=WIDTH,
                                options=tls.TimelineOptions.parse("opcode", False, False, None, row_filter=text))
        assert list(up.figure.layout.yaxis.ticktext) == every
        assert why in up.status and "every row drawn" in up.status
    assert tls.TimelineOptions.parse("opcode", False, False, None, row_filter="x" * 500).row_filter == ""
    assert tls.TimelineOptions.parse("opcode", False, False, None, row_filter=42).row_filter == ""


def test_a_query_draws_rows_above_the_traces_and_a_click_on_them_selects_the_event(trace):
    """``?query=``: the query's rows first (one per ``track`` value), the status line counts them, the link keeps
    the query; a click on one of its intervals selects the instruction its row names (or, without table_name and
    id, the result row, whose details list its columns); a failing query draws no row and says why."""
    from urllib.parse import parse_qs

    from dashboard import details as det
    from dashboard.pages.timeline import options_from_url
    from profiler.query_track import QUERY_GROUP

    sql = ("SELECT 'Instruction' AS table_name, id, start_ts, end_ts, opcode AS name, engine AS track "
           "FROM Instruction WHERE opcode = 'MATMUL'")
    layout = tl.TraceLayout(trace)
    options = tls.TimelineOptions.parse("opcode", False, query=sql)
    up = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH, options=options, layout=layout)
    labels = list(up.figure.layout.yaxis.ticktext)
    n_matmul = trace.sql("SELECT count(*) FROM Instruction WHERE opcode = 'MATMUL'").fetchall()[0][0]
    engines = [r[0] for r in trace.sql("SELECT DISTINCT engine FROM Instruction WHERE opcode = 'MATMUL'").fetchall()]
    assert labels[:len(engines)] == [f"SQL · {e}" for e in engines]
    assert up.view["rows"][0] == [-1] and up.state["query"] == sql
    assert f"query: {n_matmul:,} intervals on {len(engines)} row{'s' if len(engines) > 1 else ''}" in up.status
    query = {k: v[0] for k, v in parse_qs(tls.view_link("?trace=t0", up.state).lstrip("?")).items()}
    assert query["query"] == sql and options_from_url(query).query == sql
    # a click in the middle of the query row's first interval selects that MATMUL
    tracks = layout.query(sql)
    first = tracks.rows[0].events
    mid = (int(first.start[0]) + int(first.end[0])) // 2
    click = {"points": [{"curveNumber": 0, "x": (mid - up.view["origin"]) / 1e9, "y": 0}]}
    view = {**up.view, "res": 1}
    picked = picks.event_at_click(trace, click, view, up.state, query=tracks)
    expected = trace.event("Instruction", tracks.event_ref(int(first.ids[0]))[1])
    assert picked == {"table": "Instruction", "id": expected["id"], "track_id": expected["track_id"],
                      "start_ns": expected["start_ts"], "end_ns": expected["end_ts"]}
    assert picks.event_at_click(trace, click, view, up.state) is None      # (without the query: nothing)
    # rows that name no event: the result row is selected, and its details list its columns
    plain_sql = "SELECT start_ts, end_ts, opcode FROM Instruction WHERE opcode = 'MATMUL'"
    plain = layout.query(plain_sql)
    picked = picks.event_at_click(trace, click, view, up.state, query=plain)
    assert picked["table"] == "query" and picked["track_id"] == -1
    assert det.selected_event(picked) == ("query", picked["id"])
    panel = str(det.query_row_details(plain, picked["id"], up.view["origin"]))
    assert "query row" in panel and "MATMUL" in panel
    assert "no longer on the timeline" in str(det.query_row_details(None, 0, 0))
    # the row filter sees the query's rows too
    only_query = tl.update_timeline(trace, "t0", state=up.state, trigger="options", width_px=WIDTH, layout=layout,
                                    options=tls.TimelineOptions.parse("opcode", False, query=sql,
                                                                     row_filter=QUERY_GROUP))
    assert list(only_query.figure.layout.yaxis.ticktext) == [f"SQL · {e}" for e in engines]
    # a failing query: the trace's rows only, and why
    bad = tl.update_timeline(trace, "t0", state=up.state, trigger="options", width_px=WIDTH, layout=layout,
                             options=tls.TimelineOptions.parse("opcode", False, query="SELECT 1 AS x"))
    assert not any(label.startswith("SQL") for label in bad.figure.layout.yaxis.ticktext)
    assert "query: a query track needs a start_ts column" in bad.status
    assert tls.TimelineOptions.parse("opcode", False, query="x" * 9000).query == ""
    assert tls.clean_state({**up.state, "query": 5}, "t0")["query"] == ""


def test_a_counter_query_draws_lanes_that_zooms_patch_and_the_row_filter_picks(trace):
    sql = ("SELECT start_ts, sum(duration_ns) OVER (ORDER BY start_ts, id) AS value, engine AS track "
           "FROM Instruction WHERE engine IN ('Tensor', 'Vector')")
    layout = tl.TraceLayout(trace)
    options = tls.TimelineOptions.parse("opcode", False, query=sql)
    up = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH, options=options, layout=layout)
    sql_lanes = [name for name in up.state["lanes"] if name.startswith("SQL · ")]
    assert sorted(sql_lanes) == ["SQL · Tensor: max", "SQL · Tensor: mean", "SQL · Vector: max", "SQL · Vector: mean"]
    assert not any(label.startswith("SQL") for label in up.figure.layout.yaxis.ticktext)   # lanes, not rows
    n = trace.sql("SELECT count(*) FROM Instruction WHERE engine IN ('Tensor', 'Vector')").fetchall()[0][0]
    assert f"query: {n:,} samples on 2 lanes" in up.status
    # the running total only grows: each lane's maxima never fall
    lane = next(t for t in up.figure.data if t.name == "SQL · Tensor: max")
    ys = np.array(decode_lane_y(lane), dtype=float)
    ys = ys[np.isfinite(ys)]
    assert len(ys) and (np.diff(ys) >= 0).all()
    zoom = tl.update_timeline(trace, "t0", state=up.state, trigger="relayout", width_px=WIDTH, options=options,
                              layout=layout, relayout={"xaxis.range[0]": 1e-6, "xaxis.range[1]": 3e-6})
    index = 1 + up.state["lanes"].index("SQL · Tensor: max")
    from profiler.figures.typed_arrays import decode_typed_array

    assert zoom.figure is None and len(decode_typed_array(zoom.changes["data"][index]["y"])) > 0
    only = tl.update_timeline(trace, "t0", state=up.state, trigger="options", width_px=WIDTH, layout=layout,
                              options=tls.TimelineOptions.parse("opcode", False, query=sql, row_filter="-SQL · V"))
    assert [n for n in only.state["lanes"] if n.startswith("SQL")] == ["SQL · Tensor: max", "SQL · Tensor: mean"]


def decode_lane_y(lane):
    from profiler.figures.typed_arrays import decode_typed_array

    return list(decode_typed_array(lane.y)) if isinstance(lane.y, dict) else list(lane.y)


def test_a_searchs_matches_link_to_the_timeline_as_a_row(trace):
    from urllib.parse import parse_qs, urlparse

    href = srch.matches_row_href(trace, " MATMUL ", "?trace=t0&start=5&end=900&colour=engine")
    query = {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}
    assert query["start"] == "5" and query["colour"] == "engine" and query["trace"] == "t0"
    assert query["query"] == trace.search_sql("MATMUL")
    layout = tl.TraceLayout(trace)
    tracks = layout.query(query["query"])
    n = len(trace.search("MATMUL", limit=10**6))
    assert tracks.summary == f"{n:,} intervals on 1 row" and tracks.rows[0].label == "search MATMUL"
    assert srch.matches_row_href(trace, "/(/", None) is None           # a search that fails: no link
    listed = str(srch.results_list(srch.run_search(trace, "MATMUL"), 0, href))
    assert "draw every match as a timeline row" in listed


def test_a_row_limit_that_cannot_be_used_says_what_was_used(trace):
    # 0, -5 and 1.5 ran silently with another limit
    cases = ((0, 1), (-5, 1), (1.5, 1), (10**9, sql_logic.MAX_ROW_LIMIT), ("x", sql_logic.DEFAULT_ROW_LIMIT))
    for asked, used in cases:
        res = sql_logic.run_query(trace, "SELECT 1 AS one", row_limit=asked)
        assert res.error is None and res.warning == (
            f"the row limit is a whole number from 1 to {sql_logic.MAX_ROW_LIMIT:,}: {used:,} used"), asked
    for fine in (None, 3, 3.0):
        assert sql_logic.run_query(trace, "SELECT 1 AS one", row_limit=fine).warning == ""


def test_the_status_line_says_when_the_hover_lists_events(trace):
    """The status read "6,063 events drawn exactly" while the hover gave per-pixel summaries (it lists events only
    up to HOVER_EVENT_LIMIT in view): it says so, and not once the hover lists them."""
    from profiler.figures.raster import HOVER_EVENT_LIMIT

    whole = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=WIDTH)
    assert whole.figure is not None and "events drawn exactly" in whole.status
    assert f"; hover per event under {HOVER_EVENT_LIMIT:,} in view" in whole.status
    t0, t1 = trace.time_range
    near = (t0 + (t1 - t0) // 300) / 1e9    # a few events in view: the hover lists them
    zoomed = tl.update_timeline(trace, "t0", state=whole.state, trigger="relayout", width_px=WIDTH,
                                relayout={"xaxis.range[0]": 0.0, "xaxis.range[1]": near})
    assert "hover per event" not in zoomed.status
