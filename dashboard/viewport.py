"""Level-of-detail bookkeeping of the timeline, as pure functions over plain values.

The browser shows ``[view_start, view_end)`` across ``width_px`` pixels.  The server fetches more than that — a
*buffer* three times the visible span, at the view's resolution snapped up to a power of two — and the browser
keeps the buffer until the view leaves it or needs another resolution (Perfetto's buffered bounds).  So small pans
and the last bit of a zoom cost nothing, and every fetch is answered at a cost set by pixels, not events.
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
#: Zoom factor of one W/S key press (the client applies it; the server only sees the new range).
KEY_ZOOM = 0.8


@dataclass(frozen=True)
class Buffer:
    """What the browser currently holds: the fetched range and its resolution."""

    start_ns: int
    end_ns: int
    resolution_ns: int

    def to_dict(self) -> dict[str, int]:
        """JSON-able form for a ``dcc.Store``."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Buffer | None:
        """Inverse of :meth:`to_dict`; None for missing or malformed data."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(int(data["start_ns"]), int(data["end_ns"]), int(data["resolution_ns"]))
        except (KeyError, TypeError, ValueError):
            return None


def snap_resolution(span_ns: int, width_px: int) -> int:
    """Nanoseconds per pixel for ``span_ns`` over ``width_px`` pixels, rounded up to a power of two (>= 1)."""
    per_px = max(span_ns, 1) / max(width_px, 1)
    return 1 if per_px <= 1 else 1 << math.ceil(math.log2(per_px))


def clamp_view(start_ns: int, end_ns: int, trace_range: tuple[int, int]) -> tuple[int, int]:
    """Keep a view inside the trace (sliding it back in rather than shrinking it) and at least MIN_SPAN_NS wide."""
    t0, t1 = trace_range
    start, end = (start_ns, end_ns) if start_ns <= end_ns else (end_ns, start_ns)
    span = max(end - start, MIN_SPAN_NS)
    full = max(t1 - t0, MIN_SPAN_NS)
    if span >= full:
        return t0, t0 + full
    start = max(start, t0)
    if start + span > t0 + full:
        start = t0 + full - span
    return start, start + span


def plan_buffer(view: tuple[int, int], width_px: int, trace_range: tuple[int, int]) -> Buffer:
    """The buffer to fetch for a view: PREFETCH_FACTOR x its span, centred, snapped to the resolution, clipped."""
    v0, v1 = view
    res = snap_resolution(v1 - v0, width_px)
    span = v1 - v0
    extra = span * (PREFETCH_FACTOR - 1) // 2
    t0, t1 = trace_range
    lo = max(v0 - extra, t0)
    hi = min(v1 + extra, max(t1, t0 + 1))
    start = (lo // res) * res
    end = -(-hi // res) * res
    return Buffer(start, max(end, start + res), res)


def needs_fetch(buffer: Buffer | None, view: tuple[int, int], width_px: int) -> bool:
    """True when the browser's buffer cannot show ``view`` at its resolution."""
    if buffer is None:
        return True
    v0, v1 = view
    return (v0 < buffer.start_ns or v1 > buffer.end_ns
            or snap_resolution(v1 - v0, width_px) != buffer.resolution_ns)


def view_from_relayout(relayout: dict[str, Any] | None, origin_ns: int) -> tuple[int, int] | str | None:
    """The x range a plotly ``relayoutData`` asks for, in ns.

    Returns:
        ``(start_ns, end_ns)``; the string ``"reset"`` for an autorange (double-click); None when the relayout
        does not move the time axis (a drag-mode change, a resize, a y-only event).
    """
    if not isinstance(relayout, dict):
        return None
    if relayout.get("xaxis.autorange"):
        return "reset"
    try:
        if "xaxis.range[0]" in relayout and "xaxis.range[1]" in relayout:
            a, b = relayout["xaxis.range[0]"], relayout["xaxis.range[1]"]
        elif isinstance(relayout.get("xaxis.range"), list | tuple) and len(relayout["xaxis.range"]) == 2:
            a, b = relayout["xaxis.range"]
        else:
            return None
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    start, end = axis_to_ns(min(a, b), origin_ns), axis_to_ns(max(a, b), origin_ns)
    return start, end


def focus_view(start_ns: int, end_ns: int, trace_range: tuple[int, int], context: float = 4.0) -> tuple[int, int]:
    """A view centred on ``[start_ns, end_ns)`` showing it with ``context`` times its length around it."""
    length = max(end_ns - start_ns, MIN_SPAN_NS)
    centre = (start_ns + end_ns) // 2
    half = int(length * (1 + context) / 2)
    return clamp_view(centre - half, centre + half, trace_range)
