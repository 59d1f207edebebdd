"""Plotly figures of trnprof data: the ONE place figures are built, for the dashboard and for notebooks alike.

Every builder here is a pure function: Arrow tables, numpy arrays or plain dicts in, a ``plotly.graph_objects.
Figure`` (or the plain values a figure update needs) out; no global state.  Reading a ``Trace`` is confined to
:mod:`~profiler.figures.lane_data`, :mod:`~profiler.figures.fetch` and :func:`profiler.figures.summary.
summary_inputs`, which hand the builders plain tables.

- :mod:`profiler.figures.timeline` — per-track timelines drawn as per-pixel strips (level of detail).
- :mod:`profiler.figures.strip_png` — the strips as palette PNG images (one pixel per strip code).
- :mod:`profiler.figures.lanes` — counter lanes drawn as line charts; :mod:`profiler.figures.lane_data` reads their
  data from a ``Trace`` (busy %, DMA throughput, HFU over time, Counter tracks).
- :mod:`profiler.figures.fetch` — the window a drawing reads (attribute strings only when shown).
- :mod:`profiler.figures.summary` — charts of a trace summary (engine busy time, top opcodes, DMA, FLOPs).
- :mod:`profiler.figures.palette` — category colours and the strip codes (slot and busy shade per pixel).
- :mod:`profiler.figures.viewport` — the zoom/pan planner: prefetch buffer, resolution, view clamping.
- :mod:`profiler.figures.timefmt` — time units: axis in seconds with SI prefixes, human-readable durations.
- :mod:`profiler.figures.typed_arrays` — numpy arrays as plotly.js base64 typed arrays (compact payloads).
"""

from profiler.figures.palette import COLOUR_MODES, CategoryPalette
from profiler.figures.timefmt import format_duration, format_time
from profiler.figures.typed_arrays import typed_array

__all__ = ["COLOUR_MODES", "CategoryPalette", "format_duration", "format_time", "typed_array"]
