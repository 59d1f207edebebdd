"""profiler.analyses.instruction_tree against a brute-force oracle over the raw instructions (hypothesis, real
traces).

Random instruction sets (and a few DMA packets, which only move the default window) are written as a trace's
``Instruction`` / ``DmaPacket`` tables, ingested with ``profiler.open`` and aggregated by ``instruction_tree``; the
oracle re-derives every number from the rows with plain loops, following the module's docstring:

- the window ``[t0, t1)`` defaults to the first to the last instruction or DMA packet (of the core, when one is
  asked for; every opcode counts for the extent) and an empty window is a QueryError;
- an instruction is in the tree when it is on the core (``coalesce(pcore_idx, 0)``; every core when none is
  asked for), its opcode is not a wait-only one (``WAIT_OPCODES``) and it overlaps the window (``start < t1 and
  end > t0``) or, zero-length, lies in it (``t0 <= start < t1``, or ``start == t1`` when the window's end is the
  default one), as zero-length spans do in the spans' tree;
- its frame is ``NeuronCore N`` followed by its value at each requested level, in the order asked for, leaving out
  the levels no instruction in the tree has a value for; a null value of a kept level is ``(none)``;
- every frame on the way (prefixes included) counts the instruction once and adds its duration clipped to the
  window to ``total_ns``; only the leaf frame (a non-root one) takes it as ``self_ns``; the ``NeuronCore`` roots
  are "thread" frames with self 0;
- rows are depth first, children (and roots) by descending ``total_ns`` then name;
- ``top_frames``: per (non-root) name, ``count`` and ``self_ns`` over every frame of that name, ``total_ns`` once
  per instruction however often the name recurs down its path, ``fraction`` self over all self time; ``folded``
  is one ``stack self_ns`` line per frame with self time (``;`` in a name written as ``,``).
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
from profiler.analyses.call_tree_views import folded, limit_depth, subtree, top_frames
from profiler.analyses.inputs import WAIT_OPCODES
from profiler.analyses.instruction_tree import instruction_tree
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

PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

LEVEL_NAMES = ("layer", "operator", "source", "engine", "opcode")
NONE = "(none)"
#: pcore_idx values: null is core 0.
CORES = (0, 1, None)
ENGINES = ("Tensor", "Vector", "Scalar")
#: Two wait-only opcodes (left out of the tree, kept in the default window's extent) and three of engine work.
OPCODES = ("MATMUL", "ACTIVATE", "DMA_TRIGGER", "EVENT_SEMAPHORE", "WAIT")
#: Values chosen so names recur across levels: a layer named like an engine, an operator named like a layer or
#: like a core's root frame, a source line holding the folded separator.
VALUES = {
    "layer": ("attn", "mlp", "Tensor"),
    "operator": ("mm", "add", "attn", "NeuronCore 0"),
    "source": ("k.py:1", "k.py:2", "a;b"),
}
#: How an example fills an optional column: left out of the table, all null, some null, none null.
MODES = ("absent", "null", "mixed", "mixed", "full")
MAX_INSTRUCTIONS = 40


@dataclass(frozen=True)
class Ins:
    start: int
    end: int
    core: int | None
    engine: str
    opcode: str
    layer: str | None
    operator: str | None
    source: str | None

    def value(self, level: str) -> str | None:
        return getattr(self, level)

    @property
    def pcore(self) -> int:
        return 0 if self.core is None else self.core


@dataclass(frozen=True)
class Packet:
    start: int
    end: int
    core: int | None

    @property
    def pcore(self) -> int:
        return 0 if self.core is None else self.core


@dataclass(frozen=True)
class Example:
    instructions: list[Ins]
    packets: list[Packet]
    modes: dict[str, str]          # layer / operator / source -> MODES
    pcore_column: bool             # whether pcore_idx is written at all

    @property
    def cores(self) -> list[int]:
        return sorted({x.pcore for x in self.instructions} | {p.pcore for p in self.packets})


# -- strategies ------------------------------------------------------------------------------------------------

def _interval(draw) -> tuple[int, int]:
    s = draw(st.integers(0, 200))
    return s, s + draw(st.one_of(st.just(0), st.integers(1, 60), st.integers(1, 60)))   # a third zero-length


@st.composite
def examples(draw) -> Example:
    cores = draw(st.lists(st.sampled_from(CORES), min_size=1, max_size=2, unique=True))
    engines = draw(st.lists(st.sampled_from(ENGINES), min_size=1, max_size=3, unique=True))
    modes = {level: draw(st.sampled_from(MODES)) for level in VALUES}
    n = draw(st.integers(1, MAX_INSTRUCTIONS))
    instructions = []
    for _ in range(n):
        s, e = _interval(draw)
        values = {}
        for level, mode in modes.items():
            if mode in ("absent", "null"):
                values[level] = None
            elif mode == "mixed":
                values[level] = draw(st.one_of(st.none(), st.sampled_from(VALUES[level])))
            else:
                values[level] = draw(st.sampled_from(VALUES[level]))
        instructions.append(Ins(s, e, draw(st.sampled_from(cores)), draw(st.sampled_from(engines)),
                                draw(st.sampled_from(OPCODES)), **values))
    packets = [Packet(*_interval(draw), draw(st.sampled_from(CORES)))
               for _ in range(draw(st.sampled_from((0, 0, 1, 3))))]
    pcore_column = any(x.core is not None for x in instructions) or draw(st.booleans())
    return Example(instructions, packets, modes, pcore_column)


#: Windows as call arguments (start, end), either side possibly left to its default, or None: both defaults.
WINDOWS = st.lists(st.one_of(
    st.none(),
    st.tuples(st.integers(-20, 230), st.integers(1, 250)).map(lambda w: (w[0], w[0] + w[1])),
    st.tuples(st.integers(-20, 230), st.none()),
    st.tuples(st.none(), st.integers(-20, 270)),
), min_size=1, max_size=3)
LEVELS = st.permutations(LEVEL_NAMES).flatmap(lambda p: st.integers(1, len(p)).map(lambda k: list(p[:k])))
#: (levels, which core: None or an index into the example's cores)
QUERIES = st.lists(st.tuples(LEVELS, st.one_of(st.none(), st.integers(0, 1))), min_size=1, max_size=3)


# -- traces ----------------------------------------------------------------------------------------------------

def _write(path: Path, ex: Example) -> None:
    ins = ex.instructions
    n = len(ins)
    cols: dict[str, object] = {
        ts.ID: np.arange(n), ts.START_TS: [x.start for x in ins], ts.END_TS: [x.end for x in ins],
        ts.DURATION_NS: [x.end - x.start for x in ins], ts.ENGINE: [x.engine for x in ins],
        ts.OPCODE: [x.opcode for x in ins], ts.OPERANDS: [""] * n, ts.PC: np.arange(n),
    }
    if ex.pcore_column:
        cols[ts.PCORE_IDX] = [x.core for x in ins]
    for level, column in (("layer", ts.LAYER), ("operator", ts.HLO_NAME), ("source", ts.NKI_SOURCE_LOCATION)):
        if ex.modes[level] != "absent":
            cols[column] = [x.value(level) for x in ins]
    tables: dict[str, dict[str, object]] = {"Instruction": cols}
    if ex.packets:
        m = len(ex.packets)
        tables["DmaPacket"] = {
            ts.ID: np.arange(m) + 1000, ts.START_TS: [p.start for p in ex.packets],
            ts.END_TS: [p.end for p in ex.packets], ts.DURATION_NS: [p.end - p.start for p in ex.packets],
            ts.QUEUE_NAME: ["q0"] * m, ts.READ_BYTES: [8] * m, ts.WRITE_BYTES: [8] * m,
            ts.TRANSFER_BYTES: [8] * m, ts.PCORE_IDX: [p.core for p in ex.packets]}
    write_trace(path, tables, metadata={"arch": "trn2"}, overwrite=True)


@contextlib.contextmanager
def _opened(directory: Path, ex: Example) -> Iterator[profiler.Trace]:
    path = directory / "t.trace"
    _write(path, ex)
    with opened_quietly(path) as trace:
        yield trace


def _window(ex: Example, args: tuple[int | None, int | None] | None, core: int | None) -> tuple[int, int]:
    """The oracle's window: defaults from the core's (or every core's) instructions of any opcode and packets."""
    start, end = args if args is not None else (None, None)
    if start is None or end is None:
        events = [(x.start, x.end) for x in ex.instructions if core is None or x.pcore == core]
        events += [(p.start, p.end) for p in ex.packets if core is None or p.pcore == core]
        assert events, "a core of the example has an instruction or a packet"
        start = min(s for s, _ in events) if start is None else start
        end = max(e for _, e in events) if end is None else end
    return start, end


def _cases(ex: Example, windows, queries) -> Iterator[tuple[tuple | None, list[str], int | None]]:
    for args in windows:
        for levels, which in queries:
            yield args, levels, None if which is None else ex.cores[which % len(ex.cores)]


def _trees_and_oracles(trace, ex, windows, queries):
    """``(args, levels, core, t0, t1, tree, oracle)`` for every case of the example with a non-empty window."""
    for args, levels, core in _cases(ex, windows, queries):
        t0, t1 = _window(ex, args, core)
        if t1 <= t0:
            continue
        tree = _tree(trace, args, levels, core)
        yield args, levels, core, t0, t1, tree, oracle(ex, t0, t1, levels, core, closed=_closed(args))


def _tree(trace, args, levels: list[str], core: int | None):
    if args is None:
        return instruction_tree(trace, levels=levels, core=core)
    return instruction_tree(trace, args[0], args[1], levels=levels, core=core)


# -- the oracle ------------------------------------------------------------------------------------------------

@dataclass
class Oracle:
    frames: dict[tuple[str, ...], list[int]]      # path -> [count, total_ns, self_ns]
    rows: list[tuple]                              # the expected table, depth first
    per_name: dict[str, list[int]]                 # name -> [count, self_ns, total_ns]
    in_window: int
    kept: list[str]                                # the levels left in


def _in_window(x, t0: int, t1: int, closed: bool) -> bool:
    """Overlapping ``[t0, t1)``, or zero-length at an instant in it (or at ``t1`` when the window's end is the
    default one: ``closed``)."""
    if x.start == x.end:
        return t0 <= x.start < t1 or (closed and x.start == t1)
    return x.start < t1 and x.end > t0


def _closed(args) -> bool:
    """Whether the window's end is the default one (the trace's last instant is in it)."""
    return args is None or args[1] is None


def oracle(ex: Example, t0: int, t1: int, levels: list[str], core: int | None, *, closed: bool = False) -> Oracle:
    chosen = []
    for x in ex.instructions:
        if core is not None and x.pcore != core:
            continue
        if x.opcode in WAIT_OPCODES:
            continue
        if _in_window(x, t0, t1, closed):
            chosen.append(x)
    kept = []
    for level in levels:
        if any(x.value(level) is not None for x in chosen):
            kept.append(level)

    frames: dict[tuple[str, ...], list[int]] = {}
    per_name: dict[str, list[int]] = {}
    for x in chosen:
        ns = min(x.end, t1) - max(x.start, t0)
        assert ns >= 0
        names = []
        for level in kept:
            v = x.value(level)
            names.append(NONE if v is None else v)
        path = (f"NeuronCore {x.pcore}", *names)
        for k in range(1, len(path) + 1):
            f = frames.setdefault(path[:k], [0, 0, 0])
            f[0] += 1
            f[1] += ns
        if len(path) > 1:
            frames[path][2] += ns
        for j, name in enumerate(names):
            acc = per_name.setdefault(name, [0, 0, 0])
            acc[0] += 1
            if j == len(names) - 1:
                acc[1] += ns
            if name not in names[:j]:
                acc[2] += ns

    children: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)
    for path in frames:
        children[path[:-1]].append(path)
    rows: list[tuple] = []

    def visit(path: tuple[str, ...], parent: int | None) -> None:
        node = len(rows)
        count, total, own = frames[path]
        root = len(path) == 1
        rows.append((node, parent, len(path) - 1, rs.FRAME_THREAD if root else rs.FRAME_SPAN, path[-1], count,
                     total, 0 if root else own, rs.PATH_SEPARATOR.join(path)))
        for child in sorted(children[path], key=lambda c: (-frames[c][1], c[-1])):
            visit(child, node)

    for root in sorted(children[()], key=lambda c: (-frames[c][1], c[-1])):
        visit(root, None)
    return Oracle(frames, rows, per_name, len(chosen), kept)


