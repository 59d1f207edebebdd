"""The critical path: the chain of dependent work that ends with the kernel's last event, and where its time goes.

Critical-path-method definition over the dependency graph of :mod:`profiler.analyses.event_graph`: every node
weighs its duration, edges weigh nothing, and the critical path is the heaviest path ending at the event that
finishes last.  Nothing on it could have started earlier without some event on it finishing earlier, so
shortening anything else does not shorten the kernel.  The time between consecutive steps (a DMA's issue latency,
a semaphore release) is reported as gaps by the kind of edge that joined them, so durations plus gaps add up to the
path's span exactly.

:func:`critical_path` gives the steps (with track ids, for highlighting on the timeline); :func:`chain_to` the same
for the chain ending at any one event (why it started when it did);
:func:`critical_path_breakdown` attributes the span per engine or DMA queue and opcode or tensor.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from profiler.analyses import dag
from profiler.analyses import schema as rs
from profiler.analyses.event_graph import EventGraph, build_graph
from profiler.analyses.inputs import resolve_scope
from profiler.errors import QueryError
from profiler.trace import Trace, check_time
from tracer import schema as ts


def path_of(graph: EventGraph, sink: int | None = None) -> pa.Table:
    """The critical path of ``graph`` (:data:`~profiler.analyses.schema.CRITICAL_PATH`): the heaviest path ending at
    node ``sink`` (default: at an event that ends last, the heaviest such path); empty for no nodes."""
    n = graph.num_nodes
    if n == 0:
        return rs.CRITICAL_PATH.empty_table()
    if sink is None:  # events ending together at the end: the heaviest path into any (the latest start breaks ties)
        last = np.flatnonzero(graph.end == graph.end.max())
        sink = last[np.argsort(-graph.start[last], kind="stable")]
    hint = np.lexsort((graph.end, graph.start))
    found = dag.longest_path(n, graph.end - graph.start, graph.src, graph.dst, sink=sink, order_hint=hint)
    nodes = found.nodes
    edges = found.edges
    via = np.array([rs.EDGE_START if e < 0 else graph.edge_kind[e] for e in edges.tolist()], dtype=object)
    prev_end = np.concatenate([[graph.start[nodes[0]]], graph.end[nodes[:-1]]])
    gap = graph.start[nodes] - prev_end
    held = holding_edges(graph)[nodes]
    cause = np.where(held >= 0, graph.edge_kind[np.clip(held, 0, None)] if len(graph.edge_kind) else None, via)
    cause = np.where(gap > 0, cause, None)
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
        rs.GAP_BEFORE_NS: gap,
        rs.GAP_CAUSE: pa.array(cause.tolist(), pa.string()),
    }, schema=rs.CRITICAL_PATH)


def holding_edges(graph: EventGraph) -> np.ndarray:
    """For each node, the incoming edge that held it back longest (-1: none): the one whose source's end plus the
    edge's own latency is latest.  A ``trigger`` edge's latency is the DMA issue latency, taken as the least gap of
    any trigger edge of the graph; other edges have none.  Ties go to the preferred edge kind."""
    n, src, dst = graph.num_nodes, graph.src, graph.dst
    held = np.full(n, -1, dtype=np.int64)
    if not len(src):
        return held
    gaps = graph.start[dst] - graph.end[src]
    trigger = graph.edge_kind == rs.EDGE_TRIGGER
    latency = int(gaps[trigger].min()) if trigger.any() else 0
    arrival = graph.end[src] + np.where(trigger, latency, 0)
    order = np.lexsort((np.arange(len(src)), -arrival, dst))   # per node: latest arrival, then preferred edge
    d = dst[order]
    first = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
    held[d[first]] = order[first]
    return held


def critical_path(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                  core: int | None = None) -> pa.Table:
    """The critical path through the events starting in ``[start_ns, end_ns)`` (default: the whole trace).

    Returns :data:`~profiler.analyses.schema.CRITICAL_PATH`: one row per step in time order — the instruction or
    DMA queue segment (``id`` is the segment's last packet), its track, start, end, the edge that led to it and
    the gap before it.
    """
    scope = resolve_scope(trace, start_ns, end_ns, core)
    return path_of(build_graph(trace, scope))


def node_of(graph: EventGraph, table: str, event_id: int, start_ns: int, resource: str | None = None) -> int | None:
    """The node of an instruction (by id), or of the DMA segment holding a packet that starts at ``start_ns`` on
    queue ``resource`` (its transfer's stretch on that queue); None when the graph does not have it."""
    if table == ts.INSTRUCTION.name:
        found = np.flatnonzero((graph.table == table) & (graph.ident == event_id))
        return int(found[0]) if len(found) else None
    holding = np.flatnonzero((graph.table == table) & (graph.resource == resource) & (graph.start <= start_ns)
                             & (start_ns <= graph.end))
    return int(holding[np.argmax(graph.start[holding])]) if len(holding) else None


def chain_to(trace: Trace, table: str, event_id: int, *, graph: EventGraph | None = None,
             start_ns: int | None = None) -> pa.Table:
    """The critical path ending at one event: the heaviest chain of dependent work that ends with an instruction
    (or with the stretch of a DMA packet's transfer on its queue) -- what it waited for, what that waited for, ...
    back to the first event the chain needs; why it started when it did, Neuron Explorer's dependency chain.

    Returns :data:`~profiler.analyses.schema.CRITICAL_PATH` in time order, the event last.  ``graph``: a dependency
    graph holding the event (the whole trace's, when the caller keeps one; by default one is built over the events
    starting no later than it, which is all the chain can use, and from ``start_ns`` on when given: the chain then
    goes back no further than that).

    Raises:
        QueryError: a table other than Instruction or DmaPacket, an id the table does not have.
    """
    if table not in (ts.INSTRUCTION.name, ts.DMA_PACKET.name):
        raise QueryError(f"the dependency chain leads to instructions and DMA packets, not to {str(table)[:40]!r} "
                         "events")
    fields = trace.event(table, event_id)
    start = int(fields[ts.START_TS])
    if start_ns is not None:
        start_ns = check_time(start_ns, "start_ns")
    if graph is None:
        graph = build_graph(trace, resolve_scope(trace, None if start_ns is None else min(start_ns, start),
                                                 start + 1))
    node = node_of(graph, table, int(event_id), start, fields.get(ts.QUEUE_NAME))
    if node is None:
        raise QueryError(f"{table} {event_id} is not in the dependency graph (it starts outside the analysed window)")
    return path_of(graph, sink=node)


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
            gap = totals.setdefault((rs.KIND_GAP, r.get(rs.GAP_CAUSE) or r[rs.EDGE], None), [0, 0])
            gap[0] += 1
            gap[1] += r[rs.GAP_BEFORE_NS]
    out = [{rs.KIND: k[0], rs.RESOURCE: k[1], rs.NAME: k[2], rs.COUNT: v[0], rs.TOTAL_NS: v[1],
            rs.FRACTION: v[1] / span} for k, v in totals.items()]
    out.sort(key=lambda r: (-r[rs.TOTAL_NS], r[rs.KIND], str(r[rs.RESOURCE]), str(r[rs.NAME])))
    return pa.Table.from_pylist(out, schema=rs.CRITICAL_PATH_BREAKDOWN)
