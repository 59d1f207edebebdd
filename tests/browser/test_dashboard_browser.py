"""The dashboard in real headless Chromium: rows per engine, zoom to finer detail, details on click, search, SQL,
and a console free of errors throughout."""

from __future__ import annotations

import pytest

from tests.browser.conftest import console_errors, wait_for, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

GRAPH = "document.querySelector('#timeline-graph .js-plotly-plot')"


def _js(driver, expr):
    return driver.execute_script(f"return ({expr});")


def _ticktext(driver):
    return _js(driver, f"{GRAPH} && {GRAPH}._fullLayout && {GRAPH}._fullLayout.yaxis "
                       f"&& {GRAPH}._fullLayout.yaxis.ticktext")


def _named_shapes(driver):
    """[name, xanchor or None] of each named layout shape of the timeline (the outline, the arrows)."""
    return _js(driver, f"({GRAPH}.layout.shapes || []).filter(function (s) {{ return s.name; }})"
                       ".map(function (s) { return [s.name, s.xanchor === undefined ? null : s.xanchor]; })")


def _pointer_to(driver, x_axis, row_label):
    """Selenium actions with the mouse moved to ``x_axis`` (axis seconds) in the middle of the timeline row
    labelled ``row_label`` (to be followed by a click or nothing, then ``perform()``)."""
    from selenium.webdriver.common.action_chains import ActionChains

    point = _js(driver, f"""(function() {{
        var gd = {GRAPH}, xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        var row = ya.ticktext.indexOf('{row_label}');
        return [xa.l2p({x_axis}) - xa._length / 2, ya.l2p(row) - ya._length / 2];
    }})()""")
    drag = driver.find_element("css selector", "#timeline-graph .nsewdrag")
    return ActionChains(driver).move_to_element_with_offset(drag, int(point[0]), int(point[1]))


def _click_at(driver, x_axis, row_label):
    """Click the timeline at ``x_axis`` (axis seconds) in the middle of the row labelled ``row_label``."""
    _pointer_to(driver, x_axis, row_label).click().perform()


def _arrows_drawn(driver):
    """The named shapes once a dependency arrow is among them, else None."""
    named = _named_shapes(driver)
    return named if any(name == "waited for" for name, _x in named) else None


def _dx(driver):
    return _js(driver, f"{GRAPH} && {GRAPH}._fullData && {GRAPH}._fullData[0] && {GRAPH}._fullData[0].dx")


def _zoom_to_15us(driver):
    """Zoom the timeline to 14.9-15.4 us (a few instructions per row) and wait until it is redrawn and idle."""
    driver.execute_script(f"Plotly.relayout({GRAPH}, {{'xaxis.range[0]': 14.9e-6, 'xaxis.range[1]': 15.4e-6}});")
    wait_for(driver, lambda d: (_dx(d) or 1) < 4e-9, "the zoomed-in redraw")
    wait_idle(driver)


def _select_the_matmul_at_15us(driver, url):
    """Open the timeline, zoom to 14.9-15.4 us and click core 0's MATMUL there; wait for its details."""
    driver.get(url + "/?trace=t0")
    wait_for(driver, _ticktext, "the timeline rows")
    wait_idle(driver)
    _zoom_to_15us(driver)
    _click_at(driver, 15.15e-6, "NC0 · Tensor")
    wait_for(driver, lambda d: "MATMUL" in d.find_element("id", "tl-details").text, "the details panel")


@pytest.fixture(scope="module")
def timeline(browser, dashboard_server):
    browser.get(dashboard_server.url + "/")
    wait_for(browser, _ticktext, "the timeline rows")
    wait_idle(browser)
    return browser


def test_timeline_has_one_row_per_engine_per_core(timeline):
    labels = _ticktext(timeline)
    for core in (0, 1):
        for engine in ("Tensor", "Vector", "Scalar", "GpSimd", "Sync"):
            assert labels.count(f"NC{core} · {engine}") == 1, labels
    assert any("DMA (4 queues)" in label for label in labels)
    assert timeline.find_elements("css selector", "#tl-legend .legend-item")
    lanes = _js(timeline, f"{GRAPH}.data.slice(1).map(function (t) {{ return t.name; }})")
    for lane in ("NC0 busy %: Tensor", "DMA GB/s: NC1", "HFU %: NC0", "NC1 sbuf_usage_bytes: max"):
        assert lane in lanes, lanes
    # Hover reads each pixel's code back from the strips' PNG: iteration 5 of core 0 (the trace factory's layout)
    # has MATMUL/LDWEIGHTS busy on Tensor at +1.2 µs and nothing on GpSimd at +8 µs.
    tensor, gpsimd = labels.index("NC0 · Tensor"), labels.index("NC0 · GpSimd")
    busy = wait_for(timeline, lambda d: d.execute_script(f"return window.trnprofHoverText({tensor}, 7.9e-6);"),
                    "the hover text of a busy pixel")
    assert "NC0 · Tensor" in busy and ("MATMUL" in busy or "LDWEIGHTS" in busy), busy
    idle = timeline.execute_script(f"return window.trnprofHoverText({gpsimd}, 8.9e-6);")
    assert idle.startswith("NC0 · GpSimd") and "idle" in idle, idle
    # times in the tooltip resolve what is drawn: every ns of an exact event, a pixel's width otherwise
    fmt = [timeline.execute_script(f"return window.trnprofFmtTime({ns}, {res});")
           for ns, res in ((35_500_123, 1), (35_500_123, 10_000), (1_500, 1), (300, 1))]
    assert fmt == ["35.500123 ms", "35.50 ms", "1.500 µs", "300 ns"], fmt
    assert console_errors(timeline) == []


