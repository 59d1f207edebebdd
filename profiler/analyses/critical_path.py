"""The critical path: the chain of dependent work that ends with the kernel's last event, and where its time goes.

Critical-path-method definition over the dependency graph of :mod:`profiler.analyses.event_graph`: every node
weighs its duration, edges weigh nothing, and the critical path is the heaviest path ending at the event that
finishes last.  Nothing on it could have started earlier without some event on it finishing earlier, so
shortening anything else does not shorten the kernel.  The time between consecutive steps (a DMA's issue latency,
a semaphore release) is reported as gaps by the kind of edge that joined them, so durations plus gaps add up to the
path's span exactly.

:func:`critical_path` gives the steps (with track ids, for highlighting on the timeline);
:func:`critical_path_breakdown` attributes the span per engine or DMA queue and opcode or tensor.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from profiler.analyses import dag
from profiler.analyses import schema as rs
from profiler.analyses.event_graph import EventGraph, build_graph
from profiler.analyses.inputs import resolve_scope
from profiler.trace import Trace


def path_of(graph: EventGraph) -> pa.Table:
    """The critical path of ``graph`` (:data:`~profiler.analyses.schema.CRITICAL_PATH`); empty for no nodes."""
    n = graph.num_nodes
    if n == 0:
        return rs.CRITICAL_PATH.empty_table()
    sink = int(np.lexsort((graph.start, graph.end))[-1])
    hint = np.lexsort((graph.end, graph.start))
    found = dag.longest_path(n, graph.end - graph.start, graph.src, graph.dst, sink=sink, order_hint=hint)
    nodes = found.nodes
    edges = found.edges
    via = np.array([rs.EDGE_START if e < 0 else graph.edge_kind[e] for e in edges.tolist()], dtype=object)
    prev_end = np.concatenate([[graph.start[nodes[0]]], graph.end[nodes[:-1]]])
    return pa.table({
        rs.STEP: np.arange(len(nodes), dtype=np.int64),
        rs.KIND: pa.array(graph.kind[nodes].tolist(), pa.string()),
        rs.TABLE: pa.array(graph.table[nodes].tolist(), pa.string()),
        rs.ID: graph.ident[nodes],
        rs.TRACK_ID: pa.array(graph.track[nodes], mask=graph.track[nodes] < 0),
        rs.RESOURCE: pa.array(graph.resource[nodes].tolist(), pa.string()),
        rs.NAME: pa.array(graph.name[nodes].tolist(), pa.string()),
        rs.START_NS: graph.start[nodes],
        rs.END_NS: graph.end[nodes],
        rs.DUR_NS: graph.end[nodes] - graph.start[nodes],
        rs.EDGE: pa.array(via.tolist(), pa.string()),
        rs.GAP_BEFORE_NS: graph.start[nodes] - prev_end,
    }, schema=rs.CRITICAL_PATH)


def critical_path(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                  core: int | None = None) -> pa.Table:
    """The critical path through the events starting in ``[start_ns, end_ns)`` (default: the whole trace).

    Returns :data:`~profiler.analyses.schema.CRITICAL_PATH`: one row per step in time order — the instruction or
    DMA queue segment (``id`` is the segment's last packet), its track, start, end, the edge that led to it and
    the gap before it.
    """
    scope = resolve_scope(trace, start_ns, end_ns, core)
    return path_of(build_graph(trace, scope))


def critical_path_breakdown(path: pa.Table) -> pa.Table:
    """The span of ``path`` attributed to (kind, resource, name), plus one ``gap`` row per edge kind; sorted by time.

    ``fraction`` is of the path's span (first start to last end), so the rows add up to 1.
    """
    if path.num_rows == 0:
        return rs.CRITICAL_PATH_BREAKDOWN.empty_table()
    rows = path.to_pylist()
    span = max(rows[-1][rs.END_NS] - rows[0][rs.START_NS], 1)
    totals: dict[tuple[str, str | None, str | None], list[int]] = {}
    for r in rows:
        key = (r[rs.KIND], r[rs.RESOURCE], r[rs.NAME])
        acc = totals.setdefault(key, [0, 0])
        acc[0] += 1
        acc[1] += r[rs.DUR_NS]
        if r[rs.GAP_BEFORE_NS] > 0:
            gap = totals.setdefault((rs.KIND_GAP, r[rs.EDGE], None), [0, 0])
            gap[0] += 1
            gap[1] += r[rs.GAP_BEFORE_NS]
    out = [{rs.KIND: k[0], rs.RESOURCE: k[1], rs.NAME: k[2], rs.COUNT: v[0], rs.TOTAL_NS: v[1],
            rs.FRACTION: v[1] / span} for k, v in totals.items()]
    out.sort(key=lambda r: (-r[rs.TOTAL_NS], r[rs.KIND], str(r[rs.RESOURCE]), str(r[rs.NAME])))
    return pa.Table.from_pylist(out, schema=rs.CRITICAL_PATH_BREAKDOWN)
