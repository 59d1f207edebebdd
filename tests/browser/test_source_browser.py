"""The source page in headless Chromium: a recording's kernel file with each line's instructions, the marked line
scrolled into view, a line's link to the timeline (which searches for it and selects its first instruction), and
the details panel's link back."""

from __future__ import annotations

import pytest

from tests.browser.conftest import Server, console_errors, serving, wait_for, wait_idle
from tracer.sim import run_kernel

TARGET = 42  # nc.tensor_scalar(yt, ex, "multiply", inv): a Vector line


@pytest.fixture(scope="module")
def source_server(browser, tmp_path_factory):
    path = tmp_path_factory.mktemp("srcbrowser") / "softmax.trace"
    run_kernel("softmax", {"rows": 4096, "cols": 512}, arch="trn1", trace_path=path)
    yield from serving(path)


def test_the_source_page_shows_the_file_and_scrolls_to_the_marked_line(browser, source_server):
    browser.set_window_size(1400, 500)   # short: the marked line is far below the fold unless scrolled to
    try:
        browser.get(f"{source_server.url}/source?trace=t0&file=softmax.py&line={TARGET}")
        row = wait_for(browser, lambda d: d.find_elements("id", f"src-line-{TARGET}"), "the listing")[0]
        assert "src-target" in row.get_attribute("class") and "src-busy" in row.get_attribute("class")
        assert 'nc.tensor_scalar(yt, ex, "multiply", inv)' in row.text
        cells = row.find_elements("tag name", "td")
        assert cells[2].text == "32" and cells[7].text == "Vector"   # 4096 rows / 128 = 32 tiles, one each
        heat = browser.execute_script("return getComputedStyle(arguments[0]).getPropertyValue('--fill')",
                                      row.find_element("class name", "src-heat"))
        assert 0 < float(heat.strip().removesuffix("%")) <= 100
        # a line without instructions is three cells (the listing took 2-3 s to render at ~11 elements a line)
        idle = browser.find_element("id", "src-line-1").find_elements("tag name", "td")
        assert len(idle) == 3 and idle[1].get_attribute("colspan") == "7"
        # scrolled into view: the row is within the window's height
        top = wait_for(browser, lambda d: d.execute_script(
            f"var r = document.getElementById('src-line-{TARGET}').getBoundingClientRect();"
            "return (r.top >= 0 && r.bottom <= window.innerHeight) ? r.top : null;"), "the marked line in view")
        assert top is not None
        status = browser.find_element("id", "src-status").text
        assert status.startswith("softmax.py: 192 instructions on 6 lines"), status
        assert console_errors(browser) == []
    finally:
        browser.set_window_size(1400, 1000)


def test_without_a_marked_line_the_page_scrolls_to_the_hottest(browser, source_server):
    browser.set_window_size(1400, 500)
    try:
        browser.get(f"{source_server.url}/source?trace=t0")
        hot = wait_for(browser, lambda d: d.find_elements("css selector", "#src-table tr.src-hottest"),
                       "the listing")[0]
        assert hot.get_attribute("id") == "src-line-35" and not browser.find_elements("css selector", ".src-target")
        wait_for(browser, lambda d: d.execute_script(
            "var r = document.getElementById('src-line-35').getBoundingClientRect();"
            "return r.top >= 0 && r.bottom <= window.innerHeight;"), "the hottest line in view")
    finally:
        browser.set_window_size(1400, 1000)


def test_a_lines_link_opens_the_timeline_on_its_first_instruction_and_back(browser, source_server):
    browser.get(f"{source_server.url}/source?trace=t0&file=softmax.py")
    link = wait_for(browser, lambda d: d.find_elements("css selector", f"#src-line-{TARGET} td.src-num a"),
                    "the line's link")[0]
    link.click()
    wait_for(browser, lambda d: d.find_elements("id", "timeline-graph"), "the timeline page")
    wait_idle(browser)
    assert browser.find_element("id", "search-input").get_attribute("value") == f'"softmax.py:{TARGET}"'
    count = wait_for(browser, lambda d: d.find_element("id", "search-count").text or None, "the search count")
    assert count.startswith("1 / 32") or "32" in count, count   # every tile's instruction of that line, no other
    title = wait_for(browser, lambda d: d.find_elements("id", "details-title"), "the details of the first match")[0]
    assert "TENSOR_SCALAR" in title.text
    # the timeline opens on that instruction (not the whole trace), outlined
    graph = "document.querySelector('#timeline-graph .js-plotly-plot')"
    outlined = wait_for(browser, lambda d: d.execute_script(
        f"var g = {graph}; var s = g && g.layout.shapes && g.layout.shapes.filter(function (x) "
        "{ return x.name === 'selected'; })[0]; if (!s) return null;"
        "var r = g._fullLayout.xaxis.range; return [s.x0, s.x1, r[0], r[1]];"), "the outlined first match")
    x0, x1, r0, r1 = outlined
    assert r0 <= x0 < x1 <= r1 and (r1 - r0) < 20 * (x1 - x0), outlined
    source = browser.find_element("id", "details-source-link")
    assert source.text == f"softmax.py:{TARGET}"
    source.click()
    row = wait_for(browser, lambda d: d.find_elements("css selector", f"#src-line-{TARGET}.src-target"),
                   "the source page with the line marked")[0]
    assert "tensor_scalar" in row.text
    assert console_errors(browser) == []


def test_the_source_page_says_when_there_is_nothing_to_show(browser, tmp_path_factory):
    import shutil
    from pathlib import Path

    from dashboard.app import create_app

    host = tmp_path_factory.mktemp("srchost") / "alexnet.json.gz"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "pytorch" / "alexnet_flows.json.gz", host)
    app = create_app([host])
    server = Server(app)
    try:
        browser.get(f"{server.url}/source?trace=t0")
        err = wait_for(browser, lambda d: d.find_elements("id", "src-error"), "the error line", timeout=60)[0]
        assert "no instruction has a source location" in err.text
        assert console_errors(browser) == []
    finally:
        server.stop()
        app.trnprof_registry.close()


def test_the_summary_pages_hottest_lines_lead_to_the_source(browser, source_server):
    browser.get(f"{source_server.url}/summary?trace=t0")
    link = wait_for(browser, lambda d: d.find_elements("css selector", "#summary-hot-lines a"),
                    "the hottest source lines")[0]
    assert link.text == "softmax.py:35"
    link.click()
    row = wait_for(browser, lambda d: d.find_elements("css selector", "#src-line-35.src-target"),
                   "the source page with that line marked")[0]
    assert "tensor_reduce" in row.text
    assert console_errors(browser) == []
