"""profiler.analyses.call_tree against a brute-force oracle over the raw spans (hypothesis, real traces).

Random span forests are written as a trace's ``Span`` table, ingested with ``profiler.open`` and aggregated by
``call_tree``; the oracle re-derives every number from the spans with plain loops, following the module's
docstring:

- a span's *frame* is the names from its outermost enclosing span (along ``parent_id``) down to itself, under a
  root frame naming the row (``group / thread``, or the thread alone when the group is empty) of that outermost
  span when ``by_thread``; a ``parent_id`` naming no span makes it a root, and so do parent links forming a cycle
  for the spans on the cycle (a span below a cycle stays below its parent);
- a span belongs to the window ``[t0, t1)`` when it overlaps it (``start < t1 and end > t0``) or is zero-length at
  an instant in it (``t0 <= start < t1``; the default window, the whole trace, also holds those at its end),
  counting 0 ns;
- ``count`` is the frame's spans in the window, ``total_ns`` their durations clipped to the window, ``self_ns``
  per span its clipped duration minus what its children cover of it (each child's clipped interval cut to its
  parent's), floored at 0, summed over the frame;
- ancestors outside the window still name the frames of the spans inside it (an imported child can stick out of
  its parent); such an ancestor's own frame is then a prefix frame holding no span of the window (count 0);
- a row's root frame holds the row's root spans: their count, and the time any of them is open (the union of
  their clipped intervals: overlapping ones, such as pipelined layers, count their common time once), self 0;
- ``top_frames`` sums per name (``total_ns`` only over spans without an enclosing span of the same name),
  ``folded`` writes one ``stack self_ns`` line per frame with self time, ``limit_depth`` keeps depth <= d.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.call_tree import call_tree
from profiler.analyses.call_tree_views import folded, limit_depth, top_frames
from profiler.errors import QueryError
from tests.call_tree_checks import assert_depth_first
from tests.call_tree_checks import check_top as _check_top
from tests.call_tree_checks import folded_pairs as _folded_pairs
from tests.call_tree_checks import frames_of as _frames_of
from tests.call_tree_checks import parse_folded as _parse_folded
from tests.call_tree_checks import rows_of as _rows_of
from tests.call_tree_checks import top_rows as _top_rows
from tests.span_traces import opened_quietly
from tracer import schema as ts
from tracer import write_trace

#: Timeline rows (track_group, track_name); a None or empty group labels the row by its thread alone (the last
#: row is labelled like a span name: a row frame is no enclosing span of that name).
ROWS = (("g0", "t0"), ("g0", "t1"), ("", "main"), (None, "mm"))
#: Span names: few, so stacks share frames and names recur (recursion); one holds the folded separator.
NAMES = ("fwd", "mm", "relu", "x;y")
MAX_SPANS = 30
MISSING_ID = 1_000   # parent ids from here on name no span (span ids stay below)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass(frozen=True)
class Sp:
    id: int
    parent: int | None
    name: str
    start: int
    end: int
    row: int
    depth: int | None = None


def _label(row: int) -> str:
    group, thread = ROWS[row]
    return thread if not group else f"{group} / {thread}"


# -- strategies ------------------------------------------------------------------------------------------------

@st.composite
def nested_forests(draw) -> list[Sp]:
    """Per row, properly nested spans: children inside their parent, siblings apart, zero-length ones too."""
    rows = draw(st.permutations(range(len(ROWS))))[:draw(st.integers(1, 3))]
    ids = iter(draw(st.permutations(range(1, MAX_SPANS + 1))))   # ids in no particular time order
    spans: list[Sp] = []

    def fill(row: int, parent: int | None, start: int, end: int, level: int) -> None:
        t = start
        while (len(spans) < MAX_SPANS and t <= end and level < 5
               and ((level == 0 and t == start) or draw(st.booleans()))):
            length = draw(st.integers(0, end - t))
            sp = Sp(next(ids), parent, draw(st.sampled_from(NAMES)), t, t + length, row, level)
            spans.append(sp)
            fill(row, sp.id, sp.start, sp.end, level + 1)
            t = sp.end + draw(st.integers(0, 10))

    for row in rows:
        first = draw(st.integers(0, 60))
        fill(row, None, first, first + draw(st.integers(0, 150)), 0)
    return spans


@st.composite
def messy_forests(draw) -> list[Sp]:
    """Spans as imported traces have them: children sticking out of (or lying wholly outside) their parent,
    parents on another row, parent ids naming no span, the span itself or a later span (cycles of any length, with
    spans below them), zero-length spans."""
    n = draw(st.integers(1, MAX_SPANS))
    ids = draw(st.lists(st.integers(1, MISSING_ID - 1), min_size=n, max_size=n, unique=True))
    rows = draw(st.permutations(range(len(ROWS))))[:draw(st.integers(1, 3))]
    spans: list[Sp] = []
    for i in range(n):
        kind = draw(st.sampled_from(("root", "missing", "self", "later") + (("child",) * 4 if i else ())))
        name = draw(st.sampled_from(NAMES))
        if kind == "child":
            p = spans[draw(st.integers(0, i - 1))]
            row = draw(st.sampled_from([p.row] * 3 + list(rows)))
            if draw(st.booleans()):   # inside its parent
                s = draw(st.integers(p.start, p.end))
                e = draw(st.integers(s, p.end))
            else:                     # anywhere near it
                s = draw(st.integers(max(0, p.start - 30), p.end + 30))
                e = s + draw(st.one_of(st.just(0), st.integers(1, 80)))
            spans.append(Sp(ids[i], p.id, name, s, e, row))
            continue
        s = draw(st.integers(0, 200))
        e = s + draw(st.one_of(st.just(0), st.integers(1, 150)))
        # "later": a parent among the spans after it, which can close a cycle of any length through children
        later = ids[draw(st.integers(i, n - 1))] if kind == "later" else None
        parent = {"root": None, "self": ids[i], "missing": MISSING_ID + draw(st.integers(0, 5)),
                  "later": later}[kind]
        spans.append(Sp(ids[i], parent, name, s, e, draw(st.sampled_from(rows))))
    return spans


FORESTS = st.one_of(nested_forests(), messy_forests())
#: Windows (start, length) cutting the spans anywhere, or None: the default window (the trace's extent).
WINDOWS = st.lists(st.one_of(st.none(), st.tuples(st.integers(-20, 230), st.integers(1, 250))),
                   min_size=1, max_size=3)


# -- traces ----------------------------------------------------------------------------------------------------

def _write(path: Path, spans: list[Sp]) -> None:
    cols: dict[str, object] = {
        ts.ID: [s.id for s in spans],
        ts.PARENT_ID: [s.parent for s in spans],
        ts.START_TS: [s.start for s in spans],
        ts.END_TS: [s.end for s in spans],
        ts.DURATION_NS: [s.end - s.start for s in spans],
        ts.NAME: [s.name for s in spans],
        ts.TRACK_GROUP: [ROWS[s.row][0] for s in spans],
        ts.TRACK_NAME: [ROWS[s.row][1] for s in spans],
    }
    if all(s.depth is not None for s in spans):
        cols[ts.DEPTH] = [s.depth for s in spans]
    write_trace(path, {"Span": cols}, metadata={"arch": "trn2"}, overwrite=True)


@contextlib.contextmanager
def _opened(directory: Path, spans: list[Sp]) -> Iterator[profiler.Trace]:
    path = directory / "t.trace"
    _write(path, spans)
    with opened_quietly(path) as trace:
        yield trace


def _windows(spans: list[Sp], windows) -> Iterator[tuple[tuple[int, int] | None, int, int]]:
    """(call arguments or None for the defaults, oracle start, oracle end) per window."""
    for w in windows:
        if w is None:
            yield None, min(s.start for s in spans), max(s.end for s in spans)
        else:
            yield (w[0], w[0] + w[1]), w[0], w[0] + w[1]


def _tree(trace, args, by_thread: bool):
    if args is None:
        return call_tree(trace, by_thread=by_thread)
    return call_tree(trace, args[0], args[1], by_thread=by_thread)


def _trees(trace, spans: list[Sp], windows):
    """``(args, t0, t1, by_thread, tree)`` for every non-empty window of the example, rows split and merged."""
    for args, t0, t1 in _windows(spans, windows):
        if t1 <= t0:
            continue
        for by_thread in (True, False):
            yield args, t0, t1, by_thread, _tree(trace, args, by_thread)


# -- the oracle ------------------------------------------------------------------------------------------------

@dataclass
class Oracle:
    """Every number of a call tree, from the spans by plain loops."""

    frames: dict[tuple[str, ...], list[int]]      # stack -> [count, total_ns, self_ns]
    rows: list[tuple]                              # the expected table, depth first
    per_name: dict[str, list[int]]                 # name -> [count, self_ns, total_ns (outermost only)]
    in_window: int
    span_ns: int


def oracle(spans: list[Sp], t0: int, t1: int, by_thread: bool, closed: bool = False) -> Oracle:
    """``closed``: the default window (the whole trace), which also holds the zero-length spans at its end."""
    by_id = {s.id: s for s in spans}

    def raw_parent(s: Sp) -> Sp | None:
        return None if s.parent is None else by_id.get(s.parent)

    def on_cycle(s: Sp) -> bool:   # walking up from s comes back to s
        seen, x = set(), raw_parent(s)
        while x is not None and x.id not in seen:
            if x is s:
                return True
            seen.add(x.id)
            x = raw_parent(x)
        return False

    cycle = {s.id for s in spans if on_cycle(s)}

    def parent(s: Sp) -> Sp | None:
        return None if s.id in cycle else raw_parent(s)

    def inside(s: Sp) -> bool:   # overlapping the window, or zero-length at an instant in it
        if s.end == s.start:
            return t0 <= s.start < t1 or (closed and s.start == t1)
        return s.start < t1 and s.end > t0

    def covered(c: Sp, s: Sp) -> int:   # what child c covers of its parent s's clipped interval
        if not inside(c):
            return 0
        return max(0, min(c.end, s.end, t1) - max(c.start, s.start, t0))

    def clip(s: Sp) -> int:
        return max(0, min(s.end, t1) - max(s.start, t0)) if inside(s) else 0

    frames: dict[tuple[str, ...], list[int]] = {}
    per_name: dict[str, list[int]] = {}
    n_window = span_ns = 0
    row_intervals: dict[tuple[str, ...], list[tuple[int, int]]] = defaultdict(list)
    for s in spans:
        if not inside(s):
            continue
        n_window += 1
        chain = [s]
        while (p := parent(chain[-1])) is not None:
            chain.append(p)
            assert len(chain) <= len(spans), "a cycle's spans are roots"
        chain.reverse()
        stack = ((_label(chain[0].row),) if by_thread else ()) + tuple(x.name for x in chain)
        for k in range(1, len(stack) + 1):
            frames.setdefault(stack[:k], [0, 0, 0])
        children = sum(covered(c, s) for c in spans if parent(c) is s)
        own = max(clip(s) - children, 0)
        f = frames[stack]
        f[0] += 1
        f[1] += clip(s)
        f[2] += own
        if len(chain) == 1:
            if by_thread:
                frames[stack[:1]][0] += 1
                row_intervals[stack[:1]].append((max(s.start, t0), min(s.end, t1)))
            else:
                span_ns += clip(s)
        acc = per_name.setdefault(s.name, [0, 0, 0])
        acc[0] += 1
        acc[1] += own
        if s.name not in {x.name for x in chain[:-1]}:
            acc[2] += clip(s)

    for row, intervals in row_intervals.items():  # a row's time: when any of its root spans is open
        merged: list[list[int]] = []
        for a, b in sorted(intervals):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            elif b > a:
                merged.append([a, b])
        frames[row][1] = sum(b - a for a, b in merged)
        span_ns += frames[row][1]

    children_of: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)
    for stack in frames:
        children_of[stack[:-1]].append(stack)
    rows: list[tuple] = []

    def visit(stack: tuple[str, ...], parent_node: int | None) -> None:
        node = len(rows)
        count, total, own = frames[stack]
        thread = by_thread and len(stack) == 1
        rows.append((node, parent_node, len(stack) - 1, rs.FRAME_THREAD if thread else rs.FRAME_SPAN, stack[-1],
                     count, total, 0 if thread else own, rs.PATH_SEPARATOR.join(stack)))
        for child in sorted(children_of[stack], key=lambda c: (-frames[c][1], c[-1])):
            visit(child, node)

    for root in sorted(children_of[()], key=lambda c: (-frames[c][1], c[-1])):
        visit(root, None)
    return Oracle(frames, rows, per_name, n_window, span_ns)


# -- properties ------------------------------------------------------------------------------------------------

@PROPERTY
@given(FORESTS, WINDOWS)
def test_frames_match_the_oracle(tmp_path_factory, spans, windows):
    with _opened(tmp_path_factory.mktemp("ct"), spans) as trace:
        for args, t0, t1 in _windows(spans, windows):
            for by_thread in (True, False):
                if t1 <= t0:   # every span zero-length at one instant: the default window is empty
                    with pytest.raises(QueryError, match="empty window"):
                        _tree(trace, args, by_thread)
                    continue
                tree = _tree(trace, args, by_thread)
                want = oracle(spans, t0, t1, by_thread, closed=args is None)
                assert (tree.start_ns, tree.end_ns, tree.by_thread) == (t0, t1, by_thread)
                assert tree.spans == want.in_window
                assert _frames_of(tree) == want.frames, (t0, t1, by_thread)
                assert _rows_of(tree.table) == want.rows, (t0, t1, by_thread)
                assert tree.span_ns == want.span_ns


@PROPERTY
@given(FORESTS, WINDOWS)
def test_rows_are_depth_first_with_paths(tmp_path_factory, spans, windows):
    """The table's own shape, whatever its numbers: depth first, children by (-total_ns, name), paths."""
    with _opened(tmp_path_factory.mktemp("ct"), spans) as trace:
        for _args, _t0, _t1, by_thread, tree in _trees(trace, spans, windows):
            rows = _rows_of(tree.table)
            assert len(tree.outermost) == len(rows)
            assert len({r[-1] for r in rows}) == len(rows), "one row per distinct stack"
            children: dict[int | None, list[tuple]] = defaultdict(list)
            for i, (node, parent, depth, kind, name, count, total, own, path) in enumerate(rows):
                assert node == i
                if parent is None:
                    assert depth == 0 and path == name
                else:
                    assert parent < node, "a parent row precedes its children"
                    assert depth == rows[parent][2] + 1
                    assert path == rows[parent][-1] + rs.PATH_SEPARATOR + name
                assert kind == (rs.FRAME_THREAD if by_thread and depth == 0 else rs.FRAME_SPAN)
                assert count >= 0 and (0 <= own <= total or kind == rs.FRAME_THREAD)
                children[parent].append(rows[i])
            assert_depth_first(rows)


