"""Where Chrome events go: processes, threads and their tracks (names, order), async tracks, flow edges.

A *track* is one timeline row: a thread, a process's process-scoped instants, a per-process async row, or the one
global row for global instants.  Track names come from ``M`` metadata events, which may appear anywhere in the
file, so labels are only computed at the end (:meth:`Registry.labels`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler.importers.common import table_batch
from profiler.importers.json_kernel import bind_flows, pair_codes
from profiler.importers.nesting import Nesting, enclosing, next_starting
from tracer import schema

GLOBAL_TRACK = 0
#: Order of flow phases at equal times: ``s`` (0) before ``t`` (1) before ``f`` (2).
_FLOW_RANK = np.full(256, 2, np.int8)
_FLOW_RANK[ord("s")], _FLOW_RANK[ord("t")] = 0, 1
_MISSING = "\x01"
_LAST = 2**62


@dataclass(frozen=True)
class Labels:
    """Per track: the row group (process), the row name and the display position."""

    group: pa.Array    # string, indexed by track
    name: pa.Array     # string, indexed by track
    order: np.ndarray  # int64 rank, indexed by track


def _as_int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return None
        return int(value) if value.is_integer() else None


class Registry:
    """Processes, threads and tracks seen so far."""

    def __init__(self) -> None:
        self.pid_index: dict[str | None, int] = {}
        self.pid_text: list[str | None] = []
        self.process_name: list[str | None] = []
        self.process_labels: list[str | None] = []
        self.process_sort: list[int | None] = []
        self.thread_index: dict[tuple[int, str | None], int] = {}
        self.thread_pid: list[int] = []
        self.thread_tid: list[str | None] = []
        self.thread_name: list[str | None] = []
        self.thread_sort: list[int | None] = []
        # Tracks: kind, process (or -1), thread (or -1), name hint.
        self.track_kind: list[str] = ["global"]
        self.track_process: list[int] = [-1]
        self.track_thread: list[int] = [-1]
        self.track_hint: list[str] = ["instants"]
        self._thread_track: list[int] = []
        self._process_track: dict[int, int] = {}
        self._async_track: dict[tuple[int, str], int] = {}
        self._thread_track_np = np.zeros(0, np.int64)
        self._thread_pid_np = np.zeros(0, np.int64)
        #: thread -> thread whose track its rows go to (``lane_of`` in thread_name metadata)
        self.lane_of: dict[int, int] = {}

    # -- lookups ----------------------------------------------------------------------------------------------
    def process(self, pid: str | None) -> int:
        idx = self.pid_index.get(pid)
        if idx is None:
            idx = len(self.pid_text)
            self.pid_index[pid] = idx
            self.pid_text.append(pid)
            self.process_name.append(None)
            self.process_labels.append(None)
            self.process_sort.append(None)
        return idx

    def thread(self, pid: str | None, tid: str | None) -> int:
        p = self.process(pid)
        key = (p, tid)
        idx = self.thread_index.get(key)
        if idx is None:
            idx = len(self.thread_tid)
            self.thread_index[key] = idx
            self.thread_pid.append(p)
            self.thread_tid.append(tid)
            self.thread_name.append(None)
            self.thread_sort.append(None)
            self._thread_track.append(self._new_track("thread", p, idx, ""))
        return idx

    def _new_track(self, kind: str, process: int, thread: int, hint: str) -> int:
        self.track_kind.append(kind)
        self.track_process.append(process)
        self.track_thread.append(thread)
        self.track_hint.append(hint)
        return len(self.track_kind) - 1

    def rows(self, pid: pa.Array, tid: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(thread index, process index) of every row, given the rows' pid and tid texts."""
        key = pc.binary_join_element_wise(pid.fill_null(_MISSING), tid.fill_null(_MISSING), "\x00")
        enc = key.dictionary_encode()
        mapping = []
        for value in enc.dictionary.to_pylist():
            p, _, t = value.partition("\x00")
            mapping.append(self.thread(None if p == _MISSING else p, None if t == _MISSING else t))
        thread = np.asarray(mapping, np.int64)[np.asarray(enc.indices)] if mapping else np.zeros(0, np.int64)
        return thread, self.thread_processes(thread)

    def rows_of_integers(self, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """The thread index of every row whose pid and tid are the integers given (their text is their decimal)."""
        codes, first = pair_codes(pid, tid)
        mapping = [self.thread(str(p), str(t)) for p, t in zip(pid[first].tolist(), tid[first].tolist(), strict=True)]
        return np.asarray(mapping, np.int64)[codes]

    def thread_processes(self, thread: np.ndarray) -> np.ndarray:
        """The process index of each thread index."""
        if len(self._thread_pid_np) != len(self.thread_pid):
            self._thread_pid_np = np.asarray(self.thread_pid, np.int64)
        return self._thread_pid_np[thread]

    def thread_tracks(self, thread: np.ndarray) -> np.ndarray:
        """The track of each thread index (a new array)."""
        if len(self._thread_track_np) != len(self._thread_track):
            self._thread_track_np = np.asarray(self._thread_track, np.int64)
        return self._thread_track_np[thread]

    def track_remap(self) -> np.ndarray:
        """Track -> track after folding lane threads into the threads they are lanes of (identity elsewhere)."""
        remap = np.arange(len(self.track_kind), dtype=np.int64)
        for lane, base in self.lane_of.items():
            remap[self._thread_track[lane]] = self._thread_track[base]
        return remap

    def process_tracks(self, process: np.ndarray) -> np.ndarray:
        """The process-scoped instant track of each process index."""
        out = np.empty(len(process), np.int64)
        for p in np.unique(process).tolist():
            t = self._process_track.get(p)
            if t is None:
                t = self._process_track[p] = self._new_track("process", p, -1, "process instants")
            out[process == p] = t
        return out

    def async_track(self, process: int, name: str) -> int:
        """The async track of ``process`` named after an outermost async event called ``name``."""
        t = self._async_track.get((process, name))
        if t is None:
            t = self._async_track[(process, name)] = self._new_track("async", process, -1, name)
        return t

    # -- metadata ---------------------------------------------------------------------------------------------
    def metadata(self, name: str | None, args: dict[str, object], process: int, thread: int) -> None:
        """Apply one ``M`` event."""
        value = args.get("name")
        if name == "process_name" and isinstance(value, str):
            self.process_name[process] = value
        elif name == "thread_name" and isinstance(value, str):
            self.thread_name[thread] = value
            lane_of = args.get("lane_of")
            if isinstance(lane_of, int | str) and not isinstance(lane_of, bool):
                # A lane thread written by trnprof's exporter: its rows belong on the named thread's track.
                self.lane_of[thread] = self.thread(self.pid_text[process], str(lane_of))
        elif name == "process_labels" and isinstance(args.get("labels"), str):
            self.process_labels[process] = str(args["labels"])
        elif name == "process_sort_index" and isinstance(args.get("sort_index"), int | float):
            self.process_sort[process] = int(args["sort_index"])  # type: ignore[arg-type]
        elif name == "thread_sort_index" and isinstance(args.get("sort_index"), int | float):
            self.thread_sort[thread] = int(args["sort_index"])  # type: ignore[arg-type]

    # -- labels -----------------------------------------------------------------------------------------------
    def labels(self, used: np.ndarray | None = None) -> Labels:
        """Names and order of every track; the ``used`` tracks (default all) get unique (group, name) pairs."""
        proc = [self._process_label(p) for p in range(len(self.pid_text))]
        proc = _unique(proc, [f"pid {t}" for t in self.pid_text])
        thr = [self._thread_label(t) for t in range(len(self.thread_tid))]
        groups, names, keys = [], [], []
        kind_rank = {"thread": 0, "process": 1, "async": 2, "global": 3}
        for t, kind in enumerate(self.track_kind):
            p = self.track_process[t]
            if kind == "global":
                groups.append("Global")
                names.append(self.track_hint[t])
                keys.append((_LAST + 1, "", 0, 0, ""))
                continue
            group = proc[p]
            if kind == "thread":
                th = self.track_thread[t]
                name = thr[th]
                tsort = self.thread_sort[th]
                tkey = tsort if tsort is not None else (_as_int(self.thread_tid[th]) or 0)
            else:
                name = self.track_hint[t]
                tkey = 0
            psort = self.process_sort[p]
            pkey = psort if psort is not None else _as_int(self.pid_text[p])
            groups.append(group)
            names.append(name)
            keys.append((pkey if pkey is not None else _LAST, group, kind_rank[kind], tkey, name))
        in_use = np.ones(len(names), np.bool_) if used is None else np.isin(np.arange(len(names)), used)
        names = _unique_within(groups, names, [self._suffix(t) for t in range(len(names))], in_use.tolist())
        ranked = sorted(range(len(keys)), key=lambda t: keys[t])
        order = np.empty(len(keys), np.int64)
        order[ranked] = np.arange(len(keys))
        return Labels(group=pa.array(groups, pa.string()), name=pa.array(names, pa.string()), order=order)

    def labels_of_processes(self, labels: Labels) -> list[str]:
        """The group label of every process index (as used for its tracks)."""
        proc = [self._process_label(p) for p in range(len(self.pid_text))]
        return _unique(proc, [f"pid {t}" for t in self.pid_text])

    def _suffix(self, track: int) -> str:
        kind = self.track_kind[track]
        if kind == "thread":
            return f"tid {self.thread_tid[self.track_thread[track]]}"
        return kind

    def _process_label(self, p: int) -> str:
        pid = self.pid_text[p]
        name = (self.process_name[p] or "").strip()
        if not name:
            name = "unknown process" if pid is None else (f"pid {pid}" if _as_int(pid) is not None else pid)
        labels = (self.process_labels[p] or "").strip()
        return f"{name} ({labels})" if labels else name

    def _thread_label(self, t: int) -> str:
        tid = self.thread_tid[t]
        name = (self.thread_name[t] or "").strip()
        if name:
            return name
        if tid is None:
            return "unknown thread"
        return f"tid {tid}" if _as_int(tid) is not None else tid


def _unique(labels: list[str], suffixes: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
    return [f"{label} [{suffixes[i]}]" if seen[label] > 1 else label for i, label in enumerate(labels)]


def _unique_within(groups: list[str], names: list[str], suffixes: Sequence[str], used: list[bool]) -> list[str]:
    count: dict[tuple[str, str], int] = {}
    for g, n, u in zip(groups, names, used, strict=True):
        if u:
            count[(g, n)] = count.get((g, n), 0) + 1
    return [f"{n} [{suffixes[i]}]" if count.get((g, n), 0) > 1 and used[i] else n
            for i, (g, n) in enumerate(zip(groups, names, strict=True))]


def pair_async(events: list[tuple[int, str, str, int, str, int, str]], registry: Registry, start: np.ndarray,
               end: np.ndarray, track: np.ndarray, *, t_end: int) -> dict[str, int]:
    """Pair nestable async events (``b``/``e``, ``n``) per (process, cat, id) -- per (cat, id) for an ``id2``
    ``{"global": ...}`` identity -- and set their slices' ends and tracks.

    Each identity is a stack: ``e`` ends the latest open ``b``.  All slices of one outermost ``b`` go on the
    process's async track named after it; ``n`` instants join the open one's track or their own.

    Args:
        events: (process, cat, id, ts, kind ``b``/``e``/``n``, slice index or -1, name) in input order.
    """
    problems = {"async e events without a matching b (dropped)": 0, "async b events never ended (closed at the "
                "end of the trace)": 0}
    # an id2 {"global": ...} identity is shared by every process (its slices go on the first begin's process)
    def pairing(i: int) -> int:
        return -1 if events[i][2].startswith("global:") else events[i][0]

    order = sorted(range(len(events)), key=lambda i: (pairing(i), events[i][1], events[i][2], events[i][3], i))
    stack: list[int] = []
    root_track = -1
    current: tuple[int, str, str] | None = None
    for i in order:
        process, cat, ident, ts, kind, span, name = events[i]
        if (pairing(i), cat, ident) != current:
            problems["async b events never ended (closed at the end of the trace)"] += len(stack)
            for s in stack:
                end[s] = max(int(start[s]), t_end)
            stack, current = [], (pairing(i), cat, ident)
        if kind == "b":
            if not stack:
                root_track = registry.async_track(process, name)
            track[span] = root_track
            stack.append(span)
        elif kind == "e":
            if not stack:
                problems["async e events without a matching b (dropped)"] += 1
                continue
            s = stack.pop()
            end[s] = max(int(start[s]), ts)
        else:  # instant
            track[span] = root_track if stack else registry.async_track(process, name)
    problems["async b events never ended (closed at the end of the trace)"] += len(stack)
    for s in stack:
        end[s] = max(int(start[s]), t_end)
    return problems


def _bind(ftrack: np.ndarray, ts: np.ndarray, binds: np.ndarray, start: np.ndarray, end: np.ndarray, *,
          nest: Nesting) -> np.ndarray:
    """The slice (index) each flow event binds to, or -1; one track at a time.

    The compiled search works on the whole columns through the track's sorted rows (no per-track copies); the
    vectorised fallback, when the kernel is not loaded, on copies of one track's columns.
    """
    slice_id = np.full(len(ts), -1, np.int64)
    if not len(nest.order):
        return slice_id
    inverse: np.ndarray | None = None
    seg_tracks = nest.segments[:, 0]
    # The events grouped by track in one stable sort (a pass per track would cost tracks x events).
    by_track = np.argsort(ftrack, kind="stable")
    grouped = ftrack[by_track]
    cuts = np.flatnonzero(grouped[1:] != grouped[:-1]) + 1
    for lo_q, hi_q in zip([0, *cuts.tolist()], [*cuts.tolist(), len(grouped)], strict=True):
        if lo_q == hi_q:
            continue
        t = int(grouped[lo_q])
        k = int(np.searchsorted(seg_tracks, t))
        if k >= len(seg_tracks) or seg_tracks[k] != t:
            continue
        a, b = int(nest.segments[k, 1]), int(nest.segments[k, 2])
        rows = nest.order[a:b]
        q = by_track[lo_q:hi_q]
        at = bind_flows(start, end, rows, parent=nest.parent, t=ts[q], enclosing=binds[q])
        if at is not None:
            slice_id[q] = at
            continue
        if inverse is None:
            inverse = np.empty(len(nest.order), np.int64)
            inverse[nest.order] = np.arange(len(nest.order))
        s, e = start[rows], end[rows]
        par = nest.parent[rows]
        par_local = np.where(par >= 0, inverse[np.maximum(par, 0)] - a, -1)
        lo, hi = np.zeros(len(q), np.int64), np.full(len(q), b - a, np.int64)
        local = np.full(len(q), -1, np.int64)
        enc = np.flatnonzero(binds[q])
        local[enc] = enclosing(s, e, par_local, seg_lo=lo[enc], seg_hi=hi[enc], t=ts[q[enc]])
        nxt = np.flatnonzero(~binds[q])
        local[nxt] = next_starting(s, lo[nxt], hi[nxt], ts[q[nxt]])
        slice_id[q] = np.where(local >= 0, rows[np.maximum(local, 0)], -1)
    return slice_id


def _constant(text: str, n: int) -> pa.Array:
    """``n`` copies of ``text`` as a dictionary array (one dictionary entry, no per-row Python object)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([text], pa.string()))


def flow_edges(flows: list[tuple[np.ndarray, ...]], registry: Registry, start: np.ndarray, end: np.ndarray,
               track: np.ndarray, *, nest: Nesting) -> tuple[pa.RecordBatch | None, int]:
    """Flow rows linking the slices that flow events (``s``/``t``/``f``) bind to; and the unbound event count.

    ``flows`` holds per block: thread, ts, phase byte, binds-to-enclosing, and the flow identity as two int64
    columns (equal identities have equal pairs).

    ``s`` and ``t`` bind to the innermost slice enclosing them on their thread, ``f`` too with ``bp: "e"``,
    otherwise to the next slice starting at or after it.  Consecutive events of one flow id become edges.
    """
    if not flows:
        return None, 0
    thread = np.concatenate([f[0] for f in flows])
    ts = np.concatenate([f[1] for f in flows])
    phase = np.concatenate([f[2] for f in flows])
    binds = np.concatenate([f[3] for f in flows])
    key_a = np.concatenate([f[4] for f in flows])   # the flow's identity as two integer columns
    key_b = np.concatenate([f[5] for f in flows])
    ftrack = registry.thread_tracks(thread)
    if registry.lane_of:
        ftrack = registry.track_remap()[ftrack]
    slice_id = _bind(ftrack, ts, binds, start, end, nest=nest)
    unbound = int((slice_id < 0).sum())
    # At equal times a flow starts before it steps before it ends, whatever the order in the file (lexsort is
    # stable: ties keep the file order).
    o = np.lexsort((_FLOW_RANK[phase], ts, key_b, key_a))
    # Each column gathered once in that order; neighbours are then compared as shifted views.
    ka, kb, ph, sid = key_a[o], key_b[o], phase[o], slice_id[o]
    link = (ka[:-1] == ka[1:]) & (kb[:-1] == kb[1:]) & (ph[:-1] != ord("f")) & (ph[1:] != ord("s"))
    link &= (sid[:-1] >= 0) & (sid[1:] >= 0) & (sid[:-1] != sid[1:])
    out_id, in_id = sid[:-1][link], sid[1:][link]
    n = len(out_id)
    span = schema.SPAN.name
    batch = table_batch(schema.FLOW, {
        schema.IN_ID: pa.array(in_id, pa.int64()),
        schema.OUT_ID: pa.array(out_id, pa.int64()),
        schema.IN_TABLE: _constant(span, n),
        schema.OUT_TABLE: _constant(span, n),
        schema.DEPENDENCY_TYPE: _constant("flow", n),
        schema.GAP_TIME: pa.array(start[in_id] - end[out_id], pa.int64()),
    }, "Flow")
    return batch, unbound