# -- properties ------------------------------------------------------------------------------------------------

@PROPERTY
@given(examples(), WINDOWS, QUERIES)
def test_frames_match_the_oracle(tmp_path_factory, ex, windows, queries):
    with _opened(tmp_path_factory.mktemp("it"), ex) as trace:
        for args, levels, core in _cases(ex, windows, queries):
            t0, t1 = _window(ex, args, core)
            if t1 <= t0:
                with pytest.raises(QueryError, match="empty window"):
                    _tree(trace, args, levels, core)
                continue
            tree = _tree(trace, args, levels, core)
            want = oracle(ex, t0, t1, levels, core, closed=_closed(args))
            case = (args, levels, core, t0, t1)
            assert tree.what == "instructions"
            assert (tree.start_ns, tree.end_ns, tree.by_thread) == (t0, t1, True), case
            assert tree.table.schema == rs.CALL_TREE
            assert tree.spans == want.in_window, case
            assert _frames_of(tree) == want.frames, case
            assert _rows_of(tree.table) == want.rows, case
            assert len(tree.outermost) == tree.table.num_rows
            assert tree.span_ns == sum(r[6] for r in want.rows if r[1] is None)
            # the depth of the tree: one level per kept level under the roots
            depths = {r[2] for r in want.rows}
            assert max(depths, default=-1) == (len(want.kept) if want.rows else -1), case


