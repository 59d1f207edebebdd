"""Rasterisation of a ``Trace.window`` result: one strip code per pixel per row (level of detail by construction).

A zoomed-out row of millions of instructions and a zoomed-in row of five are drawn the same way: one cell per pixel
whose colour is the pixel's category (opcode, engine or layer) and whose shade is its busy fraction.  When few events
are in view they are rasterised exactly (an event wider than a few pixels is a solid bar with a darker first pixel
marking its start); when many are, the database's per-pixel buckets (busy time and dominant name) are.

Pure functions: :func:`timeline_rows` (tracks -> rows) and :func:`rasterize` (a window -> a :class:`StripFrame`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import db_schema as dbs
from profiler.figures import palette as pal
from tracer import schema as ts

#: Events narrower than this many pixels get no edge mark.
EDGE_MIN_PX = 4
#: Events shipped for exact hover when a window shows no more than this many.
HOVER_EVENT_LIMIT = 1500

_KIND_ORDER = {kind: i for i, kind in enumerate(dbs.TRACK_KINDS)}
_DMA_KIND = "dma_queue"
_SPAN_KIND = "span"
_ENGINE_KIND = "engine"
_COUNTER_KIND = "counter"
#: Span track holding the layer each instruction belongs to (colour-by-layer at coarse zoom).
LAYER_TRACK_NAME = ts.LAYER
#: Marks the depth in the label of a span row's deeper levels: ``thread 12 (python) ›3``.
DEPTH_MARK = "›"


class WindowLike(Protocol):
    """What :func:`rasterize` needs of :class:`profiler.window.Window`."""

    start_ns: int
    end_ns: int
    width_px: int
    resolution_ns: int
    events: pa.Table
    buckets: pa.Table


@dataclass(frozen=True)
class TimelineRow:
    """One row of the timeline: a track, or the DMA queues of one core collapsed into one row."""

    label: str
    track_ids: tuple[int, ...]
    kind: str
    core: int | None
    group: str
    #: Category of the whole row in the engine colour mode.
    engine_category: str
    #: A span row's track name (its label without the level mark), and how many levels below the row's first
    #: it lies (0: the first; a thread's nested slices, a recording's lanes of pipelined layers: 1, 2, ...).
    span_name: str = ""
    level: int = 0
    #: The row was drawn among rows of several groups (cores, hosts) before a row filter kept only some: its label
    #: keeps naming its group (:func:`row_labels`), so ``Tensor`` of core 1 alone still reads ``NC1 · Tensor``.
    among_groups: bool = False

    @property
    def collapsed(self) -> bool:
        """True for a row standing for several tracks."""
        return len(self.track_ids) > 1


def _engine_category(kind: str, name: str) -> str:
    if kind == _ENGINE_KIND:
        for engine in ts.ENGINES:
            if name.startswith(engine):
                return engine
        return name
    if kind == _DMA_KIND:
        return "DMA"
    if kind == _SPAN_KIND:
        return "Span"
    return "Host"


def timeline_rows(tracks: pa.Table, collapse_dma: bool | Collection[int | None] = False, *,
                  span_levels: int | None = None) -> list[TimelineRow]:
    """The rows of the timeline, in display order, from the ``track`` table.

    Counter tracks are left out (they are drawn as lanes).  Rows are grouped by core, then ordered by the
    track's ``sort_order``.

    Args:
        tracks: a table with the columns of :data:`profiler.db_schema.TRACK`.
        collapse_dma: True to collapse every core's DMA queues into one row, or the cores whose queues collapse.
        span_levels: show at most this many levels of each span row (a thread's outermost slices and the ones
            nested in them, ...; None: every level).

    Returns:
        The rows, top to bottom.
    """
    recs = sorted(
        (r for r in tracks.to_pylist() if r["kind"] != _COUNTER_KIND),
        key=lambda r: (r["core"] is None, r["core"] if r["core"] is not None else 0, r["sort_order"],
                       _KIND_ORDER.get(r["kind"], 99), r[dbs.TRACK_ID]),
    )

    def collapsed(core: int | None) -> bool:
        if isinstance(collapse_dma, bool):
            return collapse_dma
        return core in collapse_dma

    rows: list[TimelineRow] = []
    dma_row_index: dict[int | None, int] = {}
    top = _top_depths(recs)
    for r in recs:
        core, kind, name = r["core"], r["kind"], r[ts.NAME]
        group = r["group_name"] or (f"NeuronCore {core}" if core is not None else "host")
        depth = r.get(dbs.SPAN_DEPTH)
        if kind == _SPAN_KIND:
            level = 0 if depth is None else depth - top[(core, r["group_name"], name)]
            if span_levels is not None and level >= span_levels:
                continue
            label = f"{name} {DEPTH_MARK}{depth}" if level else name
            rows.append(TimelineRow(label, (r[dbs.TRACK_ID],), kind, core, group, _engine_category(kind, name),
                                    span_name=name, level=level))
            continue
        if kind == _DMA_KIND and collapsed(core):
            if core in dma_row_index:
                i = dma_row_index[core]
                old = rows[i]
                ids = (*old.track_ids, r[dbs.TRACK_ID])
                rows[i] = TimelineRow(f"DMA ({len(ids)} queues)", ids, kind, core, group, "DMA")
                continue
            dma_row_index[core] = len(rows)
            rows.append(TimelineRow("DMA (1 queue)", (r[dbs.TRACK_ID],), kind, core, group, "DMA"))
            continue
        rows.append(TimelineRow(name, (r[dbs.TRACK_ID],), kind, core, group, _engine_category(kind, name)))
    return rows


def _top_depths(recs: Sequence[dict[str, Any]]) -> dict[tuple[Any, Any, Any], int]:
    """The first (lowest) depth of each span row's tracks, by (core, group, name)."""
    top: dict[tuple[Any, Any, Any], int] = {}
    for r in recs:
        depth = r.get(dbs.SPAN_DEPTH)
        if r["kind"] == _SPAN_KIND and depth is not None:
            key = (r["core"], r["group_name"], r[ts.NAME])
            top[key] = min(depth, top.get(key, depth))
    return top


