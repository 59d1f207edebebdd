"""The selection panel's names with the most time: exact against SQL, and an estimate that says it is one."""

from __future__ import annotations

import random

import profiler
from dashboard import selection_view
from profiler import selection
from profiler.selection import selection_summary
from tracer import schema as ts


def _oracle(trace, a: int, b: int) -> dict[str, int]:
    rows = trace.sql(f"SELECT {ts.OPCODE}, {ts.START_TS}, {ts.END_TS} FROM {ts.INSTRUCTION.name}").fetchall()
    out: dict[str, int] = {}
    for name, s, e in rows:
        inside = min(e, b) - max(s, a)
        if inside > 0:
            out[name] = out.get(name, 0) + inside
    return out


def test_the_names_time_in_random_ranges_is_exact(two_core_trace):
    rng = random.Random(7)
    with profiler.open(two_core_trace) as t:
        lo, hi = t.time_range
        ranges = [(lo, hi)] + [tuple(sorted(rng.sample(range(lo, hi), 2))) for _ in range(12)]
        for a, b in ranges:
            s = selection_summary(t, a, b)
            want = _oracle(t, a, b)
            ranked = sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))[:selection.TOP_N]
            assert s.names_exact and s.top_names == ranked, (a, b)
            assert s.names_total_ns == sum(want.values())


def test_past_the_limit_the_names_are_estimated_and_the_panel_says_so(two_core_trace, monkeypatch):
    with profiler.open(two_core_trace) as t:
        lo, hi = t.time_range
        exact = selection_summary(t, lo, hi)
        monkeypatch.setattr(selection, "EXACT_NAMES_LIMIT", 0)
        a, b = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        est = selection_summary(t, a, b)
        want = _oracle(t, a, b)
    assert not est.names_exact and est.names_events > 0
    # every bucket's time is credited inside the range only: the names' total never passes the range's time
    assert est.names_total_ns <= sum(want.values()) * 1.001 + 1
    assert {n for n, _ in est.top_names} <= set(want)
    heading = [c for c in _walk(selection_view.render_selection(est)) if getattr(c, "id", None) == "sel-top-heading"]
    assert heading and "estimated from the index" in heading[0].children
    assert exact.names_exact
    heading = [c for c in _walk(selection_view.render_selection(exact)) if getattr(c, "id", None) == "sel-top-heading"]
    assert heading[0].children == "Top opcodes by time"


def _walk(component):
    yield component
    children = getattr(component, "children", None)
    if isinstance(children, list | tuple):
        for c in children:
            yield from _walk(c)
    elif children is not None and not isinstance(children, str):
        yield from _walk(children)


def test_the_shares_are_of_every_names_time(two_core_trace):
    with profiler.open(two_core_trace) as t:
        lo, hi = t.time_range
        s = selection_summary(t, lo, hi)
    table = next(c for c in _walk(selection_view.render_selection(s)) if getattr(c, "id", None) == "sel-top")
    shares = [int(row.children[2].children.split()[0]) for row in table.children.children]
    assert shares == [round(100 * v / s.names_total_ns) for _, v in s.top_names]
    assert s.names_total_ns > sum(v for _, v in s.top_names)    # more names than the ten shown


def test_a_click_on_a_row_drawn_from_events_picks_an_event_under_it(two_core_trace):
    """On rows drawn event by event, a click inside events selects one of them (the 2-pixel look-up returned three
    or more events as a bucket, and its representative could start after the click)."""
    from dashboard.timeline_picks import event_at_click

    rng = random.Random(3)
    checked = 0
    with profiler.open(two_core_trace) as t:
        lo, hi = t.time_range
        tracks = [r["track_id"] for r in t.tracks().to_pylist() if r["kind"] in ("dma_queue", "engine")]
        for _ in range(40):
            a = rng.randrange(lo, hi - 20_000)
            b = a + rng.choice([5_000, 20_000])
            tid = rng.choice(tracks)
            w = t.window(a, b, 1600, tracks=[tid])
            if not w.events.num_rows:
                continue
            view = {"rows": [[tid]], "origin": a, "res": w.resolution_ns}
            for ev in rng.sample(w.events.to_pylist(), min(5, w.events.num_rows)):
                if ev["end_ts"] <= ev["start_ts"]:
                    continue
                tc = rng.randrange(max(ev["start_ts"], a), min(ev["end_ts"], b))
                picked = event_at_click(t, {"points": [{"x": (tc - a) / 1e9, "y": 0, "curveNumber": 0}]}, view, {})
                assert picked is not None and picked["start_ns"] <= tc < picked["end_ns"], (tid, tc, picked)
                checked += 1
    assert checked > 50