@PROPERTY
@given(examples(), WINDOWS, QUERIES)
def test_the_table_is_a_depth_first_tree_whose_leaves_hold_the_time(tmp_path_factory, ex, windows, queries):
    """The table's own shape, whatever the oracle says: depth first, children by (-total_ns, name), paths, kinds,
    a frame's count and time those of its children, self time at the leaves only."""
    with _opened(tmp_path_factory.mktemp("it"), ex) as trace:
        for args, levels, core in _cases(ex, windows, queries):
            t0, t1 = _window(ex, args, core)
            if t1 <= t0:
                continue
            rows = _rows_of(_tree(trace, args, levels, core).table)
            assert len({r[-1] for r in rows}) == len(rows), "one row per distinct path"
            children: dict[int | None, list[tuple]] = defaultdict(list)
            for i, (node, parent, depth, kind, name, count, total, own, path) in enumerate(rows):
                assert node == i
                if parent is None:
                    assert depth == 0 and path == name and kind == rs.FRAME_THREAD and own == 0
                    assert name.startswith("NeuronCore ") and (core is None or name == f"NeuronCore {core}")
                else:
                    assert parent < node and depth == rows[parent][2] + 1 and kind == rs.FRAME_SPAN
                    assert path == rows[parent][-1] + rs.PATH_SEPARATOR + name
                assert count >= 1 and 0 <= total <= count * (t1 - t0)
                children[parent].append(rows[i])
            for node, _parent, _depth, kind, _name, count, total, own, _path in rows:
                kids = children.get(node, [])
                if kids:
                    assert (count, total) == (sum(k[5] for k in kids), sum(k[6] for k in kids))
                    assert own == 0
                elif kind == rs.FRAME_SPAN:
                    assert own == total
            assert_depth_first(rows)


