"""The dependency graph of a trace: instructions and DMA queue segments as nodes, what ordered them as edges.

Nodes:

* every instruction starting in the window;
* every DMA *segment* starting in the window: the packets of one transfer on one queue (a queue moves them back
  to back, so a segment is one busy stretch of that queue; a transfer spread over 16 queues is 16 segments).  In a
  trnprof recording a share can split around other queues' packets on its DMA engine (trace format 2.5): each run
  of packets back to back is then a segment of its own, so a segment never holds time its engine spent on another
  queue (imported profiles keep one segment per transfer and queue: their packets need not run back to back).

Edges ``u -> v`` mean "``v`` could not start before ``u`` ended", listed in this order of preference:

* ``flow`` / ``anti`` / ``output``: the ``Flow`` table (semaphore waits); a Flow edge from an instruction to a
  DMA packet is labelled ``trigger``;
* ``trigger``: the instruction that started a DMA transfer, to each segment of the transfer
  (see :mod:`profiler.analyses.dma_transfers`);
* ``stream``: the previous instruction of the same in-order stream (``timeline_track``, else engine), in time, and
  of the same engine, in program order (by id);
* ``queue``: the previous segment on the same DMA queue;
* ``dma_engine``: the previous segment on the same DMA engine (``engine_idx``), from any queue (queue q of every
  group is served by engine q, so one group's transfer can wait behind another's packets);
* ``access``: in a recording whose cost model has NeuronCore-v2 access conflicts (``access_conflicts``), the
  instruction of the conflicting engine on the same memory (Vector and GpSimd on SBUF, Vector and Scalar on PSUM)
  that ended last before the instruction started.

Only edges with ``end(u) <= start(v)`` are kept (an edge against time would be a measurement artefact), so the
graph is acyclic and sorting nodes by time is a topological order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler.analyses import schema as rs
from profiler.analyses.dma_transfers import agg_expr, transfers
from profiler.analyses.inputs import (
    ACCESS_CONFLICTS,
    DMA_PACKET,
    FLOW,
    INSTRUCTION,
    Scope,
    check_unique_ids,
    column,
    cost_model,
    event_range,
    fetch,
    find_sorted,
    has_access_conflicts,
    q,
    touches_sql,
)
from profiler.trace import Trace
from tracer import schema as ts


@dataclass(frozen=True)
class EventGraph:
    """Nodes (parallel arrays) and edges of a trace's dependency graph."""

    kind: np.ndarray        # rs.NODE_INSTRUCTION or rs.NODE_DMA (object array)
    table: np.ndarray       # Instruction or DmaPacket
    ident: np.ndarray       # instruction id, or the id of the segment's last packet
    track: np.ndarray       # track id of ``ident`` (-1 unknown)
    resource: np.ndarray    # engine, or DMA queue name
    name: np.ndarray        # opcode, or DMA variable
    start: np.ndarray
    end: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    edge_kind: np.ndarray   # object array of edge kinds
    dropped_edges: int      # Flow or trigger edges that pointed backwards in time (left out)

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return len(self.start)


def _instructions(trace: Trace, scope: Scope, conflicts: bool) -> pa.Table:
    # with access conflicts: whether each instruction reads or writes SBUF / PSUM
    access = "".join(f", {touches_sql(m)} AS touches_{m}" for m in {m for _a, _b, m in ACCESS_CONFLICTS}) \
        if conflicts else ""
    return fetch(trace, f"""
        SELECT {q(ts.ID)} AS id, {q(rs.TRACK_ID)} AS track, {q(ts.ENGINE)} AS engine,
               coalesce({q(ts.TIMELINE_TRACK)}, {q(ts.ENGINE)}) AS stream, {q(ts.OPCODE)} AS opcode,
               {q(ts.START_TS)} AS s, {q(ts.END_TS)} AS e, coalesce({q(ts.PCORE_IDX)}, 0) AS core{access}
        FROM {INSTRUCTION} WHERE {scope.starts_sql()} ORDER BY id""")


