"""The counter lanes' data, read from a ``Trace`` at a cost set by pixels, not events: per-engine busy %
(``Trace.utilization``), DMA throughput and Tensor HFU over time (``Trace.series``) and Counter tracks such as SBUF
usage (``Trace.counter_window``).

:func:`timeline_lanes` gives every lane a timeline shows, in order — one busy % lane per core, one DMA throughput
lane and one HFU lane (a series per core), one lane per Counter track — for the dashboard and the notebook alike.
A lane gets one point per :data:`profiler.figures.lanes.PX_PER_POINT` pixels; lanes without data (no engine, no DMA
queue, no Tensor peak FLOP rate, no counter) are left out.  :func:`submit_timeline_lanes` runs the same queries
concurrently on an executor (the dashboard overlaps them with the strips' window query).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, wait
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import db_schema as dbs
from profiler.figures import palette as pal
from profiler.figures.lanes import PX_PER_POINT, Lane
from tracer import schema as ts

DMA_LANE_TITLE = "DMA GB/s"
HFU_LANE_TITLE = "HFU %"
BUSY_LANE_TITLE = "busy %"
#: Series of a Counter track's lane: the largest value in each bucket and the time-weighted mean.
COUNTER_SERIES = {"max": dbs.MAX_VALUE, "mean": dbs.MEAN_VALUE}


def _points(width_px: int) -> int:
    return max(int(width_px) // PX_PER_POINT, 1)


def _floats(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A float column as float64 with NaN for nulls (plotly leaves a gap)."""
    return pc.fill_null(pc.cast(column, pa.float64()), np.nan).to_numpy(zero_copy_only=False)


def _core_label(core: Any, several: bool, default: str) -> str:
    if not several:
        return default
    return "host" if core is None else f"NC{core}"


