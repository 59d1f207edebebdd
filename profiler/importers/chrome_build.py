"""Chrome trace events -> trace tables: per-block decoding into compact columns, then the end-of-input resolution.

:class:`ChromeTraceBuilder` receives blocks of events (:class:`~profiler.importers.json_scan.ObjectBlock`) and keeps
only what the end of the input can change: per slice its start, end and track (24 bytes), plus the begin/end,
async, flow and counter events, which are few next to complete (``X``) events.  Slice names and argument JSON
go to a temporary :class:`~profiler.importers.spill.Spill`.  :meth:`ChromeTraceBuilder.finish` then pairs
``B``/``E`` and async events, computes every slice's depth and parent (:mod:`profiler.importers.nesting`), binds
flows to slices, names the tracks, and yields ``Span``, ``Counter``, ``Flow`` and ``Metadata`` batches.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler.importers import json_kernel
from profiler.importers.chrome_tracks import GLOBAL_TRACK, Labels, Registry, flow_edges, pair_async
from profiler.importers.common import TraceImportWarning, metadata_batch, table_batch
from profiler.importers.decimal_text import decimal_text_to_ns
from profiler.importers.json_scan import ObjectBlock
from profiler.importers.nesting import Nesting, match_begin_end, nest_intervals
from profiler.importers.spill import Spill
from tracer import schema

KEYS = ("ph", "name", "cat", "ts", "dur", "pid", "tid", "id", "id2", "bp", "s", "args")
#: The keys as the compiled kernel extracts them: times as exact nanoseconds, pid/tid as integers when they are.
KEY_SPEC = json_kernel.KeySpec(KEYS, tuple(3 if k in ("ts", "dur") else 0 if k in ("pid", "tid") else -1
                                           for k in KEYS))
#: Times must stay within +-2**62 ns (the database's limit); events beyond it are skipped as invalid.
TIME_LIMIT = 2**62
#: Span rows per emitted batch.
EMIT_ROWS = 1 << 16

# Phase classes.
UNKNOWN, COMPLETE, BEGIN, END, INSTANT, COUNTER, META, FLOW, ASYNC_BEGIN, ASYNC_END, ASYNC_INSTANT, IGNORED = range(12)
_CLASS = np.zeros(256, np.int8)
for _ph, _cls in {"X": COMPLETE, "B": BEGIN, "E": END, "i": INSTANT, "I": INSTANT, "C": COUNTER, "M": META,
                  "s": FLOW, "t": FLOW, "f": FLOW, "b": ASYNC_BEGIN, "S": ASYNC_BEGIN, "e": ASYNC_END,
                  "F": ASYNC_END, "n": ASYNC_INSTANT}.items():
    _CLASS[ord(_ph)] = _cls
#: Phases that make a slice.
_SPAN_CLASSES = np.array([COMPLETE, BEGIN, INSTANT, ASYNC_BEGIN, ASYNC_INSTANT])
_PENDING = -1   # end or track not known until the end of the input

_SPILL_SCHEMA = pa.schema([
    pa.field(schema.ID, pa.int64()),
    pa.field(schema.NAME, pa.string()),
    pa.field(schema.CATEGORY, pa.string()),
    pa.field(schema.ARGS, pa.string()),
])
_JSON = msgspec.json.Decoder()


class ChromeTraceBuilder:
    """Accumulates Chrome events block by block; :meth:`finish` yields the trace tables."""

    def __init__(self, path: Path, spill_dir: str | os.PathLike[str] | None = None) -> None:
        self.path = path
        self.registry = Registry()
        self.spill = Spill(_SPILL_SCHEMA, spill_dir)
        self.next_id = 0
        self.events = 0
        self.starts: list[np.ndarray] = []
        self.ends: list[np.ndarray] = []
        self.tracks: list[np.ndarray] = []
        self.be: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []   # thread, ts, is_begin, span
        self.end_args: list[tuple[int, str]] = []         # (index among B/E events, args JSON of the E)
        self.be_count = 0
        self.async_events: list[tuple[int, str, str, int, str, int, str]] = []
        self.flows: list[tuple[np.ndarray, ...]] = []     # thread, ts, phase byte, binds-enclosing, key text
        self.counters: list[tuple[int, int, str, str, float]] = []   # ts, process, name, key, value
        self.problems: Counter[str] = Counter()
        self.unknown_phases: Counter[str] = Counter()
        self.t_min: int | None = None
        self.t_max: int | None = None

    def __enter__(self) -> ChromeTraceBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.spill.close()

    # -- per block --------------------------------------------------------------------------------------------
    def add(self, block: ObjectBlock) -> None:
        """Decode one block of events."""
        n = len(block)
        if n == 0:
            return
        self.events += n
        block.members(KEYS)
        first, length = block.first_bytes("ph")
        cls = _CLASS[first]
        cls[length != 1] = UNKNOWN
        unknown = np.flatnonzero(cls == UNKNOWN)
        if len(unknown):
            phases = block.strings("ph", unknown).to_pylist()
            self.unknown_phases.update("(none)" if p is None else repr(p) for p in phases)
        ts_ns, ts_ok = exact_times(block, "ts")
        ts_ok &= np.abs(ts_ns) < TIME_LIMIT
        timed = (cls != UNKNOWN) & (cls != META)
        bad_ts = timed & ~ts_ok
        if bad_ts.any():
            self.problems["events without a valid numeric ts"] += int(bad_ts.sum())
            cls[bad_ts] = IGNORED
        ok_ts = ts_ns[timed & ts_ok]
        if len(ok_ts):
            lo, hi = int(ok_ts.min()), int(ok_ts.max())
            self.t_min = lo if self.t_min is None else min(self.t_min, lo)
            self.t_max = hi if self.t_max is None else max(self.t_max, hi)
        thread, process = self._threads(block)
        span_of_row = self._spans(block, cls, ts_ns, thread, process)
        self._begin_end(block, cls, ts_ns, thread, span_of_row)
        if np.isin(cls, (ASYNC_BEGIN, ASYNC_END, ASYNC_INSTANT)).any():
            self._async(block, cls, ts_ns, process, span_of_row)
        if (cls == FLOW).any():
            self._flows(block, cls, ts_ns, thread)
        if (cls == COUNTER).any():
            self._counters(block, cls, ts_ns, process)
        if (cls == META).any():
            self._metadata(block, cls, thread, process)

    def _threads(self, block: ObjectBlock) -> tuple[np.ndarray, np.ndarray]:
        """(thread index, process index) of every event."""
        pid, tid = block.numbers("pid"), block.numbers("tid")
        if pid is None or tid is None:
            return self.registry.rows(block.strings("pid"), block.strings("tid"))
        fast = (pid[1] == json_kernel.NUM_OK) & (tid[1] == json_kernel.NUM_OK)
        if fast.all():
            thread = self.registry.rows_of_integers(pid[0], tid[0])
        else:
            thread = np.empty(len(block), np.int64)
            f = np.flatnonzero(fast)
            thread[f] = self.registry.rows_of_integers(pid[0][f], tid[0][f])
            other = np.flatnonzero(~fast)
            thread[other], _ = self.registry.rows(block.strings("pid", other), block.strings("tid", other))
        return thread, self.registry.thread_processes(thread)

    def _spans(self, block: ObjectBlock, cls: np.ndarray, ts_ns: np.ndarray, thread: np.ndarray,
               process: np.ndarray) -> np.ndarray:
        rows = np.flatnonzero(np.isin(cls, _SPAN_CLASSES))
        span_of_row = np.full(len(cls), -1, np.int64)
        if not len(rows):
            return span_of_row
        ids = np.arange(self.next_id, self.next_id + len(rows), dtype=np.int64)
        self.next_id += len(rows)
        span_of_row[rows] = ids
        c = cls[rows]
        start = ts_ns[rows]
        end = start.copy()
        x = np.flatnonzero(c == COMPLETE)
        if len(x):
            dur, dur_ok = exact_times(block, "dur", rows[x])
            if not dur_ok.all():
                self.problems["X events without a valid dur (made zero-length)"] += int((~dur_ok).sum())
            negative = dur < 0
            if negative.any():
                self.problems["X events with a negative dur (made zero-length)"] += int(negative.sum())
                dur[negative] = 0
            end[x] = start[x] + np.minimum(dur, TIME_LIMIT - 1 - start[x])
            if len(dur):
                self.t_max = max(self.t_max or 0, int(end[x].max()))
        end[(c == BEGIN) | (c == ASYNC_BEGIN)] = _PENDING
        track = self.registry.thread_tracks(thread[rows])
        inst = np.flatnonzero(c == INSTANT)
        if len(inst):
            scope, _ = block.first_bytes("s")
            sc = scope[rows[inst]]
            track[inst[sc == ord("g")]] = GLOBAL_TRACK
            p = inst[sc == ord("p")]
            if len(p):
                track[p] = self.registry.process_tracks(process[rows[p]])
        track[(c == ASYNC_BEGIN) | (c == ASYNC_INSTANT)] = _PENDING
        names = block.strings("name", rows).fill_null("")
        cats = block.strings("cat", rows)
        args = block.raw("args", rows)
        if block.contains_byte("args", ord("\n"), rows):
            args = _compact_json(args)
        self.spill.write(pa.RecordBatch.from_arrays([pa.array(ids), names, cats, args], schema=_SPILL_SCHEMA))
        self.starts.append(start)
        self.ends.append(end)
        self.tracks.append(track)
        return span_of_row

    def _begin_end(self, block: ObjectBlock, cls: np.ndarray, ts_ns: np.ndarray, thread: np.ndarray,
                   span_of_row: np.ndarray) -> None:
        rows = np.flatnonzero((cls == BEGIN) | (cls == END))
        if not len(rows):
            return
        is_begin = cls[rows] == BEGIN
        self.be.append((thread[rows], ts_ns[rows], is_begin, span_of_row[rows]))
        ends = rows[~is_begin]
        if len(ends):
            args = block.raw("args", ends)
            end_pos = np.flatnonzero(~is_begin)
            for k, text in zip(end_pos.tolist(), args.to_pylist(), strict=True):
                if text is not None and text.strip() not in ("{}", ""):
                    self.end_args.append((self.be_count + k, text))
        self.be_count += len(rows)

    def _async(self, block: ObjectBlock, cls: np.ndarray, ts_ns: np.ndarray, process: np.ndarray,
               span_of_row: np.ndarray) -> None:
        rows = np.flatnonzero(np.isin(cls, (ASYNC_BEGIN, ASYNC_END, ASYNC_INSTANT)))
        ids = block.strings("id", rows).to_pylist()
        id2 = block.raw("id2", rows).to_pylist()
        cats = block.strings("cat", rows).to_pylist()
        names = block.strings("name", rows).fill_null("").to_pylist()
        kinds = {ASYNC_BEGIN: "b", ASYNC_END: "e", ASYNC_INSTANT: "n"}
        for r, i, i2, cat, name in zip(rows.tolist(), ids, id2, cats, names, strict=True):
            ident = i if i is not None else (i2 or "")
            self.async_events.append((int(process[r]), cat or "", ident, int(ts_ns[r]), kinds[int(cls[r])],
                                      int(span_of_row[r]), name))

    def _flows(self, block: ObjectBlock, cls: np.ndarray, ts_ns: np.ndarray, thread: np.ndarray) -> None:
        rows = np.flatnonzero(cls == FLOW)
        ident = pc.coalesce(block.strings("id", rows), block.raw("id2", rows), pa.scalar(""))
        cat = block.strings("cat", rows).fill_null("")
        # Flow identity (cat + id) as text; numbered once for the whole input at the end (one C++ hash pass).
        keys = pc.binary_join_element_wise(cat, ident, "\x00")
        phase, _ = block.first_bytes("ph")
        bp, _ = block.first_bytes("bp")
        binds_enclosing = (phase[rows] != ord("f")) | (bp[rows] == ord("e"))
        self.flows.append((thread[rows], ts_ns[rows], phase[rows], binds_enclosing, keys))

    def _counters(self, block: ObjectBlock, cls: np.ndarray, ts_ns: np.ndarray, process: np.ndarray) -> None:
        rows = np.flatnonzero(cls == COUNTER)
        names = block.strings("name", rows).fill_null("").to_pylist()
        ids = block.strings("id", rows).to_pylist()
        args = block.raw("args", rows).to_pylist()
        skipped = 0
        for r, name, ident, text in zip(rows.tolist(), names, ids, args, strict=True):
            values = _decode_object(text)
            series = f"{name}[{ident}]" if ident is not None else name
            numeric = [(k, v) for k, v in values.items() if _is_number(v)]
            skipped += len(values) - len(numeric)
            for key, value in numeric:
                self.counters.append((int(ts_ns[r]), int(process[r]), series, key, float(value)))
        if skipped:
            self.problems["non-numeric counter values"] += skipped

    def _metadata(self, block: ObjectBlock, cls: np.ndarray, thread: np.ndarray, process: np.ndarray) -> None:
        rows = np.flatnonzero(cls == META)
        names = block.strings("name", rows).to_pylist()
        args = block.raw("args", rows).to_pylist()
        for r, name, text in zip(rows.tolist(), names, args, strict=True):
            self.registry.metadata(name, _decode_object(text), int(process[r]), int(thread[r]))

    # -- end of input -----------------------------------------------------------------------------------------
    def finish(self, complete: bool = True) -> Iterator[tuple[str, pa.RecordBatch]]:
        """Resolve everything that needed the whole input and yield the trace tables."""
        start, end, track = _take_all(self.starts), _take_all(self.ends), _take_all(self.tracks)
        if self.registry.lane_of:
            remap = self.registry.track_remap()
            track = np.where(track >= 0, remap[np.maximum(track, 0)], track)
        t_end = self.t_max if self.t_max is not None else 0
        merged_args = self._pair_begin_end(start, end, t_end)
        unmatched = pair_async(self.async_events, self.registry, start, end, track, t_end=t_end)
        for what, count in unmatched.items():
            self.problems[what] += count
        nest = nest_intervals(track, start, end)
        if nest.overlapping_slices:
            self.problems[f"slices on {nest.overlapping_tracks:,} thread(s) overlapping without nesting (laid out "
                          "on extra depth lanes)"] += nest.overlapping_slices
        flow_batch, unbound = flow_edges(self.flows, self.registry, start, end, track, nest=nest)
        if unbound:
            self.problems["flow events not inside any slice of their thread (dropped)"] += unbound
        labels = self.registry.labels(np.unique(track))
        yield from self._emit_spans(start, end, track, nest=nest, labels=labels, merged_args=merged_args)
        if self.counters:
            yield schema.COUNTER.name, self._counter_batch(labels)
        if flow_batch is not None and flow_batch.num_rows:
            yield schema.FLOW.name, flow_batch
        meta = {"profile_name": self.path.name}
        if self.t_min is not None:
            meta["first_hw_timestamp"] = self.t_min
            meta["last_hw_timestamp"] = max(self.t_max or self.t_min, int(end.max()) if len(end) else 0)
        yield schema.METADATA.name, metadata_batch(meta, complete=complete, tool="Chrome trace JSON")
        self._warn()

    def _pair_begin_end(self, start: np.ndarray, end: np.ndarray, t_end: int) -> dict[int, str]:
        if not self.be:
            return {}
        thread = np.concatenate([b[0] for b in self.be])
        ts = np.concatenate([b[1] for b in self.be])
        is_begin = np.concatenate([b[2] for b in self.be])
        span = np.concatenate([b[3] for b in self.be])
        partner, _, stray_ends = match_begin_end(thread, ts, is_begin)
        b_idx = np.flatnonzero(is_begin)
        matched = partner[b_idx] >= 0
        end[span[b_idx[matched]]] = ts[partner[b_idx[matched]]]
        never = span[b_idx[~matched]]
        end[never] = np.maximum(start[never], t_end)
        if len(never):
            self.problems["B events never ended (closed at the end of the trace)"] += len(never)
        if stray_ends:
            self.problems["E events without a matching B (dropped)"] += stray_ends
        merged: dict[int, str] = {}
        for k, text in self.end_args:
            if partner[k] >= 0:
                merged[int(span[partner[k]])] = text
        return merged

    def _emit_spans(self, start: np.ndarray, end: np.ndarray, track: np.ndarray, *, nest: Nesting,
                    labels: Labels, merged_args: dict[int, str]) -> Iterator[tuple[str, pa.RecordBatch]]:
        where = f"{self.path}: Span"
        for parked in self.spill.read():
            batch = parked
            ids = np.asarray(batch.column(schema.ID))
            if not len(ids):
                continue
            a, b = int(ids[0]), int(ids[-1]) + 1
            # Rows grouped by track and sorted by time within the batch: what the database loads fastest.
            within = np.lexsort((start[a:b], track[a:b]))
            if (within[1:] < within[:-1]).any():
                batch = parked.take(pa.array(within))
                ids = ids[within]
            rows = ids
            tr = pa.array(track[rows].astype(np.int32))
            parent = nest.parent[rows]
            args = batch.column(schema.ARGS)
            if merged_args:
                args = _merge_end_args(args, rows, merged_args)
            columns = {
                schema.ID: batch.column(schema.ID),
                schema.START_TS: start[rows],
                schema.END_TS: end[rows],
                schema.DURATION_NS: end[rows] - start[rows],
                schema.NAME: batch.column(schema.NAME),
                schema.CATEGORY: batch.column(schema.CATEGORY),
                schema.DEPTH: nest.depth[rows],
                schema.PARENT_ID: pa.array(parent, pa.int64(), mask=parent < 0),
                schema.TRACK_GROUP: pa.DictionaryArray.from_arrays(tr, labels.group),
                schema.TRACK_NAME: pa.DictionaryArray.from_arrays(tr, labels.name),
                schema.ARGS: args,
                schema.TRACK_ORDER: labels.order[track[rows]],
            }
            yield schema.SPAN.name, table_batch(schema.SPAN, columns, where)

    def _counter_batch(self, labels: Labels) -> pa.RecordBatch:
        ts, process, series, key, value = zip(*self.counters, strict=True)
        keys_of: dict[tuple[int, str], set[str]] = {}
        for p, s, k in zip(process, series, key, strict=True):
            keys_of.setdefault((p, s), set()).add(k)
        names = [s if len(keys_of[(p, s)]) == 1 else f"{s}.{k}" for p, s, k in zip(process, series, key, strict=True)]
        proc_group = self.registry.labels_of_processes(labels)
        groups = [proc_group[p] for p in process]
        return table_batch(schema.COUNTER, {
            schema.TIMESTAMP: pa.array(ts, pa.int64()),
            schema.NAME: pa.array(names, pa.string()),
            schema.VALUE: pa.array(value, pa.float64()),
            schema.TRACK_GROUP: pa.array(groups, pa.string()),
        }, f"{self.path}: Counter")

    def _warn(self) -> None:
        parts = [f"{count:,} {what}" for what, count in self.problems.items() if count]
        if self.unknown_phases:
            shown = ", ".join(f"{ph} x{c:,}" for ph, c in self.unknown_phases.most_common(6))
            parts.append(f"{sum(self.unknown_phases.values()):,} events of unsupported phases skipped ({shown})")
        if parts:
            warnings.warn(TraceImportWarning(f"{self.path}: " + "; ".join(parts)), stacklevel=3)


def exact_times(block: ObjectBlock, key: str, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``key``'s values (microseconds) as exact int64 nanoseconds and a valid mask, for all rows or ``rows``.

    Numbers the kernel parsed are taken as they are; the rest (numbers in strings, exponents, huge values, blocks
    read by the vectorised scanner) go through the exact decimal cast.
    """
    parsed = block.numbers(key)
    if parsed is None:
        return decimal_text_to_ns(block.strings(key, rows))
    values, state = parsed
    if rows is not None:
        values, state = values[rows], state[rows]
    ok = state == json_kernel.NUM_OK
    slow = np.flatnonzero(state == json_kernel.NUM_SLOW)
    if len(slow):
        values = values.copy()
        sel = slow if rows is None else rows[slow]
        values[slow], ok[slow] = decimal_text_to_ns(block.strings(key, sel))
    return values, ok


def _take_all(parts: list[np.ndarray]) -> np.ndarray:
    """The parts concatenated, emptying the list (so only one copy is alive at a time per column)."""
    out = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    parts.clear()
    return out


def _compact_json(args: pa.Array) -> pa.Array:
    """Pretty-printed JSON texts without their line breaks and indentation.

    A raw line break cannot occur inside a JSON string, so removing every line break with the blanks around it
    only touches whitespace between tokens.
    """
    return pc.replace_substring_regex(args, r"[ \t\r]*\n[ \t\r]*", "")


def _decode_object(text: str | None) -> dict[str, object]:
    if not text:
        return {}
    try:
        value = _JSON.decode(text)
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _merge_end_args(args: pa.Array, rows: np.ndarray, merged: dict[int, str]) -> pa.Array:
    """Args of B slices merged with the args of their E events (E's keys win), as the format specifies."""
    hits = [k for k, sid in enumerate(rows.tolist()) if sid in merged]
    if not hits:
        return args
    values = args.to_pylist()
    for k in hits:
        both = {**_decode_object(values[k]), **_decode_object(merged[int(rows[k])])}
        values[k] = msgspec.json.encode(both).decode()
    return pa.array(values, pa.string())
