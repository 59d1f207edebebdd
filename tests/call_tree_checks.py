"""Checks shared by the call trees' property tests: the table as rows and frames, the per-name table, folded
stacks, and the depth-first order."""

from __future__ import annotations

from collections import defaultdict

import pytest

from profiler.analyses import schema as rs
from profiler.analyses.call_tree_views import FOLDED_SEPARATOR


def assert_depth_first(rows: list[tuple]) -> None:
    """``rows`` (``node, parent, depth, kind, name, count, total_ns, self_ns, path`` each) are the preorder walk of
    their tree with every frame's children by descending ``total_ns``, then name."""
    children: dict[int | None, list[tuple]] = defaultdict(list)
    for r in rows:
        children[r[1]].append(r)
    order: list[int] = []

    def walk(parent: int | None) -> None:
        ranked = sorted(children[parent], key=lambda r: (-r[6], r[4]))
        assert ranked == children[parent], "children by descending total_ns, then name"
        for r in ranked:
            order.append(r[0])
            walk(r[0])

    walk(None)
    assert order == list(range(len(rows))), "rows are the depth-first (preorder) walk"


def frames_of(tree) -> dict[tuple[str, ...], list[int]]:
    t = tree.table.to_pydict()
    stacks: dict[int, tuple[str, ...]] = {}
    out = {}
    for node, parent, name, count, total, own in zip(t[rs.NODE], t[rs.PARENT], t[rs.NAME], t[rs.COUNT],
                                                     t[rs.TOTAL_NS], t[rs.SELF_NS], strict=True):
        stacks[node] = (stacks[parent] if parent is not None else ()) + (name,)
        out[stacks[node]] = [count, total, own]
    return out


def rows_of(table) -> list[tuple]:
    t = table.to_pydict()
    return list(zip(*(t[c] for c in rs.CALL_TREE.names), strict=True))


def top_rows(per_name: dict[str, list[int]]) -> list[tuple]:
    whole = sum(v[1] for v in per_name.values())
    ranked = sorted(per_name.items(), key=lambda kv: (-kv[1][1], -kv[1][2], kv[0]))
    return [(name, c, own, total, own / whole if whole else 0.0) for name, (c, own, total) in ranked]


def check_top(table, want: list[tuple]) -> None:
    """top_frames' rows equal ``want``: names and integers exactly, fractions to rounding.

    A name whose only frames are ancestors outside the window (no span of it in the window) may be listed with
    nothing (it does appear in a stack); the others are the oracle's, in its order."""
    assert table.schema == rs.TOP_FRAMES
    got = list(zip(*(table.column(c).to_pylist() for c in rs.TOP_FRAMES.names), strict=True))
    assert all(g[1:] == (0, 0, 0, 0.0) for g in got if g[1] == 0)
    got = [g for g in got if g[1] > 0]
    want = [w for w in want if w[1] > 0]
    assert [g[:4] for g in got] == [w[:4] for w in want]
    assert [g[4] for g in got] == pytest.approx([w[4] for w in want])


def folded_pairs(rows: list[tuple]) -> list[tuple[tuple[str, ...], int]]:
    """(stack, self_ns) of the frames with self time, in table order, names as folded writes them."""
    return [(tuple(n.replace(FOLDED_SEPARATOR, ",") for n in path.split(rs.PATH_SEPARATOR)), own)
            for (_node, _parent, _depth, _kind, _name, _c, _t, own, path) in rows if own > 0]


def parse_folded(lines: list[str]) -> list[tuple[tuple[str, ...], int]]:
    out = []
    for line in lines:
        stack, _, own = line.rpartition(" ")
        out.append((tuple(stack.split(FOLDED_SEPARATOR)), int(own)))
    return out