def engine_utilization_lanes(trace: Any, rows: Sequence[Any], buffer: Any, width_px: int) -> list[Lane]:
    """One lane per core: the busy percentage of each of its engines over the buffer.

    Args:
        trace: an opened ``Trace`` (uses ``Trace.utilization``).
        rows: the timeline rows (:class:`profiler.figures.raster.TimelineRow`); their engine tracks are used.
        buffer: anything with ``start_ns``, ``end_ns`` (the time range).
        width_px: pixels across the range; a lane gets one point per PX_PER_POINT pixels.
    """
    engine_rows = [r for r in rows if r.kind == "engine"]
    if not engine_rows:
        return []
    ids = [r.track_ids[0] for r in engine_rows]
    util = trace.utilization(int(buffer.start_ns), int(buffer.end_ns), _points(width_px), tracks=ids)
    tid = util.column(dbs.TRACK_ID).to_numpy()
    start = util.column(ts.START_TS).to_numpy()
    end = util.column(ts.END_TS).to_numpy()
    frac = util.column(dbs.BUSY_FRACTION).to_numpy()
    engine_palette = pal.CategoryPalette.for_engines()
    several = len({r.core for r in engine_rows}) > 1
    lanes: dict[Any, Lane] = {}
    for row in engine_rows:
        sel = tid == row.track_ids[0]
        if not sel.any():
            continue
        order = np.argsort(start[sel], kind="stable")
        x = ((start[sel] + end[sel]) // 2)[order]
        lane = lanes.get(row.core)
        if lane is None:
            title = f"{_core_label(row.core, several, '')} {BUSY_LANE_TITLE}".strip()
            lane = lanes[row.core] = Lane(title, "%", x, y_range=(0, 100))
        if len(x) != len(lane.x_ns):
            continue  # a track with different buckets cannot share the lane's x
        lane.series[row.label] = (100.0 * frac[sel][order]).astype(np.float32)
        lane.colours[row.label] = engine_palette.colour(row.engine_category)
    return [lane for lane in lanes.values() if lane.series]


def series_lane(trace: Any, kind: str, buffer: Any, width_px: int, *, title: str, unit: str, scale: float,
                colour: str, label: str) -> Lane | None:
    """One lane of ``Trace.series(kind)`` with a series per core (values times ``scale``); None when the series
    has no rows or only unknown (null) values."""
    table = trace.series(kind, int(buffer.start_ns), int(buffer.end_ns), _points(width_px))
    if table.num_rows == 0:
        return None
    values = _floats(table.column(ts.VALUE)) * scale
    if np.isnan(values).all():
        return None
    cores = table.column(dbs.CORE).to_pylist()
    start = table.column(ts.START_TS).to_numpy()
    end = table.column(ts.END_TS).to_numpy()
    distinct = list(dict.fromkeys(cores))
    several = len(distinct) > 1
    core_palette = pal.CategoryPalette()
    lane: Lane | None = None
    for core in distinct:
        sel = np.fromiter((c == core for c in cores), dtype=bool, count=len(cores))
        x = (start[sel] + end[sel]) // 2
        if lane is None:
            lane = Lane(title, unit, x)
        elif len(x) != len(lane.x_ns):
            continue
        name = _core_label(core, several, label)
        lane.series[name] = values[sel].astype(np.float32)
        lane.colours[name] = colour if not several else core_palette.colour(name)
    return lane


def dma_throughput_lane(trace: Any, buffer: Any, width_px: int) -> Lane | None:
    """Bytes per second moved by each core's DMA queues, in GB/s (``Trace.series("dma_throughput")``)."""
    return series_lane(trace, "dma_throughput", buffer, width_px, title=DMA_LANE_TITLE, unit="", scale=1e-9,
                       colour=pal.CategoryPalette.for_engines().colour("DMA"), label="DMA")


def hfu_lane(trace: Any, buffer: Any, width_px: int) -> Lane | None:
    """Tensor engine FLOPs as a percentage of its peak, per core (``Trace.series("hfu")``); None when the trace's
    Metadata gives no Tensor clock."""
    return series_lane(trace, "hfu", buffer, width_px, title=HFU_LANE_TITLE, unit="%", scale=1.0,
                       colour=pal.CategoryPalette.for_engines().colour("Tensor"), label="HFU")


def counter_tracks(tracks: pa.Table) -> list[dict[str, Any]]:
    """The Counter tracks of a ``track`` table (``Trace.tracks()``), in display order."""
    rows = [r for r in tracks.to_pylist() if r[dbs.KIND] == "counter"]
    return sorted(rows, key=lambda r: (r[dbs.CORE] is None, r[dbs.CORE] or 0, r[dbs.SORT_ORDER], r[dbs.TRACK_ID]))


def counter_lanes(trace: Any, counters: Sequence[dict[str, Any]], buffer: Any, width_px: int) -> list[Lane]:
    """One lane per Counter track: its maximum and time-weighted mean per bucket (``Trace.counter_window``).

    A counter is a step function: after its last sample the last value holds, and the lane draws it so to the end
    of the window (as Perfetto does; the database itself calls the counter undefined there, see
    :mod:`profiler.db.lod_counter`).  Before the first sample there is a gap.
    """
    if not counters:
        return []
    points = _points(width_px)
    b0, b1 = int(buffer.start_ns), int(buffer.end_ns)
    table = trace.counter_window(b0, b1, points, tracks=[c[dbs.TRACK_ID] for c in counters])
    tid = table.column(dbs.TRACK_ID).to_numpy()
    start = table.column(ts.START_TS).to_numpy()
    end = table.column(ts.END_TS).to_numpy()
    several = len({c[dbs.CORE] for c in counters}) > 1
    palette = pal.CategoryPalette()
    lanes = []
    for counter in counters:
        sel = np.flatnonzero(tid == counter[dbs.TRACK_ID])
        order = sel[np.argsort(start[sel], kind="stable")]
        x = (start[order] + end[order]) // 2
        values = {series: _floats(table.column(column).take(pa.array(order)))
                  for series, column in COUNTER_SERIES.items()}
        x, values = _held_after_last_sample(trace, counter, x, values, starts=start[order], ends=end[order],
                                            lasts=table.column(dbs.LAST_VALUE).take(pa.array(order)),
                                            window=(b0, b1, points))
        if not len(x):
            continue
        name = str(counter[ts.NAME])
        title = f"{_core_label(counter[dbs.CORE], several, '')} {name}".strip()
        lane = Lane(title, "", x)
        colour = palette.colour(name)
        for series, v in values.items():
            lane.series[series] = v.astype(np.float32)
            lane.colours[series] = colour if series == "max" else pal.OTHER_COLOUR
        lanes.append(lane)
    return lanes


def _held_after_last_sample(trace: Any, counter: dict[str, Any], x: np.ndarray, values: dict[str, np.ndarray], *,
                            starts: np.ndarray, ends: np.ndarray, lasts: pa.Array,
                            window: tuple[int, int, int]) -> tuple[np.ndarray, dict[str, Any]]:
    """``x`` and ``values`` at the last sample's value from the counter's last sample to the window's end: the
    buckets after it (undefined in the database) filled, and the grid continued to the window's end where the
    buckets stop short of it (unchanged when the window ends before the last sample).  ``lasts``: the buckets'
    ``last_value`` (the bucket holding the last sample gives its value; only a window wholly after it asks)."""
    b0, b1, points = window
    last_ts = counter.get(ts.END_TS)
    if last_ts is None or b1 <= int(last_ts) or points < 1:
        return x, values
    last_ts = int(last_ts)
    step = int(ends[-1] - ends[-2]) if len(x) >= 2 else max((b1 - b0) // points, 1)
    next_start = int(ends[-1]) if len(x) else b0  # (a window wholly after the last sample: a grid of its own)
    after = starts > last_ts
    if (next_start >= b1 or step <= 0) and not after.any():
        return x, values
    holding = np.flatnonzero((starts <= last_ts) & (last_ts < ends))
    if len(holding):
        last = _floats(lasts.take(pa.array(holding[-1:])))
    else:
        held = trace.counter_window(last_ts, last_ts + 1, 1, tracks=[counter[dbs.TRACK_ID]])
        last = _floats(held.column(dbs.LAST_VALUE)) if held.num_rows else np.array([np.nan])
    if not np.isfinite(last[-1]):
        return x, values
    if after.any():
        values = {series: np.where(after, last[-1], v) for series, v in values.items()}
    if next_start >= b1 or step <= 0:
        return x, values
    n = -(-(b1 - next_start) // step)
    extra = next_start + step // 2 + step * np.arange(n, dtype=np.int64)
    return (np.concatenate([x, extra]),
            {series: np.concatenate([v, np.full(n, last[-1])]) for series, v in values.items()})


def _listed(lane: Lane | None) -> list[Lane]:
    return [] if lane is None else [lane]


def lane_jobs(trace: Any, rows: Sequence[Any], buffer: Any, width_px: int,
              counters: Sequence[dict[str, Any]], *, query: Any = None) -> list[Callable[[], list[Lane]]]:
    """The independent queries behind :func:`timeline_lanes`, in lane order, each a callable giving its lanes.

    Each job is one query on ``trace`` (a ``Trace`` gives every thread its own cursor), so they may run
    concurrently with each other and with the strips' window query.  Counters with negative track ids are
    ``query``'s (:class:`profiler.query_track.QueryTracks`, whose ``counter_window`` answers as the trace's does)
    and come last.
    """
    mine = [c for c in counters if c[dbs.TRACK_ID] < 0]
    counters = [c for c in counters if c[dbs.TRACK_ID] >= 0]
    jobs: list[Callable[[], list[Lane]]] = [lambda: engine_utilization_lanes(trace, rows, buffer, width_px)]
    if any(r.kind == "dma_queue" for r in rows):
        jobs.append(lambda: _listed(dma_throughput_lane(trace, buffer, width_px)))
    if any(r.kind == "engine" and r.engine_category == "Tensor" for r in rows):
        jobs.append(lambda: _listed(hfu_lane(trace, buffer, width_px)))
    if counters:
        jobs.append(lambda: counter_lanes(trace, counters, buffer, width_px))
    if mine and query is not None:
        jobs.append(lambda: counter_lanes(query, mine, buffer, width_px))
    return jobs


class PendingLanes:
    """Lane queries running on an executor (:func:`submit_timeline_lanes`); :meth:`result` gathers them in order."""

    def __init__(self, futures: list[Future[list[Lane]]]) -> None:
        self._futures = futures

    def result(self) -> list[Lane]:
        """Every lane, in :func:`timeline_lanes` order (re-raises a job's error)."""
        return [lane for future in self._futures for lane in future.result()]

    def wait(self) -> None:
        """Block until every job has finished (errors are left for :meth:`result`)."""
        wait(self._futures)


def submit_timeline_lanes(executor: Executor, trace: Any, rows: Sequence[Any], buffer: Any, width_px: int, *,
                          counters: Sequence[dict[str, Any]], query: Any = None) -> PendingLanes:
    """Start :func:`timeline_lanes`'s queries on ``executor``, one job per query, and return at once.

    Each job runs in a copy of the caller's ``contextvars`` context (what a caller tracks per request follows it).
    """
    return PendingLanes([executor.submit(contextvars.copy_context().run, job)
                         for job in lane_jobs(trace, rows, buffer, width_px, counters, query=query)])


def timeline_lanes(trace: Any, rows: Sequence[Any], buffer: Any, width_px: int,
                   counters: Sequence[dict[str, Any]] | None = None, *, query: Any = None) -> list[Lane]:
    """Every lane of a timeline over ``buffer``: busy % per core, DMA throughput, HFU, then each Counter track.

    Args:
        trace: an opened ``Trace``.
        rows: the timeline rows (their engine tracks make the busy % lanes).
        buffer: anything with ``start_ns``, ``end_ns``.
        width_px: pixels across the range.
        counters: the Counter tracks (:func:`counter_tracks`; read from ``trace`` when None), and any of
            ``query``'s (negative ids).
        query: query tracks whose counters are among ``counters`` (:mod:`profiler.query_track`).
    """
    if counters is None:
        counters = counter_tracks(trace.tracks())
    return [lane for job in lane_jobs(trace, rows, buffer, width_px, counters, query=query) for lane in job()]
