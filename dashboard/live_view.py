"""The header's line about a followed recording (:mod:`profiler.live`): what it says, and the callback polling it.

While a page shows a trace directory whose recording is still running, the header's ``live-tick`` interval asks
the registry every :data:`POLL_MS` ms where the recording stands (:meth:`dashboard.registry.TraceRegistry.poll`,
which also starts a refresh when the files have grown).  The line says how many instructions and how much
simulated time the shown rows hold and how fresh they are; the ``live-gen`` store takes each new generation.  The
timeline page redraws on it (following the recording's end while it shows the whole trace); the other pages
compute from every row, so they offer a link that draws them again with the new rows instead of recomputing
every few seconds.  Once the recording is complete and read whole, the line says so and the polling stops.
"""

from __future__ import annotations

import re
from typing import Any

import dash
from dash import Dash, Input, Output, State, html

from dashboard.registry import TraceRegistry, UnknownTraceError
from profiler.figures.timefmt import format_duration
from profiler.live import LiveStatus

#: How often a page showing a followed recording asks where it stands (ms).
POLL_MS = 2000
#: A recording whose files have not changed for this long is said to have stopped (killed, or stuck).
STOPPED_AFTER_S = 30.0
#: Paths of the pages that redraw themselves on a new generation (the others get a link).
SELF_UPDATING = frozenset({"/"})


def _ago(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def live_line(status: LiveStatus | None, page_generation: Any = None, href: str | None = None) -> tuple[Any, str]:
    """The header's line for a followed recording, and its CSS class (``live-recording``, ``live-stopped``,
    ``live-complete``); empty for a trace that is not followed.

    ``page_generation`` is the generation the page was drawn from; when the recording has a newer one and
    ``href`` is given (a page that does not redraw itself), the line links to ``href`` to draw it again."""
    if status is None:
        return "", "live-none"
    span = format_duration(max(0, status.time_range[1] - status.time_range[0]))
    packets = f", {status.dma_packets:,} DMA packets" if status.dma_packets else ""
    held = f"{status.instructions:,} instructions{packets}, {span} of simulated time"
    if not status.readable:   # no read has succeeded: nothing written yet (or unreadable: the error says)
        waiting = "ended without an event" if status.complete else "no event written yet"
        parts: list[Any] = [f"● recording: {waiting}"]
        css = "live-complete" if status.complete else "live-recording"
    elif status.complete:
        parts = [f"✓ recording complete: {held}"]
        css = "live-complete"
    elif status.idle_s >= STOPPED_AFTER_S and not status.refreshing:
        parts = [f"● recording incomplete: {held}; no new rows for {_ago(status.idle_s)} (stopped or killed?)"]
        css = "live-stopped"
    else:
        parts = [f"● recording: {held} so far · last read {_ago(status.age_s)} ago"]
        css = "live-recording"
        if status.refreshing:
            done = f" {status.progress:.0%}" if status.progress is not None else ""
            last = f" (the last read took {status.last_refresh_s:.1f} s)" if status.last_refresh_s else ""
            parts.append(f" · reading the new rows{done}{last}…")
    if status.error and "holds no events" not in status.error:   # (no event yet is what the line says already)
        parts.append(f" · the last read failed: {status.error[:200]}")
    fresh = isinstance(page_generation, int) and not isinstance(page_generation, bool) and \
        page_generation < status.generation
    if fresh and href is not None:
        parts += [" · ", html.A("show the new rows", href=href, id="live-reload",
                                title="this page drew the rows of an earlier read: draw it again with the new ones")]
    return parts, css


def register_live_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """Poll the followed recording the page shows: the header's line, the ``live-gen`` store, and the interval
    switched off once the recording is complete."""

    @app.callback(Output("live-status", "children"), Output("live-status", "className"),
                  Output("live-gen", "data"), Output("live-tick", "disabled"),
                  Input("live-tick", "n_intervals"), State("url", "pathname"), State("url", "search"),
                  State("live-gen", "data"), State("live-page-gen", "data"), prevent_initial_call=True)
    def _poll(_n: Any, pathname: Any, search: Any, shown: Any, page_gen: Any) -> Any:
        from dashboard.app import resolve_trace_id

        try:
            status = registry.poll(resolve_trace_id(registry, search))
        except UnknownTraceError:
            return "", "live-none", dash.no_update, True
        if status is None:
            return "", "live-none", dash.no_update, True
        # (a page's own path: "/summary", never "//host/..." -- the link must stay on this server)
        path = pathname if isinstance(pathname, str) and re.fullmatch(r"/[a-z]{0,20}", pathname) else "/"
        query = search if isinstance(search, str) and search.startswith("?") else ""
        href = None if path in SELF_UPDATING else f"{path}{query}"
        line, css = live_line(status, page_gen, href)
        generation = status.generation if status.generation != shown else dash.no_update
        return line, f"live-status {css}", generation, status.complete and not status.refreshing


__all__ = ["POLL_MS", "SELF_UPDATING", "STOPPED_AFTER_S", "live_line", "register_live_callbacks"]