@PROPERTY
@given(examples(), WINDOWS, QUERIES)
def test_top_frames_folded_and_views_match_the_oracle(tmp_path_factory, ex, windows, queries):
    with _opened(tmp_path_factory.mktemp("it"), ex) as trace:
        for args, levels, core, t0, t1, tree, want in _trees_and_oracles(trace, ex, windows, queries):
            case = (args, levels, core, t0, t1)
            _check_top(top_frames(tree), _top_rows(want.per_name))
            assert _parse_folded(folded(tree)) == _folded_pairs(want.rows), case
            # the folded lines' times add up to the instructions' time in the window (when a level is kept)
            if want.kept:
                assert sum(own for _, own in _parse_folded(folded(tree))) == tree.span_ns
            for d in range(3):
                cut = limit_depth(tree, d)
                assert _rows_of(cut.table) == [r for r in want.rows if r[2] <= d], (case, d)
                assert (cut.spans, cut.what) == (want.in_window, "instructions")


@PROPERTY
@given(examples(), WINDOWS, QUERIES)
def test_a_cores_subtree_matches_the_oracle(tmp_path_factory, ex, windows, queries):
    """``subtree`` of a ``NeuronCore`` root: that core's rows, and ``spans`` its instructions in the window (the
    root's count) -- CallTree.spans "counts instructions" for an instruction tree."""
    with _opened(tmp_path_factory.mktemp("it"), ex) as trace:
        for args, levels, core, t0, t1, tree, want in _trees_and_oracles(trace, ex, windows, queries):
            case = (args, levels, core, t0, t1)
            for root in (r for r in want.rows if r[1] is None):
                part = subtree(tree, root[4])
                first = root[0]
                last = next((r[0] for r in want.rows if r[0] > first and r[1] is None), len(want.rows))
                assert _rows_of(part.table) == want.rows[first:last], case
                n = sum(1 for x in ex.instructions if x.pcore == int(root[4].split()[1])
                        and x.opcode not in WAIT_OPCODES and _in_window(x, t0, t1, _closed(args)))
                assert part.what == "instructions"
                assert part.spans == n == root[5], case


