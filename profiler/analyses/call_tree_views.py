"""What is read off a built call tree (:func:`profiler.analyses.call_tree.call_tree`): time per name over every
stack (the "bottom-up" view), Brendan Gregg's folded stacks for ``flamegraph.pl`` or speedscope, one root's subtree,
the tree cut at a depth, and its roots (with their spans and time)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from profiler.analyses import schema as rs
from profiler.analyses.call_tree import SPANS, CallTree
from profiler.analyses.inputs import check_count
from profiler.errors import QueryError

#: Separator of a name's stack in :func:`folded` (``flamegraph.pl``'s); a name's own ``;`` is written as ``,``.
FOLDED_SEPARATOR = ";"


def top_frames(tree: CallTree) -> pa.Table:
    """Time per span name over every stack it appears in (:data:`~profiler.analyses.schema.TOP_FRAMES`), by
    descending ``self_ns``: ``total_ns`` counts a call nested in a call of the same name once, ``fraction`` is
    the name's share of all self time."""
    t = tree.table
    per: dict[str, list[int]] = {}
    kinds = t.column(rs.FRAME_KIND).to_pylist()
    for kind, name, n, tot, own, outer in zip(kinds, t.column(rs.NAME).to_pylist(), t.column(rs.COUNT).to_pylist(),
                                              t.column(rs.TOTAL_NS).to_pylist(), t.column(rs.SELF_NS).to_pylist(),
                                              tree.outermost, strict=True):
        if kind != rs.FRAME_SPAN:
            continue
        acc = per.setdefault(name, [0, 0, 0])
        acc[0] += n
        acc[1] += own
        if outer:
            acc[2] += tot
    whole = sum(v[1] for v in per.values())
    ranked = sorted(per.items(), key=lambda kv: (-kv[1][1], -kv[1][2], kv[0]))
    return pa.table({
        rs.NAME: [k for k, _ in ranked],
        rs.COUNT: [v[0] for _, v in ranked],
        rs.SELF_NS: [v[1] for _, v in ranked],
        rs.TOTAL_NS: [v[2] for _, v in ranked],
        rs.FRACTION: [v[1] / whole if whole else 0.0 for _, v in ranked],
    }, schema=rs.TOP_FRAMES)


def folded(tree: CallTree) -> list[str]:
    """Folded stacks (``root;frame;frame SELF_NS``, one line per frame with self time), the input of
    ``flamegraph.pl`` and speedscope; a name's own ``;`` is written as ``,`` and line breaks as spaces."""
    t = tree.table
    parents = t.column(rs.PARENT).to_pylist()
    names = [n.replace(FOLDED_SEPARATOR, ",").replace("\n", " ").replace("\r", " ")
             for n in t.column(rs.NAME).to_pylist()]
    stacks: dict[int, str] = {}
    lines = []
    for node, p, name, own in zip(t.column(rs.NODE).to_pylist(), parents, names, t.column(rs.SELF_NS).to_pylist(),
                                  strict=True):
        stack = name if p is None else stacks[p] + FOLDED_SEPARATOR + name
        stacks[node] = stack
        if own > 0:
            lines.append(f"{stack} {own}")
    return lines


def limit_depth(tree: CallTree, max_depth: int) -> CallTree:
    """``tree`` without the frames deeper than ``max_depth`` (roots are depth 0); the others keep their numbers."""
    max_depth = check_count(max_depth, "max_depth", allow_none=False)
    keep = pc.less_equal(tree.table.column(rs.DEPTH), max_depth)
    kept = keep.to_pylist()
    return CallTree(tree.table.filter(keep), tree.start_ns, tree.end_ns, tree.spans, tree.by_thread,
                    tuple(o for o, k in zip(tree.outermost, kept, strict=True) if k), tree.what)


def roots(tree: CallTree) -> list[tuple[str, int]]:
    """The root frames' names and total times, widest first (rows with ``by_thread``, outermost spans without)."""
    t = tree.table
    out = [(n, tot) for n, p, tot in zip(t.column(rs.NAME).to_pylist(), t.column(rs.PARENT).to_pylist(),
                                        t.column(rs.TOTAL_NS).to_pylist(), strict=True) if p is None]
    return out  # the table lists roots widest first already


def subtree(tree: CallTree, root: str) -> CallTree:
    """The root frame named ``root`` with every frame under it (a contiguous run of the depth-first rows).

    Raises:
        QueryError: no root frame has that name in this window.
    """
    if not isinstance(root, str):
        raise QueryError(f"root must be a root frame's name (see roots()), not {str(root)[:40]!r}")
    t = tree.table
    parents = t.column(rs.PARENT).to_pylist()
    names = t.column(rs.NAME).to_pylist()
    depth = t.column(rs.DEPTH).to_pylist()
    start = next((i for i, (p, n) in enumerate(zip(parents, names, strict=True)) if p is None and n == root), None)
    if start is None:
        raise QueryError(f"no root frame named {root[:80]!r} in this window")
    end = start + 1
    while end < len(depth) and depth[end] > depth[start]:
        end += 1
    part = t.slice(start, end - start)
    if tree.what != SPANS:   # every frame counts the events under it (instructions, kernels): the root, all
        spans = part.column(rs.COUNT)[0].as_py()
    else:                           # a span is counted by its own frame only
        spans = sum(c for c, k in zip(part.column(rs.COUNT).to_pylist(), part.column(rs.FRAME_KIND).to_pylist(),
                                      strict=True) if k == rs.FRAME_SPAN)
    return CallTree(part, tree.start_ns, tree.end_ns, spans, tree.by_thread, tree.outermost[start:end], tree.what)


def root_summary(tree: CallTree, duration_ns: int) -> pa.Table:
    """Per root frame, widest first (:data:`~profiler.analyses.schema.ROOT_SUMMARY`): the spans (or events) under
    it, its time and that time's share of ``duration_ns`` (a row's time in its outermost spans over the trace's
    duration: a GPU stream's busy share)."""
    t = tree.table
    rows: list[list] = []
    for parent, name, kind, count, total in zip(t.column(rs.PARENT).to_pylist(), t.column(rs.NAME).to_pylist(),
                                                t.column(rs.FRAME_KIND).to_pylist(), t.column(rs.COUNT).to_pylist(),
                                                t.column(rs.TOTAL_NS).to_pylist(), strict=True):
        if parent is None:
            rows.append([name, count if tree.what != SPANS or kind == rs.FRAME_SPAN else 0, total])
        elif kind == rs.FRAME_SPAN and tree.what == SPANS:
            rows[-1][1] += count
    whole = max(int(duration_ns), 1)
    return pa.table({rs.NAME: [r[0] for r in rows], rs.COUNT: [r[1] for r in rows],
                     rs.TOTAL_NS: [r[2] for r in rows], rs.FRACTION: [r[2] / whole for r in rows]},
                    schema=rs.ROOT_SUMMARY)
