"""The call tree of a trace's spans: time per stack of nested span names, as a flame graph draws it.

Every span (the ``slice`` table: PyTorch/JAX operators, Python functions and GPU kernels of an imported trace, a
recording's layers and operators) belongs to a *frame*: the list of names from its outermost enclosing span (along
``parent_id``) down to itself, under a root frame naming the row its outermost span is on (process / thread).
For a window ``[start_ns, end_ns)`` each frame gets

- ``count``: its spans that overlap the window (a zero-length span: that lies in it, or at the end of the whole
  trace when the window is the default one);
- ``total_ns``: their durations clipped to the window (inclusive: their children's time is in it);
- ``self_ns``: the part of that time not covered by their children, each child counting only the part of its
  clipped interval inside its parent's (an imported child that sticks out of its parent takes nothing away from
  its parent's other time), at least 0 (children that overlap each other can cover more than their parent).

A row's root frame (``by_thread``) counts the row's outermost spans, and its ``total_ns`` is the time any of them is
open: the union of their clipped intervals, so spans overlapping on one row (pipelined layers, concurrent kernels
on a GPU stream) count their common time once and a row never holds more time than the window.

Perfetto's area-selection flame graph and its slice aggregation, HTA's operator breakdown and a profiler's
"call tree" view give the same numbers; :mod:`profiler.analyses.call_tree_views` reads the per-name table, folded
stacks and subtrees off a built tree.

Spans are read for the window only, plus any ancestor outside it (an imported span can stick out of its parent),
so a small window of a large trace is cheap.  A ``parent_id`` that names no span makes its span a root, and so do
parent links that form a cycle for the spans on it (the spans below a cycle stay below their parents).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import db_schema as dbs
from profiler.analyses import intervals
from profiler.analyses import schema as rs
from profiler.analyses.inputs import check_count, column, fetch, find_sorted, q
from profiler.errors import QueryError
from profiler.trace import Trace, check_time
from tracer import schema as ts

#: Most spans one call tree reads (the window's, with their ancestors); a larger window is an error naming the fix.
MAX_SPANS = 20_000_000
#: :attr:`CallTree.what` values.
SPANS = "spans"
INSTRUCTIONS = "instructions"
KERNELS = "kernels"
#: A numbered iteration at the end of a span name (``ProfilerStep#552``), and what ``merge_steps`` makes of it.
STEP_NUMBER = r"#[0-9]+$"
STEP_MERGED = "#N"
#: Rounds of reading ancestors that lie outside the window (each round one level up).
MAX_ANCESTOR_ROUNDS = 256

_IN_WINDOW = "in_window"


@dataclass(frozen=True)
class CallTree:
    """Spans of ``[start_ns, end_ns)`` aggregated by stack.

    Attributes:
        table: :data:`profiler.analyses.schema.CALL_TREE`, one row per frame, depth first (a frame's children by
            descending ``total_ns``, then name), so a parent comes before its children.
        start_ns, end_ns: the window.
        spans: spans overlapping the window (of the frames in ``table``: a :func:`subtree` counts its own).
        by_thread: roots are rows (process / thread) when true; otherwise stacks of every row are merged.
        outermost: per row of ``table``, false when an enclosing frame has the same name (recursion), so
            :func:`top_frames` counts a nested call's time once.
    """

    table: pa.Table
    start_ns: int
    end_ns: int
    spans: int
    by_thread: bool
    outermost: tuple[bool, ...] = field(repr=False)
    #: What the frames count: :data:`SPANS`, :data:`INSTRUCTIONS` for
    #: :func:`profiler.analyses.instruction_tree.instruction_tree` or :data:`KERNELS` for
    #: :func:`profiler.analyses.kernel_tree.kernel_tree` (``spans`` then counts those; each frame counts the events
    #: under it, where a spans' frame counts its own spans).
    what: str = "spans"

    @property
    def span_ns(self) -> int:
        """Time covered by spans, summed over rows (the roots' ``total_ns``: each row's time with a span open)."""
        if self.table.num_rows == 0:
            return 0
        roots = pc.is_null(self.table.column(rs.PARENT))
        return int(pc.sum(pc.filter(self.table.column(rs.TOTAL_NS), roots)).as_py() or 0)


def _span_sql(where: str, limit: int | None = None) -> str:
    return (f"SELECT {q(ts.ID)} AS id, {q(ts.PARENT_ID)} AS parent, {q(ts.NAME)} AS name, {q(ts.START_TS)} AS s, "
            f"{q(ts.END_TS)} AS e, {q(dbs.TRACK_ID)} AS track FROM {q(dbs.SLICE_TABLE)} s WHERE {where}"
            + ("" if limit is None else f" LIMIT {int(limit)}"))


def window_of(trace: Trace, start_ns: int | None, end_ns: int | None) -> tuple[int, int, bool]:
    """``(t0, t1, closed)``: the window ``[start_ns, end_ns)``, each bound defaulting to the trace's extent, and
    whether its end is the default one (the trace's last instant then belongs to it: see :func:`in_window_sql`).

    Raises:
        QueryError: a malformed bound or an empty window.
    """
    t0 = check_time(start_ns, "start_ns") if start_ns is not None else None
    t1 = check_time(end_ns, "end_ns") if end_ns is not None else None
    closed = t1 is None
    if t0 is None or t1 is None:
        lo, hi = trace.time_range
        t0, t1 = (lo if t0 is None else t0), (hi if t1 is None else t1)
    if t1 <= t0:
        raise QueryError(f"empty window: end ({t1} ns) must be greater than start ({t0} ns)")
    return t0, t1, closed


def in_window_sql(s: str = q(ts.START_TS), e: str = q(ts.END_TS)) -> str:
    """SQL condition on the parameters ``$t0``, ``$t1`` and ``$closed`` over a row's start ``s`` and end ``e``
    (column expressions): the row overlaps ``[t0, t1)``, or is zero-length at an instant in it (at ``t1`` too when
    ``closed``)."""
    return f"(({s} < $t1 AND {e} > $t0) OR ({e} = {s} AND {s} >= $t0 AND ({s} < $t1 OR ({s} = $t1 AND $closed))))"


def row_label_sql(alias: str) -> str:
    """SQL of a track's row label: ``group / name`` (its name alone without a group)."""
    g, n = f"{alias}.{q(dbs.GROUP_NAME)}", f"{alias}.{q(ts.NAME)}"
    return f"CASE WHEN {g} IS NULL OR {g} = '' THEN {n} ELSE {g} || ' / ' || {n} END"


def _row_labels(trace: Trace) -> tuple[np.ndarray, list[str]]:
    """Per track: its row's label (``group / name``; the tracks of one thread's nesting levels share it), as
    sorted track ids and the label of each."""
    k = fetch(trace, f"SELECT k.{q(dbs.TRACK_ID)} AS track, {row_label_sql('k')} AS label "
                     f"FROM {q(dbs.TRACK_TABLE)} k ORDER BY 1")
    return column(k, "track"), [v or "" for v in k.column("label").to_pylist()]


def _read_spans(trace: Trace, t0: int, t1: int, max_spans: int, *, closed_end: bool = False
                ) -> tuple[pa.Table, int]:
    """The spans overlapping the window (``in_window`` true) and their ancestors outside it (false)."""
    window = fetch(trace, _span_sql(in_window_sql(), max_spans + 1), {"t0": t0, "t1": t1, "closed": closed_end})
    if window.num_rows > max_spans:
        raise QueryError(f"{trace.path}: more than {max_spans:,} spans in the window, the call tree's limit; "
                         "pick a smaller window (--start/--end)")
    n_window = window.num_rows
    parts = [window.append_column(_IN_WINDOW, pa.array(np.ones(n_window, dtype=bool)))]
    known = np.sort(column(window, "id"))
    wanted = column(window, "parent", fill=-1)
    for _ in range(MAX_ANCESTOR_ROUNDS):
        wanted = wanted[wanted >= 0]
        _, found = find_sorted(known, wanted)
        missing = np.unique(wanted[~found])
        if missing.size == 0:
            break
        more = fetch(trace, _span_sql(f"{q(ts.ID)} IN (SELECT unnest($ids::BIGINT[]))"),
                     {"ids": missing.tolist()})
        if more.num_rows == 0:
            break
        parts.append(more.append_column(_IN_WINDOW, pa.array(np.zeros(more.num_rows, dtype=bool))))
        known = np.sort(np.concatenate([known, column(more, "id")]))
        wanted = column(more, "parent", fill=-1)
        if len(known) > max_spans:
            raise QueryError(f"{trace.path}: the window's spans have more than {max_spans:,} ancestors and spans "
                             "in all, the call tree's limit; pick a smaller window (--start/--end)")
    return pa.concat_tables(parts), n_window


def _codes(table: pa.Table, name: str) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes of a string column (null: "") and its distinct values."""
    col = pc.fill_null(table.column(name), "").combine_chunks()
    enc = col.dictionary_encode()
    return np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64), enc.dictionary.to_pylist()


def _children_index(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the spans by parent: ``kids[offsets[i]:offsets[i + 1]]`` are span ``i``'s children."""
    n = len(parent)
    has = parent >= 0
    idx = np.flatnonzero(has)
    kids = idx[np.argsort(parent[idx], kind="stable")]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(parent[idx], minlength=n), out=offsets[1:])
    return kids, offsets


