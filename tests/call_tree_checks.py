"""Checks shared by the call trees' property tests: the table's depth-first order."""

from __future__ import annotations

from collections import defaultdict


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
