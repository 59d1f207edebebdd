"""The analyses in the dashboard, browser-free: selection bounds, summary recommendations, the critical-path overlay
of the timeline, and the compare page's logic (pair choice, synchronised zoom, comparison views)."""

from __future__ import annotations

from pathlib import Path

import dash
import pyarrow as pa
import pytest
from dash import html

from dashboard import compare_logic as cl
from dashboard import timeline_logic as tl
from dashboard import timeline_state as tls
from dashboard.analysis_views import CriticalPathOverlays, analysis_section, bounds_section, recommendation_list
from dashboard.registry import TraceRegistry
from profiler.analyses import recommendations
from profiler.analyses import schema as rs
from profiler.figures.palette import CategoryPalette
from tests.golden.handmade import write_handmade

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    root = tmp_path_factory.mktemp("dash")
    reg = TraceRegistry([write_handmade(root / "a.trace"), write_handmade(root / "b.trace", spill_reload_bytes=400)])
    yield reg
    reg.close()


def _ids(component) -> dict[str, object]:
    """Every component with an id in a Dash tree, by id."""
    found = {}
    stack = [component]
    while stack:
        c = stack.pop()
        if isinstance(c, list | tuple):
            stack.extend(c)
            continue
        if getattr(c, "id", None):
            found[c.id] = c
        children = getattr(c, "children", None)
        if children is not None and not isinstance(children, str):
            stack.append(children)
    return found


def _text(component) -> str:
    if isinstance(component, str):
        return component
    if isinstance(component, list | tuple):
        return " ".join(_text(c) for c in component)
    children = getattr(component, "children", None)
    return "" if children is None else _text(children)


def test_selection_bounds_section(registry):
    trace = registry.open("t0")
    section = bounds_section(trace, 80, 230)
    ids = _ids(section)
    assert ids["bounds-bottleneck"].children == "Tensor"
    rows = ids["bounds-table"].children[1].children
    assert len(rows) == 7 and rows[0].children[0].children == "memory_bound"
    # a window the bounds cannot use says so instead of failing the panel
    assert "unavailable" in _text(bounds_section(trace, 300, 300))


def test_selection_waits_section_says_what_the_engines_waited_on(registry):
    """The selection panel's waits: the sentences of ``trnprof waits`` for the range, largest first; a range
    without waits, or one the analysis cannot take, says so instead of failing the panel."""
    from dashboard.analysis_views import waits_section
    from profiler.analyses.waits import wait_sentences, wait_summary

    trace = registry.open("t0")
    t0, t1 = trace.time_range
    want = wait_sentences(wait_summary(trace, t0, t1, queue_groups=True), 5)
    assert want, "the handmade trace has semaphore waits"
    items = [li.children for li in _ids(waits_section(trace, t0, t1))["selection-waits"].children[1].children]
    assert items == want
    assert "No semaphore waits" in _text(waits_section(trace, t0, t0 + 1))
    assert "unavailable" in _text(waits_section(trace, 300, 300))


def test_summary_recommendations(registry):
    trace = registry.open("t0")
    recs = recommendations(trace)
    items = recommendation_list(recs).children.children
    assert [i.to_plotly_json()["props"]["data-rule"] for i in items] == recs.column("rule").to_pylist()
    assert "13.5%" in _text(items[0])
    section = analysis_section(trace)
    assert "summary-bounds-chart" in _ids(section)
    # the window the bounds cover is said (it is not the trace's whole extent, which a timeline selection takes)
    from profiler.analyses import performance_bounds
    from profiler.figures.timefmt import format_duration

    b = performance_bounds(trace)
    t0, t1 = trace.time_range
    assert (f"cover the kernel, {format_duration(b['end_ns'] - b['start_ns'])} of the trace's "
            f"{format_duration(t1 - t0)}") in _text(section)
    assert "No rule fired" in _text(recommendation_list(recs.slice(0, 0)))


