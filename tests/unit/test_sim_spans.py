"""The fast path's Span boxes at a segment's end (``commit.spans``) against a brute-force oracle."""

from __future__ import annotations

import math
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.sim.fastpath.commit import spans
from tracer.sim.fastpath.trie import ENTER, EXIT


class _Scope:
    def __init__(self, box: list[float]) -> None:
        self.box = box

    def row(self) -> tuple[float, float] | None:
        return (self.box[0], self.box[1]) if self.box[0] <= self.box[1] else None


def _oracle(open0: list[list[float]], events: list[tuple[int, int, _Scope]], starts: list[int],
            fins: list[int]) -> None:
    """Each scope's instructions in the segment are those between its entry (or the segment's start) and its exit
    (or the segment's end): its box takes their earliest start and latest finish."""
    opened = {id(box): (box, 0) for box in open0}
    ranges = []
    for kind, pos, scope in events:
        if kind == ENTER:
            opened[id(scope.box)] = (scope.box, pos)
        else:
            box, a = opened.pop(id(scope.box))
            ranges.append((box, a, pos))
    ranges.extend((box, a, len(starts)) for box, a in opened.values())
    for box, a, b in ranges:
        if a < b:
            box[0] = min(box[0], *starts[a:b])
            box[1] = max(box[1], *fins[a:b])


@st.composite
def _segments(draw: st.DrawFn) -> tuple[int, int, list[tuple[int, int, int]], list[int], list[int], list[bool]]:
    n = draw(st.integers(0, 40))
    n_open0 = draw(st.integers(0, 3))
    starts = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n))
    fins = [s + d for s, d in zip(starts, draw(st.lists(st.integers(0, 500), min_size=n, max_size=n)), strict=True)]
    events: list[tuple[int, int, int]] = []  # (kind, position, scope index)
    open_now = list(range(n_open0))
    new = n_open0
    pos = 0
    for _ in range(draw(st.integers(0, 12))):
        pos = draw(st.integers(pos, n))
        if open_now and draw(st.booleans()):
            # mostly the innermost scope, sometimes another one (scopes entered and left by hand)
            k = len(open_now) - 1 if draw(st.integers(0, 3)) else draw(st.integers(0, len(open_now) - 1))
            events.append((EXIT, pos, open_now.pop(k)))
        else:
            events.append((ENTER, pos, new))
            open_now.append(new)
            new += 1
    boxes_seeded = draw(st.lists(st.booleans(), min_size=new, max_size=new))
    return n_open0, new, events, starts, fins, boxes_seeded


@settings(max_examples=400, deadline=None)
@given(seg=_segments())
def test_span_boxes_equal_the_brute_force_ranges(seg):
    n_open0, _n_scopes, events, starts, fins, seeded = seg

    def boxes() -> list[list[float]]:  # some scopes already hold instructions of earlier segments
        return [[5_000.0, 5_100.0] if s else [math.inf, -math.inf] for s in seeded]

    mine, want = boxes(), boxes()
    scopes_mine = [_Scope(b) for b in mine]
    scopes_want = [_Scope(b) for b in want]
    rows: list[tuple[float, float]] = []
    m = SimpleNamespace(open0=[mine[i] for i in range(n_open0)],
                        scopes=[(k, p, scopes_mine[i]) for k, p, i in events])
    spans(SimpleNamespace(spans=rows.extend), m, starts, fins)
    _oracle([want[i] for i in range(n_open0)], [(k, p, scopes_want[i]) for k, p, i in events], starts, fins)
    assert mine == want
    left = [scopes_want[i] for k, _p, i in events if k == EXIT]
    assert rows == [r for r in (s.row() for s in left) if r is not None]
