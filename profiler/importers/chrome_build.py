"""Chrome trace events -> trace tables: the per-block bookkeeping, then the end-of-input resolution.

:class:`ChromeTraceBuilder` receives decoded blocks of events (:func:`profiler.importers.chrome_decode.decode_block`,
which runs on the stream's background thread) and keeps only what the end of the input can change: per slice its
start, end and track (24 bytes), plus the begin/end, async, flow and counter events, which are few next to complete
(``X``) events.  Slice names and argument JSON go to a temporary :class:`~profiler.importers.spill.Spill`.
:meth:`ChromeTraceBuilder.finish` then pairs ``B``/``E`` and async events, computes every slice's depth and parent
(:mod:`profiler.importers.nesting`), binds flows to slices, names the tracks, and yields ``Span``, ``Counter``,
``Flow`` and ``Metadata`` batches.
"""

from __future__ import annotations

import os
import re
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from profiler.importers.chrome_decode import (
    ASYNC_BEGIN,
    ASYNC_INSTANT,
    PENDING,
    DecodedBlock,
    decode_object,
)
from profiler.importers.chrome_tracks import GLOBAL_TRACK, Labels, Registry, flow_edges, pair_async
from profiler.importers.common import TraceImportWarning, metadata_batch, table_batch
from profiler.importers.nesting import Nesting, match_begin_end, nest_intervals
from profiler.importers.spill import Spill
from tracer import schema

#: Span rows per emitted batch.
EMIT_ROWS = 1 << 16


