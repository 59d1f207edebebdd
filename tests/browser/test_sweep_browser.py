"""The Sweep page in real headless Chromium: a sweep's folder served, its chart and rows drawn, the navigation bar
offering it, and a point's "compare with the fastest" link opening the compare page on the pair."""

from __future__ import annotations

import pytest

from tests.browser.conftest import Server, console_errors, settled, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def sweep_server(tmp_path_factory):
    from dashboard.app import create_app
    from dashboard.command import expand_folders
    from profiler.cli import main

    out = tmp_path_factory.mktemp("sweep") / "dir"
    assert main(["sweep", "matmul_rowload", "-p", "M=512", "-p", "N=1024", "-p", "K=256", "-p", "block_m=1,2,4",
                 "-q", "--trace-dir", str(out)]) == 0
    app = create_app(expand_folders([out]))
    for trace_id in ("t0", "t1", "t2"):
        app.trnprof_registry.open(trace_id)
    server = Server(app)
    yield server
    server.stop()
    app.trnprof_registry.close()


def test_the_sweep_page_draws_the_sweep_and_links_to_a_comparison(browser, sweep_server):
    console_errors(browser)
    browser.get(sweep_server.url + "/sweep?trace=t0")
    head = wait_for(browser, lambda d: d.find_element("id", "sweep-head-0").text, "the sweep's headline")
    assert head.startswith("Sweep of matmul_rowload: 3 of 3 points ran; fastest block_m=")
    fastest = {"1": "t0", "2": "t1", "4": "t2"}[head.split("fastest block_m=")[1].split()[0]]
    assert fastest != "t0"   # (else row 0 has no comparison to link)
    assert browser.find_element("id", "nav-sweep").get_attribute("class") == "nav-link active"
    bars = wait_for(browser, lambda d: d.execute_script(
        "const g = document.querySelector('.sweep-chart .js-plotly-plot');"
        "return g && g.data && g.data.reduce((n, t) => n + t.y.length, 0);"), "the sweep's chart")
    assert bars == 3
    row = browser.find_element("id", "sweep-0-row-0")
    assert "block_m=1" in row.text and "current" in row.get_attribute("class")
    browser.find_element("id", "sweep-0-0-compare").click()
    wait_for(browser, lambda d: d.current_url.endswith(f"/compare?trace={fastest}&b=t0"), "the compare page's URL")
    headline = wait_for(browser, lambda d: d.find_element("id", "cmp-headline").text, "the comparison's headline")
    assert "block_m=1" in headline, headline
    wait_for(browser, settled, "the compare page to settle")
    errors = console_errors(browser)
    assert errors == [], errors


def test_a_click_on_a_bar_opens_that_points_timeline(browser, sweep_server):
    console_errors(browser)
    browser.get(sweep_server.url + "/sweep?trace=t0")
    wait_for(browser, lambda d: d.execute_script(
        "const g = document.querySelector('.sweep-chart .js-plotly-plot'); return !!(g && g.data && g.data.length);"),
        "the sweep's chart")
    # the bar of block_m=2 (trace t1)
    target = browser.execute_script(
        "const g = document.querySelector('.sweep-chart .js-plotly-plot');"
        "for (let c = 0; c < g.data.length; c++) { const t = g.data[c]; for (let i = 0; i < t.y.length; i++) {"
        "  if (t.y[i] === 'block_m=2') { g.emit('plotly_click', {points: [{curveNumber: c, pointNumber: i,"
        "    customdata: t.customdata[i], y: t.y[i], x: t.x[i], data: t}]}); return t.customdata[i][3]; } } }"
        "return null;")
    assert target == "t1"
    wait_for(browser, lambda d: d.current_url.endswith("/?trace=t1"), "the point's timeline")
    wait_for(browser, lambda d: d.find_element("id", "tl-status").text.startswith("view "), "its timeline drawn")
    errors = console_errors(browser)
    assert errors == [], errors
