"""The memory page in headless Chromium: a recording's SBUF map drawn with its headline, a zoom on the graph
redrawing the window (and its links), the PSUM map, a double-click back to the whole trace."""

from __future__ import annotations

import pytest

from tests.browser.conftest import console_errors, link_query, serving, settled, wait_for, wait_idle
from tracer.sim import run_kernel

GRAPH = "document.querySelector('#mem-graph .js-plotly-plot')"


@pytest.fixture(scope="module")
def memory_server(browser, tmp_path_factory):
    path = tmp_path_factory.mktemp("membrowser") / "mm.trace"
    run_kernel("matmul_rowload", {"M": 512, "N": 1024, "K": 512}, trace_path=path)
    yield from serving(path)


def _heatmap_shape(driver):
    return driver.execute_script(
        f"var g = {GRAPH}; if (!g || !g._fullData) return null;"
        "var h = g._fullData.filter(function (t) { return t.type === 'heatmap'; });"
        "return h.length ? [h[0].z.length, h[0].z[0].length, g.layout.xaxis.range[0], g.layout.xaxis.range[1]]"
        " : null;")


def test_the_memory_page_draws_zooms_and_switches_memory(browser, memory_server):
    browser.get(f"{memory_server.url}/memory?trace=t0")
    shape = wait_for(browser, _heatmap_shape, "the SBUF map")
    assert shape[:2] == [256, 900]
    status = wait_for(browser, lambda d: d.find_element("id", "mem-status").text, "the headline")
    assert status.startswith("SBUF peak live ") and "per partition of 224.0 KiB" in status
    whole = shape[3] - shape[2]
    wait_for(browser, settled, "the first callbacks")

    # a zoom on the graph (what a drag does) asks the server for that window
    browser.execute_script(f"window.Plotly.relayout({GRAPH}, {{'xaxis.range[0]': {shape[2] + whole / 4}, "
                           f"'xaxis.range[1]': {shape[2] + whole / 2}}});")
    wait_for(browser, lambda d: "start" in link_query(d, "mem-view-link"), "the zoomed view's link")
    view = link_query(browser, "mem-view-link")
    assert view["mem"] == "SBUF" and int(view["end"]) - int(view["start"]) == pytest.approx(whole * 1e9 / 4, rel=1e-3)
    assert link_query(browser, "mem-timeline-link")["start"] == view["start"]
    zoomed = wait_for(browser, lambda d: (s := _heatmap_shape(d)) and abs((s[3] - s[2]) - whole / 4) < whole / 100
                      and s, "the zoomed map")
    assert zoomed[:2] == [256, 900]

    # PSUM keeps the window
    browser.find_element("css selector", "#mem-mem input[value='PSUM']").click()
    wait_for(browser, lambda d: d.find_element("id", "mem-status").text.startswith("PSUM "), "the PSUM headline")
    assert link_query(browser, "mem-view-link")["mem"] == "PSUM"
    assert link_query(browser, "mem-view-link")["start"] == view["start"]

    # a double-click (autorange) goes back to the whole trace
    browser.execute_script(f"window.Plotly.relayout({GRAPH}, {{'xaxis.autorange': true}});")
    wait_for(browser, lambda d: "start" not in link_query(d, "mem-view-link"), "the whole trace again")
    assert console_errors(browser) == []


def test_a_link_to_a_view_opens_it(browser, memory_server):
    browser.get(f"{memory_server.url}/memory?trace=t0&mem=PSUM&start=2000&end=6000")
    shape = wait_for(browser, _heatmap_shape, "the PSUM map")
    assert shape[2] == pytest.approx(2000e-9) and shape[3] == pytest.approx(6000e-9)
    assert browser.find_element("css selector", "#mem-mem input[value='PSUM']").is_selected()
    assert browser.find_element("id", "mem-status").text.startswith("PSUM ")


def test_the_timelines_memory_link_opens_the_memory_of_its_view(browser, memory_server):
    browser.get(f"{memory_server.url}/?trace=t0&start=3000&end=9000")
    wait_for(browser, lambda d: "start" in link_query(d, "tl-memory-link"), "the timeline's memory link")
    link = link_query(browser, "tl-memory-link")
    assert (link["mem"], link["start"], link["end"]) == ("SBUF", "3000", "9000")
    browser.find_element("id", "tl-memory-link").click()
    shape = wait_for(browser, _heatmap_shape, "the memory of the view")
    assert shape[2] == pytest.approx(3000e-9) and shape[3] == pytest.approx(9000e-9)
    assert link_query(browser, "mem-view-link")["start"] == "3000"


def test_the_summary_pages_memory_lines_lead_to_the_map(browser, memory_server):
    browser.get(f"{memory_server.url}/summary?trace=t0")
    links = wait_for(browser, lambda d: d.find_elements("css selector", "#summary-memory-lines a"), "the memory part")
    assert [a.text.split(" ")[0] for a in links] == ["SBUF", "PSUM"] and "peak live" in links[0].text
    links[1].click()
    wait_for(browser, _heatmap_shape, "the PSUM map")
    assert browser.find_element("css selector", "#mem-mem input[value='PSUM']").is_selected()


def test_a_click_on_the_map_explains_its_cell(browser, memory_server):
    browser.get(f"{memory_server.url}/memory?trace=t0")
    shape = wait_for(browser, _heatmap_shape, "the SBUF map")
    wait_for(browser, settled, "the first callbacks")
    # the cell of the first column and row whose state is not free (what a click on it sends)
    point = browser.execute_script(
        f"var g = {GRAPH}; var h = g._fullData.filter(function (t) {{ return t.type === 'heatmap'; }})[0];"
        "for (var c = 0; c < h.z[0].length; c++) { for (var r = 0; r < h.z.length; r++) {"
        "  if (h.z[r][c] >= 2) { return {x: h.x[c], y: h.y[r]}; } } } return null;")
    assert point is not None and shape[2] <= point["x"] <= shape[3]
    browser.execute_script(f"{GRAPH}.emit('plotly_click', {{points: [{{x: {point['x']}, y: {point['y']}, "
                           "curveNumber: 0}]});")
    table = wait_for(browser, lambda d: d.find_elements("id", "mem-cell-table"), "the cell's accesses")[0]
    rows = table.find_elements("css selector", "tbody tr")
    assert rows and rows[0].find_elements("tag name", "td")[0].text == "in this cell"
    link = rows[0].find_element("css selector", "td:nth-child(2) a")
    assert "select=Instruction%3A" in link.get_attribute("href")
    link.click()
    # the timeline selects it once its first figure is drawn: its details, then nothing in flight when the server
    # stops
    wait_for(browser, lambda d: "Instruction" in d.find_element("id", "tl-details").text, "its details")
    wait_idle(browser, "the timeline of the selected instruction")
    assert console_errors(browser) == []
