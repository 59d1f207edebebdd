"""Markers (dashboard/markers.py): what the browser's store may hold, adding and removing, the rows and CSV with the
times between markers, the lines drawn, the time of a key press, and markers through the timeline's logic."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard import markers as mk
from dashboard import timeline_logic as tl
from dashboard import timeline_picks as picks
from dashboard import timeline_state as tls
from tests.browser.trace_factory import write_kernel_trace


def test_the_store_keeps_valid_distinct_sorted_times_only():
    assert mk.clean_markers([30, 10, "20", 10, None, "x", 1.5, True, 2**70, 20]) == [10, 20, 30]
    assert mk.clean_markers("300,100,abc,-5,,200") == [-5, 100, 200, 300]        # a URL's markers= value
    assert mk.clean_markers("--5,-,5-,1e3,٣,+7, 8 ,99999999999999999999") == [8]  # whole numbers of ns only
    assert mk.clean_markers({"a": 1}) == [] and mk.clean_markers(None) == []
    assert len(mk.clean_markers(list(range(100)))) == mk.MAX_MARKERS
    assert len(mk.clean_markers(",".join(str(i) for i in range(100)))) == mk.MAX_MARKERS


@given(st.lists(st.integers(-10**12, 10**12), max_size=40), st.integers(-10**12, 10**12))
def test_adding_keeps_the_latest_markers_sorted_and_capped(existing, t):
    before = mk.clean_markers(existing)
    after = mk.add_marker(existing, t)
    assert after == sorted(set(after)) and len(after) <= mk.MAX_MARKERS
    assert t in after or (len(before) == mk.MAX_MARKERS and t < before[0])
    assert set(after) <= set(before) | {t}


def test_removing_by_position_and_ignoring_bad_positions():
    assert mk.remove_marker([10, 20, 30], 1) == [10, 30]
    for bad in (-1, 3, "1", None, 1.5):
        assert mk.remove_marker([10, 20, 30], bad) == [10, 20, 30], bad
    assert mk.remove_marker([], 0) == []


def test_rows_and_csv_give_the_time_since_the_start_the_previous_and_the_first_marker():
    rows = mk.marker_rows([1_100, 1_600, 3_100], origin_ns=1_000)
    assert [r["marker"] for r in rows] == ["M1", "M2", "M3"]
    assert [r["since_start_ns"] for r in rows] == [100, 600, 2_100]
    assert [r["since_previous_ns"] for r in rows] == [None, 500, 1_500]
    assert [r["since_first_ns"] for r in rows] == [None, 500, 2_000]
    parsed = list(csv.DictReader(io.StringIO(mk.markers_csv([1_100, 1_600, 3_100], 1_000))))
    assert parsed[2] == {"marker": "M3", "time_ns": "3100", "since_start_ns": "2100", "since_previous_ns": "1500",
                         "since_first_ns": "2000"}
    assert parsed[0]["since_previous_ns"] == ""
    assert mk.markers_csv([], 0).strip() == "marker,time_ns,since_start_ns,since_previous_ns,since_first_ns"


def test_each_marker_is_a_labelled_line_across_the_rows():
    shapes = mk.marker_shapes([1_500, 2_000], n_rows=4, origin_ns=1_000)
    assert [s["name"] for s in shapes] == ["M1", "M2"]
    assert shapes[0]["x0"] == shapes[0]["x1"] == pytest.approx(500e-9)
    assert (shapes[0]["y0"], shapes[0]["y1"]) == (3.5, -0.5) and shapes[1]["label"]["text"] == "M2"
    text = str(mk.markers_panel([1_500, 2_000], 1_000))
    assert "M1" in text and "+500 ns" in text and "M1 → M2" in text
    assert "press M" in str(mk.markers_panel([], 0))


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    import profiler

    t = profiler.open(write_kernel_trace(tmp_path_factory.mktemp("markers") / "k.trace", iterations=20))
    yield t
    t.close()


def test_markers_through_the_timeline_logic(trace):
    """A key press's axis time becomes ns on the drawn view's axis; markers are patched into the drawn figure, drawn
    into every rebuilt one, and kept by the link to the view."""
    first = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=800)
    origin = first.view["origin"]
    assert picks.marker_time({"x": 1.25e-6, "seq": 3}, first.view) == origin + 1_250
    for bad in (None, {"x": "a"}, {"x": float("nan")}, {"x": 1e30}):
        assert picks.marker_time(bad, first.view) is None, bad
    assert picks.marker_time({"x": 1e-6}, None) is None
    times = [origin + 1_250, origin + 5_000]
    patch = picks.decoration_layout(first.view, None, times)
    assert [s.get("name") for s in patch["shapes"] if s.get("name")] == ["M1", "M2"]
    rebuilt = tl.update_timeline(trace, "t0", state=first.state, trigger="options", width_px=800,
                                 options=tls.TimelineOptions("engine"), markers=times)
    assert [s.name for s in rebuilt.figure.layout.shapes if s.name] == ["M1", "M2"]
    link = tls.view_link("?trace=t0", rebuilt.state)
    assert f"markers={times[0]}%2C{times[1]}" in link
    from dashboard.app import query_values

    assert mk.clean_markers(query_values(link)["markers"]) == times
