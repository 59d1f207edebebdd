"""A real PyTorch trace in headless Chromium: each nesting level of a thread is a row of its own, and a legend of
hundreds of names scrolls instead of pushing the timeline out of view."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.browser.conftest import Server, console_errors, wait_for, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
GRAPH = "document.querySelector('#timeline-graph .js-plotly-plot')"
#: The first timestamp of sampled_rank-0.json.gz (ns).
_TRACE_START = 1_682_725_897_226_747_000


def _ticktext(driver):
    return driver.execute_script(f"return {GRAPH} && {GRAPH}._fullLayout && {GRAPH}._fullLayout.yaxis "
                                 f"&& {GRAPH}._fullLayout.yaxis.ticktext;")


@pytest.fixture(scope="module")
def pytorch_timeline(browser, tmp_path_factory):
    from dashboard.app import create_app

    src = tmp_path_factory.mktemp("pytorch") / "rank0.json.gz"
    shutil.copy(DATA / "sampled_rank-0.json.gz", src)
    app = create_app([src])
    app.trnprof_registry.open("t0")
    server = Server(app)
    browser.get(server.url + "/")
    wait_for(browser, _ticktext, "the timeline rows")
    wait_idle(browser)
    yield browser
    server.stop()
    app.trnprof_registry.close()


def test_a_threads_nesting_levels_are_rows_under_it(pytorch_timeline):
    labels = _ticktext(pytorch_timeline)
    first = labels.index("pyper:trainer:0:0 (CPU) · thread 4037 (python3.8)")
    deeper = [f"thread 4037 (python3.8) ›{d}" for d in range(1, 11)]
    assert labels[first + 1:first + 11] == deeper, labels
    # the row of depth 3 draws that level's slices: a pixel of it is busy, and its hover names the row
    row = first + 3
    text = wait_for(pytorch_timeline, lambda d: d.execute_script(
        f"var g = {GRAPH}, r = g._fullLayout.xaxis.range;"
        f"for (var i = 0; i <= 400; i++) {{ var t = window.trnprofHoverText({row}, r[0] + (r[1] - r[0]) * i / 400);"
        "  if (t && t.indexOf('idle') < 0) return t; } return null;"), "a busy pixel on the depth-3 row")
    assert "thread 4037 (python3.8) ›3" in text.splitlines()[:2], text
    assert console_errors(pytorch_timeline) == []


def test_a_legend_of_many_names_scrolls_and_the_rows_stay_in_view(pytorch_timeline):
    legend = pytorch_timeline.find_element("id", "tl-legend")
    sizes = pytorch_timeline.execute_script(
        "var l = arguments[0]; return [l.clientHeight, l.scrollHeight, l.children.length];", legend)
    assert sizes[2] > 20 and sizes[1] > sizes[0] and sizes[0] <= 90, sizes
    top = pytorch_timeline.execute_script(f"return {GRAPH}.getBoundingClientRect().top;")
    assert top < pytorch_timeline.execute_script("return window.innerHeight;") / 2


def test_deep_zoom_far_from_the_start_labels_ticks_as_offsets(pytorch_timeline):
    """At 300 ns in view 1.23 s into the trace, plotly's own labels read 1.2345672s, 1.23456725s, ...; the axis
    labels its first tick with its time and the others as offsets from it.  Zoomed out again, plotly's labels."""
    driver = pytorch_timeline
    url = driver.current_url.split("?")[0]
    start = _TRACE_START + 1_234_567_000
    driver.get(f"{url}?start={start}&end={start + 300}")
    labels = wait_for(driver, lambda d: d.execute_script(
        f"var g = {GRAPH}; return g && g._fullLayout && g.layout.xaxis && g.layout.xaxis.tickmode === 'array' "
        "&& g._fullLayout.xaxis.ticktext;"), "offset tick labels")
    assert labels[0] == "1.23456720 s" and labels[1:4] == ["+50 ns", "+100 ns", "+150 ns"], labels
    # near the start of the trace, or zoomed out, the axis's own labels
    assert driver.execute_script("return window.trnprofOffsetTicks(0.000001, 0.000002, 1000);") is None
    driver.find_element("tag name", "body").send_keys("r")
    wait_for(driver, lambda d: d.execute_script(
        f"var g = {GRAPH}; return g && g.layout.xaxis && g.layout.xaxis.tickmode !== 'array' "
        "&& g._fullLayout.xaxis.range[1] > 3;"), "plotly's own labels after the reset")
    assert console_errors(driver) == []


def test_the_span_levels_picker_limits_each_threads_rows(pytorch_timeline):
    driver = pytorch_timeline
    driver.get(driver.current_url.split("?")[0])
    wait_for(driver, _ticktext, "the timeline rows")
    wait_idle(driver)
    assert "thread 4037 (python3.8) ›10" in _ticktext(driver)
    driver.find_element("id", "span-levels").click()
    option = wait_for(driver, lambda d: next((e for e in d.find_elements(
        "xpath", "//*[@id='span-levels']//*[normalize-space(text())='2'] | //*[@role='option'][normalize-space(.)='2']")
        if e.is_displayed()), None), "the picker's options")
    option.click()

    def two_levels(d):
        labels = _ticktext(d) or []
        return labels if "thread 4037 (python3.8) ›1" in labels and not any("›2" in x for x in labels) else None

    labels = wait_for(driver, two_levels, "the rows of two levels per thread")
    assert sum("thread 4037" in x for x in labels) == 2 and sum("thread 23695" in x for x in labels) == 2
    assert console_errors(driver) == []
