"""Two call trees compared: the flame-graph diff, per stack and per name (B relative to A).

Stacks are matched by their path of names (:data:`profiler.analyses.schema.PATH`), names by name: build both trees
with ``by_thread=False`` to compare runs whose processes and threads have other ids (the CLI and the dashboard do),
or with rows when the rows are named alike.  A stack or name in one tree only is ``only_a`` / ``only_b`` with zeros
on the other side.  Perfetto's users ask for exactly this comparison (google/perfetto#2780); HTA's ``TraceDiff``
gives its per-name counts and durations.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.call_tree import CallTree
from profiler.analyses.call_tree_views import top_frames
from profiler.analyses.diff import BOTH, ONLY_A, ONLY_B


def _ratio(a: int, b: int) -> float | None:
    return b / a if a else None


def _presence(in_a: bool, in_b: bool) -> str:
    return BOTH if in_a and in_b else (ONLY_A if in_a else ONLY_B)


def diff_stacks(a: CallTree, b: CallTree) -> pa.Table:
    """Every stack of either tree with its count, total and self time in A and B and their changes
    (:data:`~profiler.analyses.schema.CALL_TREE_DIFF`), largest absolute change of total time first."""
    def index(tree: CallTree) -> dict[str, dict[str, Any]]:
        return {r[rs.PATH]: r for r in tree.table.to_pylist()}

    ia, ib = index(a), index(b)
    zero = {rs.COUNT: 0, rs.TOTAL_NS: 0, rs.SELF_NS: 0}
    rows = []
    for path in list(ia) + [p for p in ib if p not in ia]:
        ra, rb = ia.get(path, zero), ib.get(path, zero)
        first = ia.get(path) or ib[path]
        rows.append({
            rs.PATH: path, rs.NAME: first[rs.NAME], rs.DEPTH: first[rs.DEPTH],
            rs.PRESENCE: _presence(path in ia, path in ib),
            rs.A_COUNT: ra[rs.COUNT], rs.B_COUNT: rb[rs.COUNT],
            rs.A_NS: ra[rs.TOTAL_NS], rs.B_NS: rb[rs.TOTAL_NS], rs.DELTA_NS: rb[rs.TOTAL_NS] - ra[rs.TOTAL_NS],
            rs.A_SELF_NS: ra[rs.SELF_NS], rs.B_SELF_NS: rb[rs.SELF_NS],
            rs.DELTA_SELF_NS: rb[rs.SELF_NS] - ra[rs.SELF_NS],
            rs.RATIO: _ratio(ra[rs.TOTAL_NS], rb[rs.TOTAL_NS]),
        })
    rows.sort(key=lambda r: (-abs(r[rs.DELTA_NS]), -(r[rs.A_NS] + r[rs.B_NS]), r[rs.PATH]))
    return pa.Table.from_pylist(rows, schema=rs.CALL_TREE_DIFF)


def diff_names(a: CallTree, b: CallTree) -> pa.Table:
    """Time per name in A and B (:func:`~profiler.analyses.call_tree.top_frames` of each) and its changes
    (:data:`~profiler.analyses.schema.CALL_TREE_NAME_DIFF`), largest absolute change of self time first."""
    def index(tree: CallTree) -> dict[str, dict[str, Any]]:
        return {r[rs.NAME]: r for r in top_frames(tree).to_pylist()}

    ia, ib = index(a), index(b)
    zero = {rs.COUNT: 0, rs.TOTAL_NS: 0, rs.SELF_NS: 0}
    rows = []
    for name in list(ia) + [n for n in ib if n not in ia]:
        ra, rb = ia.get(name, zero), ib.get(name, zero)
        rows.append({
            rs.NAME: name, rs.PRESENCE: _presence(name in ia, name in ib),
            rs.A_COUNT: ra[rs.COUNT], rs.B_COUNT: rb[rs.COUNT],
            rs.A_SELF_NS: ra[rs.SELF_NS], rs.B_SELF_NS: rb[rs.SELF_NS],
            rs.DELTA_SELF_NS: rb[rs.SELF_NS] - ra[rs.SELF_NS],
            rs.A_NS: ra[rs.TOTAL_NS], rs.B_NS: rb[rs.TOTAL_NS], rs.DELTA_NS: rb[rs.TOTAL_NS] - ra[rs.TOTAL_NS],
            rs.RATIO: _ratio(ra[rs.TOTAL_NS], rb[rs.TOTAL_NS]),
        })
    rows.sort(key=lambda r: (-abs(r[rs.DELTA_SELF_NS]), -abs(r[rs.DELTA_NS]), r[rs.NAME]))
    return pa.Table.from_pylist(rows, schema=rs.CALL_TREE_NAME_DIFF)