def test_zoom_redraws_at_finer_detail(timeline):
    wait_idle(timeline)
    before = _dx(timeline)
    timeline.execute_script(f"var gd = {GRAPH}; var r = gd._fullLayout.xaxis.range;"
                            "Plotly.relayout(gd, {'xaxis.range[0]': r[0], 'xaxis.range[1]': r[0] + (r[1]-r[0])/64});")
    wait_for(timeline, lambda d: (_dx(d) or before) < before / 8,
             f"a finer redraw after zooming in (dx {before} -> {_dx(timeline)})")
    status = timeline.find_element("id", "tl-status").text
    assert "events drawn exactly" in status or "rows exact" in status
    # The lanes were redrawn at the finer resolution too (their points now span the zoomed buffer only).
    lane_span = _js(timeline, f"(function () {{ var t = {GRAPH}._fullData[1], n = t._length;"
                              "return t.x ? t.x[n - 1] - t.x[0] : t.dx * (n - 1); })()")
    full = _js(timeline, f"{GRAPH}._fullLayout.xaxis.range[1] - {GRAPH}._fullLayout.xaxis.range[0]")
    assert lane_span < full * 8, (lane_span, full)
    # The keyboard zooms too: W narrows the view (client side), the server redraws finer still.
    span = _js(timeline, f"{GRAPH}._fullLayout.xaxis.range[1] - {GRAPH}._fullLayout.xaxis.range[0]")
    timeline.find_element("tag name", "body").send_keys("w")
    wait_for(timeline, lambda d: _js(d, f"{GRAPH}._fullLayout.xaxis.range[1] - {GRAPH}._fullLayout.xaxis.range[0]")
             < span * 0.9, "W to zoom in")
    assert console_errors(timeline) == []


def test_clicking_an_instruction_shows_its_details(timeline):
    # The trace factory puts iteration 10's MATMUL of core 0 at [14_990, 15_290) ns after the trace start:
    # centre the view on it, then click the middle of the NC0 Tensor row.
    wait_idle(timeline)
    timeline.execute_script(f"Plotly.relayout({GRAPH}, {{'xaxis.range[0]': 14.9e-6, 'xaxis.range[1]': 15.4e-6}});")
    wait_for(timeline, lambda d: (_dx(d) or 1) < 4e-9, "the zoomed-in redraw")
    wait_idle(timeline)
    # Zoomed in this far the events are listed for hover: the tooltip names the instruction and its source line.
    tensor = _ticktext(timeline).index("NC0 · Tensor")
    hover = wait_for(timeline, lambda d: d.execute_script(f"return window.trnprofHoverText({tensor}, 15.15e-6);"),
                     "the hover text of an exactly drawn instruction")
    assert hover.startswith("MATMUL") and "source kernel.py:11" in hover and "Instruction" in hover, hover
    _click_at(timeline, 15.15e-6, "NC0 · Tensor")
    wait_for(timeline, lambda d: "MATMUL" in d.find_element("id", "tl-details").text, "the details panel")
    details = timeline.find_element("id", "tl-details").text
    assert "Instruction" in details and "kernel.py:11" in details
    assert "Waited for" in details and "LDWEIGHTS" in details     # its dependency, from Flow
    # the timeline outlines it and draws its dependencies' arrows, the one from its LDWEIGHTS ending at its start
    shapes = wait_for(timeline, _arrows_drawn, "the dependency arrows")
    assert shapes[0][0] == "selected"
    heads = [x for name, x in shapes if name == "waited for" and x is not None]
    assert heads and all(abs(x - 14.99e-6) < 1e-12 for x in heads), shapes
    assert any(name == "waited on it" for name, _x in shapes), shapes   # what waited on the MATMUL
    # F fits the view to it; . and , step to the next and previous event on its row (Perfetto's keys)
    timeline.find_element("tag name", "body").send_keys("f")
    wait_for(timeline, lambda d: abs(_js(d, f"{GRAPH}._fullLayout.xaxis.range[1] - {GRAPH}._fullLayout.xaxis.range[0]")
                                     - 300e-9 * 5 / 3) < 2e-9, "F to fit the 300 ns MATMUL")
    title = timeline.find_element("id", "details-title").text
    timeline.find_element("tag name", "body").send_keys(".")
    wait_for(timeline, lambda d: d.find_element("id", "details-title").text != title, "the next event on the row")
    nxt = timeline.find_element("id", "details-title").text
    assert "LDWEIGHTS" in nxt or "MATMUL" in nxt, nxt                       # the Tensor row's next instruction
    timeline.find_element("tag name", "body").send_keys(",")
    wait_for(timeline, lambda d: d.find_element("id", "details-title").text == title, "back to the MATMUL")
    assert console_errors(timeline) == []