@PROPERTY
@given(FORESTS, WINDOWS)
def test_top_frames_folded_and_limit_depth_match_the_oracle(tmp_path_factory, spans, windows):
    with _opened(tmp_path_factory.mktemp("ct"), spans) as trace:
        for args, t0, t1, by_thread, tree in _trees(trace, spans, windows):
            want = oracle(spans, t0, t1, by_thread, closed=args is None)
            _check_top(top_frames(tree), _top_rows(want.per_name))
            assert _parse_folded(folded(tree)) == _folded_pairs(want.rows), (t0, t1, by_thread)
            for d in range(4):
                cut = limit_depth(tree, d)
                kept = [r for r in want.rows if r[2] <= d]
                assert _rows_of(cut.table) == kept, (t0, t1, by_thread, d)
                # per name over the kept frames; total only where no enclosing span frame has the name
                per: dict[str, list[int]] = {}
                for (_n, _p, _d, kind, name, count, total, own, path) in kept:
                    if kind != rs.FRAME_SPAN:
                        continue
                    stack = path.split(rs.PATH_SEPARATOR)[(1 if by_thread else 0):]
                    acc = per.setdefault(name, [0, 0, 0])
                    acc[0] += count
                    acc[1] += own
                    acc[2] += total if name not in stack[:-1] else 0
                _check_top(top_frames(cut), _top_rows(per))


