"""The compare page in real headless Chromium: both timelines drawn, a zoom on A followed by B, the delta table
regrouped, and a console free of errors."""

from __future__ import annotations

import pytest

from tests.browser.conftest import WAIT_S, Server, console_errors, wait_for
from tests.browser.trace_factory import write_kernel_trace

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def _graph(side: str) -> str:
    return f"document.querySelector('#cmp-graph-{side} .js-plotly-plot')"


def _range(driver, side: str):
    g = _graph(side)
    return driver.execute_script(f"return {g} && {g}._fullLayout && {g}._fullLayout.xaxis "
                                 f"&& {g}._fullLayout.xaxis.range;")


def _drawn(driver, side: str) -> bool:
    g = _graph(side)
    return bool(driver.execute_script(f"return !!({g} && {g}.data && {g}.data.length "
                                      f"&& {g}.data[0].type === 'image');"))


@pytest.fixture(scope="module")
def compare_server(tmp_path_factory):
    from dashboard.app import create_app

    root = tmp_path_factory.mktemp("compare")
    app = create_app([write_kernel_trace(root / "short.trace", iterations=120),
                      write_kernel_trace(root / "long.trace", iterations=200)])
    for trace_id in ("t0", "t1"):
        app.trnprof_registry.open(trace_id)  # ingest before the browser asks
    server = Server(app)
    yield server
    server.stop()
    app.trnprof_registry.close()


def test_compare_page_stacks_two_synchronised_timelines(browser, compare_server):
    browser.get(compare_server.url + "/compare?trace=t0")
    wait_for(browser, lambda d: _drawn(d, "a") and _drawn(d, "b"), "both timelines")
    total = wait_for(browser, lambda d: d.execute_script(
        "var e = document.getElementById('cmp-total'); return e && e.textContent;"), "the total-time headline")
    assert "B is 1.67x slower" in total  # B runs 200 iterations, A 120
    assert browser.execute_script("return document.querySelectorAll('#cmp-delta-table tbody tr').length") > 0
    for side in ("a", "b"):   # each timeline has its colour legend
        wait_for(browser, lambda d, s=side: d.find_elements("css selector", f"#cmp-legend-{s} .legend-item"),
                 f"the legend of {side}")
    console_errors(browser)  # start clean
    first = {side: _range(browser, side) for side in ("a", "b")}

    browser.execute_script(f"window.Plotly.relayout({_graph('a')}, "
                           "{'xaxis.range[0]': 2e-6, 'xaxis.range[1]': 6e-6});")
    wait_for(browser, lambda d: (_range(d, "b") or [0, 0])[0] == pytest.approx(2e-6, rel=1e-3)
             and _range(d, "b")[1] == pytest.approx(6e-6, rel=1e-3), "timeline B to follow A's zoom")

    # the keyboard moves A (and B follows): W zooms in, R resets both
    browser.find_element("tag name", "body").send_keys("w")
    wait_for(browser, lambda d: (_range(d, "b") or [0, 1])[1] - _range(d, "b")[0] < 4e-6 * 0.9,
             "W to zoom A and B to follow")
    browser.find_element("tag name", "body").send_keys("r")
    wait_for(browser, lambda d: (_range(d, "a") or [0, 0])[1] - _range(d, "a")[0] > 20e-6
             and _range(d, "b")[1] - _range(d, "b")[0] > 20e-6, "R to reset A and B to follow")
    # back to each trace's exact extent (plotly's autorange of the strip image went past the end, to its grid)
    wait_for(browser, lambda d: all(_range(d, s) == pytest.approx(first[s], abs=1e-12) for s in ("a", "b")),
             f"the reset to end where the first view did ({first})")

    browser.execute_script("document.querySelector('#cmp-by input[value=\"source\"]').click();")
    wait_for(browser, lambda d: d.execute_script(
        "var h = document.querySelector('#cmp-delta-table thead'); return h && h.textContent.indexOf('source') === 0;"),
        "the delta table grouped by source line")
    assert console_errors(browser) == []


def _legend_counts(driver, side: str):
    """(swatches in a side's legend, swatches shown)."""
    return driver.execute_script(
        f"var it = document.querySelectorAll('#cmp-legend-{side} .legend-item');"
        "return [it.length, Array.prototype.filter.call(it, function (e) { return e.style.display !== 'none'; })"
        ".length];")


def _all_shown(driver, side: str):
    total, shown = _legend_counts(driver, side)
    return (total, shown) if total and total == shown else None


def _some_hidden(driver, side: str):
    total, shown = _legend_counts(driver, side)
    return (total, shown) if total and 0 < shown < total else None


def test_the_legends_list_only_the_colours_in_view(browser, compare_server):
    """As on the timeline page: the strips cover a buffer wider than the view, and each legend hides the swatches
    of colours no pixel in view has, on both sides as B follows A; they come back when the view widens."""
    browser.get(compare_server.url + "/compare?trace=t0")
    wait_for(browser, lambda d: _drawn(d, "a") and _drawn(d, "b"), "both timelines")
    full = {side: wait_for(browser, lambda d, s=side: _all_shown(d, s), f"every swatch of {side} shown")
            for side in ("a", "b")}
    browser.execute_script(f"window.Plotly.relayout({_graph('a')}, "
                           "{'xaxis.range[0]': 8.0e-6, 'xaxis.range[1]': 8.2e-6});")
    for side in ("a", "b"):
        total, shown = wait_for(browser, lambda d, s=side: _some_hidden(d, s),
                                f"some swatches of {side} hidden in a narrow view")
        assert total >= shown > 0
    # a reset of A (a double-click) resets B too (it failed B's update: a reset is no range to compare)
    browser.execute_script(f"window.Plotly.relayout({_graph('a')}, {{'xaxis.autorange': true}});")
    for side in ("a", "b"):
        wait_for(browser, lambda d, s=side: _all_shown(d, s), f"every swatch of {side} back")
    assert full["a"][0] > 0
    assert console_errors(browser) == []


def _ticks(driver, side: str):
    g = _graph(side)
    return driver.execute_script(f"return {g} && {g}._fullLayout && {g}._fullLayout.yaxis "
                                 f"&& {g}._fullLayout.yaxis.ticktext;")


def test_the_row_filter_draws_the_same_rows_on_both_timelines(browser, compare_server):
    browser.get(compare_server.url + "/compare?trace=t0&b=t1&tracks=Tensor")
    # (twice the usual wait: two timelines drawn from a cold page; under a loaded machine this one wait ran out)
    wait_for(browser, lambda d: _ticks(d, "a") == _ticks(d, "b") == ["Tensor"],
             "both timelines with the Tensor rows of the link", timeout=2 * WAIT_S)
    box = browser.find_element("id", "cmp-rows")
    assert box.get_attribute("value") == "Tensor"
    from selenium.webdriver.common.keys import Keys

    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("-DMA, -Tensor\n")
    wait_for(browser, lambda d: (_ticks(d, "a") or []) and _ticks(d, "a") == _ticks(d, "b")
             and not any("Tensor" in t or "DMA" in t for t in _ticks(d, "a")), "the new filter on both")
    assert console_errors(browser) == []