def test_search_steps_through_matches(timeline):
    box = timeline.find_element("id", "search-input")
    box.clear()
    box.send_keys("ACTIVATE\n")
    wait_for(timeline, lambda d: "match 1 of" in d.find_element("id", "search-count").text, "search results")
    wait_for(timeline, lambda d: "ACTIVATE" in d.find_element("id", "tl-details").text, "details of match 1")
    timeline.find_element("id", "search-next").click()
    wait_for(timeline, lambda d: "match 2 of" in d.find_element("id", "search-count").text, "the next match")
    # picking a result in the list makes it the current match too
    timeline.find_elements("css selector", "#search-list .link-button")[3].click()
    wait_for(timeline, lambda d: "match 4 of" in d.find_element("id", "search-count").text, "the picked match")
    timeline.find_element("id", "search-next").click()
    wait_for(timeline, lambda d: "match 5 of" in d.find_element("id", "search-count").text, "the match after it")
    assert console_errors(timeline) == []


def _show_20us(driver) -> None:
    """Set the view to [0, 20] us and wait until the app has drawn it (waiting for idle alone can pass before its
    callback starts; a view change still on its way, e.g. a search's, can land after ours: then set it again)."""
    for _attempt in range(3):
        driver.execute_script(f"Plotly.relayout({GRAPH}, {{'xaxis.range[0]': 0, 'xaxis.range[1]': 20e-6}});")
        try:
            wait_for(driver, lambda d: d.find_element("id", "tl-status").text.startswith("view 20 µs"),
                     "the 20 us view", timeout=10)
        except pytest.fail.Exception:
            continue
        wait_idle(driver)
        if driver.find_element("id", "tl-status").text.startswith("view 20 µs"):
            return
    pytest.fail("the timeline did not keep the 20 us view: " + driver.find_element("id", "tl-status").text)


