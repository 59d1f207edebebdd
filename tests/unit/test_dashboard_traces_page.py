"""The Traces page: every served trace with what it is (format, machine, duration, events) and links to its pages;
a trace that cannot be opened says why in its row instead of failing the page."""

from __future__ import annotations

import json

from dashboard.pages import PageContext
from dashboard.pages import traces as page
from dashboard.registry import TraceRegistry
from tests.browser.trace_factory import write_kernel_trace
from tracer.errors import TraceFormatError


def _text(node) -> str:
    return json.dumps(node.to_plotly_json(), default=lambda o: o.to_plotly_json() if hasattr(o, "to_plotly_json")
                      else str(o))


def test_each_trace_says_what_it_is_and_links_to_its_pages(tmp_path):
    import profiler

    kernel = write_kernel_trace(tmp_path / "k.trace", iterations=12)
    chrome = tmp_path / "host.json"
    chrome.write_text(json.dumps([{"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
                                  {"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 10, "dur": 20}]))
    registry = TraceRegistry([kernel, chrome])
    try:
        with profiler.open(kernel) as t:
            instructions = t.sql("SELECT count(*) FROM Instruction").fetchall()[0][0]
            duration_ns = t.time_range[1] - t.time_range[0]
        what, duration, events = page.trace_facts(registry, registry.entry("t0"))
        assert what.startswith("trnprof recording") and f"{instructions:,} instructions" in events
        from profiler.figures.timefmt import format_duration

        assert duration == format_duration(duration_ns)
        what, duration, events = page.trace_facts(registry, registry.entry("t1"))
        assert what == "Chrome trace JSON" and events == "2 spans" and duration == "50 µs"
        body = _text(page.layout(PageContext(registry, "t0", {})))
        for href in ("/?trace=t1", "/summary?trace=t1", "/source?trace=t1", "/memory?trace=t1", "/compare?trace=t1",
                     "/sql?trace=t1"):
            assert href in body, href
    finally:
        registry.close()


def test_a_trace_that_cannot_be_opened_is_one_line_in_its_row(tmp_path):
    def opener(path):
        raise TraceFormatError(f"{path}: truncated footer; re-record it")

    registry = TraceRegistry([tmp_path / "bad.trace"], opener=opener)
    what, duration, events = page.trace_facts(registry, registry.entry("t0"))
    assert what.startswith("cannot be opened:") and "truncated footer" in what and str(tmp_path) not in what
    assert (duration, events) == ("", "")
    assert "cannot be opened" in _text(page.layout(PageContext(registry, "t0", {})))