def test_critical_path_overlay_on_the_timeline(registry):
    trace = registry.open("t0")
    overlays = CriticalPathOverlays()
    builder = overlays.builder("t0", trace)
    palette = CategoryPalette()
    plain = tl.update_timeline(trace, "t0", state=None, trigger="initial", width_px=800, palette=palette)
    on = tls.TimelineOptions.parse("opcode", False, True)
    lit = tl.update_timeline(trace, "t0", state=plain.state, trigger="options", width_px=800, options=on,
                             palette=palette, overlay=builder)
    names = [t.name for t in lit.figure.data]
    assert names[-3:] == ["critical path links", "critical path", "range select"]
    assert len(lit.figure.data) == len(plain.figure.data) + 2  # after the strips and lanes
    assert lit.state["critical_path"] is True
    # the path is computed once per trace
    assert overlays.path("t0", trace) is overlays.path("t0", trace)
    # without the option, or without a builder, nothing is drawn
    again = tl.update_timeline(trace, "t0", state=lit.state, trigger="options", width_px=800, palette=palette,
                               overlay=builder)
    assert len(again.figure.data) == len(plain.figure.data)


def test_a_zoom_patches_the_critical_path_overlay_for_its_window(tmp_path):
    """The overlay is drawn for the fetched window at its resolution, rebuilt or patched: what the browser gets
    grows with the pixels, not with the path."""
    import profiler
    from profiler.cli import main

    db = tmp_path / "mlp.duckdb"
    assert main(["ingest", str(SAMPLES / "mlp-trn2.trace"), "-o", str(db)]) == 0
    with profiler.open(db) as trace:
        overlays = CriticalPathOverlays()
        builder = overlays.builder("t0", trace)
        palette = CategoryPalette()
        on = tls.TimelineOptions.parse("opcode", False, True)
        lit = tl.update_timeline(trace, "t0", state=None, trigger="initial", width_px=800, options=on,
                                 palette=palette, overlay=builder)
        t0, t1 = trace.time_range
        a, b = t0 + (t1 - t0) // 3, t0 + (t1 - t0) // 3 + (t1 - t0) // 50
        origin = lit.state["origin"]
        zoom = tl.update_timeline(trace, "t0", state=lit.state, trigger="relayout", width_px=800, options=on,
                                  palette=palette, overlay=builder,
                                  relayout={"xaxis.range[0]": (a - origin) / 1e9, "xaxis.range[1]": (b - origin) / 1e9})
        assert zoom.figure is None and zoom.fetched
        first_overlay = len(lit.figure.data) - 3         # (links, segments, then the range select trace)
        patched = zoom.changes["data"]
        assert {first_overlay, first_overlay + 1} <= set(patched) and first_overlay + 2 not in patched
        seg = patched[first_overlay + 1]
        whole = next(t for t in lit.figure.data if t.name == "critical path")
        assert set(seg) == {"x", "y", "text"} and 0 < len(seg["x"]) < len(whole.x)   # only the zoomed window
        buf = zoom.state["buffer"]   # every segment overlaps the fetched window
        spans = [(seg["x"][k] * 1e9 + origin, seg["x"][k + 1] * 1e9 + origin) for k in range(0, len(seg["x"]), 3)]
        assert all(e > buf["start_ns"] - 1 and s < buf["end_ns"] + 1 for s, e in spans)
        assert len(spans) == len({(round(s), round(e)) for s, e in spans})


def test_pair_choice(registry):
    assert cl.default_pair(registry, "t0", {}) == ("t0", "t1")
    assert cl.default_pair(registry, "t1", {"b": "t0"}) == ("t1", "t0")
    assert cl.default_pair(registry, "t0", {"b": "t0"}) == ("t0", "t1")  # never a trace with itself
    assert cl.default_pair(registry, "t0", {"b": "../etc"}) == ("t0", "t1")
    assert cl.check_pair(registry, "t0", "t1") is None
    assert "different" in cl.check_pair(registry, "t0", "t0")
    assert "served" in cl.check_pair(registry, "t0", "/tmp/x")


def test_sync_relayout():
    assert cl.sync_relayout({"xaxis.range[0]": 1e-6, "xaxis.range[1]": 3e-6}) == {
        "xaxis.range[0]": 1e-6, "xaxis.range[1]": 3e-6}
    assert cl.sync_relayout({"xaxis.range": [3e-6, 1e-6]}) == {"xaxis.range[0]": 1e-6, "xaxis.range[1]": 3e-6}
    assert cl.sync_relayout({"xaxis.autorange": True}) == {"xaxis.autorange": True}
    assert cl.sync_relayout({"dragmode": "pan"}) is None
    assert cl.sync_relayout(None) is None


