"""Markers on the timeline: times the user pins (key M, snapped to the nearest event edge), drawn as labelled
vertical lines, listed with the time between them, kept in links to the view and exported as CSV.

Neuron Explorer's trace viewer has annotations ("markers snap to events", a "diff vs" column between them) and its
users ask to export them to CSV; Perfetto has flags.  Here a marker is only a time (int64 ns, absolute, as every
time in trnprof): ``M1``, ``M2``, ... in time order.  Plain functions over the ``tl-markers`` store (a list of ints),
which comes back from the browser: anything malformed is dropped, never raised.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

from dash import html

from dashboard.inputs import as_int
from profiler.db.lod import TIME_LIMIT
from profiler.figures.timefmt import format_duration, format_time, ns_to_axis

#: Markers kept at most (the oldest placed is dropped for a new one beyond this).
MAX_MARKERS = 16
#: Colour of the marker lines and labels.
MARKER_COLOUR = "#7B2CBF"
#: A marker's time in a URL: a whole number of ns.
_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,19}")
#: Pattern-matching id type of a marker's remove button (``{"type": REMOVE_TYPE, "index": i}``).
REMOVE_TYPE = "marker-remove"


def clean_markers(value: Any) -> list[int]:
    """The markers of a ``tl-markers`` store (or a URL's ``markers=`` value, comma-separated ns): valid
    timestamps, at most :data:`MAX_MARKERS`, without repeats, in time order."""
    if isinstance(value, str):
        value = [int(v) for v in value[:2000].split(",")[:MAX_MARKERS] if _WHOLE_NUMBER.fullmatch(v.strip())]
    if not isinstance(value, list):
        return []
    times = {t for t in (as_int(v, -TIME_LIMIT, TIME_LIMIT) for v in value[:MAX_MARKERS]) if t is not None}
    return sorted(times)


def add_marker(markers: Any, t_ns: int) -> list[int]:
    """``markers`` with one more at ``t_ns`` (a repeat changes nothing; beyond :data:`MAX_MARKERS` the earliest
    goes)."""
    times = clean_markers(markers)
    if t_ns not in times:
        times = sorted([*times, int(t_ns)])[-MAX_MARKERS:]
    return times


def remove_marker(markers: Any, index: Any) -> list[int]:
    """``markers`` without the one at position ``index`` (unchanged for an index that is not one)."""
    times = clean_markers(markers)
    i = as_int(index, 0, len(times) - 1) if times else None
    return times if i is None else times[:i] + times[i + 1:]


def marker_shapes(markers: list[int], n_rows: int, origin_ns: int) -> list[dict[str, Any]]:
    """Layout shapes: a dashed vertical line across the timeline's rows per marker, labelled ``M1``, ``M2``, ...
    at its top."""
    return [{"type": "line", "xref": "x", "yref": "y", "x0": ns_to_axis(t, origin_ns), "x1": ns_to_axis(t, origin_ns),
             "y0": n_rows - 0.5, "y1": -0.5, "layer": "above", "name": f"M{i + 1}",
             "line": {"color": MARKER_COLOUR, "width": 1.5, "dash": "dash"},
             "label": {"text": f"M{i + 1}", "textposition": "end", "textangle": 0, "xanchor": "left", "yanchor": "top",
                       "font": {"color": MARKER_COLOUR, "size": 11}}}
            for i, t in enumerate(markers)]


def marker_rows(markers: list[int], origin_ns: int) -> list[dict[str, Any]]:
    """One row per marker: its label, time (absolute ns and since the trace start) and the time since the marker
    before it and since the first (None for the first)."""
    rows = []
    for i, t in enumerate(markers):
        rows.append({"marker": f"M{i + 1}", "time_ns": t, "since_start_ns": t - origin_ns,
                     "since_previous_ns": t - markers[i - 1] if i else None,
                     "since_first_ns": t - markers[0] if i else None})
    return rows


def markers_csv(markers: list[int], origin_ns: int) -> str:
    """The markers as CSV (:func:`marker_rows`' columns, times in ns)."""
    out = io.StringIO()
    rows = marker_rows(markers, origin_ns)
    writer = csv.DictWriter(out, fieldnames=["marker", "time_ns", "since_start_ns", "since_previous_ns",
                                             "since_first_ns"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def markers_panel(markers: list[int], origin_ns: int) -> Any:
    """The markers line under the timeline: each marker's time and the time since the one before, a remove button
    each; or how to place one."""
    if not markers:
        return html.Span("Markers: press M over the timeline to pin a time (it snaps to the nearest event edge).",
                         className="muted")
    items: list[Any] = ["Markers: "]
    for i, row in enumerate(marker_rows(markers, origin_ns)):
        delta = row["since_previous_ns"]
        items.append(html.Span([
            html.Strong(row["marker"], style={"color": MARKER_COLOUR}),
            f" {format_time(row['time_ns'], origin_ns)}",
            html.Span(f" (+{format_duration(delta)})" if delta is not None else "", className="muted",
                      title=f"since M{i}" if delta is not None else None),
            html.Button("×", id={"type": REMOVE_TYPE, "index": i}, n_clicks=0, className="link-button",
                        title=f"remove {row['marker']}"),
        ], className="marker-item", id=f"marker-{i + 1}"))
    if len(markers) > 1:
        items.append(html.Span(f" · M1 → M{len(markers)}: {format_duration(markers[-1] - markers[0])}",
                               className="muted", id="markers-span"))
    return items
