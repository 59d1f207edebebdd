"""GPU time by the CPU stack that launched it: the kernels, copies and memsets of a PyTorch/Kineto trace, each under
the call stack of the runtime call that launched it (HTA's kernel breakdown per operator, as a call tree).

A GPU event (a slice whose category is one of :data:`GPU_CATEGORIES`, case-insensitive) and its launch (the
``cudaLaunchKernel``, ``cudaMemcpyAsync``, ... slice on a CPU thread) carry the same ``correlation`` in their
``args``; a GPU event's *frame* is the launch's stack of names (its outermost enclosing span down to the launch
itself, along ``parent_id``) under the launching thread's row, then the GPU event's own name.  Each frame's
``count`` is the GPU events under it that overlap the window, ``total_ns`` their GPU durations clipped to the window
(GPU time, not the CPU time of the stack's spans), ``self_ns`` the events' own frames'.  A GPU event without a
launch in the trace hangs under its stream's row as ``(no launch)``.  Where several launches share a correlation,
the last one that starts no later than the event is its launch.  The result is a
:class:`~profiler.analyses.call_tree.CallTree` (``what = "kernels"``): the views, comparisons and the icicle work on
it unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from profiler import db_schema as dbs
from profiler.analyses.call_tree import KERNELS, MAX_ANCESTOR_ROUNDS, STEP_MERGED, STEP_NUMBER, CallTree, tree_of_paths
from profiler.analyses.inputs import fetch, q
from profiler.errors import QueryError
from profiler.trace import Trace, check_time
from tracer import schema as ts

#: Categories of GPU-side slices in Kineto traces (compared lower-case).
GPU_CATEGORIES: tuple[str, ...] = ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")
#: The frame of a GPU event whose launch is not in the trace.
NO_LAUNCH = "(no launch)"


def _label_sql(alias: str) -> str:
    g, n = f"{alias}.{q(dbs.GROUP_NAME)}", f"{alias}.{q(ts.NAME)}"
    return f"CASE WHEN {g} IS NULL OR {g} = '' THEN {n} ELSE {g} || ' / ' || {n} END"


def kernel_tree(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, *,
                merge_steps: bool = False, categories: Sequence[str] = GPU_CATEGORIES) -> CallTree:
    """The GPU events overlapping ``[start_ns, end_ns)`` (default: the whole trace) under the CPU stacks that
    launched them.

    Raises:
        QueryError: a bad window, or a trace without GPU events that carry a launch correlation.
    """
    t0 = check_time(start_ns, "start_ns") if start_ns is not None else None
    t1 = check_time(end_ns, "end_ns") if end_ns is not None else None
    closed = t1 is None
    if t0 is None or t1 is None:
        lo, hi = trace.time_range
        t0, t1 = (lo if t0 is None else t0), (hi if t1 is None else t1)
    if t1 <= t0:
        raise QueryError(f"empty window: end ({t1} ns) must be greater than start ({t0} ns)")
    gpu = ", ".join(repr(c.lower()) for c in categories)
    s, e, corr = q(ts.START_TS), q(ts.END_TS), f"try_cast(json_extract_string({q(ts.ARGS)}, '$.correlation') AS BIGINT)"
    slice_, track = q(dbs.SLICE_TABLE), q(dbs.TRACK_TABLE)
    rows = fetch(trace, f"""
        WITH gpu AS (
            SELECT g.{q(ts.ID)} AS id, g.{q(ts.NAME)} AS name, g.{s} AS s, g.{e} AS e, {corr} AS c,
                   {_label_sql("k")} AS stream
            FROM {slice_} g JOIN {track} k USING ({q(dbs.TRACK_ID)})
            WHERE lower(g.{q(ts.CATEGORY)}) IN ({gpu}) AND {corr} IS NOT NULL
              AND ((g.{s} < $t1 AND g.{e} > $t0)
                   OR (g.{e} = g.{s} AND g.{s} >= $t0 AND (g.{s} < $t1 OR (g.{s} = $t1 AND $closed))))),
        launch AS (
            SELECT {q(ts.ID)} AS id, {s} AS s, {corr} AS c FROM {slice_}
            WHERE ({q(ts.CATEGORY)} IS NULL OR lower({q(ts.CATEGORY)}) NOT IN ({gpu})) AND {corr} IS NOT NULL
              AND {corr} IN (SELECT c FROM gpu))
        SELECT gpu.name, gpu.stream, least(gpu.e, $t1) - greatest(gpu.s, $t0) AS ns,
               (SELECT arg_max(l.id, l.s) FROM launch l WHERE l.c = gpu.c AND l.s <= gpu.s) AS launch
        FROM gpu""", {"t0": t0, "t1": t1, "closed": closed}).to_pylist()
    if not rows:
        any_gpu = fetch(trace, f"SELECT count(*) AS n FROM (SELECT 1 FROM {slice_} WHERE lower({q(ts.CATEGORY)}) "
                               f"IN ({gpu}) AND {corr} IS NOT NULL LIMIT 1)").column(0)[0].as_py()
        if not any_gpu:
            raise QueryError(f"{trace.path}: the trace has no GPU kernels, copies or memsets with a launch "
                             "correlation (a PyTorch or Kineto trace of a GPU run has them)")
    stacks = _launch_stacks(trace, sorted({r["launch"] for r in rows if r["launch"] is not None}))

    def named(name: str) -> str:
        return _merged(name) if merge_steps else name

    leaves = []
    for r in rows:
        stack = stacks.get(r["launch"]) if r["launch"] is not None else None
        path = ((stack[0], *map(named, stack[1:])) if stack else (r["stream"], NO_LAUNCH))
        leaves.append(((*path, named(r["name"])), 1, max(int(r["ns"]), 0)))
    return tree_of_paths(leaves, (t0, t1), what=KERNELS)


def has_gpu_events(trace: Trace, categories: Sequence[str] = GPU_CATEGORIES) -> bool:
    """Whether the trace has a GPU kernel, copy or memset (a slice of one of ``categories``); no scan of the rest."""
    gpu = ", ".join(repr(c.lower()) for c in categories)
    found = fetch(trace, f"SELECT count(*) AS n FROM (SELECT 1 FROM {q(dbs.SLICE_TABLE)} "
                         f"WHERE lower({q(ts.CATEGORY)}) IN ({gpu}) LIMIT 1)")
    return bool(found.column(0)[0].as_py())


def _merged(name: str) -> str:
    import re

    return re.sub(STEP_NUMBER, STEP_MERGED, name)


def _launch_stacks(trace: Trace, launches: list[int]) -> dict[int, tuple[str, ...]]:
    """Per launch: its row's label, then its names from the outermost enclosing span down to itself."""
    if not launches:
        return {}
    up = fetch(trace, f"""
        WITH RECURSIVE up(lid, id, parent, name, track, hop) AS (
            SELECT s.{q(ts.ID)}, s.{q(ts.ID)}, s.{q(ts.PARENT_ID)}, s.{q(ts.NAME)}, s.{q(dbs.TRACK_ID)}, 0
            FROM {q(dbs.SLICE_TABLE)} s WHERE s.{q(ts.ID)} IN (SELECT unnest($ids::BIGINT[]))
            UNION ALL
            SELECT up.lid, p.{q(ts.ID)}, p.{q(ts.PARENT_ID)}, p.{q(ts.NAME)}, p.{q(dbs.TRACK_ID)}, up.hop + 1
            FROM up JOIN {q(dbs.SLICE_TABLE)} p ON p.{q(ts.ID)} = up.parent
            WHERE up.hop < {MAX_ANCESTOR_ROUNDS} AND p.{q(ts.ID)} <> up.id)
        SELECT up.lid, list(up.name ORDER BY up.hop DESC) AS names, arg_max({_label_sql("k")}, up.hop) AS label
        FROM up JOIN {q(dbs.TRACK_TABLE)} k ON k.{q(dbs.TRACK_ID)} = up.track
        GROUP BY up.lid""", {"ids": launches}).to_pylist()
    return {r["lid"]: (r["label"] or "", *r["names"]) for r in up}
