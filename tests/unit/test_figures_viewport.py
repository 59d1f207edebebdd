"""The one viewport/prefetch planner (profiler.figures.viewport) the dashboard and the notebook widget share."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.figures import viewport as vp


def test_resolution_is_a_power_of_two_covering_the_view():
    assert vp.snap_resolution(1000, 1000) == 1
    assert vp.snap_resolution(1001, 1000) == 2
    assert vp.snap_resolution(10**9, 1200) == 1 << 20


def test_buffer_is_three_spans_aligned_and_reused_until_left():
    view = (10_000, 20_000)
    buf = vp.plan_buffer(view, 100, (0, 100_000))
    assert buf.start_ns <= 5_000 and buf.end_ns >= 25_000
    assert buf.start_ns % buf.resolution_ns == 0 and buf.end_ns % buf.resolution_ns == 0
    assert buf.width_px == (buf.end_ns - buf.start_ns) // buf.resolution_ns
    assert not vp.needs_fetch(buf, (12_000, 22_000), 100)        # a small pan stays inside
    assert vp.needs_fetch(buf, (30_000, 40_000), 100)            # left the buffer
    assert vp.needs_fetch(buf, (10_000, 12_000), 100)            # finer resolution
    assert vp.Buffer.from_dict(buf.to_dict()) == buf
    for bad in ({"start_ns": "x"}, None, [1, 2, 3], {"start_ns": 0, "end_ns": 10, "resolution_ns": 0},
                {"start_ns": 10, "end_ns": 10, "resolution_ns": 1}):
        assert vp.Buffer.from_dict(bad) is None


def test_relayout_and_axis_range_parsing_and_clamping():
    assert vp.view_from_relayout({"xaxis.range[0]": 1e-6, "xaxis.range[1]": 2e-6}, 100) == (1100, 2100)
    assert vp.view_from_relayout({"xaxis.range": [2e-6, 1e-6]}, 0) == (1000, 2000)
    assert vp.view_from_relayout({"xaxis.autorange": True}, 0) == "reset"
    for ignored in ({"autosize": True}, {"xaxis.range[0]": "nan", "xaxis.range[1]": 1}, "junk",
                    {"xaxis.range[0]": 1e300, "xaxis.range[1]": 1}, {"xaxis.range": [1, 1]}):
        assert vp.view_from_relayout(ignored, 0) is None
    assert vp.view_from_axis_range((3e-9, 1e-9), 10) == (11, 13)
    assert vp.view_from_axis_range("ab", 0) is None
    assert vp.clamp_view(-50, 50, (0, 1000)) == (0, 100)
    assert vp.clamp_view(900, 1200, (0, 1000)) == (700, 1000)
    assert vp.clamp_view(5, 6, (0, 1000)) == (5, 5 + vp.MIN_SPAN_NS)
    assert vp.focus_view(500, 600, (0, 1000)) == (300, 800)      # the event with 4x its length around it
    assert vp.focus_view(990, 1000, (0, 1000)) == (1000 - 5 * vp.MIN_SPAN_NS, 1000)  # slid back in


@settings(max_examples=300, deadline=None)
@given(t0=st.integers(-(2**40), 2**40), length=st.integers(1, 2**40), a=st.floats(0, 1), b=st.floats(0, 1),
       width=st.integers(1, 5000))
def test_planned_buffer_covers_the_view_at_its_power_of_two_resolution(t0, length, a, b, width):
    trace_range = (t0, t0 + length)
    view = vp.clamp_view(t0 + int(a * length), t0 + int(b * length), trace_range)
    assert view[1] - view[0] >= vp.MIN_SPAN_NS
    assert t0 <= view[0] and view[1] <= max(t0 + length, t0 + vp.MIN_SPAN_NS)
    buf = vp.plan_buffer(view, width, trace_range)
    res = buf.resolution_ns
    span = view[1] - view[0]
    assert res & (res - 1) == 0
    assert res * width >= span and (res == 1 or (res // 2) * width < span)
    assert buf.start_ns % res == 0 and buf.end_ns % res == 0
    assert buf.start_ns <= view[0] and view[1] <= buf.end_ns
    assert buf.start_ns > t0 - res and buf.end_ns < max(t0 + length, view[1]) + res, "clipped to the trace"
    assert buf.end_ns - buf.start_ns <= vp.PREFETCH_FACTOR * span + 2 * res
    assert not vp.needs_fetch(buf, view, width)
    assert vp.needs_fetch(None, view, width)
    assert vp.needs_fetch(vp.Buffer(buf.start_ns, buf.end_ns, res * 2), view, width)
