"""The Sweep page (``/sweep``): a sweep served from its folder (``trnprof serve DIR`` on a sweep's ``--trace-dir``),
its chart and one row per point linking to that point's pages (:mod:`dashboard.sweep_view`).  Links only: no
callbacks."""

from __future__ import annotations

from typing import Any

from dash import Dash

from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry
from dashboard.sweep_view import sweep_page


def layout(ctx: PageContext) -> Any:
    """The served sweeps, the page's trace's first."""
    return sweep_page(ctx.registry, ctx.trace_id)


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """None: the page is links."""