# -- by hand ---------------------------------------------------------------------------------------------------

def _ins(start, end, opcode="MATMUL", engine="Tensor", *, core=None, layer=None, operator=None, source=None):
    return Ins(start, end, core, engine, opcode, layer, operator, source)


def _example(instructions, packets=(), absent=()):
    modes = {level: "absent" if level in absent else "mixed" for level in VALUES}
    return Example(list(instructions), list(packets), modes, True)


HAND = _example([
    _ins(0, 10, layer="attn", operator="mm"),
    _ins(5, 25, "ACTIVATE", "Scalar", layer="attn", operator="add"),
    _ins(20, 40, layer=None, operator="mm"),
    _ins(30, 30, layer="mlp", operator="mm"),                 # zero-length
    _ins(0, 50, "EVENT_SEMAPHORE", "Vector", layer="mlp"),    # a wait: no frame
    _ins(10, 20, "MATMUL", "Tensor", core=1, layer="mlp", operator="mm"),
], absent=("source",))


def test_a_small_tree_by_hand(tmp_path):
    with _opened(tmp_path, HAND) as trace:
        tree = instruction_tree(trace, 8, 35, levels=["layer", "engine", "source"])
        assert tree.spans == 5
        assert _rows_of(tree.table) == [
            # node parent depth kind name count total self path
            (0, None, 0, "thread", "NeuronCore 0", 4, 34, 0, "NeuronCore 0"),     # 2 + 17 + 15 + 0
            (1, 0, 1, "span", "attn", 2, 19, 0, "NeuronCore 0 › attn"),
            (2, 1, 2, "span", "Scalar", 1, 17, 17, "NeuronCore 0 › attn › Scalar"),
            (3, 1, 2, "span", "Tensor", 1, 2, 2, "NeuronCore 0 › attn › Tensor"),
            (4, 0, 1, "span", NONE, 1, 15, 0, "NeuronCore 0 › (none)"),
            (5, 4, 2, "span", "Tensor", 1, 15, 15, "NeuronCore 0 › (none) › Tensor"),
            (6, 0, 1, "span", "mlp", 1, 0, 0, "NeuronCore 0 › mlp"),
            (7, 6, 2, "span", "Tensor", 1, 0, 0, "NeuronCore 0 › mlp › Tensor"),
            (8, None, 0, "thread", "NeuronCore 1", 1, 10, 0, "NeuronCore 1"),
            (9, 8, 1, "span", "mlp", 1, 10, 0, "NeuronCore 1 › mlp"),
            (10, 9, 2, "span", "Tensor", 1, 10, 10, "NeuronCore 1 › mlp › Tensor"),
        ]
        assert _rows_of(tree.table) == oracle(HAND, 8, 35, ["layer", "engine", "source"], None).rows
        assert folded(tree) == ["NeuronCore 0;attn;Scalar 17", "NeuronCore 0;attn;Tensor 2",
                                "NeuronCore 0;(none);Tensor 15", "NeuronCore 1;mlp;Tensor 10"]
        top = {r["name"]: (r["count"], r["self_ns"], r["total_ns"]) for r in top_frames(tree).to_pylist()}
        assert top == {"Tensor": (4, 27, 27), "Scalar": (1, 17, 17), "attn": (2, 0, 19), NONE: (1, 0, 15),
                       "mlp": (2, 0, 10)}
        # core 1 alone: its default window is its own instruction's [10, 20)
        tree = instruction_tree(trace, levels=["operator", "opcode"], core=1)
        assert (tree.start_ns, tree.end_ns, tree.spans) == (10, 20, 1)
        assert [r[-1] for r in _rows_of(tree.table)] == ["NeuronCore 1", "NeuronCore 1 › mm",
                                                         "NeuronCore 1 › mm › MATMUL"]