def test_a_followed_reset_is_never_clamped():
    """The side that follows a zoom is "clamped" when its trace is too short for the range asked; a reset (a
    double-click on the other side) asks for no range (it raised TypeError, failing the follower's update)."""
    state = {"origin": 0, "view": [0, 5_000]}
    assert cl.clamped({"xaxis.autorange": True}, state) is False
    assert cl.clamped({"xaxis.range[0]": 0.0, "xaxis.range[1]": 5e-6}, state) is False
    assert cl.clamped({"xaxis.range[0]": 0.0, "xaxis.range[1]": 9e-6}, state) is True
    assert cl.clamped({"dragmode": "pan"}, state) is False


def test_compare_views(registry):
    diffs = cl.DiffCache()
    pair, headline, charts, deltas, title_a, title_b = cl.compare_outputs(registry, diffs, "t0", "t1", by="opcode")
    assert pair == {"a": "t0", "b": "t1"} and (title_a, title_b) == ("A: a", "B: b")
    ids = _ids([headline, charts, deltas])
    assert ids["cmp-total"].children == "370 ns → 370 ns — same time"
    assert ids["cmp-bottleneck"].children == "Tensor → Tensor"
    assert {"cmp-engines-chart", "cmp-bounds-chart", "cmp-delta-chart"} <= set(ids)
    # the charts name their window (the bounds'), which is not the headline's first event to last
    assert ids["cmp-engines-chart"].figure.layout.title.text == cl.ENGINES_CHART_TITLE
    assert "first DMA start to last DMA end" in cl.ENGINES_CHART_TITLE
    assert ids["cmp-bounds-chart"].figure.layout.title.text == cl.BOUNDS_CHART_TITLE
    # B's instruction tree coloured by the change from A: the same traces, so every box is "the same" (0)
    icicle = ids["cmp-instruction-diff"].figure.data[0]
    assert icicle.type == "icicle" and icicle.labels[0] == "NeuronCore 0" and set(icicle.marker.colors) == {0.0}
    assert diffs.instruction_figure(registry, "t0", "t1") is ids["cmp-instruction-diff"].figure   # computed once
    body = ids["cmp-delta-table"].children[1].children
    # no change anywhere: the busiest identities first
    assert [r.children[1].children for r in body] == ["MATMUL", "TENSOR_COPY", "DMA_TRIGGER", "DMA_TRIGGER"]
    assert diffs.get(registry, "t0", "t1") is diffs.get(registry, "t0", "t1")  # computed once
    # changing only the grouping keeps the pair (the timelines are not rebuilt)
    assert cl.compare_outputs(registry, diffs, "t0", "t1", by="operator", by_only=True)[0] is dash.no_update
    bad = cl.compare_outputs(registry, diffs, "t0", "t0", by="opcode")
    assert bad[0] is None and isinstance(bad[1], html.Div) and bad[1].id == "cmp-error"