def _access_edges(ins: pa.Table, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``access`` edges: to each instruction accessing a memory its engine shares with a conflicting one, from the
    conflicting engine's instruction on that memory (same core) that ended last by its start."""
    engine = np.asarray(ins.column("engine").to_pylist(), dtype=object)
    core = column(ins, "core")
    us, vs = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for a, b, mem in ACCESS_CONFLICTS:
        touches = np.asarray(ins.column(f"touches_{mem}"), dtype=bool)
        for c in np.unique(core):
            here = touches & (core == c)
            for mine, other in ((a, b), (b, a)):
                v = np.flatnonzero(here & (engine == mine))
                u = np.flatnonzero(here & (engine == other))
                if not len(v) or not len(u):
                    continue
                u = u[np.argsort(end[u], kind="stable")]
                pos = np.searchsorted(end[u], start[v], side="right") - 1
                ok = pos >= 0
                us.append(u[pos[ok]])
                vs.append(v[ok])
    return np.concatenate(us), np.concatenate(vs)


def _segments(trace: Trace, scope: Scope) -> pa.Table:
    """The DMA segments (a transfer's packets on one queue, or a run of them back to back in a trnprof recording)
    starting in the scope's window, ordered by transfer, queue and start.  Only the segments with a packet
    starting in the window can, so those are found first by a range scan, and only their packets are grouped
    (grouping every packet of the core made a 1% window cost 40-50% of the whole trace)."""
    s0, s1 = int(scope.start_ns), int(scope.end_ns)
    runs = bool(cost_model(trace))   # a trnprof recording: a gap in a share is time its engine gave another queue
    extent = event_range(trace, scope.core, dma_only=True)
    source = f"{DMA_PACKET} p"
    if extent is not None and (s0 > extent[0] or s1 < extent[1]):   # (every packet: the semi-join would only cost)
        source = (f"{DMA_PACKET} p SEMI JOIN (SELECT DISTINCT {agg_expr()} AS agg, {q(ts.QUEUE_NAME)} AS queue "
                  f"FROM {DMA_PACKET} WHERE {scope.core_sql()} AND {q(ts.START_TS)} >= {s0} AND "
                  f"{q(ts.START_TS)} < {s1}) c ON {agg_expr('p')} = c.agg "
                  f"AND p.{q(ts.QUEUE_NAME)} IS NOT DISTINCT FROM c.queue")
    # (with runs, a share that started before the window may have a run starting in it)
    having = (f"max(p.{q(ts.START_TS)}) >= {s0}" if runs else f"min(p.{q(ts.START_TS)}) >= {s0}")
    seg = fetch(trace, f"""
        SELECT {agg_expr('p')} AS agg, p.{q(ts.QUEUE_NAME)} AS queue,
               min(p.{q(ts.START_TS)}) AS s, max(p.{q(ts.END_TS)}) AS e,
               arg_max(p.{q(ts.ID)}, (p.{q(ts.END_TS)}, p.{q(ts.ID)})) AS last_id,
               arg_max(p.{q(rs.TRACK_ID)}, (p.{q(ts.END_TS)}, p.{q(ts.ID)})) AS track,
               any_value(p.{q(ts.VARIABLE)}) AS var, any_value(p.{q(ts.ENGINE_IDX)}) AS dma_engine,
               any_value(coalesce(p.{q(ts.PCORE_IDX)}, 0)) AS core,
               min(p.{q(ts.ID)}) AS first_id, any_value(p.{q(ts.QUEUE_IDX)}) AS qidx,
               sum(p.{q(ts.END_TS)} - p.{q(ts.START_TS)}) AS busy
        FROM {source} WHERE {scope.core_sql('p')}
        GROUP BY 1, 2 HAVING {having} AND min(p.{q(ts.START_TS)}) < {s1}
        ORDER BY agg, queue""")
    if not runs or not seg.num_rows:
        return seg.drop_columns(["busy", "qidx"])
    split = column(seg, "busy") < column(seg, "e") - column(seg, "s")
    whole = seg.filter(pa.array(~split & (column(seg, "s") >= s0))).drop_columns(["busy", "qidx"])
    if not split.any():
        return whole
    parts = _runs(trace, scope, seg.filter(pa.array(split)))
    parts = parts.filter(pa.array((column(parts, "s") >= s0) & (column(parts, "s") < s1)))
    out = pa.concat_tables([whole, parts.select(whole.column_names).cast(whole.schema)])
    return out.sort_by([("agg", "ascending"), ("queue", "ascending"), ("s", "ascending")])


def _runs(trace: Trace, scope: Scope, split: pa.Table) -> pa.Table:
    """The runs of packets back to back of the segments ``split`` (columns of :func:`_segments`): a segment per
    run, its last packet the one ending last.  (In a trnprof recording a transfer's queues are of one group, so
    its queue index names the queue: integers are matched, not queue names, ~2x faster.)"""
    pk = fetch(trace, f"""
        SELECT {agg_expr('p')} AS agg, p.{q(ts.QUEUE_IDX)} AS qidx, p.{q(ts.ID)} AS id, p.{q(ts.START_TS)} AS s,
               p.{q(ts.END_TS)} AS e, p.{q(rs.TRACK_ID)} AS track
        FROM {DMA_PACKET} p
        WHERE {scope.core_sql('p')} AND {agg_expr('p')} IN (SELECT unnest($aggs))
        ORDER BY agg, qidx, s, id""", params={"aggs": np.unique(column(split, "agg")).tolist()})
    width = int(max(column(pk, "qidx", fill=0).max(initial=0), column(split, "qidx", fill=0).max(initial=0))) + 1
    want = column(split, "agg") * width + column(split, "qidx", fill=0)
    key = column(pk, "agg") * width + column(pk, "qidx", fill=0)
    order_split = np.argsort(want, kind="stable")
    pos, found = find_sorted(want[order_split], key)
    keep = np.flatnonzero(found)
    pair = order_split[pos[keep]]
    s, e, ident = column(pk, "s")[keep], column(pk, "e")[keep], column(pk, "id")[keep]
    # a run starts at another (transfer, queue)'s packet or after a gap in its own
    first = np.r_[True, (pair[1:] != pair[:-1]) | (s[1:] > e[:-1])] if len(pair) else np.zeros(0, bool)
    starts = np.flatnonzero(first)
    run = np.cumsum(first) - 1
    # the packet ending last (then the highest id) of each run names it
    order = np.lexsort((ident, e, run))
    last = order[np.r_[np.flatnonzero(np.diff(run[order])), len(order) - 1]] if len(starts) else starts
    owner = pa.array(pair[starts])
    return pa.table({
        "agg": split.column("agg").take(owner), "queue": split.column("queue").take(owner),
        "s": pa.array(np.minimum.reduceat(s, starts) if len(starts) else s[:0]),
        "e": pa.array(np.maximum.reduceat(e, starts) if len(starts) else e[:0]),
        "last_id": pa.array(ident[last]), "track": pk.column("track").take(pa.array(keep[last])),
        "var": split.column("var").take(owner), "dma_engine": split.column("dma_engine").take(owner),
        "core": split.column("core").take(owner), "first_id": pa.array(ident[starts]),
    })


def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Index of each key in ``sorted_keys``, -1 when absent."""
    if len(sorted_keys) == 0:
        return np.full(len(keys), -1, np.int64)
    pos = np.clip(np.searchsorted(sorted_keys, keys), 0, len(sorted_keys) - 1)
    return np.where(sorted_keys[pos] == keys, pos, -1)


def _last_of(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Index of the last occurrence of each key in ``sorted_keys`` (which may repeat), -1 when absent."""
    pos = np.searchsorted(sorted_keys, keys, side="right") - 1
    hit = pos >= 0
    hit[hit] = sorted_keys[pos[hit]] == keys[hit]
    return np.where(hit, pos, -1)


def _consecutive(groups: np.ndarray, start: np.ndarray, end: np.ndarray,
                 by: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Edges between consecutive, non-overlapping nodes of the same group (indices into the arrays): consecutive in
    time, or in the order of ``by`` (e.g. instruction ids: program order) when given."""
    if len(start) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((end, start, groups)) if by is None else np.lexsort((by, groups))
    u, v = order[:-1], order[1:]
    keep = (groups[u] == groups[v]) & (end[u] <= start[v])
    return u[keep], v[keep]


def _per_core(codes: np.ndarray, table: pa.Table) -> np.ndarray:
    """``codes`` made distinct per core (``table``'s ``core`` column): each core has its own engines and queues."""
    core = column(table, "core")
    return codes * (int(core.max()) + 1 if len(core) else 1) + core


def _codes(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A code per value, numbered in order of first appearance (null a value too)."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if len(arr) == 0:
        return np.zeros(0, np.int64)
    return np.asarray(pc.dictionary_encode(arr, null_encoding="encode").indices, dtype=np.int64)


def build_graph(trace: Trace, scope: Scope) -> EventGraph:
    """The dependency graph of the events starting in ``scope``'s window."""
    conflicts = has_access_conflicts(trace)
    ins = _instructions(trace, scope, conflicts)
    seg = _segments(trace, scope)
    ni, ns_ = ins.num_rows, seg.num_rows
    i_id = column(ins, "id")
    check_unique_ids(trace, i_id)
    s_agg = column(seg, "agg")
    s_queue = seg.column("queue").to_pylist()
    start = np.concatenate([column(ins, "s"), column(seg, "s")])
    end = np.concatenate([column(ins, "e"), column(seg, "e")])
    edges: list[tuple[np.ndarray, np.ndarray, str | np.ndarray]] = []

    # Flow edges; a packet end maps to its segment (agg, queue)
    flow = fetch(trace, f"""
        SELECT f.{q(ts.OUT_TABLE)} AS ot, f.{q(ts.OUT_ID)} AS oid, f.{q(ts.IN_TABLE)} AS it, f.{q(ts.IN_ID)} AS iid,
               f.{q(ts.DEPENDENCY_TYPE)} AS dep,
               {agg_expr('po')} AS oagg,
               po.{q(ts.QUEUE_NAME)} AS oq,
               {agg_expr('pi')} AS iagg,
               pi.{q(ts.QUEUE_NAME)} AS iq
        FROM {FLOW} f
        LEFT JOIN {DMA_PACKET} po ON f.{q(ts.OUT_TABLE)} = '{ts.DMA_PACKET.name}' AND po.{q(ts.ID)} = f.{q(ts.OUT_ID)}
        LEFT JOIN {DMA_PACKET} pi ON f.{q(ts.IN_TABLE)} = '{ts.DMA_PACKET.name}' AND pi.{q(ts.ID)} = f.{q(ts.IN_ID)}""")
    if flow.num_rows:
        # a packet's segment by (transfer, queue): the queue names of segments and flow ends coded together
        nf = flow.num_rows
        qcodes = _codes(pa.concat_arrays([seg.column("queue").combine_chunks().cast(pa.string()),
                                          flow.column("oq").combine_chunks().cast(pa.string()),
                                          flow.column("iq").combine_chunks().cast(pa.string())]))
        width = int(qcodes.max()) + 1 if len(qcodes) else 1
        seg_key = s_agg * width + qcodes[:ns_]
        seg_order = np.argsort(seg_key, kind="stable")   # (a transfer's runs on a queue stay in time order)
        seg_sorted = seg_key[seg_order]
        seg_first = column(seg, "first_id")[seg_order]

        def ends(table_col: str, id_col: str, agg_col: str, q_col: str, q_codes: np.ndarray) -> np.ndarray:
            tables = flow.column(table_col)
            ids = column(flow, id_col)
            is_ins = np.asarray(pc.fill_null(pc.equal(tables, ts.INSTRUCTION.name), False), dtype=bool)
            is_pkt = np.asarray(pc.fill_null(pc.equal(tables, ts.DMA_PACKET.name), False), dtype=bool) \
                & ~np.asarray(flow.column(agg_col).is_null(), dtype=bool)   # a packet the trace does not have
            node = np.where(is_ins, _lookup(i_id, ids), -1)
            if is_pkt.any() and ns_ == 0:   # a window without DMA segments: its flows' packets are outside it
                node[is_pkt] = -1
            elif is_pkt.any():
                key = column(flow, agg_col)[is_pkt] * width + q_codes[is_pkt]
                found = _last_of(seg_sorted, key)   # (as a dict from (transfer, queue) would keep the last)
                pid = ids[is_pkt]
                while True:   # a split share: the run holding the packet (runs of a pair hold rising ids)
                    back = (found > 0) & (seg_first[np.clip(found, 0, None)] > pid)
                    back[back] = seg_sorted[found[back] - 1] == key[back]
                    if not back.any():
                        break
                    found[back] -= 1
                node[is_pkt] = np.where(found >= 0, ni + seg_order[np.clip(found, 0, None)], -1)
            return node

        u = ends("ot", "oid", "oagg", "oq", qcodes[ns_:ns_ + nf])
        v = ends("it", "iid", "iagg", "iq", qcodes[ns_ + nf:])
        dep = np.asarray(flow.column("dep").to_pylist(), dtype=object)
        # an instruction -> DMA packet edge is the instruction triggering the transfer
        dep[(u >= 0) & (u < ni) & (v >= ni)] = rs.EDGE_TRIGGER
        ok = (u >= 0) & (v >= 0) & (u != v)
        edges.append((u[ok], v[ok], dep[ok]))

    # trigger edges: trigger instruction -> every segment of its transfer
    if ns_:
        moved = transfers(trace, scope, window_only=True)   # (the segments' transfers: those of the window)
        if moved.trigger_source != "none":
            agg_sorted = moved.col("agg")
            trig_node = _lookup(i_id, moved.trigger[np.clip(_lookup(agg_sorted, s_agg), 0, None)])
            trig_node = np.where(_lookup(agg_sorted, s_agg) >= 0, trig_node, -1)
            ok = trig_node >= 0
            edges.append((trig_node[ok], (ni + np.arange(ns_))[ok], rs.EDGE_TRIGGER))

    # stream order: per timeline track in time, per engine in program order (instruction ids), so that an engine
    # with two tracks joins each instruction to the one issued before it (a MATMUL to its LDWEIGHTS, even when the
    # next LDWEIGHTS, loading in the background, starts at the same time as the MATMUL)
    u, v = _consecutive(_per_core(_codes(ins.column("stream")), ins), start[:ni], end[:ni])
    edges.append((u, v, rs.EDGE_STREAM))
    u, v = _consecutive(_per_core(_codes(ins.column("engine")), ins), start[:ni], end[:ni], by=i_id)
    edges.append((u, v, rs.EDGE_STREAM))
    # queue order
    u, v = _consecutive(_per_core(_codes(seg.column("queue")), seg), start[ni:], end[ni:])
    edges.append((ni + u, ni + v, rs.EDGE_QUEUE))
    # DMA engine order: the queues of every group share the core's DMA engines, so a segment can wait for another
    # group's packets on its engine (segments of unknown engine are not joined)
    if ns_:
        known = ~np.asarray(seg.column("dma_engine").is_null(), dtype=bool)
        idx = np.flatnonzero(known)
        u, v = _consecutive(_per_core(column(seg, "dma_engine"), seg)[idx], start[ni:][idx], end[ni:][idx])
        edges.append((ni + idx[u], ni + idx[v], rs.EDGE_DMA_ENGINE))
    # engines taking turns on a memory (NeuronCore-v2 access conflicts, as the recording's cost model says)
    if conflicts and ni:
        u, v = _access_edges(ins, start[:ni], end[:ni])
        edges.append((u, v, rs.EDGE_ACCESS))

    src = np.concatenate([e[0] for e in edges]).astype(np.int64)
    dst = np.concatenate([e[1] for e in edges]).astype(np.int64)
    kinds = np.concatenate([np.full(len(e[0]), e[2], dtype=object) if isinstance(e[2], str) else e[2]
                            for e in edges])
    forward = end[src] <= start[dst]
    dropped = int((~forward).sum())
    src, dst, kinds = src[forward], dst[forward], kinds[forward]
    # one edge per (src, dst): the first listed (preferred) kind
    pair = src * max(ni + ns_, 1) + dst
    _, first = np.unique(pair, return_index=True)
    first.sort()
    src, dst, kinds = src[first], dst[first], kinds[first]

    kind = np.array([rs.NODE_INSTRUCTION] * ni + [rs.NODE_DMA] * ns_, dtype=object)
    table = np.array([ts.INSTRUCTION.name] * ni + [ts.DMA_PACKET.name] * ns_, dtype=object)
    ident = np.concatenate([i_id, column(seg, "last_id")])
    track = np.concatenate([column(ins, "track", fill=-1), column(seg, "track", fill=-1)])
    resource = np.array(ins.column("engine").to_pylist() + s_queue, dtype=object)
    name = np.array(ins.column("opcode").to_pylist() + seg.column("var").to_pylist(), dtype=object)
    return EventGraph(kind, table, ident, track, resource, name, start, end, src, dst, kinds, dropped)
