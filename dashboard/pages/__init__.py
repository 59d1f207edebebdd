"""The dashboard's pages and the registry that lists them.

A page is a :class:`Page`: a URL path, a title for the navigation bar, a ``layout(ctx)`` building its content for
one trace, and a ``register_callbacks(app, registry)`` wiring its callbacks onto one app.  Nothing is decorated at
import time; :func:`dashboard.app.create_app` registers the pages it is given (default :func:`default_pages`), so a
later page (the compare page of the analyses issue) is one more entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dash import Dash

    from dashboard.registry import TraceRegistry


@dataclass(frozen=True)
class PageContext:
    """What a page layout is built for: the registry, the trace the URL names, the URL's query values."""

    registry: TraceRegistry
    trace_id: str
    query: dict[str, str]


@dataclass(frozen=True)
class Page:
    """One page of the dashboard."""

    path: str
    title: str
    layout: Callable[[PageContext], Any]
    register_callbacks: Callable[[Dash, TraceRegistry], None]
    #: Shown in the navigation bar.
    in_nav: bool = True


def default_pages(registry: TraceRegistry | None = None) -> list[Page]:
    """Timeline (the home page), summary, source, memory, call tree, compare, SQL, the sweep and the trace picker.
    The Sweep page is in the navigation bar only when ``registry`` serves a sweep's traces."""
    from dashboard.pages import calltree, compare, memory, source, sql, summary, sweep, timeline, traces
    from dashboard.sweep_view import SWEEP_PATH, sweep_folders

    has_sweep = registry is not None and bool(sweep_folders(registry))
    return [
        Page("/", "Timeline", timeline.layout, timeline.register_callbacks),
        Page("/summary", "Summary", summary.layout, summary.register_callbacks),
        Page("/source", "Source", source.layout, source.register_callbacks),
        Page("/memory", "Memory", memory.layout, memory.register_callbacks),
        Page("/calltree", "Call tree", calltree.layout, calltree.register_callbacks),
        Page("/compare", "Compare", compare.layout, compare.register_callbacks),
        Page(SWEEP_PATH, "Sweep", sweep.layout, sweep.register_callbacks, in_nav=has_sweep),
        Page("/sql", "SQL", sql.layout, sql.register_callbacks),
        Page("/traces", "Traces", traces.layout, traces.register_callbacks),
    ]
