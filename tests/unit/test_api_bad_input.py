"""Bad input to the public Python API gets a one-line trnprof error, never a TypeError, a duckdb exception or a
silently wrong result (found by an adversarial sweep over the sample traces)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import profiler
from profiler import analyses
from profiler.errors import ConfigError, QueryError, TraceFormatError
from tracer import TraceReader, TraceWriter

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "mlp-trn2.trace"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input")
    mp = pytest.MonkeyPatch()
    mp.setenv("TRNPROF_CACHE_DIR", str(root / "cache"))
    shutil.copytree(SAMPLE, root / SAMPLE.name)
    t = profiler.open(root / SAMPLE.name)
    yield t
    t.close()
    mp.undo()


def _ids(trace, counter: bool) -> list[int]:
    return [r["track_id"] for r in trace.tracks().to_pylist() if (r["kind"] == "counter") == counter]


@pytest.mark.parametrize("path", [None, 1, b"/tmp", ["x"], ""])
def test_open_rejects_non_paths(path):
    with pytest.raises(TraceFormatError, match="path"):
        profiler.open(path)


def test_open_overlong_name_is_a_trace_error(tmp_path):
    with pytest.raises(TraceFormatError, match="cannot open"):
        profiler.open(tmp_path / ("x" * 5000))


@pytest.mark.parametrize("track", [1.5, "0", True, float("inf"), float("nan")])
def test_track_ids_must_be_integers(trace, track):
    t0, t1 = trace.time_range
    with pytest.raises(QueryError, match="track id must be an integer"):
        trace.track_info(track)
    with pytest.raises(QueryError, match="track"):
        trace.window(t0, t1, 100, tracks=[track])


@pytest.mark.parametrize("tracks", [7.5, "1", {}])
def test_tracks_argument_must_be_ids(trace, tracks):
    t0, t1 = trace.time_range
    with pytest.raises(QueryError, match="tracks must be"):
        trace.window(t0, t1, 100, tracks=tracks)
    with pytest.raises(QueryError, match="tracks must be"):
        trace.counter_window(t0, t1, 100, tracks=tracks)


def test_counter_tracks_have_no_busy_time(trace):
    counter = _ids(trace, counter=True)[0]
    t0, t1 = trace.time_range
    for call in (lambda: trace.busy_ns(counter, t0, t1), lambda: trace.busy_ns([counter], t0, t1),
                 lambda: trace.event_count(counter, t0, t1), lambda: trace.utilization(t0, t1, 10, [counter])):
        with pytest.raises(QueryError, match="Counter track"):
            call()


@pytest.mark.parametrize(("start", "end", "match"), [
    (100, 10, "reversed"), (0, 2**64, "2\\*\\*62"), (-(2**63), 10, "2\\*\\*62"), (float("nan"), 10, "integer")])
def test_busy_ns_and_event_count_check_the_range(trace, start, end, match):
    track = _ids(trace, counter=False)[0]
    with pytest.raises(QueryError, match=match):
        trace.busy_ns(track, start, end)
    with pytest.raises(QueryError, match=match):
        trace.event_count(track, start, end)


def test_window_messages_name_the_argument(trace):
    t0, t1 = trace.time_range
    with pytest.raises(QueryError, match="width_px must be an integer number of pixels"):
        trace.window(t0, t1, 1.5)
    with pytest.raises(QueryError, match="beyond"):
        trace.window(2**62 + 1, 2**63, 10)


@pytest.mark.parametrize("limit", [None, float("nan"), float("inf"), 2**70, -1, 1.5, "5", True])
def test_search_limit(trace, limit):
    if limit == 2**70:
        assert trace.search("matmul", limit).num_rows >= 0        # huge: every row, no duckdb overflow
        return
    with pytest.raises(QueryError, match="limit"):
        trace.search("matmul", limit)


@pytest.mark.parametrize("core", [-1, 99, 1.5, "0", True])
def test_series_core_must_exist(trace, core):
    t0, t1 = trace.time_range
    with pytest.raises(QueryError, match="core"):
        trace.series("hfu", t0, t1, 100, core=core)


@pytest.mark.parametrize("bounds", [(float("nan"), None), (None, float("inf")), ("0", None), (True, None),
                                    (1.5, None), (-(2**63), None), (None, 2**64)])
def test_summary_bounds(trace, bounds):
    with pytest.raises(QueryError, match="_ns"):
        trace.summary(*bounds)
    with pytest.raises(QueryError, match="_ns"):
        trace.summary_figures(*bounds)


@pytest.mark.parametrize("width", [None, float("nan"), 1.5, "100", True, 0, -1, 10**9])
def test_notebook_widths(trace, width):
    with pytest.raises(QueryError, match="width_px"):
        trace.timeline(width_px=width)
    with pytest.raises(QueryError, match="width_px"):
        trace.utilization_figure(width_px=width)
    pytest.importorskip("anywidget")
    with pytest.raises(QueryError, match="width_px"):
        trace.widget(width_px=width)


def test_widget_view_outside_the_trace(trace):
    pytest.importorskip("anywidget")
    t1 = trace.time_range[1]
    with pytest.raises(QueryError, match="outside the trace"):
        trace.widget(t1 + 10**6, t1 + 2 * 10**6)
    with pytest.raises(QueryError, match="beyond"):
        trace.widget(-(2**63), None)


@pytest.mark.parametrize("fn", [analyses.performance_bounds, analyses.idle_gaps, analyses.time_by,
                                analyses.dma_efficiency])
@pytest.mark.parametrize("not_a_trace", [None, str(SAMPLE)])
def test_analyses_need_a_trace(fn, not_a_trace):
    with pytest.raises(QueryError, match="profiler.open"):
        fn(not_a_trace)


@pytest.mark.parametrize("small", [-1, float("nan"), "5", 2**70])
def test_small_bytes(trace, small):
    with pytest.raises(QueryError, match="small_bytes"):
        analyses.small_transfer_regions(trace, small_bytes=small)
    with pytest.raises(QueryError, match="small_bytes"):
        analyses.dma_efficiency(trace, small_bytes=small)


@pytest.mark.parametrize("fraction", [float("nan"), -0.1, 2, "x"])
def test_min_fraction(trace, fraction):
    with pytest.raises(QueryError, match="min_fraction"):
        analyses.small_transfer_regions(trace, min_fraction=fraction)


@pytest.mark.parametrize("path", [None, 1, b"/tmp", ""])
def test_reader_and_writer_reject_non_paths(path):
    with pytest.raises(TraceFormatError, match="path"):
        TraceReader(path)
    with pytest.raises(TraceFormatError, match="path"):
        TraceWriter(path)


def test_reader_overlong_name(tmp_path):
    with pytest.raises(TraceFormatError, match="cannot open"):
        TraceReader(tmp_path / ("x" * 5000))


@pytest.mark.parametrize("kwargs", [{"batch_rows": 1.5}, {"batch_rows": "10"}, {"batch_rows": None},
                                    {"batch_rows": True}, {"batch_rows": 0}, {"batch_rows": 10**18},
                                    {"compression": "bogus"}])
def test_writer_options(tmp_path, kwargs):
    with pytest.raises(ConfigError):
        TraceWriter(tmp_path / "t.trace", **kwargs)


def test_writer_metadata_and_columns_types(tmp_path):
    with pytest.raises(TraceFormatError, match="metadata must be a dict"):
        TraceWriter(tmp_path / "a.trace", metadata=5)
    with TraceWriter(tmp_path / "b.trace", background_flush=False) as w:
        for columns in (None, 5, np.arange(3)):
            with pytest.raises(TraceFormatError, match="columns must be a dict"):
                w.append("Instruction", columns)


def test_flows_of_a_row_that_does_not_exist(trace):
    """As ``event()``: a QueryError, not two empty tables that look like an event without dependencies."""
    with pytest.raises(QueryError, match="has no row with id 999999999"):
        trace.flows("Instruction", 999_999_999)
    linked = trace.sql("SELECT in_id FROM Flow WHERE in_table = 'Instruction' LIMIT 1").fetchall()[0][0]
    ins, outs = trace.flows("Instruction", linked)  # an existing row with dependencies still answers
    assert ins.num_rows + outs.num_rows >= 1


def test_appending_to_a_closed_writer(tmp_path):
    w = TraceWriter(tmp_path / "w.trace", metadata={})
    w.close()
    with pytest.raises(TraceFormatError, match="trace writer is closed"):
        w.append("Instruction", {"id": [1]})
