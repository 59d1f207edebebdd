"""Export a trace database as Chrome Trace Event JSON, for the Perfetto UI and chrome://tracing.

Every timeline row (track) becomes a named thread of a named process (the track's group): ``Instruction``,
``DmaPacket`` and ``slice`` rows become complete (``X``) events, ``Counter`` samples counter (``C``) events, and
``Flow`` edges flow arrows (``s``/``f`` pairs bound to the exact slices).  Times are written in microseconds as
exact decimals (``1234.567``), so nothing is lost in a round trip.  Event lines are built column-wise with Arrow
string kernels, a page of rows at a time; a ``.gz`` output name gives gzip output.
"""

from __future__ import annotations

import gzip
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import db_schema as dbs
from profiler.db.sqlutil import quote
from profiler.exporters.common import TimeWindow, atomic_output, count_rows, paged, table_columns, table_names
from profiler.importers.nesting import nest_intervals
from profiler.trace import Trace
from tracer import schema as ts

#: Database tables exported as complete events, with the SQL giving each event's name, category and args.
INTERVAL_EVENTS: dict[str, tuple[str, str, str]] = {
    ts.INSTRUCTION.name: (
        quote(ts.OPCODE), "'Instruction'",
        f"json_object('id', id, 'engine', {quote(ts.ENGINE)}, 'operands', {quote(ts.OPERANDS)}, 'pc', {quote(ts.PC)},"
        f" 'hlo_name', {quote(ts.HLO_NAME)}, 'nki_source_location', {quote(ts.NKI_SOURCE_LOCATION)})"),
    ts.DMA_PACKET.name: (
        f"coalesce({quote(ts.VARIABLE)}, {quote(ts.QUEUE_NAME)})", "'DmaPacket'",
        f"json_object('id', id, 'queue_name', {quote(ts.QUEUE_NAME)}, 'transfer_bytes', "
        f"{quote(ts.TRANSFER_BYTES)}, 'variable', {quote(ts.VARIABLE)})"),
    # a span's args text goes in as it is when it is a JSON object, else as {"args": text} (pasted raw, text that
    # is not an object made the file invalid JSON)
    dbs.SLICE_TABLE: (quote(ts.NAME), quote(ts.CATEGORY),
                      f"CASE WHEN {quote(ts.ARGS)} IS NULL THEN NULL WHEN try_cast({quote(ts.ARGS)} AS JSON) IS NOT "
                      f"NULL AND json_type(try_cast({quote(ts.ARGS)} AS JSON)) = 'OBJECT' THEN {quote(ts.ARGS)} "
                      f"ELSE json_object('args', {quote(ts.ARGS)}) END"),
}
#: Flow tables name the slice table ``Span`` (the trace table it came from).
_FLOW_TABLE = {ts.SPAN.name: dbs.SLICE_TABLE, dbs.SLICE_TABLE: dbs.SLICE_TABLE,
               ts.INSTRUCTION.name: ts.INSTRUCTION.name, ts.DMA_PACKET.name: ts.DMA_PACKET.name}
_CONTROL = r"[\x00-\x1f]"

Progress = Callable[[int], None]


@dataclass
class ExportStats:
    """What an export wrote."""

    events: dict[str, int] = field(default_factory=dict)   # per kind: X, C, flow, M
    path: Path | None = None
    #: Bytes of JSON written (before gzip).
    json_bytes: int = 0