def test_compare_timelines_follow_each_other(registry):
    sides = cl.SideUpdater(registry, lambda pair: CategoryPalette())
    pair = {"a": "t0", "b": "t1"}
    size = {"width": 600}
    fig_a, state_a, fwd, _, legend_a = sides.update("a", {"cmp-pair"}, pair=pair, size=size, relayout=None, synced=None,
                                         state=None)
    fig_b, state_b, _, _, _ = sides.update("b", {"cmp-pair"}, pair=pair, size=size, relayout=None, synced=None,
                                        state=None)
    assert fwd is dash.no_update and state_a["trace"] == "t0" and state_b["trace"] == "t1"
    assert fig_a.data[0].type == fig_b.data[0].type == "image" and len(fig_a.data) == 1  # strips, no lanes
    names = [str(item.children[1]) for item in legend_a]         # each side has a colour legend
    assert legend_a and "MATMUL" in names
    zoom = {"xaxis.range[0]": 1e-7, "xaxis.range[1]": 2e-7}
    _, state_a2, fwd, _, _ = sides.update("a", {"cmp-graph-a"}, pair=pair, size=size, relayout=zoom, synced=None,
                                      state=state_a)
    assert state_a2["view"] == [100, 200] and fwd["relayout"] == zoom
    _, state_b2, back, _, _ = sides.update("b", {"cmp-sync-b"}, pair=pair, size=size, relayout=None, synced=fwd,
                                       state=state_b)
    assert state_b2["view"] == [100, 200]
    assert back is dash.no_update  # a forwarded zoom is not sent back
    # a zoom B is too short to follow: B shows the nearest range it has, and says so
    t1_end = registry.open("t1").time_range[1]
    late = {"relayout": {"xaxis.range[0]": (t1_end + 50) / 1e9, "xaxis.range[1]": (t1_end + 150) / 1e9}, "seq": 9}
    _, state_b3, _, status, _ = sides.update("b", {"cmp-sync-b"}, pair=pair, size=size, relayout=None, synced=late,
                                          state=state_b2)
    assert state_b3["view"][1] <= t1_end and cl.CLAMPED_NOTE in status
    _, _, _, plain, _ = sides.update("b", {"cmp-sync-b"}, pair=pair, size=size, relayout=None, synced=fwd,
                                  state=state_b3)
    assert plain is dash.no_update or cl.CLAMPED_NOTE not in str(plain)
    # an echo of the same range on A moves nothing, so nothing is forwarded again
    echo = sides.update("a", {"cmp-graph-a"}, pair=pair, size=size, relayout=zoom, synced=None, state=state_a2)
    assert echo is None or echo[2] is dash.no_update
    # a pair that cannot be drawn: the timelines say so (not "loading…" for ever)
    refused = sides.update("a", {"cmp-pair"}, pair=None, size=size, relayout=None, synced=None, state=state_a2)
    assert refused is not None and cl.NO_PAIR in str(refused[0].layout) and refused[1] is None
    assert sides.update("a", {"cmp-graph-a"}, pair={"a": "t0", "b": "t0"}, size=size, relayout=zoom, synced=None,
                        state=None) is None


def test_the_compare_pages_row_filter_redraws_both_timelines_with_its_rows(registry):
    sides = cl.SideUpdater(registry, lambda pair: CategoryPalette())
    pair, size = {"a": "t0", "b": "t1"}, {"width": 600}
    drawn = {}
    for side in ("a", "b"):
        fig, state, *_ = sides.update(side, {"cmp-pair"}, pair=pair, size=size, relayout=None, synced=None,
                                      state=None)
        assert "Vector" in " ".join(fig.layout.yaxis.ticktext)
        fig, state2, _, status, _ = sides.update(side, {"cmp-rows"}, pair=pair, size=size, relayout=None,
                                                 synced=None, state=state, row_filter="Tensor")
        drawn[side] = list(fig.layout.yaxis.ticktext)
        assert state2["row_filter"] == "Tensor" and "rows match 'Tensor'" in status
        zoom = {"xaxis.range[0]": 1e-7, "xaxis.range[1]": 2e-7}   # a zoom keeps the filter
        _, state3, *_ = sides.update(side, {f"cmp-graph-{side}"}, pair=pair, size=size, relayout=zoom, synced=None,
                                     state=state2, row_filter="Tensor")
        assert state3["row_filter"] == "Tensor" and state3["view"] == [100, 200]
    assert all(labels and all(label.endswith("Tensor") for label in labels) for labels in drawn.values())


def test_traces_the_analyses_cannot_compare_still_get_their_timelines(tmp_path):
    """A device trace beside a host-only PyTorch trace: no diff, but both timelines, under the reason."""
    import shutil

    host = tmp_path / "rank0.json.gz"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "pytorch" / "sampled_rank-0.json.gz", host)
    reg = TraceRegistry([write_handmade(tmp_path / "a.trace"), host])
    try:
        pair, headline, charts, deltas, title_a, title_b = cl.compare_outputs(reg, cl.DiffCache(), "t0", "t1",
                                                                              by="opcode")
        assert pair == {"a": "t0", "b": "t1"} and (title_a, title_b) == ("A: a", "B: rank0.json.gz")
        assert headline.id == "cmp-error" and "no instructions or DMA packets" in _text(headline)
        assert charts == [] and deltas == []
        sides = cl.SideUpdater(reg, lambda pair: CategoryPalette())
        fig_b, state_b, *_ = sides.update("b", {"cmp-pair"}, pair=pair, size={"width": 600}, relayout=None,
                                          synced=None, state=None)
        assert state_b["trace"] == "t1" and fig_b.data[0].type == "image"
    finally:
        reg.close()