def test_box_select_summarizes_the_dragged_range(timeline, dashboard_server):
    from selenium.webdriver.common.action_chains import ActionChains

    # a fresh page: nothing left in flight by the tests before (a search's step to its match once landed after
    # the view below was set, and the drag then summarised 749 ns of the match's view)
    timeline.get(dashboard_server.url + "/")
    wait_for(timeline, _ticktext, "the timeline rows")
    wait_idle(timeline)
    _show_20us(timeline)
    titles = _js(timeline, "Array.prototype.map.call(document.querySelectorAll('#timeline-graph .modebar-btn'),"
                           " function (b) { return b.getAttribute('data-title'); })")
    assert "Box Select" in titles, titles
    assert not [t for t in titles if "Share" in t or "Cloud" in t or "Studio" in t], titles  # nothing uploads data
    timeline.find_element("css selector", '#timeline-graph .modebar-btn[data-title="Box Select"]').click()
    wait_for(timeline, lambda d: _js(d, f"{GRAPH}._fullLayout.dragmode") == "select", "box select mode")
    drag = timeline.find_element("css selector", "#timeline-graph .nsewdrag")
    width = drag.size["width"]
    # drag from 1/4 to 3/4 of the plot, across the rows: the range summarised is about [5, 15] µs (with pauses:
    # plotly.js throttles the selection it computes while dragging, and a loaded machine once released the button
    # before the last move was taken into account)
    ActionChains(timeline).move_to_element_with_offset(drag, -width // 4, 0).click_and_hold().pause(0.1) \
        .move_by_offset(width // 8, 5).pause(0.1).move_by_offset(width // 8, 5).pause(0.1) \
        .move_by_offset(width // 4, 5).pause(0.3).release().perform()
    text = wait_for(timeline, lambda d: d.find_element("id", "sel-duration").text
                    if d.find_elements("id", "sel-duration") else None, "the selection summary")
    assert "µs" in text and 8.0 < float(text.split()[0]) < 12.0, text
    assert timeline.find_element("id", "sel-engines").text
    waits = timeline.find_element("id", "selection-waits").text     # what the engines waited on in the range
    assert waits.startswith("Waits") and ("waiting on" in waits or "No semaphore waits" in waits), waits
    timeline.find_element("css selector", '#timeline-graph .modebar-btn[data-title="Zoom"]').click()  # as it was
    assert console_errors(timeline) == []


def test_summarize_view_says_it_is_working_while_it_does(timeline, dashboard_server, monkeypatch):
    """A summary of a large range takes seconds; the button gave no sign of it and could be pressed again."""
    import time

    from dashboard.pages import timeline as page

    real = page.selection_outputs

    def slow(*args, **kwargs):
        time.sleep(2.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(page, "selection_outputs", slow)
    timeline.get(dashboard_server.url + "/")
    wait_for(timeline, _ticktext, "the timeline rows")
    wait_idle(timeline)
    button = timeline.find_element("id", "tl-summarize")
    button.click()
    wait_for(timeline, lambda d: d.find_element("id", "tl-selection-busy").text == "summarizing…"
             and not d.find_element("id", "tl-summarize").is_enabled(), "the busy note and the disabled button")
    wait_for(timeline, lambda d: d.find_elements("id", "sel-duration"), "the summary")
    wait_for(timeline, lambda d: d.find_element("id", "tl-selection-busy").text == ""
             and d.find_element("id", "tl-summarize").is_enabled(), "the note gone and the button back")
    assert console_errors(timeline) == []


def test_sql_query_returns_rows(browser, dashboard_server):
    browser.get(dashboard_server.url + "/sql?trace=t0")
    run = wait_for(browser, lambda d: d.find_elements("id", "sql-run"), "the SQL page")[0]
    run.click()
    wait_for(browser, lambda d: d.find_elements("id", "sql-ok"), "query results")
    assert "rows in" in browser.find_element("id", "sql-ok").text
    cells = wait_for(browser, lambda d: d.find_elements("css selector", "#sql-grid .ag-cell"), "grid cells")
    assert any(c.text == "Tensor" for c in cells)
    # A write is refused inline, as one line.
    from selenium.webdriver.common.keys import Keys

    editor = browser.find_element("id", "sql-query")
    editor.send_keys(Keys.CONTROL, "a")   # (clear() empties the DOM, not the React component's value)
    editor.send_keys(Keys.DELETE)
    editor.send_keys("COPY Instruction TO '/tmp/trnprof-should-not-exist.csv'")
    run.click()
    err = wait_for(browser, lambda d: d.find_elements("id", "sql-error"), "the inline error")[0]
    assert err.text.startswith("not allowed: COPY") and "\n" not in err.text
    assert console_errors(browser) == []


def test_sql_grid_shows_text_after_numbers_in_the_same_columns(browser, dashboard_server):
    """Columns are keyed c0, c1, ... in every result: a text result after a numeric one must show its text."""
    from selenium.webdriver.common.keys import Keys

    browser.get(dashboard_server.url + "/sql?trace=t0")
    run = wait_for(browser, lambda d: d.find_elements("id", "sql-run"), "the SQL page")[0]
    editor = browser.find_element("id", "sql-query")
    def cells(d):  # read in one script: the grid replaces its cells as it renders
        return set(d.execute_script("return Array.prototype.map.call(document.querySelectorAll('#sql-grid .ag-cell'),"
                                    " function (c) { return c.textContent.trim(); });"))

    for query, want in (("SELECT 1 AS a, 2 AS b", {"1", "2"}),
                        ("SELECT 'hello' AS a, 'world' AS b", {"hello", "world"})):
        editor.send_keys(Keys.CONTROL, "a")
        editor.send_keys(Keys.DELETE)
        editor.send_keys(query)
        run.click()
        wait_for(browser, lambda d, w=want: w <= cells(d), f"the cells of {query!r}")
        assert "Invalid Number" not in cells(browser), cells(browser)
    assert console_errors(browser) == []


def test_sql_grid_shows_columns_whose_names_have_dots(browser, dashboard_server):
    """AG Grid reads a field with a dot as a path into nested data; the page keys columns so every cell shows."""
    browser.get(dashboard_server.url + "/sql?trace=t0")
    run = wait_for(browser, lambda d: d.find_elements("id", "sql-run"), "the SQL page")[0]
    from selenium.webdriver.common.keys import Keys

    editor = browser.find_element("id", "sql-query")
    editor.send_keys(Keys.CONTROL, "a")   # (clear() empties the DOM, not the React component's value)
    editor.send_keys(Keys.DELETE)
    editor.send_keys('SELECT 1.5 * 2 AS plain, 1.5 * 2, 42 AS "a.b"')
    run.click()
    wait_for(browser, lambda d: d.find_elements("id", "sql-ok"), "query results")

    def cells(d):
        found = d.find_elements("css selector", "#sql-grid .ag-row .ag-cell")
        return [c.text for c in found] if len(found) == 3 else None

    assert wait_for(browser, cells, "three grid cells") == ["3.0", "3.0", "42"]
    headers = [h.text for h in browser.find_elements("css selector", "#sql-grid .ag-header-cell-text")]
    assert headers == ["plain", "(1.5 * 2)", "a.b"]
    assert console_errors(browser) == []


def test_summary_page_shows_its_charts(browser, dashboard_server):
    browser.get(dashboard_server.url + "/summary?trace=t0")
    n_bars = ("Array.from(document.querySelectorAll('#summary-charts .js-plotly-plot'))"
              ".map(function (gd) { return gd.querySelectorAll('.bars path').length; })")

    def drawn(d):
        bars = _js(d, n_bars)
        return bars if bars and len(bars) >= 5 and all(bars) else None

    bars = wait_for(browser, drawn, "every summary chart drawn with bars")
    assert bars[0] == 5                                                    # one bar per engine
    assert "Tensor MATMUL" in browser.find_element("id", "summary-chart-1").text
    assert len(browser.find_elements("css selector", "#summary-cards .card")) >= 5
    assert console_errors(browser) == []


def test_a_narrow_window_wraps_the_header_instead_of_scrolling_sideways(browser, dashboard_server):
    size = browser.get_window_size()
    try:
        browser.set_window_size(700, 900)
        browser.get(dashboard_server.url + "/sql?trace=t0")
        wait_for(browser, lambda d: d.find_elements("id", "sql-run"), "the SQL page")
        widths = _js(browser, "[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], widths                      # no sideways scroll
        assert browser.find_element("id", "trace-dropdown").is_displayed()
        # the Traces page too: its "what" text and its row of links wrap (below ~1,350 px the links hid behind a
        # scrollbar), each link kept whole
        browser.get(dashboard_server.url + "/traces?trace=t0")
        wait_for(browser, lambda d: d.find_elements("id", "pick-t0"), "the traces table")
        widths = _js(browser, "[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], widths
        assert browser.find_element("id", "pick-t0").size["height"] < 30
    finally:
        browser.set_window_size(size["width"], size["height"])


def test_a_link_to_a_view_opens_there_and_the_page_offers_one(browser, dashboard_server):
    browser.get(dashboard_server.url + "/?trace=t0&start=10000&end=15000")
    wait_for(browser, _ticktext, "the timeline rows")
    wait_idle(browser)
    rng = _js(browser, f"{GRAPH}._fullLayout.xaxis.range")     # (axis seconds from the trace's start)
    assert abs((rng[1] - rng[0]) * 1e9 - 5_000) < 50, rng
    assert "start=10000" in browser.current_url                  # the page kept the link's view in its URL
    href = wait_for(browser, lambda d: d.find_element("id", "tl-link").get_attribute("href") or None, "the link")
    assert "start=10000" in href and "end=15000" in href and "trace=t0" in href
    assert console_errors(browser) == []


def test_a_link_keeps_the_selected_event_and_the_options(browser, dashboard_server):
    """Select an instruction and colour by engine: the page's link carries both; opening it shows the same view,
    colour mode, details, outline and dependency arrows."""
    _select_the_matmul_at_15us(browser, dashboard_server.url)
    browser.find_element("css selector", "#colour-by input[value='engine']").click()

    def link_with_both(driver):
        href = driver.find_element("id", "tl-link").get_attribute("href") or ""
        return href if "select=Instruction" in href and "colour=engine" in href else None

    href = wait_for(browser, link_with_both, "a link with the selection and the colour mode")
    assert "start=" in href and "end=" in href
    wait_for(browser, _arrows_drawn, "the arrows, kept by the figure rebuilt for the new colour mode")
    browser.get(href)
    wait_for(browser, _ticktext, "the timeline rows of the link")
    wait_for(browser, lambda d: "MATMUL" in d.find_element("id", "tl-details").text, "the linked event's details")
    shapes = wait_for(browser, _arrows_drawn, "the linked event's outline and arrows")
    assert shapes[0][0] == "selected"
    assert browser.find_element("css selector", "#colour-by input[value='engine']").is_selected()
    rng = _js(browser, f"{GRAPH}._fullLayout.xaxis.range")
    assert abs((rng[1] - rng[0]) * 1e9 - 500) < 50, rng          # the view of the link
    # a link with a search too: its matches are listed, but the link's view and selected event stay
    browser.get(href + "&search=LDWEIGHTS")
    wait_for(browser, lambda d: "matches" in (_js(d, "(document.getElementById('search-count') || {}).textContent")
                                              or ""), "the link's search listed")
    assert "MATMUL" in _js(browser, "document.getElementById('details-title').textContent")
    rng = _js(browser, f"{GRAPH}._fullLayout.xaxis.range")
    assert abs((rng[1] - rng[0]) * 1e9 - 500) < 50, rng
    browser.find_element("id", "search-next").click()             # the first step goes to the first match
    wait_for(browser, lambda d: "LDWEIGHTS" in (_js(d, "(document.getElementById('details-title') || {}).textContent")
                                                or ""), "the first match")
    assert "search=LDWEIGHTS" in browser.find_element("id", "tl-link").get_attribute("href")
    assert console_errors(browser) == []


def _press_m_at(driver, x_axis, row_label):
    """Move the mouse to ``x_axis`` (axis seconds) on the row labelled ``row_label`` and press M."""
    _pointer_to(driver, x_axis, row_label).perform()
    driver.find_element("tag name", "body").send_keys("m")


def _marker_xs(driver):
    return _js(driver, f"({GRAPH}.layout.shapes || []).filter(function (s) {{ return /^M\\d+$/.test(s.name); }})"
                       ".map(function (s) { return s.x0; })")


def _two_markers(driver):
    xs = _marker_xs(driver)
    return xs if len(xs) == 2 else None


def test_markers_snap_to_event_edges_show_the_time_between_them_and_travel_in_links(browser, dashboard_server):
    """M pins a marker at the mouse, snapped to an exactly drawn event's edge within a few pixels (the trace
    factory's MATMUL of iteration 10 starts at +14.99 µs); the line under the graph gives the time between
    markers, the link to the view carries them, × removes one and "clear" all."""
    browser.get(dashboard_server.url + "/?trace=t0")
    wait_for(browser, _ticktext, "the timeline rows")
    wait_idle(browser)
    browser.execute_script(f"Plotly.relayout({GRAPH}, {{'xaxis.range[0]': 14.9e-6, 'xaxis.range[1]': 15.4e-6}});")
    wait_for(browser, lambda d: (_dx(d) or 1) < 4e-9 and _js(d, "window.trnprofHoverText(0, 15.0e-6)"),
             "the zoomed-in redraw with its events listed")
    wait_idle(browser)
    assert not browser.find_element("id", "tl-markers-clear").is_displayed()   # nothing to clear or export yet
    _press_m_at(browser, 14.9915e-6, "NC0 · Tensor")          # 1.5 ns (~3 px) after the MATMUL's start
    xs = wait_for(browser, lambda d: _marker_xs(d) or None, "the first marker")
    assert xs == [pytest.approx(14.99e-6, abs=1e-13)], xs     # snapped to the edge
    _press_m_at(browser, 15.2e-6, "NC0 · Tensor")              # in the middle of the MATMUL: not snapped
    xs = wait_for(browser, _two_markers, "the second marker")
    assert xs[1] == pytest.approx(15.2e-6, abs=2e-9)
    line = browser.find_element("id", "tl-markers-line").text
    assert "M1" in line and "M2" in line and "M1 → M2" in line, line
    assert browser.find_element("id", "tl-markers-csv").is_displayed()
    href = browser.find_element("id", "tl-link").get_attribute("href")
    assert "markers=" in href, href
    browser.find_element("css selector", "#marker-1 button").click()     # remove M1: the other is M1 now
    wait_for(browser, lambda d: len(_marker_xs(d)) == 1, "one marker left")
    assert _marker_xs(browser)[0] == pytest.approx(15.2e-6, abs=2e-9)
    browser.get(href)                                            # the link brings both back
    wait_for(browser, _ticktext, "the timeline rows of the link")
    xs = wait_for(browser, _two_markers, "the linked markers")
    assert xs[0] == pytest.approx(14.99e-6, abs=1e-13)
    browser.find_element("id", "tl-markers-clear").click()
    wait_for(browser, lambda d: _marker_xs(d) == [], "no markers after clear")
    assert "press M" in browser.find_element("id", "tl-markers-line").text
    wait_for(browser, lambda d: not d.find_element("id", "tl-markers-csv").is_displayed(), "the CSV button hidden")
    assert console_errors(browser) == []


def _legend_counts(driver):
    """(swatches in the legend, swatches shown)."""
    return _js(driver, "(function () { var it = document.querySelectorAll('#tl-legend .legend-item');"
                       "  var shown = Array.prototype.filter.call(it, function (e) {"
                       "    return e.style.display !== 'none'; });"
                       "  return [it.length, shown.length]; })()")


def _some_hidden(driver):
    total, shown = _legend_counts(driver)
    return (total, shown) if total and shown < total else None


def _all_shown(driver):
    total, shown = _legend_counts(driver)
    return total > 0 and total == shown


def test_the_legend_lists_only_the_colours_in_view(browser, dashboard_server):
    """The strips cover the fetched buffer, wider than the view: swatches of colours no pixel in view has are
    hidden, and come back when the view widens."""
    browser.get(dashboard_server.url + "/?trace=t0&start=8000&end=8200")
    wait_for(browser, _ticktext, "the timeline rows")
    wait_idle(browser)
    total, shown = wait_for(browser, _some_hidden, "some swatches hidden")
    assert 1 <= shown < total
    browser.find_element("tag name", "body").send_keys("r")
    wait_for(browser, _all_shown, "every swatch shown for the whole trace")
    assert console_errors(browser) == []


def test_the_views_csv_links_follow_the_view_and_download_its_rows(timeline):
    from urllib.parse import parse_qs, urlparse

    link = timeline.find_element("id", "tl-export-Instruction")
    href = wait_for(timeline, lambda d: link.get_attribute("href") or None, "the export link")
    values = {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}
    assert values["table"] == "Instruction" and values["trace"] == "t0"
    view = timeline.execute_script(f"var r = {GRAPH}._fullLayout.xaxis.range; return [r[0], r[1]];")
    assert int(values["end"]) > int(values["start"]) and view[1] > view[0]
    # the browser fetches it from the same server: a CSV of that window's instructions
    text = timeline.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "fetch(arguments[0]).then(r => r.text().then(t => done([r.status, r.headers.get('content-type'), t])));",
        href)
    status, kind, body = text
    assert status == 200 and kind.startswith("text/csv")
    lines = body.splitlines()
    assert lines[0].startswith('"track_id","id","start_ts"') and len(lines) > 100
    assert console_errors(timeline) == []


def test_the_row_filter_keeps_the_rows_it_names_and_travels_in_links(browser, dashboard_server):
    """Type a filter and press Enter: only its rows are drawn (their lanes too), the status says how many, a click
    on a kept row still finds its instruction, and the page's link opens with the same rows and filter text."""
    from selenium.webdriver.common.keys import Keys

    browser.get(dashboard_server.url + "/?trace=t0")
    every = wait_for(browser, _ticktext, "the timeline rows")
    wait_idle(browser)
    box = browser.find_element("id", "row-filter")
    box.send_keys("Tensor, -NC0\n")
    wait_for(browser, lambda d: _ticktext(d) == ["NC1 · Tensor"], "only core 1's Tensor row")
    status = wait_for(browser, lambda d: "rows match" in d.find_element("id", "tl-status").text
                      and d.find_element("id", "tl-status").text, "the status line's note")
    assert f"1 of {len(every)} rows match 'Tensor, -NC0'" in status
    lanes = _js(browser, f"{GRAPH}.data.slice(1).map(function (t) {{ return t.name || ''; }})")
    assert not any("Vector" in name for name in lanes), lanes
    wait_idle(browser)
    _zoom_to_15us(browser)
    _click_at(browser, 15.15e-6, "NC1 · Tensor")
    wait_for(browser, lambda d: "MATMUL" in d.find_element("id", "tl-details").text, "the kept row's details")
    href = wait_for(browser, lambda d: (d.find_element("id", "tl-link").get_attribute("href") or "")
                    if "tracks=" in (d.find_element("id", "tl-link").get_attribute("href") or "") else None,
                    "a link with the filter")
    browser.get(href)
    wait_for(browser, lambda d: _ticktext(d) == ["NC1 · Tensor"], "the link's rows")
    assert browser.find_element("id", "row-filter").get_attribute("value") == "Tensor, -NC0"
    # a malformed filter draws every row and says why
    box = browser.find_element("id", "row-filter")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("/(/\n")
    wait_for(browser, lambda d: len(_ticktext(d) or []) == len(every), "every row again")
    wait_for(browser, lambda d: "bad regular expression" in d.find_element("id", "tl-status").text,
             "the status line's reason")
    assert console_errors(browser) == []


def test_a_querys_rows_go_from_the_sql_page_to_the_timeline_and_select_their_events(browser, dashboard_server):
    """Run a query with start_ts on the SQL page, follow its link: the timeline draws the query's rows first; a
    click on one selects the instruction its row names; "edit" reopens it in the SQL page, "remove" takes it
    away."""
    from selenium.webdriver.common.keys import Keys

    from profiler.sql_examples import TIMELINE_EXAMPLE

    sql = ("SELECT 'Instruction' AS table_name, id, start_ts, end_ts, opcode AS name, engine AS track "
           "FROM Instruction WHERE opcode = 'MATMUL'")
    browser.get(dashboard_server.url + "/?trace=t0")      # the timeline offers rows from a query
    wait_for(browser, lambda d: d.find_elements("id", "tl-query-add"), "the timeline's query link")[0].click()
    editor = wait_for(browser, lambda d: d.find_elements("id", "sql-query"), "the SQL page")[0]
    wait_for(browser, lambda d: d.find_element("id", "sql-query").get_attribute("value") == TIMELINE_EXAMPLE,
             "the example in the editor")
    editor.send_keys(Keys.CONTROL, "a")
    editor.send_keys(Keys.DELETE)
    editor.send_keys(sql)
    browser.find_element("id", "sql-run").click()
    link = wait_for(browser, lambda d: d.find_elements("id", "sql-timeline-link"), "the timeline link")[0]
    link.click()
    wait_for(browser, lambda d: (_ticktext(d) or [""])[0] == "SQL · Tensor", "the query's row first")
    assert "query=" in browser.current_url
    assert sql[:40] in browser.find_element("id", "tl-query-bar").text
    wait_for(browser, lambda d: "query: " in d.find_element("id", "tl-status").text, "the query's note")
    wait_idle(browser)
    _zoom_to_15us(browser)
    _click_at(browser, 15.15e-6, "SQL · Tensor")
    title = wait_for(browser, lambda d: (_js(d, "(document.getElementById('details-title') || {}).textContent")
                                         or "") if "MATMUL" in (_js(d, "(document.getElementById('details-title')"
                                                                     " || {}).textContent") or "") else None,
                     "the linked instruction's details")
    assert title.startswith("Instruction")
    edit = browser.find_element("link text", "edit in the SQL page").get_attribute("href")
    assert "/sql?" in edit and "query=" in edit
    browser.find_element("id", "tl-query-remove").click()
    wait_for(browser, lambda d: not any(label.startswith("SQL") for label in (_ticktext(d) or ["SQL"])),
             "the timeline without the query's rows")
    assert "query=" not in browser.current_url
    browser.get(edit)
    wait_for(browser, lambda d: d.find_element("id", "sql-query").get_attribute("value") == sql,
             "the query in the SQL page's editor")
    assert console_errors(browser) == []


def test_a_counter_query_is_drawn_as_lanes(browser, dashboard_server):
    from urllib.parse import quote

    sql = ("SELECT start_ts, sum(duration_ns) OVER (ORDER BY start_ts, id) AS value, 'busy so far' AS track "
           "FROM Instruction WHERE engine = 'Tensor'")
    browser.get(dashboard_server.url + "/?trace=t0&query=" + quote(sql))
    names = wait_for(browser, lambda d: (_js(d, f"{GRAPH} && {GRAPH}.data && {GRAPH}.data.map("
                                                "function (t) { return t.name || ''; })") or None)
                     if "SQL · busy so far: max" in (_js(d, f"{GRAPH} && {GRAPH}.data && {GRAPH}.data.map("
                                                         "function (t) { return t.name || ''; })") or [])
                     else None, "the query's lane")
    assert "SQL · busy so far: mean" in names
    assert "samples on 1 lane" in browser.find_element("id", "tl-status").text
    assert console_errors(browser) == []


def test_a_searchs_matches_become_a_timeline_row(browser, dashboard_server):
    browser.get(dashboard_server.url + "/?trace=t0")
    wait_for(browser, _ticktext, "the timeline rows")
    wait_idle(browser)
    browser.find_element("id", "search-input").send_keys("LDWEIGHTS\n")
    link = wait_for(browser, lambda d: d.find_elements("id", "search-as-row"), "the search's row link")[0]
    link.click()
    wait_for(browser, lambda d: (_ticktext(d) or [""])[0] == "SQL · search LDWEIGHTS", "the matches' row first")
    wait_for(browser, lambda d: "intervals on 1 row" in d.find_element("id", "tl-status").text, "the query's note")
    assert console_errors(browser) == []


def test_what_led_here_lists_the_chain_and_its_steps_select_their_events(browser, dashboard_server):
    _select_the_matmul_at_15us(browser, dashboard_server.url)
    browser.find_element("id", "details-chain-go").click()
    head = wait_for(browser, lambda d: d.find_elements("id", "details-chain-head"), "the chain")[0].text
    assert "steps over" in head and "busy" in head
    steps = browser.find_elements("css selector", "#details-chain .chain-steps button")
    assert len(steps) >= 2 and steps[0].text.startswith("Tensor MATMUL")     # the selected event, latest first
    # drawn over the timeline, in the link to the view, and hidden again
    browser.find_element("id", "details-chain-draw").click()

    def chain_traces(driver):
        names = _js(driver, f"{GRAPH}.data.map(function (t) {{ return t.name || ''; }})") or []
        return [n for n in names if n.startswith("chain to Instruction")]

    assert wait_for(browser, chain_traces, "the chain drawn on the timeline")[-1].startswith("chain to Instruction")
    assert "chain=Instruction" in browser.find_element("id", "tl-link").get_attribute("href")
    browser.find_element("id", "details-chain-draw").click()
    wait_for(browser, lambda d: not chain_traces(d), "the chain hidden")
    title = browser.find_element("id", "details-title").text
    steps = browser.find_elements("css selector", "#details-chain .chain-steps button")
    steps[1].click()                                                         # what it waited for: selected
    wait_for(browser, lambda d: d.find_element("id", "details-title").text != title, "the step's details")
    assert console_errors(browser) == []



def test_a_running_sql_query_disables_run_and_says_so(browser, dashboard_server):
    """Nothing changed while a query ran: users clicked Run again, queueing queries that held the server's SQL slots
    after their answers were dropped."""
    from selenium.webdriver.common.keys import Keys

    browser.get(dashboard_server.url + "/sql?trace=t0")
    run = wait_for(browser, lambda d: d.find_elements("id", "sql-run"), "the SQL page")[0]
    editor = browser.find_element("id", "sql-query")
    editor.send_keys(Keys.CONTROL, "a")
    editor.send_keys(Keys.DELETE)
    editor.send_keys("SELECT count(*) FROM Instruction a, Instruction b, Instruction c "
                     "WHERE a.start_ts + b.start_ts + c.start_ts = 12345")
    timeout = browser.find_element("id", "sql-timeout")
    timeout.send_keys(Keys.CONTROL, "a")
    timeout.send_keys("3")
    run.click()
    wait_for(browser, lambda d: d.find_element("id", "sql-busy").text == "running…"
             and not d.find_element("id", "sql-run").is_enabled(), "the running state")
    wait_for(browser, lambda d: d.find_elements("id", "sql-error") or d.find_elements("id", "sql-ok"),
             "the query's end", timeout=30)
    wait_for(browser, lambda d: d.find_element("id", "sql-run").is_enabled()
             and d.find_element("id", "sql-busy").text == "", "Run enabled again")


def test_the_address_bar_follows_the_view_so_a_reload_keeps_it(browser, dashboard_server):
    """Only "link to this view" held the view: a reload lost the zoom and the options (an audit of interactions).
    The address bar now follows it (history.replaceState: no navigation), and a reload opens the same view."""
    browser.get(dashboard_server.url + "/?trace=t0")
    wait_for(browser, _ticktext, "the timeline rows")
    wait_idle(browser)
    _zoom_to_15us(browser)
    wait_for(browser, lambda d: "start=" in d.current_url and "end=" in d.current_url, "the view in the address bar")
    url = browser.current_url
    assert "trace=t0" in url
    browser.refresh()
    wait_for(browser, _ticktext, "the timeline rows after the reload")
    wait_idle(browser)
    rng = _js(browser, f"{GRAPH}._fullLayout.xaxis.range")
    assert abs((rng[1] - rng[0]) - 0.5e-6) < 0.05e-6, rng                 # the zoomed view, not the whole trace
    assert console_errors(browser) == []


def test_the_plot_does_not_move_when_the_legend_hides_colours_out_of_view(browser, dashboard_server):
    """Hiding the legend's colours that left the view made it lose a line: the plot moved up under the pointer in
    the middle of a wheel zoom (an audit). The legend keeps its height."""
    browser.get(dashboard_server.url + "/?trace=t0")
    wait_for(browser, _ticktext, "the timeline rows")
    wait_idle(browser)
    top = "return document.querySelector('#timeline-graph .nsewdrag').getBoundingClientRect().top;"
    hidden = ("return Array.prototype.filter.call(document.querySelectorAll('#tl-legend .legend-item[data-slot]'),"
              " function (it) { return it.style.display === 'none'; }).length;")
    before = browser.execute_script(top)
    _zoom_to_15us(browser)
    wait_for(browser, lambda d: d.execute_script(hidden) > 0, "colours out of view hidden from the legend")
    assert abs(browser.execute_script(top) - before) < 1