class _Threads:
    """pid/tid of every track, and extra lane threads for tracks whose rows overlap without nesting.

    Perfetto (and chrome://tracing) need the complete events of one thread to nest; rows that overlap without
    nesting (DMA packets in flight together on one queue) go to lane threads of the same name, marked with
    ``"lane_of"`` in their ``thread_name`` metadata so trnprof's importer puts them back on one track.
    """

    def __init__(self, trace: Trace) -> None:
        self.pid: dict[int, int] = {}
        self.tid: dict[int, int] = {}
        self.meta: list[dict[str, Any]] = []
        self._name: dict[int, str] = {}
        self._position: dict[int, int] = {}
        self._lanes: dict[tuple[int, int], int] = {}
        #: Track id of a thread's deeper nesting level -> the track id of its first level (the thread's own).
        self.level_of: dict[int, int] = {}
        #: (database table, row id) -> tid, for flow endpoints that went to a lane thread.
        self.row_tid: dict[tuple[str, int], int] = {}
        pid_of_group: dict[str, int] = {}
        #: pid of each core's process (its engines' group), for the rows of tables without tracks (semaphores).
        self.pid_of_core: dict[int, int] = {}
        tracks = trace.tracks().to_pylist()
        self._next_tid = len(tracks) + 1
        # the nesting levels of one thread are tracks of their own in the database (track.span_depth), one thread here
        level_of = self.level_of
        first_level: dict[tuple[Any, ...], int] = {}
        for t in sorted(tracks, key=lambda t: t.get(dbs.SPAN_DEPTH) or 0):
            if t.get(dbs.SPAN_DEPTH) is not None:
                base = first_level.setdefault((t[dbs.CORE], t[dbs.GROUP_NAME], t[ts.NAME], t[dbs.KIND]),
                                              t[dbs.TRACK_ID])
                if base != t[dbs.TRACK_ID]:
                    level_of[t[dbs.TRACK_ID]] = base
        for position, t in enumerate(tracks):
            if t[dbs.TRACK_ID] in level_of:
                continue
            group = t[dbs.GROUP_NAME] or "trace"
            p = pid_of_group.get(group)
            if p is None:
                p = pid_of_group[group] = len(pid_of_group) + 1
                self.meta.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": group}})
                self.meta.append({"ph": "M", "name": "process_sort_index", "pid": p, "tid": 0,
                                  "args": {"sort_index": p}})
            track_id = t[dbs.TRACK_ID]
            self.pid[track_id] = p
            if t[dbs.CORE] is not None:
                self.pid_of_core.setdefault(int(t[dbs.CORE]), p)
            self.tid[track_id] = position + 1
            self._name[track_id] = t[ts.NAME]
            self._position[track_id] = position
            if t[dbs.TABLE] != ts.COUNTER.name:
                self.meta.append({"ph": "M", "name": "thread_name", "pid": p, "tid": position + 1,
                                  "args": {"name": t[ts.NAME]}})
                self.meta.append({"ph": "M", "name": "thread_sort_index", "pid": p, "tid": position + 1,
                                  "args": {"sort_index": position * 1000}})
        for level, base in level_of.items():
            self.pid[level], self.tid[level] = self.pid[base], self.tid[base]
            self._name[level], self._position[level] = self._name[base], self._position[base]

    def lane_tids(self, track: np.ndarray, lane: np.ndarray) -> np.ndarray:
        """tid of each (track, lane); lane 0 is the track's own thread."""
        keys, inverse = np.unique(track, return_inverse=True)
        tids = np.array([self.tid.get(int(t), 0) for t in keys], np.int64)[inverse] if len(keys) else track.copy()
        for k in np.flatnonzero(lane > 0).tolist():
            key = (int(track[k]), int(lane[k]))
            tid = self._lanes.get(key)
            if tid is None:
                tid = self._lanes[key] = self._next_tid
                self._next_tid += 1
                t = key[0]
                self.meta.append({"ph": "M", "name": "thread_name", "pid": self.pid.get(t, 0), "tid": tid,
                                  "args": {"name": self._name.get(t, ""), "lane_of": self.tid.get(t, 0)}})
                self.meta.append({"ph": "M", "name": "thread_sort_index", "pid": self.pid.get(t, 0), "tid": tid,
                                  "args": {"sort_index": self._position.get(t, 0) * 1000 + key[1]}})
            tids[k] = tid
        return tids


