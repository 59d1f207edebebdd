"""Time as the figures show it.

Timestamps are int64 nanoseconds everywhere in trnprof.  Figures put time on the x axis as *seconds relative to
the start of the trace* (float64): plotly's SI tick format (``~s`` + suffix ``s``) then reads ``120ns``,
``3.5µs``, ``12ms`` as fits the zoom, with no server round trip to relabel ticks, and float64 seconds keep
sub-nanosecond precision for traces up to hours long.
"""

from __future__ import annotations

import numpy as np

NS_PER_S = 1_000_000_000

#: Plotly x-axis settings that make the tick labels read ns, µs, ms or s as fits.
TIME_AXIS: dict[str, object] = {
    "tickformat": ".12~s",
    "ticksuffix": "s",
    "hoverformat": ".12~s",
    "showgrid": True,
    "zeroline": False,
}

_UNITS: tuple[tuple[float, str], ...] = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def ns_to_axis(t_ns: np.ndarray | int | float, origin_ns: int) -> np.ndarray | float:
    """Nanosecond timestamps -> axis x values (seconds since ``origin_ns``)."""
    if isinstance(t_ns, np.ndarray):
        return (t_ns.astype(np.float64) - origin_ns) / NS_PER_S
    return (float(t_ns) - origin_ns) / NS_PER_S


def axis_to_ns(x: float, origin_ns: int) -> int:
    """Axis x value (seconds since ``origin_ns``) -> nanosecond timestamp, rounded to the nearest ns."""
    return round(float(x) * NS_PER_S) + int(origin_ns)


def format_duration(ns: float | int | None) -> str:
    """A duration in the unit that fits: ``850 ns``, ``1.25 µs``, ``3.4 ms``, ``2.1 s``."""
    if ns is None:
        return "–"
    value = float(ns)
    for scale, unit in _UNITS:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:.4g} ns"


def format_time(t_ns: int, origin_ns: int = 0) -> str:
    """A timestamp relative to ``origin_ns`` in the unit that fits (``+1.25 ms``)."""
    return ("+" if t_ns >= origin_ns else "-") + format_duration(abs(int(t_ns) - int(origin_ns)))
