"""The call-tree page in headless Chromium: a real PyTorch trace's icicle drawn with its status and per-name table,
the root picker narrowing it to one thread (and the link to the view following), a name's link opening the timeline
on its first match, and the timeline's "call tree of this view" link."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.browser.conftest import console_errors, link_query, serving, settled, wait_for, wait_idle

GRAPH = "document.querySelector('#ct-graph .js-plotly-plot')"
DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
THREAD = "pyper:trainer:0:0 (CPU) / thread 4037 (python3.8)"


@pytest.fixture(scope="module")
def torch_server(browser, tmp_path_factory):
    src = tmp_path_factory.mktemp("ctbrowser") / "rank0.json.gz"
    shutil.copy(DATA / "sampled_rank-0.json.gz", src)
    yield from serving(src)


def _icicle(driver):
    """(boxes, first box's label, boxes drawn as SVG paths) of the graph, None before it is drawn."""
    return driver.execute_script(
        f"var g = {GRAPH}; if (!g || !g._fullData || !g._fullData.length) return null;"
        "var d = g._fullData[0]; if (d.type !== 'icicle' || !d.ids) return null;"
        "return [d.ids.length, d.labels[0], g.querySelectorAll('g.slice path').length];")


def test_the_call_tree_draws_and_narrows_to_a_root(browser, torch_server):
    browser.get(f"{torch_server.url}/calltree?trace=t0")
    boxes, first, drawn = wait_for(browser, _icicle, "the icicle")
    assert first == "all rows" and boxes > 50 and drawn > 10
    status = browser.find_element("id", "ct-status").text
    assert status.startswith("4,811 spans in the whole trace")
    rows = wait_for(browser, lambda d: d.find_elements("css selector", "#ct-top-table tbody tr"), "the names")
    assert rows[0].find_element("tag name", "td").text == "PyTorch Profiler (0)"

    # the root picker: one thread's stacks only
    browser.find_element("id", "ct-root").click()
    option = wait_for(browser, lambda d: [o for o in d.find_elements("css selector", "[role=option]")
                                          if o.text.startswith(THREAD)], "the thread's option")[0]
    option.click()
    wait_for(browser, lambda d: (s := _icicle(d)) and s[1] == THREAD and s, "the thread's icicle")
    assert wait_for(browser, lambda d: d.find_element("id", "ct-status").text.startswith("1,828 spans"),
                    "the thread's status")
    assert link_query(browser, "ct-view-link")["root"] == THREAD

    # a name links to the timeline searching for it, its first match selected
    first_name = browser.find_element("css selector", "#ct-top-table tbody tr td a")
    name = first_name.text
    first_name.click()
    wait_for(browser, lambda d: name in d.find_element("id", "tl-details").text, "the name's first match")
    wait_idle(browser, "the timeline of the match")
    assert console_errors(browser) == []


def test_the_timelines_link_opens_the_call_tree_of_its_view(browser, torch_server):
    lo = 1682725898082212000
    browser.get(f"{torch_server.url}/?trace=t0&start={lo}&end={lo + 300_000_000}")
    wait_for(browser, lambda d: "start" in link_query(d, "tl-calltree-link"), "the timeline's call-tree link")
    link = link_query(browser, "tl-calltree-link")
    assert (link["start"], link["end"]) == (str(lo), str(lo + 300_000_000))
    browser.find_element("id", "tl-calltree-link").click()
    wait_for(browser, _icicle, "the call tree of the view")
    status = wait_for(browser, lambda d: d.find_element("id", "ct-status").text, "the status")
    assert "spans in +" in status or " to " in status
    assert link_query(browser, "ct-timeline-link")["start"] == str(lo)
    wait_for(browser, settled, "the call-tree page")
    assert console_errors(browser) == []


def test_the_summary_of_a_host_trace_leads_to_its_call_tree(browser, torch_server):
    browser.get(f"{torch_server.url}/summary?trace=t0")
    rows = wait_for(browser, lambda d: d.find_elements("css selector", "#summary-span-rows tbody tr"), "the rows")
    assert len(rows) == 8
    assert "this trace has none" in browser.find_element("id", "summary-no-device").text
    cards = [c.text for c in browser.find_elements("css selector", "#summary-cards .card")]
    assert cards and not any("DMA" in c for c in cards)
    # a row's link opens the call tree narrowed to that row
    link = next(r.find_element("tag name", "a") for r in rows if r.text.startswith(THREAD))
    link.click()
    wait_for(browser, lambda d: (s := _icicle(d)) and s[1] == THREAD and s, "the row's icicle")
    wait_for(browser, settled, "the call-tree page")
    assert console_errors(browser) == []


@pytest.fixture(scope="module")
def host_pair_server(browser, tmp_path_factory):
    from dashboard.app import create_app
    from tests.browser.conftest import Server

    d = tmp_path_factory.mktemp("ctcompare")
    paths = []
    for name in ("sampled_rank-0.json.gz", "alexnet_flows.json.gz"):
        shutil.copy(DATA / name, d / name)
        paths.append(d / name)
    app = create_app(paths)
    for trace_id in ("t0", "t1"):
        app.trnprof_registry.open(trace_id)
    server = Server(app)
    yield server
    server.stop()
    app.trnprof_registry.close()


def test_the_compare_page_of_two_host_traces_draws_the_differential_call_tree(browser, host_pair_server):
    browser.get(f"{host_pair_server.url}/compare?trace=t0&b=t1")
    graph = "document.querySelector('#cmp-calltree-diff .js-plotly-plot')"
    drawn = wait_for(browser, lambda d: d.execute_script(
        f"var g = {graph}; if (!g || !g._fullData || !g._fullData.length) return null;"
        "var d = g._fullData[0]; return d.type === 'icicle' ? [d.ids.length, g.querySelectorAll('g.slice').length]"
        " : null;"), "the differential icicle")
    assert drawn[0] > 20 and drawn[1] > 5
    assert "spans: 4,811 → 870" in browser.find_element("id", "cmp-span-headline").text
    rows = browser.find_elements("css selector", "#cmp-name-deltas tbody tr")
    assert len(rows) == 20 and rows[0].find_element("tag name", "td").text == "PyTorch Profiler (0)"
    assert browser.find_elements("id", "cmp-error") == []
    wait_for(browser, settled, "the compare page")
    assert console_errors(browser) == []


@pytest.fixture(scope="module")
def recording_server(browser):
    yield from serving(Path(__file__).resolve().parents[2] / "sample_traces" / "softmax-trn1.trace")


def test_a_recording_without_spans_shows_its_instructions_and_can_ask_for_spans(browser, recording_server):
    browser.get(f"{recording_server.url}/calltree?trace=t0")
    boxes, _first, _drawn = wait_for(browser, lambda d: (s := _icicle(d)) and s[1] == "NeuronCore 0" and s,
                                    "the instructions' icicle")
    assert boxes == 19
    assert browser.find_element("css selector", "#ct-of input[value='instructions']").is_selected()
    assert not browser.find_element("id", "ct-rows-box").is_displayed()
    assert not browser.find_element("id", "ct-steps-box").is_displayed()
    assert browser.find_element("id", "ct-levels-box").is_displayed()
    assert "48 instructions in the whole trace" in browser.find_element("id", "ct-status").text
    browser.find_element("css selector", "#ct-of input[value='spans']").click()
    error = wait_for(browser, lambda d: d.find_elements("id", "ct-error"), "the one-line reason")[0]
    assert "no spans" in error.text
    assert link_query(browser, "ct-view-link")["of"] == "spans"
    wait_for(browser, settled, "the call-tree page")
    assert console_errors(browser) == []


def test_gpu_kernels_by_launch(browser, torch_server):
    browser.get(f"{torch_server.url}/calltree?trace=t0")
    wait_for(browser, _icicle, "the spans' icicle")
    browser.find_element("css selector", "#ct-of input[value='kernels']").click()
    wait_for(browser, lambda d: d.find_element("id", "ct-status").text.startswith("1,204 kernels"), "the kernels")
    assert not browser.find_element("id", "ct-rows-box").is_displayed()
    assert browser.find_element("id", "ct-steps-box").is_displayed()
    assert not browser.find_element("id", "ct-levels-box").is_displayed()
    assert link_query(browser, "ct-view-link")["of"] == "kernels"
    wait_for(browser, lambda d: (s := _icicle(d)) and s[0] > 100 and s, "the kernels' icicle")
    wait_for(browser, settled, "the call-tree page")
    assert console_errors(browser) == []


def test_a_click_on_a_box_shows_its_stack(browser, torch_server):
    browser.get(f"{torch_server.url}/calltree?trace=t0&root={THREAD.replace(' ', '%20')}")
    wait_for(browser, lambda d: (s := _icicle(d)) and s[1] == THREAD and s, "the thread's icicle")
    wait_for(browser, settled, "the first callbacks")
    # what a click on the "## backward ##" box of the first step sends (plotly's click event with its point)
    browser.execute_script(
        f"var g = {GRAPH}; var d = g._fullData[0];"
        "var i = d.customdata.findIndex(function (c) { return c[0] === '## backward ##'; });"
        "g.emit('plotly_click', {points: [{id: d.ids[i], label: d.labels[i], customdata: d.customdata[i],"
        " curveNumber: 0, pointNumber: i}]});")
    stack = wait_for(browser, lambda d: d.find_elements("id", "ct-frame-stack"), "the frame panel")[0]
    assert stack.text.endswith("› ## backward ##") and stack.text.startswith(THREAD)
    assert "spans, total" in browser.find_element("id", "ct-frame-numbers").text
    assert "search=" in browser.find_element("id", "ct-frame-search").get_attribute("href")
    wait_for(browser, settled, "the call-tree page")
    assert console_errors(browser) == []
