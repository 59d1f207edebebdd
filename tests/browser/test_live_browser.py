"""A recording followed while it runs (profiler.live, dashboard.live_view), in headless Chromium.

The test writes the recording itself with the real TraceWriter, a batch at a time, and waits for the page to show
each batch: the header's line counts the instructions, the timeline's view grows with the trace while it shows the
whole of it and stays put when zoomed, other pages offer a link to the new rows, and the line says when the
recording is complete.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import Server, console_errors, link_query, wait_for, wait_idle
from tests.unit.test_live import rows
from tracer import TraceWriter
from tracer import schema as ts


def leave(browser) -> None:
    """A page following a recording polls its server: leave it for a blank one before that server stops, so no
    later test's console holds the refused requests."""
    browser.get("about:blank")
    console_errors(browser)


@pytest.fixture
def live_server(tmp_path: Path, browser):
    from dashboard.app import create_app
    from dashboard.registry import TraceRegistry

    path = tmp_path / "live.trace"
    writer = TraceWriter(path, background_flush=False, metadata={"is_simulation": True})
    writer.append(ts.INSTRUCTION.name, rows(0, 100))
    writer.flush()
    registry = TraceRegistry([path], live_options={"min_interval_s": 0.0})
    app = create_app(registry)
    registry.open("t0")
    server = Server(app)
    console_errors(browser)
    yield server, writer
    leave(browser)
    server.stop()
    registry.close()
    writer.close(complete=False)


def line(driver) -> str:
    return driver.find_element("id", "live-status").text


def add(writer, a: int, b: int) -> None:
    writer.append(ts.INSTRUCTION.name, rows(a, b))
    writer.flush()


def open_timeline(browser, url: str, view: str) -> None:
    """Open the timeline at ``url`` and wait for the header's line (100 instructions) and the view ``view``."""
    browser.get(url)
    wait_idle(browser)
    wait_for(browser, lambda d: "● recording: 100 instructions" in line(d), "the header's line")
    assert browser.find_element("id", "tl-status").text.startswith(f"view {view}")


def test_the_timeline_follows_a_recording_until_it_completes(browser, live_server):
    server, writer = live_server
    open_timeline(browser, server.url + "/", "9.98 µs")
    add(writer, 100, 400)
    wait_for(browser, lambda d: "● recording: 400 instructions" in line(d), "the line to count the new rows")
    wait_for(browser, lambda d: d.find_element("id", "tl-status").text.startswith("view 39.98 µs"),
             "the whole-trace view to grow with the trace")
    writer.close()
    wait_for(browser, lambda d: line(d).startswith("✓ recording complete: 400 instructions"), "completion")
    errors = console_errors(browser)
    assert errors == [], errors


def test_a_zoomed_timeline_stays_put_and_other_pages_link_to_the_new_rows(browser, live_server):
    server, writer = live_server
    open_timeline(browser, server.url + "/?trace=t0&start=1000&end=3000", "2 µs")
    add(writer, 100, 200)
    wait_for(browser, lambda d: "200 instructions" in line(d), "the new rows")
    wait_idle(browser)
    assert browser.find_element("id", "tl-status").text.startswith("view 2 µs")   # the zoom is kept
    # the summary page computes from every row: it links to a redraw instead of recomputing by itself
    browser.get(server.url + "/summary?trace=t0")
    wait_for(browser, lambda d: "200 instructions" in line(d), "the summary page's line")
    wait_for(browser, lambda d: "\n200\n" in "\n" + d.find_element("id", "summary-cards").text + "\n",
             "the summary's instruction count")
    assert not browser.find_elements("id", "live-reload")
    add(writer, 200, 300)
    link = wait_for(browser, lambda d: d.find_elements("id", "live-reload"), "the link to the new rows")[0]
    assert link.text == "show the new rows"
    link.click()
    wait_for(browser, lambda d: "300 instructions" in line(d) and not d.find_elements("id", "live-reload"),
             "the page drawn again with the new rows")
    wait_for(browser, lambda d: "\n300\n" in "\n" + d.find_element("id", "summary-cards").text + "\n",
             "the summary computed again from the new rows")
    errors = console_errors(browser)
    assert errors == [], errors


def test_a_view_at_the_end_of_the_recording_follows_it(browser, live_server):
    server, writer = live_server
    open_timeline(browser, server.url + "/?trace=t0&start=7980&end=9980", "2 µs")   # the last 2 µs
    add(writer, 100, 200)
    wait_for(browser, lambda d: link_query(d, "tl-link").get("end") == "19980", "the view to move to the new end")
    assert link_query(browser, "tl-link")["start"] == "17980"
    assert browser.find_element("id", "tl-status").text.startswith("view 2 µs")
    errors = console_errors(browser)
    assert errors == [], errors


def test_a_recording_with_no_event_yet_is_drawn_once_it_has_some(browser, tmp_path):
    from dashboard.app import create_app
    from dashboard.registry import TraceRegistry

    path = tmp_path / "early.trace"
    writer = TraceWriter(path, background_flush=False, metadata={"is_simulation": True})
    registry = TraceRegistry([path], live_options={"min_interval_s": 0.0})
    server = Server(create_app(registry))
    console_errors(browser)
    try:
        browser.get(server.url + "/")
        wait_for(browser, lambda d: "no events to show yet" in d.find_element("id", "tl-status").text,
                 "the timeline to say there is nothing to draw yet")
        add(writer, 0, 50)
        wait_for(browser, lambda d: "● recording: 50 instructions" in line(d), "the first rows")
        wait_for(browser, lambda d: d.find_element("id", "tl-status").text.startswith("view 4.98 µs"),
                 "the timeline drawn from them")
        errors = console_errors(browser)
        assert errors == [], errors
    finally:
        leave(browser)
        server.stop()
        registry.close()
        writer.close(complete=False)