def row_labels(rows: Sequence[TimelineRow]) -> list[str]:
    """Y-axis labels: the row name, prefixed with its core where a trace has several groups (not on the deeper
    levels of a span row, which follow their first level)."""
    groups = {r.group for r in rows}
    if len(groups) <= 1 and not any(r.among_groups for r in rows):
        return [r.label for r in rows]
    labels = []
    for i, r in enumerate(rows):
        follows = r.level > 0 and i > 0 and rows[i - 1].group == r.group and rows[i - 1].span_name == r.span_name
        labels.append(r.label if follows else f"{_short_group(r.group)} · {r.label}")
    return labels


def _short_group(group: str) -> str:
    return group.replace("NeuronCore ", "NC")


@dataclass
class StripFrame:
    """A window rasterised to one strip code per pixel per row, plus what hover needs.

    ``codes[row, px]`` covers ``[start_ns + px * resolution_ns, start_ns + (px + 1) * resolution_ns)``.
    """

    start_ns: int
    end_ns: int
    resolution_ns: int
    codes: np.ndarray
    #: Category name of every slot that appears in ``codes`` (legend), slot -> name; a slot that several names in
    #: view share (more names than colours) is labelled with all of them (:func:`legend_label`), never just one.
    legend: dict[int, str]
    #: Per row: True when the row was drawn from exact events (or is empty), False from buckets.
    exact: np.ndarray
    #: Events of the exact rows, for hover (None when more than HOVER_EVENT_LIMIT are in view); times in ns.
    hover_events: dict[str, list[Any]] | None = None
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def width_px(self) -> int:
        """Number of pixels (columns) of the frame."""
        return int(self.codes.shape[1])

    @property
    def n_events(self) -> int:
        """Exact events drawn in this frame."""
        return self.counts.get("events", 0)