class ChromeTraceBuilder:
    """Accumulates Chrome events block by block; :meth:`finish` yields the trace tables."""

    def __init__(self, path: Path, spill_dir: str | os.PathLike[str] | None = None) -> None:
        self.path = path
        self.registry = Registry()
        self.spill = Spill(spill_dir)
        self.spill_first_ids: list[int] = []   # first slice id of each spilled batch
        self.next_id = 0
        self.events = 0
        self.starts: list[np.ndarray] = []
        self.ends: list[np.ndarray] = []
        self.tracks: list[np.ndarray] = []
        self.be: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []   # thread, ts, is_begin, span
        self.end_args: list[tuple[int, str]] = []         # (index among B/E events, args JSON of the E)
        self.be_count = 0
        self.async_events: list[tuple[int, str, str, int, str, int, str]] = []
        self.flows: list[tuple[np.ndarray, ...]] = []     # thread, ts, phase byte, binds-enclosing, key (2 columns)
        self.flow_category_codes: dict[str, int] = {}
        self.flow_text_ids: dict[str, int] = {}
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
    def add(self, block: DecodedBlock) -> None:
        """Take in one decoded block of events."""
        n = block.n
        if n == 0:
            return
        self.events += n
        self.problems.update(block.problems)
        self.unknown_phases.update(block.unknown_phases)
        if block.t_min is not None:
            self.t_min = block.t_min if self.t_min is None else min(self.t_min, block.t_min)
            self.t_max = block.t_max if self.t_max is None else max(self.t_max, block.t_max)  # type: ignore[type-var]
        thread, process = self._threads(block)
        span_of_row = self._spans(block, thread, process)
        if len(block.be_rows):
            rows = block.be_rows
            self.be.append((thread[rows], block.ts[rows], block.be_is_begin, span_of_row[rows]))
            self.end_args.extend((self.be_count + k, text) for k, text in block.end_args)
            self.be_count += len(rows)
        ts = block.ts
        for r, ident, cat, name, kind in block.async_events:
            self.async_events.append((int(process[r]), cat, ident, int(ts[r]), kind, int(span_of_row[r]), name))
        if len(block.flow_rows):
            rows = block.flow_rows
            self.flows.append((thread[rows], ts[rows], block.flow_phase, block.flow_binds_enclosing,
                               *self._flow_keys(block)))
        for r, series, key, value in block.counters:
            self.counters.append((int(ts[r]), int(process[r]), series, key, value))
        for r, name, args in block.metadata:
            self.registry.metadata(name, args, int(process[r]), int(thread[r]))

    def _flow_keys(self, block: DecodedBlock) -> tuple[np.ndarray, np.ndarray]:
        """Flow identities (category + id text) as two int64 columns: ``2 * category code`` and the integer id, or
        ``2 * category code + 1`` and a number given to the id's text when it is not an integer."""
        cats = np.array([self._flow_category_code(c) for c in block.flow_categories], np.int64)
        cat = cats[block.flow_category] * 2 if len(cats) else np.zeros(0, np.int64)
        value = block.flow_id.copy()
        if block.flow_id_text:
            other = np.flatnonzero(~block.flow_integer)
            for k, text in zip(other.tolist(), block.flow_id_text, strict=True):
                number = _canonical_integer(text)
                if number is not None:
                    value[k] = number
                else:
                    value[k] = self.flow_text_ids.setdefault(text, len(self.flow_text_ids))
                    cat[k] += 1   # odd: the id is a text's number
        return cat, value

    def _flow_category_code(self, category: str) -> int:
        return self.flow_category_codes.setdefault(category, len(self.flow_category_codes))

    def _threads(self, block: DecodedBlock) -> tuple[np.ndarray, np.ndarray]:
        """(thread index, process index) of every event."""
        th = block.threads
        if th.integer is not None and len(th.text_rows) == 0:
            thread = self.registry.rows_of_integers(th.pid, th.tid)  # type: ignore[arg-type]
        else:
            thread = np.empty(block.n, np.int64)
            if th.integer is not None:
                f = np.flatnonzero(th.integer)
                thread[f] = self.registry.rows_of_integers(th.pid[f], th.tid[f])  # type: ignore[index]
            thread[th.text_rows], _ = self.registry.rows(th.pid_text, th.tid_text)  # type: ignore[arg-type]
        return thread, self.registry.thread_processes(thread)

    def _spans(self, block: DecodedBlock, thread: np.ndarray, process: np.ndarray) -> np.ndarray:
        rows = block.span_rows
        span_of_row = np.full(block.n, -1, np.int64)
        if not len(rows):
            return span_of_row
        ids = np.arange(self.next_id, self.next_id + len(rows), dtype=np.int64)
        self.spill_first_ids.append(self.next_id)
        self.next_id += len(rows)
        span_of_row[rows] = ids
        if block.x_end_max is not None:
            self.t_max = max(self.t_max or 0, block.x_end_max)
        c = block.cls[rows]
        track = self.registry.thread_tracks(thread[rows])
        scope = block.scope
        track[scope == ord("g")] = GLOBAL_TRACK
        p = np.flatnonzero(scope == ord("p"))
        if len(p):
            track[p] = self.registry.process_tracks(process[rows[p]])
        track[(c == ASYNC_BEGIN) | (c == ASYNC_INSTANT)] = PENDING
        self.spill.write_stream(block.spill)
        self.starts.append(block.start)
        self.ends.append(block.end)
        self.tracks.append(track)
        return span_of_row

    # -- end of input -----------------------------------------------------------------------------------------
    def finish(self, complete: bool = True,
               other: dict[str, Any] | None = None) -> Iterator[tuple[str, pa.RecordBatch]]:
        """Resolve everything that needed the whole input and yield the trace tables; ``other``: Metadata fields
        the file's ``otherData`` holds (:func:`profiler.importers.chrome_json.other_metadata`)."""
        start, end, track = _take_all(self.starts), _take_all(self.ends), _take_all(self.tracks)
        own_threads = None
        if self.registry.lane_of:
            own_threads = track
            remap = self.registry.track_remap()
            track = np.where(track >= 0, remap[np.maximum(track, 0)], track)
        t_end = self.t_max if self.t_max is not None else 0
        merged_args = self._pair_begin_end(start, end, t_end)
        unmatched = pair_async(self.async_events, self.registry, start, end, track, t_end=t_end)
        for what, count in unmatched.items():
            self.problems[what] += count
        nest = nest_intervals(track, start, end)
        if nest.overlapping_slices:
            # rows a trnprof export put on lane threads ("lane_of") overlap once back on one track: that is the
            # export's layout, not a fault of the file; what overlaps within a thread of the file is
            within = nest if own_threads is None else nest_intervals(own_threads, start, end)
            if within.overlapping_slices:
                self.problems[f"slices on {within.overlapping_tracks:,} thread(s) overlapping without nesting (laid "
                              "out on extra depth lanes)"] += within.overlapping_slices
        flow_batch, unbound = flow_edges(self.flows, self.registry, start, end, track, nest=nest)
        if unbound:
            self.problems["flow events not inside any slice of their thread (dropped)"] += unbound
        labels = self.registry.labels(nest.segments[:, 0])   # the tracks in use, one segment each
        yield from self._emit_spans(start, end, track, nest=nest, labels=labels, merged_args=merged_args)
        if self.counters:
            yield schema.COUNTER.name, self._counter_batch(labels)
        if flow_batch is not None and flow_batch.num_rows:
            yield schema.FLOW.name, flow_batch
        meta = {**(other or {}), "profile_name": (other or {}).get("profile_name") or self.path.name}
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
        for first_id, parked in zip(self.spill_first_ids, self.spill.read(), strict=True):
            batch = parked
            a, b = first_id, first_id + batch.num_rows
            if a == b:
                continue
            ids = np.arange(a, b, dtype=np.int64)
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
                schema.ID: ids,
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


_INTEGER = re.compile(r"-?[0-9]{1,19}")


def _canonical_integer(text: str | None) -> int | None:
    """The integer a flow id's text spells exactly as Python prints it (``"5"``, not ``"05"`` or ``"-0"``), within
    the range the kernel parses; else None."""
    if not text or not _INTEGER.fullmatch(text):  # (not str.isdigit: "--5" and "²" pass it and int() rejects them)
        return None
    value = int(text)
    return value if str(value) == text and abs(value) < 2**62 else None


def _take_all(parts: list[np.ndarray]) -> np.ndarray:
    """The parts concatenated, emptying the list (so only one copy is alive at a time per column)."""
    out = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    parts.clear()
    return out


def _merge_end_args(args: pa.Array, rows: np.ndarray, merged: dict[int, str]) -> pa.Array:
    """Args of B slices merged with the args of their E events (E's keys win), as the format specifies."""
    hits = [k for k, sid in enumerate(rows.tolist()) if sid in merged]
    if not hits:
        return args
    values = args.to_pylist()
    for k in hits:
        both = {**decode_object(values[k]), **decode_object(merged[int(rows[k])])}
        values[k] = msgspec.json.encode(both).decode()
    return pa.array(values, pa.string())