# -- examples with hand-computed numbers -----------------------------------------------------------------------

#: fwd [0, 100) > mm [10, 60) > relu [20, 30), and a second mm [70, 90) under the same fwd; row "g0 / t0".
THREE_LEVELS = [Sp(1, None, "fwd", 0, 100, 0), Sp(2, 1, "mm", 10, 60, 0), Sp(3, 2, "relu", 20, 30, 0),
                Sp(4, 1, "mm", 70, 90, 0)]


def test_a_three_level_stack_by_hand(tmp_path):
    with _opened(tmp_path, THREE_LEVELS) as trace:
        tree = call_tree(trace, 0, 100)
        assert _rows_of(tree.table) == [
            # node parent depth kind name count total self path
            (0, None, 0, "thread", "g0 / t0", 1, 100, 0, "g0 / t0"),
            (1, 0, 1, "span", "fwd", 1, 100, 30, "g0 / t0 › fwd"),            # 100 - 50 - 20
            (2, 1, 2, "span", "mm", 2, 70, 60, "g0 / t0 › fwd › mm"),         # (50 - 10) + 20
            (3, 2, 3, "span", "relu", 1, 10, 10, "g0 / t0 › fwd › mm › relu"),
        ]
        assert tree.spans == 4 and tree.span_ns == 100

        # [25, 80) cuts fwd to 55 ns, the first mm to [25, 60) = 35, the second to [70, 80) = 10, relu to 5
        tree = call_tree(trace, 25, 80, by_thread=False)
        assert _rows_of(tree.table) == [
            (0, None, 0, "span", "fwd", 1, 55, 10, "fwd"),                     # 55 - 35 - 10
            (1, 0, 1, "span", "mm", 2, 45, 40, "fwd › mm"),                    # (35 - 5) + 10
            (2, 1, 2, "span", "relu", 1, 5, 5, "fwd › mm › relu"),
        ]
        assert top_frames(tree).to_pylist() == [
            {"name": "mm", "count": 2, "self_ns": 40, "total_ns": 45, "fraction": 40 / 55},
            {"name": "fwd", "count": 1, "self_ns": 10, "total_ns": 55, "fraction": 10 / 55},
            {"name": "relu", "count": 1, "self_ns": 5, "total_ns": 5, "fraction": 5 / 55},
        ]
        assert folded(tree) == ["fwd 10", "fwd;mm 40", "fwd;mm;relu 5"]
        assert _rows_of(limit_depth(tree, 1).table) == _rows_of(tree.table)[:2]