def _lanes(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane of each row: 0 unless it overlaps an earlier row of its track without nesting in it."""
    nest = nest_intervals(track, start, end)
    lane = np.where((nest.depth > 0) & (nest.parent < 0), nest.depth, 0).astype(np.int64)
    # Nested rows follow their parent's lane (parents are shallower, so resolve depth by depth).
    for d in range(1, int(nest.depth.max(initial=0)) + 1):
        rows = np.flatnonzero((nest.depth == d) & (nest.parent >= 0))
        lane[rows] = lane[nest.parent[rows]]
    return lane


def micros(ns: pa.Array | np.ndarray) -> pa.Array:
    """Integer nanoseconds as exact decimal microsecond texts: 1234567 -> ``"1234.567"``, -1 -> ``"-0.001"``."""
    a = np.asarray(ns, dtype=np.int64)
    neg = a < 0
    mag = np.abs(a)
    whole = pa.array(mag // 1000).cast(pa.string())
    frac = pc.utf8_lpad(pa.array(mag % 1000).cast(pa.string()), 3, "0")
    text = pc.binary_join_element_wise(whole, frac, ".")
    if neg.any():
        text = pc.if_else(pa.array(neg), pc.binary_join_element_wise("-", text, ""), text)
    return text


def json_strings(values: pa.Array) -> pa.Array:
    """Strings as JSON string literals (quoted and escaped); nulls stay null."""
    values = values.cast(pa.string())
    esc = pc.replace_substring(pc.replace_substring(values, "\\", "\\\\"), '"', '\\"')
    has_control = pc.match_substring_regex(esc, _CONTROL)
    if pc.any(has_control).as_py():
        fixed = [None if v is None else msgspec.json.encode(v).decode()[1:-1]
                 for v in pc.filter(values, has_control).to_pylist()]
        esc = pc.replace_with_mask(esc, has_control, pa.array(fixed, pa.string()))
    return pc.binary_join_element_wise('"', esc, '"', "")


def _part(key: str, values: pa.Array) -> pa.Array:
    """``,"key":value`` per row, or an empty string where the value is null."""
    return pc.binary_join_element_wise(f',"{key}":', values, "").fill_null("")


class _Writer:
    """Writes the event array: one JSON event per line, comma-separated."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.first = True
        self.bytes = 0

    def lines(self, lines: pa.Array) -> None:
        if not len(lines):
            return
        joined = pc.binary_join_element_wise(",\n", lines, "").combine_chunks() if isinstance(
            lines, pa.ChunkedArray) else pc.binary_join_element_wise(",\n", lines, "")
        offsets = np.frombuffer(joined.buffers()[1], np.int32, count=len(joined) + 1 + joined.offset)
        data = joined.buffers()[2]
        lo, hi = int(offsets[joined.offset]), int(offsets[-1])
        view = memoryview(data)[lo:hi]
        if self.first:
            view = view[2:]
            self.first = False
        self.out.write(view)
        self.bytes += len(view)

    def objects(self, events: list[dict[str, Any]]) -> None:
        if events:
            self.lines(pa.array([msgspec.json.encode(e).decode() for e in events], pa.string()))


def export_chrome(trace: Trace, output: str | os.PathLike[str], *, window: TimeWindow | None = None,
                  force: bool = False, progress: Progress | None = None,
                  expected: Callable[[int], None] | None = None) -> ExportStats:
    """Write ``trace`` (or the part in ``window``) as Chrome trace JSON at ``output`` (gzip for ``.gz``).

    The file is written beside ``output`` and renamed over it when complete; an existing ``output`` needs
    ``force``.  ``expected`` is told the interval rows to write before the first (a progress bar's total).
    """
    window = window or TimeWindow()
    out_path = Path(output)
    stats = ExportStats(path=out_path)
    threads = _Threads(trace)
    tables = set(table_names(trace))
    with atomic_output(out_path, force=force, inputs=(trace.path, trace.db_path)) as tmp:
        opener = gzip.open if out_path.name.endswith(".gz") else open
        with opener(tmp, "wb") as raw:
            f: IO[bytes] = raw  # type: ignore[assignment]
            other = {k: v for k, v in trace.metadata.items() if v is not None}
            f.write(b'{"displayTimeUnit":"ns","otherData":' + msgspec.json.encode(other) + b',"traceEvents":[\n')
            w = _Writer(f)
            if expected is not None:
                expected(sum(count_rows(trace, table, *window.interval_sql()) for table in INTERVAL_EVENTS
                             if table in tables))
            for table, sql in INTERVAL_EVENTS.items():
                if table in tables:
                    stats.events[table] = _intervals(trace, w, table, sql=sql, threads=threads, window=window,
                                                     progress=progress)
            if ts.COUNTER.name in tables:
                stats.events[ts.COUNTER.name] = _counters(trace, w, threads, window)
            if ts.SEMAPHORE_UPDATE.name in tables:
                stats.events[ts.SEMAPHORE_UPDATE.name] = _semaphores(trace, w, threads, window)
            if ts.FLOW.name in tables:
                stats.events["flow"] = _flows(trace, w, threads, window, tables)
            w.objects(threads.meta)          # last: lane threads are only known now (order is free in JSON)
            stats.events["M"] = len(threads.meta)
            f.write(b"\n]}\n")
            stats.json_bytes = w.bytes
    return stats


def _intervals(trace: Trace, w: _Writer, table: str, *, sql: tuple[str, str, str], threads: _Threads,
               window: TimeWindow, progress: Progress | None) -> int:
    name_sql, cat_sql, args_sql = sql
    where, params = window.interval_sql()
    select = (f"{quote(dbs.TRACK_ID)} AS t, {quote(ts.START_TS)} AS s, {quote(ts.END_TS)} AS e, "
              f"CAST({name_sql} AS VARCHAR) AS n, CAST({cat_sql} AS VARCHAR) AS c, CAST({args_sql} AS VARCHAR) AS a, "
              f"{quote(ts.ID)} AS i")
    endpoints = _flow_endpoint_ids(trace, table)
    count = 0
    for page in paged(trace, select, table, where=where, params=params):
        track = np.asarray(page.column("t"))
        keys, inverse = np.unique(track, return_inverse=True)
        pids = np.array([threads.pid.get(int(k), 0) for k in keys], np.int64)[inverse] if len(keys) else track
        s = np.asarray(page.column("s"))
        e = np.asarray(page.column("e"))
        # A thread's nesting levels (tracks of their own) go back to its thread; rows that overlap without nesting
        # there (instructions and packets of one queue, pipelined layers' spans) are laid out on lane threads.
        if threads.level_of:
            track = np.array([threads.level_of.get(t, t) for t in track.tolist()], np.int64)
        lane = _lanes(track, s, e)
        tids = threads.lane_tids(track, lane)
        if len(endpoints) and (lane > 0).any():
            ids = np.asarray(page.column("i"))
            for k in np.flatnonzero((lane > 0) & np.isin(ids, endpoints)).tolist():
                threads.row_tid[(table, int(ids[k]))] = int(tids[k])
        line = pc.binary_join_element_wise(
            '{"ph":"X","pid":', pa.array(pids).cast(pa.string()),
            ',"tid":', pa.array(tids).cast(pa.string()),
            ',"ts":', micros(s), ',"dur":', micros(e - s),
            ',"name":', json_strings(page.column("n").combine_chunks()).fill_null('""'),
            _part("cat", json_strings(page.column("c").combine_chunks())),
            _part("args", page.column("a").combine_chunks()), "}", "")
        w.lines(line)
        count += page.num_rows
        if progress is not None:
            progress(page.num_rows)
    return count


def _counter_lines(w: _Writer, pids: np.ndarray, page: pa.Table) -> int:
    """``C`` events of a page with columns s (ns), n (name) and v (value); non-finite values left out."""
    finite = pc.is_finite(page.column("v").combine_chunks().cast(pa.float64())).fill_null(False)
    page = page.filter(finite)
    pids = pids[np.asarray(finite)]
    value_text = pa.array([msgspec.json.encode(v).decode() for v in page.column("v").to_pylist()], pa.string())
    line = pc.binary_join_element_wise(
        '{"ph":"C","pid":', pa.array(pids).cast(pa.string()), ',"tid":0,"ts":',
        micros(np.asarray(page.column("s"))), ',"name":',
        json_strings(page.column("n").combine_chunks()).fill_null('""'),
        ',"args":{"value":', value_text, "}}", "")
    w.lines(line)
    return page.num_rows


def _held_at_start(trace: Trace, table: str, keys: str, start: int) -> pa.Table:
    """Per counter (``keys``), its last sample before ``start``, moved to ``start``: a counter holds its value
    until its next sample, so a window shows the value it starts with (as trace cutters do)."""
    t = quote(ts.TIMESTAMP)
    result = trace.sql(f"SELECT {keys}, {int(start)}::BIGINT AS s, arg_max({quote(ts.VALUE)}, {t}) AS v "
                       f"FROM {quote(table)} WHERE {t} < {int(start)} GROUP BY ALL ORDER BY ALL",
                       timeout_s=None).arrow()
    return result.read_all() if isinstance(result, pa.RecordBatchReader) else result


def _counters(trace: Trace, w: _Writer, threads: _Threads, window: TimeWindow) -> int:
    where, params = window.point_sql()
    select = f"{quote(dbs.TRACK_ID)} AS t, {quote(ts.TIMESTAMP)} AS s, {quote(ts.NAME)} AS n, {quote(ts.VALUE)} AS v"
    pages: list[pa.Table] = []
    if window.start is not None:
        pages.append(_held_at_start(trace, ts.COUNTER.name, f"{quote(dbs.TRACK_ID)} AS t, {quote(ts.NAME)} AS n",
                                    window.start).select(["t", "s", "n", "v"]))
    count = 0
    for page in itertools.chain(pages, paged(trace, select, ts.COUNTER.name, where=where, params=params)):
        pids = np.array([threads.pid.get(t, 0) for t in page.column("t").to_pylist()], np.int64)
        count += _counter_lines(w, pids, page)
    return count


def _semaphores(trace: Trace, w: _Writer, threads: _Threads, window: TimeWindow) -> int:
    """Semaphore values as counters (``semaphore <id>``) in their core's process: the Chrome format has no table
    for them, and a counter track draws a value over time as Neuron Explorer's semaphore rows do."""
    where, params = window.point_sql()
    core = f"coalesce({quote(ts.PCORE_IDX)}, 0)" if ts.PCORE_IDX in table_columns(
        trace, ts.SEMAPHORE_UPDATE.name) else "0"
    name = f"'semaphore ' || CAST({quote(ts.ID)} AS VARCHAR)"
    select = f"{core} AS c, {quote(ts.TIMESTAMP)} AS s, {name} AS n, {quote(ts.VALUE)} AS v"
    pages: list[pa.Table] = []
    if window.start is not None:
        pages.append(_held_at_start(trace, ts.SEMAPHORE_UPDATE.name, f"{core} AS c, {name} AS n",
                                    window.start).select(["c", "s", "n", "v"]))
    fallback = next(iter(threads.pid_of_core.values()), 1)
    count = 0
    for page in itertools.chain(pages, paged(trace, select, ts.SEMAPHORE_UPDATE.name, where=where, params=params)):
        pids = np.array([threads.pid_of_core.get(int(c), fallback) for c in page.column("c").to_pylist()], np.int64)
        count += _counter_lines(w, pids, page)
    return count


def _flow_endpoint_ids(trace: Trace, table: str) -> np.ndarray:
    """Ids of ``table``'s rows that flows start or end at."""
    if ts.FLOW.name not in table_names(trace):
        return np.zeros(0, np.int64)
    names = ", ".join(f"'{k}'" for k, v in _FLOW_TABLE.items() if v == table)
    ft = quote(ts.FLOW.name)
    rows = trace.sql(f"SELECT {quote(ts.OUT_ID)} FROM {ft} WHERE {quote(ts.OUT_TABLE)} IN ({names}) UNION "
                     f"SELECT {quote(ts.IN_ID)} FROM {ft} WHERE {quote(ts.IN_TABLE)} IN ({names})",
                     timeout_s=None).fetchall()
    return np.array(sorted(r[0] for r in rows), np.int64)


def _endpoints(trace: Trace, table: str, ids_sql: str, window: TimeWindow) -> dict[int, tuple[int, int, int]]:
    """id -> (track, start, end) of the rows of ``table`` that flows touch, within the window."""
    where, params = window.interval_sql()
    rows = trace.sql(f"SELECT id, {quote(dbs.TRACK_ID)}, {quote(ts.START_TS)}, {quote(ts.END_TS)} FROM {quote(table)} "
                     f"WHERE id IN ({ids_sql}) AND {where}", timeout_s=None, params=params or None).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _free_points(trace: Trace, table: str, ends: dict[int, tuple[int, int, int]], ids_sql: str) -> dict[int, int]:
    """For each flow endpoint of ``table``, the earliest time inside it that none of the events nested in it on its
    thread covers (its start if possible).

    A flow event binds to the innermost slice enclosing its time, so this time binds to the endpoint itself: a
    slice's children are its rows by ``parent_id``; an instruction's or packet's, the rows of its track it
    contains (an LDWEIGHTS starting with the MATMUL around it took the MATMUL's arrows).
    """
    kids: dict[int, list[tuple[int, int]]] = {}
    s_, e_, tr, i_ = quote(ts.START_TS), quote(ts.END_TS), quote(dbs.TRACK_ID), quote(ts.ID)
    if table == dbs.SLICE_TABLE:
        query = (f"SELECT {quote(ts.PARENT_ID)}, {s_}, {e_} FROM {quote(table)} WHERE {quote(ts.PARENT_ID)} "
                 f"IN ({ids_sql})") if ts.PARENT_ID in table_columns(trace, table) else None
    else:
        query = (f"SELECT ep.{i_}, r.{s_}, r.{e_} FROM {quote(table)} ep JOIN {quote(table)} r ON r.{tr} = ep.{tr} "
                 f"AND r.{s_} >= ep.{s_} AND r.{s_} < ep.{e_} AND r.{e_} <= ep.{e_} AND r.{i_} <> ep.{i_} "
                 f"WHERE ep.{i_} IN ({ids_sql})")
    if query is not None:
        for p, s, e in trace.sql(query, timeout_s=None).fetchall():
            kids.setdefault(p, []).append((s, e))
    out = {}
    for sid, (_, s, e) in ends.items():
        t = s
        for cs, ce in sorted(kids.get(sid, ())):
            if cs > t:
                break
            if cs <= t < ce or cs == ce == t:
                t = ce if ce > cs else t + 1
        out[sid] = t if (t < e or s == e) else s
    return out


def _flows(trace: Trace, w: _Writer, threads: _Threads, window: TimeWindow, tables: set[str]) -> int:
    flow = trace.sql(f"SELECT {quote(ts.OUT_TABLE)}, {quote(ts.OUT_ID)}, {quote(ts.IN_TABLE)}, {quote(ts.IN_ID)} "
                     f"FROM {quote(ts.FLOW.name)}", timeout_s=None).fetchall()
    if not flow:
        return 0
    where_tables = {}
    for name in {_FLOW_TABLE.get(r[0]) for r in flow} | {_FLOW_TABLE.get(r[2]) for r in flow}:
        if name is None or name not in tables:
            continue
        aliases = [k for k, v in _FLOW_TABLE.items() if v == name]
        quoted = ", ".join(f"'{a}'" for a in aliases)
        ft = quote(ts.FLOW.name)
        ids_sql = (f"SELECT {quote(ts.OUT_ID)} FROM {ft} WHERE {quote(ts.OUT_TABLE)} IN ({quoted}) "
                   f"UNION SELECT {quote(ts.IN_ID)} FROM {ft} WHERE {quote(ts.IN_TABLE)} IN ({quoted})")
        ends = _endpoints(trace, name, ids_sql, window)
        points = _free_points(trace, name, ends, ids_sql)
        where_tables[name] = (ends, points)
    events = []
    for n, (out_t, out_id, in_t, in_id) in enumerate(flow):
        a = where_tables.get(_FLOW_TABLE.get(out_t, ""))
        b = where_tables.get(_FLOW_TABLE.get(in_t, ""))
        if a is None or b is None or out_id not in a[0] or in_id not in b[0]:
            continue
        for ph, (ends, points), sid in (("s", a, out_id), ("f", b, in_id)):
            track = ends[sid][0]
            table = _FLOW_TABLE.get(out_t if ph == "s" else in_t, "")
            tid = threads.row_tid.get((table, sid), threads.tid.get(track, 0))
            ev = {"ph": ph, "id": n, "cat": "flow", "name": "flow", "pid": threads.pid.get(track, 0),
                  "tid": tid, "ts": msgspec.Raw(micros([points[sid]])[0].as_py().encode())}
            if ph == "f":
                ev["bp"] = "e"
            events.append(ev)
    w.objects(events)
    return len(events) // 2