def _children_of(level: np.ndarray, kids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Every child of the spans ``level`` (the next level down), from the CSR of :func:`_children_index`."""
    count = offsets[level + 1] - offsets[level]
    begin = np.repeat(offsets[level] - (np.cumsum(count) - count), count)
    return kids[begin + np.arange(int(count.sum()))]


def _paths(parent: np.ndarray, name: np.ndarray, root_frame: np.ndarray, n_names: int, *, first: int, depth0: int
           ) -> tuple[np.ndarray, list[int], list[int], list[int]] | None:
    """Frame of every span, walking down from the roots level by level (vectorised per level).

    Frames are numbered from ``first`` (the ones below are the rows' root frames); a root span hangs under frame
    ``root_frame`` (-1: none) at depth ``depth0``.  Returns (frame per span, and per new frame: its parent frame,
    name code, depth), or None when some spans were never reached (a parent cycle)."""
    n = len(parent)
    frame = np.full(n, -1, dtype=np.int64)
    f_parent: list[int] = []
    f_name: list[int] = []
    f_depth: list[int] = []
    kids, offsets = _children_index(parent)
    level = np.flatnonzero(parent < 0)
    above = root_frame[level]
    depth = depth0
    while level.size:
        key = (above + 1) * n_names + name[level]
        uniq, inv = np.unique(key, return_inverse=True)
        base = first + len(f_parent)
        f_parent.extend((uniq // n_names - 1).tolist())
        f_name.extend((uniq % n_names).tolist())
        f_depth.extend([depth] * len(uniq))
        frame[level] = base + inv
        level = _children_of(level, kids, offsets)
        above = frame[parent[level]]
        depth += 1
    if (frame < 0).any():
        return None
    return frame, f_parent, f_name, f_depth


def call_tree(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, *, by_thread: bool = True,
              merge_steps: bool = False, max_spans: int = MAX_SPANS) -> CallTree:
    """The call tree of the spans overlapping ``[start_ns, end_ns)`` (default: the whole trace).

    Args:
        trace: an open trace.
        start_ns, end_ns: the window (ns, as stored); each defaults to the trace's extent.
        by_thread: one root per row (process / thread) the stacks start on; False merges every row's stacks
            (their times then add up across rows).
        merge_steps: names ending in ``#`` and a number (PyTorch's ``ProfilerStep#552``) end in ``#N`` instead, so
            the iterations of a loop make one frame (and two windows' trees line up for :mod:`call_tree_diff`).
        max_spans: most spans to read (the window's and their ancestors').

    Raises:
        QueryError: a trace without spans, an empty or malformed window, or more than ``max_spans`` spans.
    """
    t0, t1, closed_end = window_of(trace, start_ns, end_ns)
    max_spans = check_count(max_spans, "max_spans", allow_none=False)
    has_spans = fetch(trace, f"SELECT count(*) AS n FROM (SELECT 1 FROM {q(dbs.SLICE_TABLE)} LIMIT 1)")
    if has_spans.column(0)[0].as_py() == 0:
        has_instructions = fetch(trace, f"SELECT count(*) AS n FROM (SELECT 1 FROM {q(ts.INSTRUCTION.name)} "
                                        "LIMIT 1)").column(0)[0].as_py()
        hint = ("; its instructions have a tree of their own (layer, operator, source line, engine, opcode): "
                "`trnprof calltree --instructions`, Trace.call_tree_figure(of='instructions')"
                if has_instructions else "")
        raise QueryError(f"{trace.path}: the trace has no spans to build a call tree from (it needs nested "
                         "spans: an imported PyTorch/JAX/Chrome trace, or a recording with layer or operator "
                         f"names){hint}")
    rows, n_window = _read_spans(trace, t0, t1, max_spans, closed_end=closed_end)
    if merge_steps:
        i = rows.schema.get_field_index("name")
        rows = rows.set_column(i, "name", pc.replace_substring_regex(rows.column(i), STEP_NUMBER, STEP_MERGED))
    if by_thread:  # each span's row label, coded: one code per distinct label
        tracks, labels = _row_labels(trace)
        distinct = sorted(set(labels))
        code_of = {v: i for i, v in enumerate(distinct)}
        pos, _found = find_sorted(tracks, column(rows, "track"))
        label_codes = np.asarray([code_of[v] for v in labels], dtype=np.int64)[pos]
        return _tree(rows, n_window, (t0, t1), (label_codes, distinct))
    return _tree(rows, n_window, (t0, t1), None)


@dataclass
class _Frames:
    """The frames found by :func:`_paths` (row labels first), before aggregation: per frame its parent frame
    (-1: a root), name code into ``strings`` and depth; frames below ``n_labels`` are rows' root frames."""

    parent: list[int]
    name: list[int]
    depth: list[int]
    strings: list[str]
    n_labels: int


def _tree(rows: pa.Table, n_window: int, window: tuple[int, int],
          row_labels: tuple[np.ndarray, list[str]] | None) -> CallTree:
    """The tree of ``rows`` (:func:`_read_spans`); ``row_labels``: each row's label code and the labels, for one
    root per row (None: merged)."""
    by_thread = row_labels is not None
    order = np.argsort(column(rows, "id"), kind="stable")
    rows = rows.take(pa.array(order))
    ids = column(rows, "id")
    pos, found = find_sorted(ids, column(rows, "parent", fill=-1))
    parent = np.where(found & (pos != np.arange(len(ids))), pos, -1)
    name, names = _codes(rows, "name")
    if row_labels is not None:  # a root frame per row label (frames 0..L-1), their names coded after the span names
        root_frame, labels = row_labels[0][order], row_labels[1]
    else:
        labels = []
        root_frame = np.full(len(ids), -1, dtype=np.int64)
    n_pre = len(labels)
    n_names = len(names) + len(labels) + 1
    walked = _paths(parent, name, root_frame, n_names, first=n_pre, depth0=1 if by_thread else 0)
    if walked is None:  # parent cycles: each cycle's spans become roots, the spans under them stay under them
        parent = parent.copy()
        parent[_cycle_members(parent, np.flatnonzero(~_paths_reached(parent)))] = -1
        walked = _paths(parent, name, root_frame, n_names, first=n_pre, depth0=1 if by_thread else 0)
        assert walked is not None
    frame, f_parent, f_name, f_depth = walked
    frames = _Frames([-1] * n_pre + f_parent, [len(names) + i for i in range(n_pre)] + f_name,
                     [0] * n_pre + f_depth, names + labels, n_pre)
    return _aggregate(rows, n_window, window, parent, frame, frames=frames, by_thread=by_thread)


def _cycle_members(parent: np.ndarray, unreached: np.ndarray) -> list[int]:
    """The spans of ``unreached`` (not reached from a root) that lie on a cycle of parent links (a walk up from
    each, each span visited once)."""
    state: dict[int, int] = {}   # 1: on the walk in progress, 2: done
    members: list[int] = []
    for start in unreached.tolist():
        walk = []
        x = start
        while x >= 0 and x not in state:
            state[x] = 1
            walk.append(x)
            x = int(parent[x])
        if x >= 0 and state[x] == 1:   # the walk closed a cycle: from x on
            members += walk[walk.index(x):]
        for y in walk:
            state[y] = 2
    return members


def _paths_reached(parent: np.ndarray) -> np.ndarray:
    """Spans reachable from a root by parent links (the others are on cycles or below one)."""
    reached = parent < 0
    kids, offsets = _children_index(parent)
    level = np.flatnonzero(reached)
    while level.size:
        level = _children_of(level, kids, offsets)
        reached[level] = True
    return reached


def _aggregate(rows: pa.Table, n_window: int, window: tuple[int, int], parent: np.ndarray, frame: np.ndarray, *,
               frames: _Frames, by_thread: bool) -> CallTree:
    t0, t1 = window
    inside = column(rows, _IN_WINDOW, dtype=bool, fill=False)
    clip = np.where(inside, np.minimum(column(rows, "e"), t1) - np.maximum(column(rows, "s"), t0), 0)
    clip = np.maximum(clip, 0)
    # what each child covers of its parent's clipped interval (an imported child may stick out of its parent)
    has = parent >= 0
    starts, ends = column(rows, "s"), column(rows, "e")
    lo = np.maximum(np.maximum(starts[has], starts[parent[has]]), t0)
    hi = np.minimum(np.minimum(ends[has], ends[parent[has]]), t1)
    covered = np.where(inside[has], np.maximum(hi - lo, 0), 0)
    child = _sum_by(parent[has], covered, len(clip))
    own = np.where(inside, np.maximum(clip - child, 0), 0)
    n_frames = len(frames.parent)
    count = np.bincount(frame[inside], minlength=n_frames).astype(np.int64)
    total = _sum_by(frame, clip, n_frames)
    self_ns = _sum_by(frame, own, n_frames)
    f_parent = np.asarray(frames.parent, dtype=np.int64)
    if frames.n_labels:  # a row's frame: its root spans' count, and the time any of them is open
        roots = inside & (parent < 0)
        lab = f_parent[frame[roots]]
        count += np.bincount(lab, minlength=n_frames).astype(np.int64)
        for label, busy in intervals.union_ns_by(lab, starts[roots], ends[roots], t0, t1).items():
            total[label] += busy
    # frames of the window's spans, and of their ancestors outside it (count 0) that hold them
    keep = count > 0
    up = np.flatnonzero(keep & (f_parent >= 0))
    while up.size:
        p = np.unique(f_parent[up])
        p = p[~keep[p]]
        keep[p] = True
        up = p[f_parent[p] >= 0]
    return _depth_first(frames, _Sums(count, total, self_ns, keep), window, n_window, by_thread)


def _sum_by(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per key ``0..n-1`` the sum of its int64 ``values``, exact (float64 sums are exact below 2**53 ns, ~104 days
    of span time; above that the sums are made in int64)."""
    out = np.bincount(keys, weights=values, minlength=n)
    if out.size and float(np.abs(values).sum()) >= 2.0**53:
        exact = np.zeros(n, dtype=np.int64)
        np.add.at(exact, keys, values)
        return exact
    return out.astype(np.int64)


@dataclass
class _Sums:
    """Per frame: spans in the window, their clipped time, their self time, and whether the tree shows it."""

    count: np.ndarray
    total: np.ndarray
    self_ns: np.ndarray
    keep: np.ndarray


def _outermost(parent: np.ndarray, name: np.ndarray, n_labels: int) -> np.ndarray:
    """Per frame: no enclosing span frame has its name (vectorised: one step up the ancestors per pass)."""
    out = np.arange(len(parent)) >= n_labels
    anc = parent.copy()
    live = np.flatnonzero(out & (anc >= 0))
    while live.size:
        a = anc[live]
        same = (name[a] == name[live]) & (a >= n_labels)
        out[live[same]] = False
        live = live[~same]
        anc[live] = parent[anc[live]]
        live = live[anc[live] >= 0]
    return out


def _depth_first(frames: _Frames, sums: _Sums, window: tuple[int, int], n_window: int, by_thread: bool
                 ) -> CallTree:
    parent = np.asarray(frames.parent, dtype=np.int64)
    name = np.asarray(frames.name, dtype=np.int64)
    strings, n_labels = frames.strings, frames.n_labels
    outer = _outermost(parent, name, n_labels)
    kept = np.flatnonzero(sums.keep)
    # siblings widest first, then by name, then by frame number: one sort of every kept frame by its parent too
    name_rank = np.empty(len(strings), dtype=np.int64)
    name_rank[sorted(range(len(strings)), key=strings.__getitem__)] = np.arange(len(strings))
    order = kept[np.lexsort((kept, name_rank[name[kept]], -sums.total[kept], parent[kept]))]
    par = parent[order]
    first_child = np.searchsorted(par, np.arange(-1, len(parent)), side="left")
    last_child = np.searchsorted(par, np.arange(-1, len(parent)), side="right")
    seq: list[int] = []
    stack = list(reversed(order[first_child[0]:last_child[0]].tolist()))
    while stack:  # preorder: a frame, then its children's subtrees widest first
        f = stack.pop()
        seq.append(f)
        stack.extend(reversed(order[first_child[f + 1]:last_child[f + 1]].tolist()))
    idx = np.asarray(seq, dtype=np.int64)
    new_id = np.full(len(parent), -1, dtype=np.int64)
    new_id[idx] = np.arange(len(idx))
    texts = [strings[c] for c in name[idx].tolist()]
    paths: list[str] = []
    path_of: dict[int, str] = {}
    for f, p, text in zip(seq, parent[idx].tolist(), texts, strict=True):
        path = text if p < 0 else path_of[p] + rs.PATH_SEPARATOR + text
        path_of[f] = path
        paths.append(path)
    label = idx < n_labels
    new_parent = pa.array(np.where(parent[idx] >= 0, new_id[np.maximum(parent[idx], 0)], 0),
                          mask=parent[idx] < 0, type=pa.int64())
    table = pa.table({
        rs.NODE: np.arange(len(idx), dtype=np.int64), rs.PARENT: new_parent,
        rs.DEPTH: np.asarray(frames.depth, dtype=np.int32)[idx],
        rs.FRAME_KIND: np.where(label, rs.FRAME_THREAD, rs.FRAME_SPAN).tolist(), rs.NAME: texts,
        rs.COUNT: sums.count[idx], rs.TOTAL_NS: sums.total[idx], rs.SELF_NS: np.where(label, 0, sums.self_ns[idx]),
        rs.PATH: paths,
    }, schema=rs.CALL_TREE)
    return CallTree(table, window[0], window[1], n_window, by_thread, tuple(outer[idx].tolist()))


def tree_of_paths(leaves: Iterable[tuple[tuple[str, ...], int, int]], window: tuple[int, int], *, what: str
                  ) -> CallTree:
    """A tree of counted events from their paths: ``(path, count, ns)`` per group of events (``path[0]`` a root,
    drawn as a row; the events' time is the self time of the path's last frame), each frame counting and timing
    every event under it.  Rows depth first, children by descending time then name; ``spans`` is the events' count.
    The instructions' and the kernels' trees are built so."""
    frames: dict[tuple[str, ...], list[int]] = {}   # path -> [count, total_ns, self_ns]
    n = 0
    for path, count, ns in leaves:
        n += count
        f = frames.setdefault(path, [0, 0, 0])
        f[0] += count
        f[1] += ns
        f[2] += ns
    # each frame adds its counts to its parent once, the longest paths first (not once per leaf and ancestor)
    by_length: dict[int, list[tuple[str, ...]]] = {}
    for path in frames:
        by_length.setdefault(len(path), []).append(path)
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for length in range(max(by_length, default=0), 1, -1):
        for path in by_length.get(length, []):
            parent = path[:-1]
            pf = frames.get(parent)
            if pf is None:
                pf = frames[parent] = [0, 0, 0]
                by_length.setdefault(length - 1, []).append(parent)
            pf[0] += frames[path][0]
            pf[1] += frames[path][1]
            children.setdefault(parent, []).append(path)
    children[()] = by_length.get(1, [])

    def widest_last(paths: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        return sorted(paths, key=lambda p: (-frames[p][1], p[-1]), reverse=True)

    order: list[tuple[str, ...]] = []
    stack = widest_last(children.get((), []))
    while stack:   # preorder, children widest first
        path = stack.pop()
        order.append(path)
        stack.extend(widest_last(children.get(path, [])))
    node_of = {path: i for i, path in enumerate(order)}
    table = pa.table({
        rs.NODE: list(range(len(order))),
        rs.PARENT: [node_of[p[:-1]] if len(p) > 1 else None for p in order],
        rs.DEPTH: [len(p) - 1 for p in order],
        rs.FRAME_KIND: [rs.FRAME_THREAD if len(p) == 1 else rs.FRAME_SPAN for p in order],
        rs.NAME: [p[-1] for p in order],
        rs.COUNT: [frames[p][0] for p in order],
        rs.TOTAL_NS: [frames[p][1] for p in order],
        rs.SELF_NS: [0 if len(p) == 1 else frames[p][2] for p in order],
        rs.PATH: [rs.PATH_SEPARATOR.join(p) for p in order],
    }, schema=rs.CALL_TREE)
    # a name repeated down one path (an operator named like its layer) counts once in top_frames' total
    outermost = tuple(len(p) > 1 and p[-1] not in p[1:-1] for p in order)
    return CallTree(table, window[0], window[1], n, True, outermost, what=what)