def test_recursion_counts_the_outer_call_once_in_top_frames(tmp_path):
    # fwd [0, 100) > mm [10, 90) > fwd [20, 50): fwd's total is the outer call's 100, not 130
    spans = [Sp(1, None, "fwd", 0, 100, 2), Sp(2, 1, "mm", 10, 90, 2), Sp(3, 2, "fwd", 20, 50, 2)]
    with _opened(tmp_path, spans) as trace:
        tree = call_tree(trace, 0, 100)
        assert [r[-1] for r in _rows_of(tree.table)] == ["main", "main › fwd", "main › fwd › mm",
                                                         "main › fwd › mm › fwd"]
        assert top_frames(tree).to_pylist() == [
            {"name": "fwd", "count": 2, "self_ns": 50, "total_ns": 100, "fraction": 0.5},   # 20 + 30
            {"name": "mm", "count": 1, "self_ns": 50, "total_ns": 80, "fraction": 0.5},     # 80 - 30
        ]


def test_a_child_whose_parent_lies_outside_the_window_keeps_its_stack(tmp_path):
    # The docstring: "Spans are read for the window only, plus any ancestor outside it (an imported span can
    # stick out of its parent)".  fwd [0, 10) has a child mm [20, 30) (as imported traces have them); in the
    # window [15, 40) only mm overlaps, so its frame fwd › mm holds 1 span, 10 ns total, 10 ns self.
    spans = [Sp(1, None, "fwd", 0, 10, 0), Sp(2, 1, "mm", 20, 30, 0)]
    with _opened(tmp_path, spans) as trace:
        merged = call_tree(trace, 15, 40, by_thread=False)
        assert merged.spans == 1
        assert _frames_of(merged).get(("fwd", "mm")) == [1, 10, 10]
        assert folded(merged) == ["fwd;mm 10"]
        assert top_frames(merged).to_pylist()[0] == {"name": "mm", "count": 1, "self_ns": 10, "total_ns": 10,
                                                     "fraction": 1.0}
        rows = call_tree(trace, 15, 40)
        assert _frames_of(rows).get(("g0 / t0", "fwd", "mm")) == [1, 10, 10]