def test_what_a_recommendation_stands_to_gain_never_reads_as_1x_faster():
    from profiler.analyses.recommendations import stake_text

    base = {rs.IMPACT_NS: 23_160_000}
    assert stake_text({**base, rs.SPEEDUP: None}) == "23.16 ms at stake"
    assert stake_text({**base, rs.SPEEDUP: 1.0}) == "23.16 ms at stake, no faster until the bottleneck moves"
    assert stake_text({**base, rs.SPEEDUP: 1.25}) == "23.16 ms at stake, up to 1.25x faster"
    items = recommendation_list(pa.table({rs.TITLE: ["t"], rs.IMPACT_NS: [23_160_000], rs.SPEEDUP: [1.0],
                                          rs.MESSAGE: ["m"], rs.RULE: ["r"]}))
    assert "1.00x" not in str(items) and "no faster until the bottleneck moves" in str(items)


def test_the_instruction_diff_shows_source_lines_when_both_traces_run_the_same_kernel(tmp_path):
    """A what-if (the same kernel, a cost-model constant changed) lines up by source line; two versions of a kernel
    in two files line up by layer, operator, engine and opcode only."""
    from pathlib import Path

    from tracer.sim import run_kernel

    a, b = tmp_path / "a.trace", tmp_path / "b.trace"
    run_kernel("softmax", {"rows": 256, "cols": 256}, arch="trn1", trace_path=a)
    run_kernel("softmax", {"rows": 256, "cols": 256}, arch="trn1", trace_path=b, overrides={"dma_bandwidth_gbps": 50})
    samples = Path(__file__).resolve().parents[2] / "sample_traces"
    reg = TraceRegistry([a, b, samples / "matmul_naive-trn2.trace", samples / "matmul_rowload-trn2.trace"])
    try:
        diffs = cl.DiffCache()
        what_if = diffs.instruction_figure(reg, "t0", "t1")
        assert "source line" in what_if.layout.title.text
        assert any(str(label).startswith("softmax.py:") for label in what_if.data[0].labels)
        # slower DMA: the DMA triggers' lines keep their time, the run gets longer, nothing is new or gone
        assert "only in A" not in what_if.layout.title.text
        versions = diffs.instruction_figure(reg, "t2", "t3")
        assert "source line" not in versions.layout.title.text
        assert not any(".py:" in str(label) for label in versions.data[0].labels)
    finally:
        reg.close()


def test_what_led_here_lists_the_chain_ending_at_the_selected_event(registry):
    """The hand-made trace's second MATMUL: a chain of five steps over 230 ns (worked out in
    test_analysis_cli.py), the latest first, each a jump link; the breakdown leads with the MATMULs."""
    from dashboard import details as det
    from dashboard.analysis_views import ChainGraphs, chain_panel

    trace = registry.open("t0")
    chains = ChainGraphs()
    chain, back = chains.chain("t0", trace, "Instruction", 3)
    assert back is None
    panel = chain_panel(chain, 0)
    text = _text(panel)
    assert "5 steps over 230 ns since" in text and "96% of it busy" in text
    assert "65% Tensor MATMUL (2×, 150 ns)" in text
    # each step says when it started and which event it is (a dozen "Tensor MATMUL 214 ns" could not be told apart)
    assert "100 ns at +80 ns · Instruction 2 · after" in text and "50 ns at +180 ns · Instruction 3 · after" in text
    links = [c for c in _walk(panel) if isinstance(c, html.Button) and isinstance(c.id, dict)]
    assert any(getattr(c, "id", None) == "details-chain-draw" for c in _walk(panel))
    assert [det.parse_jump_index(b.id["index"])["id"] for b in links] == [3, 2, 1, 1, 0]
    assert chains.chain("t0", trace, "Instruction", 3)[0].equals(chain)       # the graph is kept
    with pytest.raises(Exception, match="leads to instructions and DMA packets"):
        chains.chain("t0", trace, "Span", 1)
    # the details panel offers it for instructions and packets only
    def offers(table: str, ident: int) -> bool:
        return any(getattr(c, "id", None) == "details-chain-go" for c in _walk(det.event_details(trace, table, ident)))

    assert offers("Instruction", 3) and offers("DmaPacket", 2)
    long = chain_panel(chains.chain("t0", trace, "DmaPacket", 2)[0], 0)
    assert "8 steps" in _text(long) and "earlier steps" not in _text(long)
    # a trace with more events than the bound: the chain is followed back over the latest events only, and says so
    small = ChainGraphs(max_events=3)
    cut, back = small.chain("t0", trace, "Instruction", 3)
    assert back is not None and 0 < back <= 180
    assert cut.column(rs.START_NS)[0].as_py() >= back and cut.to_pylist()[-1][rs.ID] == 3
    assert "followed back to" in _text(chain_panel(cut, 0, back))


