"""drawing_window: the strings a timeline drawing shows are read only when it shows them."""

from __future__ import annotations

import pytest

import profiler
from profiler import db_schema as dbs
from profiler.figures.fetch import drawing_window
from profiler.figures.raster import HOVER_EVENT_LIMIT
from tests.browser.trace_factory import write_kernel_trace
from tracer import schema as ts


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    with profiler.open(write_kernel_trace(tmp_path_factory.mktemp("fetch") / "k.trace", iterations=400)) as t:
        yield t


def _tracks(trace):
    return [r[dbs.TRACK_ID] for r in trace.tracks().to_pylist() if r[dbs.KIND] != "counter"]


def test_attributes_only_for_hover_sized_windows_or_colour_by_layer(trace):
    t0, t1 = trace.time_range
    many = drawing_window(trace, t0, t1, 4096, _tracks(trace), colour_by="opcode")
    assert many.events.num_rows > HOVER_EVENT_LIMIT                       # too many to list for hover
    assert many.events.column(dbs.SOURCE).null_count == many.events.num_rows
    assert many.events.column(ts.NAME).null_count == 0
    few = drawing_window(trace, t0, t0 + 20_000, 4096, _tracks(trace), colour_by="opcode")
    full = trace.window(t0, t0 + 20_000, 4096, tracks=_tracks(trace), attributes=True)
    assert 0 < few.events.num_rows <= HOVER_EVENT_LIMIT
    assert few.events.equals(full.events) and few.buckets.equals(full.buckets)   # as if read with attributes
    hinted = drawing_window(trace, t0, t0 + 20_000, 4096, _tracks(trace), colour_by="opcode", expect_few=True)
    assert hinted.events.equals(full.events) and hinted.buckets.equals(full.buckets)   # one query, same window
    wrong_guess = drawing_window(trace, t0, t1, 4096, _tracks(trace), colour_by="opcode", expect_few=True)
    assert wrong_guess.events.column(ts.NAME).equals(many.events.column(ts.NAME))     # still correct, with strings
    assert wrong_guess.events.column(dbs.SOURCE).null_count < wrong_guess.events.num_rows
    layered = drawing_window(trace, t0, t1, 4096, _tracks(trace), colour_by="layer")
    assert layered.events.column(ts.LAYER).null_count < layered.events.num_rows
