"""Summary charts of a :class:`~profiler.Trace` for notebooks (``Trace.summary_figures``): the dashboard's summary
page charts, gathered and drawn by :mod:`profiler.figures.summary`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiler.figures import summary as sfig

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from profiler.trace import Trace


def summary_figures(trace: Trace, start_ns: int | None = None, end_ns: int | None = None) -> list[go.Figure]:
    """Engine utilization, top opcodes, top operators, DMA bytes per queue and FLOPs by operator of
    ``[start_ns, end_ns)`` (default: the whole trace), as the dashboard's summary page draws them."""
    return sfig.summary_figures(sfig.summary_inputs(trace, start_ns, end_ns))