def test_levels_without_values_in_the_window_are_left_out(tmp_path):
    ex = _example([_ins(0, 10, operator="mm"), _ins(20, 30, layer="attn"), _ins(5, 12, "WAIT", source="k.py:1")])
    with _opened(tmp_path, ex) as trace:
        # in [0, 15) no layer is set (the later one lies outside), and the source line is a wait's
        rows = _rows_of(instruction_tree(trace, 0, 15, levels=["layer", "source", "operator"]).table)
        assert [r[-1] for r in rows] == ["NeuronCore 0", "NeuronCore 0 › mm"]
        rows = _rows_of(instruction_tree(trace, 0, 35, levels=["layer", "source", "operator"]).table)
        assert [r[-1] for r in rows] == ["NeuronCore 0", "NeuronCore 0 › (none)", "NeuronCore 0 › (none) › mm",
                                         "NeuronCore 0 › attn", "NeuronCore 0 › attn › (none)"]   # 10 ns each


def test_a_name_repeated_down_a_path_counts_its_time_once(tmp_path):
    ex = _example([_ins(0, 10, layer="attn", operator="attn"), _ins(10, 30, layer="Tensor", operator="mm")])
    with _opened(tmp_path, ex) as trace:
        tree = instruction_tree(trace, levels=["layer", "operator", "engine"])
        top = {r["name"]: (r["count"], r["self_ns"], r["total_ns"]) for r in top_frames(tree).to_pylist()}
        assert top == {"Tensor": (3, 30, 30), "attn": (2, 0, 10), "mm": (1, 0, 20)}


def test_the_subtree_of_a_core_counts_its_instructions_once(tmp_path):
    """One instruction under two levels: the tree and its core's subtree both hold 1 instruction."""
    ex = _example([_ins(0, 5)], absent=tuple(VALUES))
    with _opened(tmp_path, ex) as trace:
        tree = instruction_tree(trace, levels=["engine", "opcode"])
        assert tree.spans == 1
        assert subtree(tree, "NeuronCore 0").spans == 1


# -- errors ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hand_trace(tmp_path_factory):
    with _opened(tmp_path_factory.mktemp("hand"), HAND) as trace:
        yield trace


@pytest.mark.parametrize("levels", [
    ["layer", "nope"], ["engine", "engine"], ["opcode", "layer", "opcode"], ["Layer"], [None], [1],
    [], (), "engine", "", None,
    5, 3.5,                  # not a list at all
    [["engine"]],            # an element that is not a level name (nor hashable)
    iter([]),                # an empty iterable: no levels
], ids=lambda v: "iter([])" if type(v).__name__ == "list_iterator" else repr(v))
def test_bad_levels_are_a_query_error(hand_trace, levels):
    with pytest.raises(QueryError):
        instruction_tree(hand_trace, levels=levels)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from((*LEVEL_NAMES, "nope", "Engine", "")), min_size=0, max_size=6))
def test_levels_are_checked(hand_trace, levels):
    good = bool(levels) and all(x in LEVEL_NAMES for x in levels) and len(set(levels)) == len(levels)
    if good:
        tree = instruction_tree(hand_trace, levels=levels)
        assert tree.spans == 5
    else:
        with pytest.raises(QueryError):
            instruction_tree(hand_trace, levels=levels)


@pytest.mark.parametrize("core", [2, 7, -1, True, "0", 1.0])
def test_a_core_the_trace_lacks_is_a_query_error(hand_trace, core):
    with pytest.raises(QueryError):
        instruction_tree(hand_trace, core=core)
    with pytest.raises(QueryError):
        instruction_tree(hand_trace, 0, 100, core=core)


def test_a_core_with_packets_only_has_an_empty_tree(tmp_path):
    ex = _example([_ins(0, 10, layer="attn")], [Packet(5, 40, 1)])
    with _opened(tmp_path, ex) as trace:
        tree = instruction_tree(trace, core=1)
        assert (tree.start_ns, tree.end_ns, tree.spans, tree.table.num_rows) == (5, 40, 0, 0)
        assert folded(tree) == [] and top_frames(tree).num_rows == 0
        tree = instruction_tree(trace)   # the packet stretches the default window
        assert (tree.start_ns, tree.end_ns) == (0, 40)


@pytest.mark.parametrize(("start", "end"), [(50, 50), (60, 40), (-5, -10)])
def test_an_empty_or_reversed_window_is_an_error(hand_trace, start, end):
    with pytest.raises(QueryError, match="empty window"):
        instruction_tree(hand_trace, start, end)