def _walk(component):
    yield component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list) else [children] if children is not None else []:
        if hasattr(child, "children") or isinstance(child, html.Button):
            yield from _walk(child)


def test_a_chain_is_drawn_over_the_timeline_instead_of_the_critical_path(registry):
    """``options.chain``: the overlay is the chain to that event (named so), patched on zooms; it travels in the
    link; a malformed chain draws none."""
    from urllib.parse import parse_qs

    from dashboard.analysis_views import ChainGraphs

    trace = registry.open("t0")
    overlays, chains = CriticalPathOverlays(), ChainGraphs()
    options = tls.TimelineOptions.parse("opcode", False, chain="Instruction:3")
    assert options.chain_event == ("Instruction", 3) and options.overlay and not options.critical_path
    up = tl.update_timeline(trace, "t0", state=None, trigger="size", width_px=800, options=options,
                            overlay=overlays.builder("t0", trace, options.chain_event, chains))
    drawn = [t for t in up.figure.data if (t.name or "").startswith("chain to Instruction 3")]
    assert [t.name for t in drawn] == ["chain to Instruction 3 links", "chain to Instruction 3"]
    segments = drawn[1]
    # five steps; the two Sync and the two Tensor steps touch, so they merge: Sync 0-20, DMA 30-80, Tensor 80-230
    assert [x for x in segments.x if x is not None] == [0.0, 2e-08, 3e-08, 8e-08, 8e-08, 2.3e-07]
    assert all(text.startswith("chain to Instruction 3:") for text in segments.text if text)
    assert parse_qs(tls.view_link("?trace=t0", up.state).lstrip("?"))["chain"] == ["Instruction:3"]
    assert up.state["overlay_traces"] == 2      # (zooms patch them as the critical path's: options.overlay)
    hidden = tl.update_timeline(trace, "t0", state=up.state, trigger="options", width_px=800,
                                options=tls.TimelineOptions.parse("opcode", False, chain=""),
                                overlay=overlays.builder("t0", trace, None, chains))
    assert not any((t.name or "").startswith("chain to") for t in hidden.figure.data)
    for bad in ("Span:1", "Instruction:x", "Instruction:3; DROP", 5, None):
        assert tls.TimelineOptions.parse("opcode", False, chain=bad).chain == ""
    assert tls.clean_state({**up.state, "chain": "Flow:1"}, "t0")["chain"] == ""
    # the critical-path toggle says the chain is drawn instead (it stayed ticked, as if the path were drawn)
    from dashboard.pages.timeline import critical_path_options

    assert critical_path_options("Instruction:3") == [
        {"label": "critical path (the chain to Instruction 3 is drawn instead)", "value": "on"}]
    assert critical_path_options("") == critical_path_options(None) == [{"label": "critical path", "value": "on"}]


def test_the_small_dma_recommendation_links_to_its_band_on_the_timeline(tmp_path):
    """The summary's small-DMA recommendation links to the timeline drawing the small-DMA band (a query track of
    the example query), for the served trace; rules without such rows have no link."""
    import shutil
    from urllib.parse import parse_qs, urlparse

    from dashboard.analysis_views import analysis_section
    from profiler.sql_examples import EXAMPLE_QUERIES

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "matmul_naive-trn2.trace"
    shutil.copytree(sample, tmp_path / "naive.trace")
    reg = TraceRegistry([tmp_path / "naive.trace"])
    try:
        section = analysis_section(reg.open("t0"), "t0")
        links = {k: v for k, v in _ids(section).items() if isinstance(k, str) and k.startswith("rec-timeline-")}
        assert list(links) == ["rec-timeline-small_dma"]
        query = parse_qs(urlparse(links["rec-timeline-small_dma"].href).query)
        assert query["trace"] == ["t0"]
        assert query["query"] == [dict(EXAMPLE_QUERIES)["Timeline rows: where small DMA transfers take most of the "
                                                         "DMA time"]]
        assert not any(str(k).startswith("rec-timeline-") for k in _ids(analysis_section(reg.open("t0"))))
    finally:
        reg.close()