#: A legend label names at most this many of the names sharing its colour (then "+N more").
LEGEND_NAMES = 3


def _note(legend: dict[int, list[str]], slot: int, name: str | None) -> None:
    name = name or pal.OTHER
    names = legend.setdefault(slot, [])
    if name not in names:
        names.append(name)


def legend_label(names: Sequence[str]) -> str:
    """The legend (and coarse hover) label of a colour shared by ``names``: ``"A / B"``, ``"A / B / C +2 more"``."""
    shown = " / ".join(names[:LEGEND_NAMES])
    return shown if len(names) <= LEGEND_NAMES else f"{shown} +{len(names) - LEGEND_NAMES} more"


def _name_slots(names: pa.ChunkedArray | pa.Array, palette: pal.CategoryPalette,
                legend: dict[int, list[str]]) -> np.ndarray:
    """Slot per row of a string column (dictionary-encode, map the few distinct names)."""
    if len(names) == 0:
        return np.zeros(0, dtype=np.int64)
    enc = pc.dictionary_encode(names)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks() if enc.num_chunks != 1 else enc.chunk(0)
    dictionary = enc.dictionary.to_pylist()
    dict_slots = palette.slots(dictionary)
    idx = enc.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    nulls = enc.indices.is_null().to_numpy(zero_copy_only=False)
    slots = np.where(nulls, pal.OTHER_SLOT, dict_slots[idx] if len(dict_slots) else pal.OTHER_SLOT)
    for name, slot in zip(dictionary, dict_slots.tolist(), strict=True):
        _note(legend, slot, name)
    return slots.astype(np.int64)