def test_a_parent_cycle_makes_its_spans_roots(tmp_path):
    spans = [Sp(1, 2, "fwd", 0, 10, 0), Sp(2, 1, "mm", 2, 8, 0), Sp(3, 3, "relu", 4, 6, 0)]
    with _opened(tmp_path, spans) as trace:
        tree = call_tree(trace, 0, 10, by_thread=False)
        assert _frames_of(tree) == {("fwd",): [1, 10, 10], ("mm",): [1, 6, 6], ("relu",): [1, 2, 2]}


def test_a_span_below_a_cycle_stays_below_its_parent(tmp_path):
    spans = [Sp(1, 2, "fwd", 0, 10, 0), Sp(2, 1, "mm", 2, 8, 0), Sp(3, 1, "relu", 4, 6, 0)]
    with _opened(tmp_path, spans) as trace:
        tree = call_tree(trace, 0, 10, by_thread=False)
        assert _frames_of(tree) == {("fwd",): [1, 10, 8], ("fwd", "relu"): [1, 2, 2], ("mm",): [1, 6, 6]}


def test_a_child_sticking_out_of_its_parent_takes_only_what_it_covers(tmp_path):
    # a [0, 10) with b [5, 30): b covers 5 ns of a, so a keeps 5 ns of self time (not 10 - 25, floored to 0)
    spans = [Sp(1, None, "a", 0, 10, 0), Sp(2, 1, "b", 5, 30, 0), Sp(3, None, "tick", 0, 0, 0)]
    with _opened(tmp_path, spans) as trace:
        tree = call_tree(trace, by_thread=False)   # the default window starts at the zero-length span: it counts
        assert _frames_of(tree) == {("a",): [1, 10, 5], ("a", "b"): [1, 25, 25], ("tick",): [1, 0, 0]}
        assert _frames_of(call_tree(trace, 20, 40, by_thread=False)) == {("a",): [0, 0, 0], ("a", "b"): [1, 10, 10]}


def test_a_trace_without_spans_is_an_error(tmp_path):
    path = tmp_path / "t.trace"
    n = 4
    write_trace(path, {"Instruction": {
        ts.ID: np.arange(n), ts.START_TS: np.arange(n) * 10, ts.END_TS: np.arange(n) * 10 + 5,
        ts.DURATION_NS: [5] * n, ts.ENGINE: ["Tensor"] * n, ts.OPCODE: ["MATMUL"] * n, ts.OPERANDS: [""] * n,
        ts.PC: np.arange(n)}}, metadata={"arch": "trn2"}, overwrite=True)
    with profiler.open(path) as trace:
        with pytest.raises(QueryError, match="no spans"):
            call_tree(trace)
        with pytest.raises(QueryError, match="no spans"):
            call_tree(trace, 0, 100, by_thread=False)


@pytest.mark.parametrize(("start", "end"), [(50, 50), (60, 40), (0, 0), (-5, -10)])
def test_an_empty_or_reversed_window_is_an_error(tmp_path, start, end):
    with _opened(tmp_path, THREE_LEVELS) as trace:
        for by_thread in (True, False):
            with pytest.raises(QueryError):
                call_tree(trace, start, end, by_thread=by_thread)
