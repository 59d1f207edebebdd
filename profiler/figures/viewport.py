"""Level-of-detail bookkeeping of a zoomable timeline, as pure functions over plain values — the ONE planner shared
by the dashboard's timeline (``dashboard.timeline_logic``) and the notebook's live widget
(:mod:`profiler.notebook.widget`).

A view shows ``[view_start, view_end)`` across ``width_px`` pixels.  What is fetched is more than that: a *buffer*
:data:`PREFETCH_FACTOR` times the visible span, centred on it, at the view's resolution snapped up to a power of two
(Perfetto's buffered bounds).  The buffer serves the view until the view leaves it or needs another resolution, so
small pans and the end of a zoom cost no query, and every fetch costs pixels, not events.

Also here: reading a view out of a plotly x range (axis seconds since an origin) or a plotly ``relayoutData``, and
the view that focuses an event.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from profiler.figures.timefmt import axis_to_ns

#: The buffer spans this many times the visible span.
PREFETCH_FACTOR = 3
#: The narrowest view, in ns (a few pixels per nanosecond is as far as zooming makes sense).
MIN_SPAN_NS = 16


@dataclass(frozen=True)
class Buffer:
    """What a view holds: the fetched range ``[start_ns, end_ns)`` and its resolution (ns per pixel, a power of
    two); both ends lie on the resolution grid."""

    start_ns: int
    end_ns: int
    resolution_ns: int

    @property
    def width_px(self) -> int:
        """Pixels across the buffer (the ``width_px`` to ask ``Trace.window`` for)."""
        return max((self.end_ns - self.start_ns) // self.resolution_ns, 1)

    def to_dict(self) -> dict[str, int]:
        """JSON-able form (a ``dcc.Store`` value)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Buffer | None:
        """Inverse of :meth:`to_dict`; None for missing or malformed data (a browser sends anything)."""
        if not isinstance(data, dict):
            return None
        try:
            buffer = cls(int(data["start_ns"]), int(data["end_ns"]), int(data["resolution_ns"]))
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
        if buffer.resolution_ns < 1 or buffer.end_ns <= buffer.start_ns:
            return None
        return buffer


def snap_resolution(span_ns: int, width_px: int) -> int:
    """Nanoseconds per pixel for ``span_ns`` over ``width_px`` pixels, rounded up to a power of two (>= 1)."""
    per_px = max(span_ns, 1) / max(width_px, 1)
    return 1 if per_px <= 1 else 1 << math.ceil(math.log2(per_px))


def clamp_view(start_ns: int, end_ns: int, trace_range: tuple[int, int]) -> tuple[int, int]:
    """Keep a view inside the trace (sliding it back in rather than shrinking it), at least MIN_SPAN_NS wide.

    A view as long as the trace or longer becomes the whole trace.
    """
    t0, t1 = trace_range
    start, end = (start_ns, end_ns) if start_ns <= end_ns else (end_ns, start_ns)
    span = max(end - start, MIN_SPAN_NS)
    full = max(t1 - t0, MIN_SPAN_NS)
    if span >= full:
        return t0, t0 + full
    start = min(max(start, t0), t0 + full - span)
    return start, start + span


def plan_buffer(view: tuple[int, int], width_px: int, trace_range: tuple[int, int]) -> Buffer:
    """The buffer to fetch for ``view``: PREFETCH_FACTOR times its span, centred, on the resolution grid, clipped
    to the trace but never into the view (a view reaching past the trace's end keeps its whole range)."""
    v0, v1 = view
    res = snap_resolution(v1 - v0, width_px)
    extra = (v1 - v0) * (PREFETCH_FACTOR - 1) // 2
    t0, t1 = trace_range
    lo = max(v0 - extra, min(t0, v0))
    hi = min(v1 + extra, max(t1, v1))
    start = (lo // res) * res
    end = -(-hi // res) * res
    return Buffer(start, max(end, start + res), res)


def needs_fetch(buffer: Buffer | None, view: tuple[int, int], width_px: int) -> bool:
    """True when ``buffer`` cannot show ``view`` at the resolution ``width_px`` pixels call for."""
    if buffer is None:
        return True
    v0, v1 = view
    return v0 < buffer.start_ns or v1 > buffer.end_ns or snap_resolution(v1 - v0, width_px) != buffer.resolution_ns


def view_from_axis_range(x_range: Any, origin_ns: int) -> tuple[int, int] | None:
    """The ns range of a plotly x range (two axis values in seconds since ``origin_ns``), ordered; None for
    anything else (not two finite numbers, or an empty range)."""
    try:
        a, b = (float(v) for v in x_range)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return None
    try:
        return axis_to_ns(min(a, b), origin_ns), axis_to_ns(max(a, b), origin_ns)
    except OverflowError:  # finite seconds whose nanoseconds are not (1e300 s)
        return None


def view_from_relayout(relayout: Any, origin_ns: int) -> tuple[int, int] | str | None:
    """The x range a plotly ``relayoutData`` asks for, in ns.

    Returns:
        ``(start_ns, end_ns)``; the string ``"reset"`` for an autorange (double-click); None when the relayout
        does not move the time axis (a drag-mode change, a resize, a y-only event) or is malformed.
    """
    if not isinstance(relayout, dict):
        return None
    if relayout.get("xaxis.autorange"):
        return "reset"
    if "xaxis.range[0]" in relayout and "xaxis.range[1]" in relayout:
        x_range: Any = (relayout["xaxis.range[0]"], relayout["xaxis.range[1]"])
    elif isinstance(relayout.get("xaxis.range"), list | tuple) and len(relayout["xaxis.range"]) == 2:
        x_range = relayout["xaxis.range"]
    else:
        return None
    return view_from_axis_range(x_range, origin_ns)


def focus_view(start_ns: int, end_ns: int, trace_range: tuple[int, int], context: float = 4.0) -> tuple[int, int]:
    """A view centred on ``[start_ns, end_ns)`` showing it with ``context`` times its length around it."""
    length = max(end_ns - start_ns, MIN_SPAN_NS)
    centre = (start_ns + end_ns) // 2
    half = int(length * (1 + context) / 2)
    return clamp_view(centre - half, centre + half, trace_range)