def _union_pieces(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals [starts, ends) as disjoint pieces, in order (overlapping events count once).
    (``profiler.analyses.intervals.merge`` does the same, but importing the analyses package costs the timeline's
    start ~0.4 s; zero-length events are kept here and add nothing.)"""
    if len(starts) < 2:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def _busy_from_intervals(starts: np.ndarray, ends: np.ndarray, w0: int, res: int, n: int, *,
                         lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """Per pixel, the share of its time some interval covers (their union: overlapping events count once, as in
    the index's buckets), clipped to [0, 1].  With ``lo`` / ``hi`` (the window), a pixel sticking out of the window
    is measured over its part inside it (the events outside the window are not fetched)."""
    edges = w0 + res * np.arange(n + 1, dtype=np.int64)
    s, e = _union_pieces(starts, ends)
    if lo is not None or hi is not None:
        a = edges[0] if lo is None else lo
        b = edges[-1] if hi is None else hi
        s, e = np.clip(s, a, b), np.clip(e, a, b)
    cs = np.concatenate(([0], np.cumsum(s, dtype=np.float64)))
    ce = np.concatenate(([0], np.cumsum(e, dtype=np.float64)))
    ks = np.searchsorted(s, edges, side="left")
    ke = np.searchsorted(e, edges, side="left")
    # covered(t) = sum_{s_i < t} (t - s_i) - sum_{e_i < t} (t - e_i), on disjoint pieces sorted by start (and end)
    covered = (ks * edges.astype(np.float64) - cs[ks]) - (ke * edges.astype(np.float64) - ce[ke])
    length = np.full(n, float(res))
    if lo is not None or hi is not None:
        inside = np.minimum(edges[1:], b) - np.maximum(edges[:-1], a)
        length = np.maximum(inside, 1).astype(np.float64)
    return np.clip(np.diff(covered) / length, 0.0, 1.0)


def _paint_longest(p0: np.ndarray, p1: np.ndarray, dur: np.ndarray, slots: np.ndarray, n: int) -> np.ndarray:
    """Per pixel, the slot of the longest event touching it (-1 where none does)."""
    spans = np.maximum(p1 - p0, 0)
    total = int(spans.sum())
    out = np.full(n, -1, dtype=np.int64)
    if total == 0:
        return out
    owner = np.repeat(np.arange(len(p0)), spans)
    offsets = np.arange(total) - np.repeat(np.cumsum(spans) - spans, spans)
    px = p0[owner] + offsets
    rank = np.argsort(np.argsort(dur, kind="stable"), kind="stable")
    key = np.full(n, -1, dtype=np.int64)
    np.maximum.at(key, px, rank[owner] * pal.N_SLOTS + slots[owner])
    has = key >= 0
    out[has] = key[has] % pal.N_SLOTS
    return out


def _track_positions(rows: Sequence[TimelineRow]) -> dict[int, int]:
    return {tid: i for i, row in enumerate(rows) for tid in row.track_ids}


def rasterize(window: WindowLike, rows: Sequence[TimelineRow], palette: pal.CategoryPalette,
              colour_by: str = "opcode") -> StripFrame:
    """Rasterise a ``Trace.window`` result into one strip code per pixel per row.

    Args:
        window: the window (its events and buckets tables follow ``db_schema.WINDOW_EVENTS`` / ``WINDOW_BUCKETS``).
        rows: the rows to draw (from :func:`timeline_rows`); tracks of the window not in a row are ignored.
        palette: the name -> colour slot assignment (opcodes / layers); the engine mode uses its own.
        colour_by: ``opcode``, ``engine`` or ``layer``.

    Returns:
        The frame; pixel ``i`` covers ``[start_ns + i * res, start_ns + (i + 1) * res)``.
    """
    if colour_by not in pal.COLOUR_MODES:
        raise ValueError(f"colour_by must be one of {', '.join(pal.COLOUR_MODES)}, not {colour_by!r}")
    res = max(int(window.resolution_ns), 1)
    w0 = (int(window.start_ns) // res) * res  # the bucket grid (Window.bucket_start_ns)
    n = max(int(-(-(int(window.end_ns) - w0) // res)), 1)
    n_rows = len(rows)
    busy = np.zeros((n_rows, n), dtype=np.float64)
    slots = np.full((n_rows, n), pal.OTHER_SLOT, dtype=np.int64)
    exact = np.zeros(n_rows, dtype=bool)
    edge_mask = np.zeros((n_rows, n), dtype=bool)
    legend: dict[int, list[str]] = {}
    row_of = _track_positions(rows)
    engine_palette = pal.CategoryPalette.for_engines()

    events = window.events
    buckets = window.buckets
    ev_tracks = events.column(dbs.TRACK_ID).to_numpy() if events.num_rows else np.zeros(0, np.int64)
    bk_tracks = buckets.column(dbs.TRACK_ID).to_numpy() if buckets.num_rows else np.zeros(0, np.int64)
    tracks_with_events = set(np.unique(ev_tracks).tolist())
    tracks_with_buckets = set(np.unique(bk_tracks).tolist()) - tracks_with_events

    # Layer per pixel from the layer span tracks (colour-by-layer where only buckets are known).
    layer_slots: dict[int | None, np.ndarray] = {}

    name_col = ts.LAYER if colour_by == "layer" else ts.NAME
    ev_slots = _name_slots(events.column(name_col), palette, legend) if events.num_rows and colour_by != "engine" \
        else np.zeros(events.num_rows, np.int64)
    bucket_legend: dict[int, list[str]] = {}
    bk_slots = _name_slots(buckets.column(dbs.TOP_NAME), palette, bucket_legend) \
        if buckets.num_rows and colour_by != "engine" else np.zeros(buckets.num_rows, np.int64)
    if colour_by == "opcode":
        for slot, names in bucket_legend.items():
            for name in names:
                _note(legend, slot, name)
    span_name_slots = None
    if colour_by == "layer" and events.num_rows:
        span_name_slots = _name_slots(events.column(ts.NAME), palette, {})

    ev_start = events.column(ts.START_TS).to_numpy() if events.num_rows else np.zeros(0, np.int64)
    ev_end = events.column(ts.END_TS).to_numpy() if events.num_rows else np.zeros(0, np.int64)
    bk_start = buckets.column(ts.START_TS).to_numpy() if buckets.num_rows else np.zeros(0, np.int64)
    bk_end = buckets.column(ts.END_TS).to_numpy() if buckets.num_rows else np.zeros(0, np.int64)
    bk_busy = buckets.column(dbs.BUSY_NS).to_numpy() if buckets.num_rows else np.zeros(0, np.int64)

    per_track_busy: dict[int, np.ndarray] = {}
    per_track_slots: dict[int, np.ndarray] = {}
    per_track_edges: dict[int, np.ndarray] = {}
    for tid in sorted(row_of):
        if tid in tracks_with_events:
            w_end = w0 + n * res
            sel = np.flatnonzero((ev_tracks == tid) & (ev_start < w_end)
                                 & ((ev_end > w0) | (ev_start >= w0)))
            s, e = ev_start[sel], np.maximum(ev_end[sel], ev_start[sel])
            b = _busy_from_intervals(s, e, w0, res, n, lo=int(window.start_ns), hi=int(window.end_ns))
            p0 = np.clip((s - w0) // res, 0, n)
            p1 = np.clip(-(-(e - w0) // res), 0, n)
            p1 = np.maximum(p1, np.minimum(p0 + 1, n))  # zero-length events still own a pixel
            row = rows[row_of[tid]]
            if colour_by == "engine":
                ss = np.full(len(sel), engine_palette.slot(row.engine_category))
            elif colour_by == "layer" and row.kind == _SPAN_KIND and span_name_slots is not None:
                ss = span_name_slots[sel]
            else:
                ss = ev_slots[sel]
            sl = _paint_longest(p0, p1, e - s, ss, n)
            edges = np.zeros(n, dtype=bool)
            wide = (p1 - p0) >= EDGE_MIN_PX
            edges[p0[wide & (p0 < n)]] = True
            b = np.where((sl >= 0) & (b == 0), 1.0 / pal.BUSY_SHADES, b)  # zero-length events stay visible
            per_track_busy[tid], per_track_slots[tid], per_track_edges[tid] = b, np.maximum(sl, 0), edges
        else:
            sel = np.flatnonzero(bk_tracks == tid)
            b = np.zeros(n, dtype=np.float64)
            sl = np.full(n, pal.OTHER_SLOT, dtype=np.int64)
            if len(sel):
                bs, be = bk_start[sel], bk_end[sel]
                p0 = np.clip((bs - w0) // res, 0, n - 1)
                p1 = np.clip(-(-(be - w0) // res), 1, n)
                p1 = np.maximum(p1, p0 + 1)
                frac = bk_busy[sel] / np.maximum(be - bs, 1)
                spans = p1 - p0
                owner = np.repeat(np.arange(len(sel)), spans)
                px = p0[owner] + (np.arange(int(spans.sum())) - np.repeat(np.cumsum(spans) - spans, spans))
                b[px] = frac[owner]
                row = rows[row_of[tid]]
                if colour_by == "engine":
                    sl[:] = engine_palette.slot(row.engine_category)
                else:
                    sl[px] = bk_slots[sel][owner]
                    if colour_by == "layer" and row.kind == _SPAN_KIND:
                        for slot in np.unique(bk_slots[sel]).tolist():
                            for name in bucket_legend.get(slot, [pal.OTHER]):
                                _note(legend, slot, name)
            per_track_busy[tid], per_track_slots[tid] = b, sl
            per_track_edges[tid] = np.zeros(n, dtype=bool)

    if colour_by == "layer":
        for row in rows:
            # the layer row's lanes (pipelined layers overlap): a pixel takes the first lane's layer busy there
            if row.kind == _SPAN_KIND and row.span_name == LAYER_TRACK_NAME:
                tid = row.track_ids[0]
                lane = np.where(per_track_busy[tid] > 0, per_track_slots[tid], pal.OTHER_SLOT)
                have = layer_slots.get(row.core)
                layer_slots[row.core] = lane if have is None else np.where(have == pal.OTHER_SLOT, lane, have)
        _apply_layer_fallback(rows, per_track_slots, tracks_with_events, layer_slots)

    for i, row in enumerate(rows):
        if len(row.track_ids) == 1:
            tid = row.track_ids[0]
            busy[i], slots[i], edge_mask[i] = per_track_busy[tid], per_track_slots[tid], per_track_edges[tid]
            exact[i] = tid not in tracks_with_buckets
        else:  # collapsed DMA queues: the busiest member per pixel
            stack_b = np.vstack([per_track_busy[t] for t in row.track_ids])
            stack_s = np.vstack([per_track_slots[t] for t in row.track_ids])
            stack_e = np.vstack([per_track_edges[t] for t in row.track_ids])
            arg = np.argmax(stack_b, axis=0)
            busy[i] = stack_b[arg, np.arange(n)]
            slots[i] = stack_s[arg, np.arange(n)]
            edge_mask[i] = stack_e[arg, np.arange(n)]
            exact[i] = not any(t in tracks_with_buckets for t in row.track_ids)

    codes = pal.encode(slots, busy)
    edge_codes = (1 + slots * pal.SHADES + pal.EDGE_SHADE).astype(np.uint8)
    codes = np.where(edge_mask & (codes > 0), edge_codes, codes)

    if colour_by == "engine":
        legend = {}
        for r in rows:
            _note(legend, engine_palette.slot(r.engine_category), r.engine_category)
    present = set(np.unique(slots[busy > 0]).tolist())
    labels = {s: legend_label(names) for s, names in legend.items() if s in present}
    if pal.OTHER_SLOT in present:
        labels.setdefault(pal.OTHER_SLOT, pal.OTHER)

    hover = _hover_events(events, row_of, 0) if 0 < events.num_rows <= HOVER_EVENT_LIMIT else None
    return StripFrame(w0, int(window.end_ns), res, codes, labels, exact, hover,
                      {"events": int(events.num_rows), "buckets": int(buckets.num_rows)})


def _apply_layer_fallback(rows: Sequence[TimelineRow], per_track_slots: dict[int, np.ndarray],
                          tracks_with_events: set[int], layer_slots: dict[int | None, np.ndarray]) -> None:
    """Colour-by-layer for bucket rows: the layer running at that pixel on the core's layer span track."""
    if not layer_slots:
        return
    any_layer = next(iter(layer_slots.values()))
    for row in rows:
        if row.kind == _SPAN_KIND:
            continue
        layer = layer_slots.get(row.core, any_layer)
        for tid in row.track_ids:
            if tid not in tracks_with_events:
                per_track_slots[tid] = layer.copy()


def _hover_events(events: pa.Table, row_of: dict[int, int], origin_ns: int) -> dict[str, list[Any]]:
    """Events as compact columns for client-side hover: row, start/end (ns from origin), name, source, id."""
    tids = events.column(dbs.TRACK_ID).to_pylist()
    keep = [i for i, t in enumerate(tids) if t in row_of]
    take = events.take(pa.array(keep, pa.int64())) if len(keep) != events.num_rows else events
    start = take.column(ts.START_TS).to_numpy() - origin_ns
    end = take.column(ts.END_TS).to_numpy() - origin_ns
    return {
        "row": [row_of[t] for t in take.column(dbs.TRACK_ID).to_pylist()],
        "start": start.tolist(),
        "end": end.tolist(),
        "name": take.column(ts.NAME).to_pylist(),
        "source": take.column("source").to_pylist(),
        "table": take.column(dbs.TABLE).to_pylist(),
        "id": take.column(ts.ID).to_pylist(),
    }


