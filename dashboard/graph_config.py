"""The plotly ``config`` of every graph the dashboard draws (one place, so no graph is left out).

Every graph keeps its data on this machine: plotly.js shows a "Share chart..." button by default that uploads the
figure, trace data included, to Plotly Cloud; the dashboard serves profiles on the loopback interface for a
reason, so that button (and "Edit in Chart Studio") is always off, as is the plotly logo.
"""

from __future__ import annotations

from typing import Any

#: What every graph's config holds.
BASE_CONFIG: dict[str, Any] = {"displaylogo": False, "showSendToCloud": False, "showEditInChartStudio": False}


def graph_config(**extra: Any) -> dict[str, Any]:
    """:data:`BASE_CONFIG` with ``extra`` settings (``scrollZoom``, ``modeBarButtonsToRemove``, ...) added."""
    return {**BASE_CONFIG, **extra}


__all__ = ["BASE_CONFIG", "graph_config"]
