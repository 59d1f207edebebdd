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

import re
from collections.abc import Sequence

from profiler import db_schema as dbs
from profiler.analyses.call_tree import (
    KERNELS,
    MAX_ANCESTOR_ROUNDS,
    STEP_MERGED,
    STEP_NUMBER,
    CallTree,
    in_window_sql,
    row_label_sql,
    tree_of_paths,
    window_of,
)
from profiler.analyses.inputs import check_names, fetch, q
from profiler.db.sqlutil import literal
from profiler.errors import QueryError
from profiler.trace import Trace
from tracer import schema as ts

#: Categories of GPU-side slices in Kineto traces (compared lower-case).
GPU_CATEGORIES: tuple[str, ...] = ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")
#: The frame of a GPU event whose launch is not in the trace.
NO_LAUNCH = "(no launch)"


#: SQL of a slice's launch correlation (null without one).
CORRELATION_SQL = f"try_cast(json_extract_string({q(ts.ARGS)}, '$.correlation') AS BIGINT)"


def categories_sql(categories: Sequence[str] = GPU_CATEGORIES) -> str:
    """``categories`` as an SQL list of lower-case literals (for ``lower(category) IN (...)``)."""
    # (repr() wrote a name holding a quote in double quotes: an SQL identifier, not a string)
    return ", ".join(literal(c.lower()) for c in check_names(categories, "categories"))


def kernel_tree(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, *,
                merge_steps: bool = False, categories: Sequence[str] = GPU_CATEGORIES) -> CallTree:
    """The GPU events overlapping ``[start_ns, end_ns)`` (default: the whole trace) under the CPU stacks that
    launched them.

    Raises:
        QueryError: a bad window, or a trace without GPU events that carry a launch correlation.
    """
    t0, t1, closed = window_of(trace, start_ns, end_ns)
    rows = fetch(trace, _tree_sql(categories_sql(categories)), {"t0": t0, "t1": t1, "closed": closed}).to_pylist()
    if not rows and not has_gpu_events(trace, categories, correlated=True):
        raise QueryError(f"{trace.path}: the trace has no GPU kernels, copies or memsets with a launch "
                         "correlation (a PyTorch or Kineto trace of a GPU run has them)")

    def named(name: str) -> str:
        return re.sub(STEP_NUMBER, STEP_MERGED, name) if merge_steps else name

    leaves = []
    for r in rows:
        names = r["names"]
        path = (r["label"] or "", *map(named, names)) if names else (r["label"] or "", NO_LAUNCH)
        leaves.append(((*path, named(r["name"])), int(r["n"]), max(int(r["ns"]), 0)))
    return tree_of_paths(leaves, (t0, t1), what=KERNELS)


def _tree_sql(gpu: str) -> str:
    """One query: the window's GPU events grouped by their launch's stack of names (null: no launch), the
    launching row's label (else the event's stream) and their own name, with their count and clipped GPU time."""
    s, e, sl, tr = q(ts.START_TS), q(ts.END_TS), q(dbs.SLICE_TABLE), q(dbs.TRACK_TABLE)
    ident, parent, name, track, cat = q(ts.ID), q(ts.PARENT_ID), q(ts.NAME), q(dbs.TRACK_ID), q(ts.CATEGORY)
    corr = CORRELATION_SQL
    return f"""
        WITH RECURSIVE
        corr AS (   -- the slices with a correlation (a LIKE before parsing any JSON)
            SELECT {ident} AS id, {name} AS name, {s} AS s, {e} AS e, {track} AS track,
                   coalesce(lower({cat}) IN ({gpu}), FALSE) AS is_gpu, {corr} AS c
            FROM {sl} WHERE {q(ts.ARGS)} LIKE '%correlation%'),
        gpu AS (
            SELECT * FROM corr WHERE is_gpu AND c IS NOT NULL
              AND {in_window_sql("s", "e")}),
        launch AS (SELECT id, s, c FROM corr WHERE NOT is_gpu AND c IN (SELECT c FROM gpu)),
        paired AS (
            SELECT gpu.name, gpu.track, least(gpu.e, $t1) - greatest(gpu.s, $t0) AS ns,
                   (SELECT arg_max(l.id, l.s) FROM launch l WHERE l.c = gpu.c AND l.s <= gpu.s) AS lid
            FROM gpu),
        up(lid, id, parent, name, track, hop) AS (
            SELECT x.{ident}, x.{ident}, x.{parent}, x.{name}, x.{track}, 0
            FROM {sl} x WHERE x.{ident} IN (SELECT lid FROM paired)
            UNION ALL
            SELECT up.lid, p.{ident}, p.{parent}, p.{name}, p.{track}, up.hop + 1
            FROM up JOIN {sl} p ON p.{ident} = up.parent
            WHERE up.hop < {MAX_ANCESTOR_ROUNDS} AND p.{ident} <> up.id),
        stacks AS (SELECT lid, list(name ORDER BY hop DESC) AS names, arg_max(track, hop) AS track
                   FROM up GROUP BY lid)
        SELECT {row_label_sql("k")} AS label, st.names, p.name, count(*) AS n, sum(p.ns)::BIGINT AS ns
        FROM paired p LEFT JOIN stacks st ON st.lid = p.lid
             JOIN {tr} k ON k.{track} = coalesce(st.track, p.track)
        GROUP BY ALL"""


def has_gpu_events(trace: Trace, categories: Sequence[str] = GPU_CATEGORIES, *, correlated: bool = False) -> bool:
    """Whether the trace has a GPU kernel, copy or memset (a slice of one of ``categories``; with ``correlated``,
    one with a launch correlation), reading until the first one."""
    gpu = categories_sql(categories)
    corr = f" AND {CORRELATION_SQL} IS NOT NULL" if correlated else ""
    found = fetch(trace, f"SELECT count(*) AS n FROM (SELECT 1 FROM {q(dbs.SLICE_TABLE)} "
                         f"WHERE lower({q(ts.CATEGORY)}) IN ({gpu}){corr} LIMIT 1)")
    return bool(found.column(0)[0].as_py())