def test_traces_of_one_name_in_different_folders_get_labels_that_tell_them_apart(tmp_path):
    from dashboard.registry import TraceRegistry

    paths = [tmp_path / "v1" / "mm.trace", tmp_path / "v2" / "mm.trace", tmp_path / "x" / "v1" / "mm.trace",
             tmp_path / "other.trace"]
    labels = [e.label for e in TraceRegistry(paths).entries]
    # each grows by a folder until it is alone: v1/mm is still shared with x/v1/mm, so both take one more
    assert labels == [f"{tmp_path.name}/v1/mm", "v2/mm", "x/v1/mm", "other"]
    assert [e.label for e in TraceRegistry(paths[:1] + paths[3:]).entries] == ["mm", "other"]


def test_a_pairs_comparison_runs_without_the_traces_locks(registry, monkeypatch):
    """The diff of two large traces takes a minute: under the traces' locks both timelines of the compare page,
    and every tab of the two traces, waited for it (60-92 s of "loading...")."""
    import threading

    free: list[bool] = []

    def probe(*args, **kwargs):
        def try_lock(trace_id: str) -> None:
            lock = registry.lock(trace_id)
            if lock.acquire(timeout=2):
                lock.release()
                free.append(True)
            else:
                free.append(False)

        for trace_id in ("t0", "t1"):
            t = threading.Thread(target=try_lock, args=(trace_id,))
            t.start()
            t.join()
        return real_diff(*args, **kwargs)

    real_diff = cl.diff
    monkeypatch.setattr(cl, "diff", probe)
    cl.DiffCache().get(registry, "t0", "t1")
    assert free == [True, True]


def test_the_critical_paths_first_computation_runs_without_the_traces_lock(tmp_path, monkeypatch):
    """The timeline computed the critical path (tens of seconds on a large trace) under the trace's lock: every
    zoom queued behind it, and a zoom made meanwhile could leave a stale figure (an audit of interactions)."""
    import json
    import threading

    from dashboard import analysis_views as av
    from dashboard.app import create_app
    from tests.browser.trace_factory import write_kernel_trace
    from tests.unit.test_dashboard_callbacks_fuzz import post

    app = create_app([write_kernel_trace(tmp_path / "k.trace", iterations=20)])
    registry = app.trnprof_registry
    free: list[bool] = []
    real_path = av.CriticalPathOverlays.path

    def probe(self, trace_id, trace):
        def try_lock() -> None:
            lock = registry.lock(trace_id)
            free.append(lock.acquire(timeout=2))
            if free[-1]:
                lock.release()

        if not free:
            t = threading.Thread(target=try_lock)
            t.start()
            t.join()
        return real_path(self, trace_id, trace)

    monkeypatch.setattr(av.CriticalPathOverlays, "path", probe)
    try:
        resp = post(app, "tl-draw.data", {"url.search": "?trace=t0", "tl-size.data": {"width": 800},
                                          "cp-toggle.value": ["on"]}, "cp-toggle.value")
        assert resp.status_code == 200 and "critical path" in json.dumps(resp.get_json())
    finally:
        registry.close()
    assert free == [True]


def test_one_traces_critical_path_does_not_wait_for_anothers(registry, monkeypatch):
    """CriticalPathOverlays computed every trace's path under one lock: a small trace's toggle waited for a large
    one's first computation (a review)."""
    import threading
    import time

    from dashboard import analysis_views as av

    real = av.critical_path
    started = threading.Event()

    def slow(trace, *args, **kwargs):
        if getattr(trace, "_slow_for_test", False):
            started.set()
            time.sleep(3)
        return real(trace, *args, **kwargs)

    monkeypatch.setattr(av, "critical_path", slow)
    overlays = av.CriticalPathOverlays()
    big, small = registry.open("t0"), registry.open("t1")
    big._slow_for_test = True
    worker = threading.Thread(target=overlays.path, args=("t0", big))
    worker.start()
    try:
        assert started.wait(5)
        t0 = time.perf_counter()
        assert overlays.path("t1", small).num_rows > 0
        assert time.perf_counter() - t0 < 2       # (not behind the 3 s computation)
    finally:
        worker.join()
        del big._slow_for_test
    assert overlays.path("t0", big).num_rows > 0  # (cached)
