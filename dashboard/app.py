"""The Dash application factory: :func:`create_app` builds one self-contained dashboard for a set of traces.

Everything an app needs — its trace registry, pages and callbacks — is created here, per app; nothing is global
and nothing is registered at import time, so tests can build several apps in one process.  The server keeps no
per-browser-session state: what a browser looks at (trace id, visible range, buffered range) travels with each
request in ``dcc.Store`` components.

Every request passes the host check of :mod:`dashboard.hosts` (DNS rebinding); an unexpected error in a callback
becomes one line in the page's error banner and a traceback in the server log (:mod:`dashboard.errors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import dash
from dash import Dash, Input, Output, State, dcc, html

from dashboard import errors
from dashboard.hosts import HostPolicy, install_host_check
from dashboard.links import SELECT_PARAM, TRACE_PARAM
from dashboard.live_view import POLL_MS, live_line, register_live_callbacks
from dashboard.pages import Page, PageContext, default_pages
from dashboard.registry import TraceRegistry, UnknownTraceError

ASSETS = Path(__file__).resolve().parent / "assets"


def query_values(search: str | None) -> dict[str, str]:
    """``?trace=t1&x=2`` -> ``{"trace": "t1", "x": "2"}`` (first value of each key, bounded length)."""
    if not search or not isinstance(search, str):
        return {}
    parsed = parse_qs(search.lstrip("?")[:2000], keep_blank_values=False)
    return {k: v[0] for k, v in parsed.items() if v}


def trace_search(trace_id: str) -> str:
    """The URL query selecting ``trace_id``."""
    return "?" + urlencode({TRACE_PARAM: trace_id})


def with_trace(query: Any, trace_id: str, *, same_trace: bool = False) -> str:
    """The URL query ``query`` (the page's query values) with its trace set to ``trace_id``, its other values kept
    (the compare page's ``b``, a timeline view's ``start``, ``end`` and options), and the selected event too when
    ``same_trace`` (else it names an event of another trace)."""
    dropped = (TRACE_PARAM,) if same_trace else (TRACE_PARAM, SELECT_PARAM)
    values = {str(k): str(v) for k, v in query.items() if k not in dropped} if isinstance(query, dict) else {}
    return "?" + urlencode({TRACE_PARAM: trace_id, **values})


def resolve_trace_id(registry: TraceRegistry, search: str | None) -> str:
    """The trace id a URL query names (the default trace when it names none); UnknownTraceError otherwise."""
    return registry.entry(query_values(search).get(TRACE_PARAM)).id


def open_served(registry: TraceRegistry, search: str | None) -> tuple[str, Any]:
    """The id and opened ``Trace`` of the served trace a URL query names; UnknownTraceError for one not served."""
    trace_id = resolve_trace_id(registry, search)
    return trace_id, registry.open(trace_id)


def _header(pages: Sequence[Page], registry: TraceRegistry, current_path: str, trace_id: str,
            query: dict[str, str] | None = None) -> html.Header:
    links = [
        dcc.Link(p.title, href=p.path + trace_search(trace_id),
                 className="nav-link active" if p.path == current_path else "nav-link", id=f"nav-{p.title.lower()}")
        for p in pages if p.in_nav
    ]
    options = [{"label": e.label + (" (sample)" if e.sample else ""), "value": e.id} for e in registry.entries]
    return html.Header(className="app-header", children=[
        html.Span("trnprof", className="brand"),
        html.Nav(links, className="nav"),
        dcc.Dropdown(id="trace-dropdown", options=options, value=trace_id, clearable=False, searchable=True,
                     className="trace-dropdown"),
        dcc.Store(id="url-query", data=query or {}),   # the page's URL query, for the picker to keep
        *live_components(registry, trace_id),
    ])


def live_components(registry: TraceRegistry, trace_id: str) -> list[Any]:
    """The header's line about a followed recording, the interval polling it (off for other traces), the
    generation the page was drawn from and the latest one (:mod:`dashboard.live_view`)."""
    followed = bool(trace_id) and trace_id in registry and registry.followed(trace_id)
    generation = registry.version(trace_id) if followed else 0
    status = registry.live_status(trace_id) if followed else None
    line, css = live_line(status)
    return [
        html.Span(line, id="live-status", className=f"live-status {css}", role="status"),
        dcc.Interval(id="live-tick", interval=POLL_MS, disabled=not followed or bool(status and status.complete)),
        dcc.Store(id="live-page-gen", data=generation),
        dcc.Store(id="live-gen", data=generation),
    ]


def render_page(pages: Sequence[Page], registry: TraceRegistry, pathname: str | None, search: str | None) -> Any:
    """The content of the page at ``pathname`` for the trace ``search`` names (an error panel when none)."""
    by_path = {p.path: p for p in pages}
    path = pathname if isinstance(pathname, str) and pathname in by_path else None
    if not len(registry):
        return html.Div("No trace is served: start the dashboard with `trnprof serve TRACE_OR_DB`.",
                        className="error-panel")
    try:
        trace_id = resolve_trace_id(registry, search)
    except UnknownTraceError as exc:
        return html.Div([_header(pages, registry, "", registry.default_id or ""),
                         html.Div(str(exc), className="error-panel", id="page-error")])
    if path is None:
        return html.Div([_header(pages, registry, "", trace_id),
                         html.Div(f"No page at {str(pathname)[:80]!r}.", className="error-panel", id="page-error")])
    page = by_path[path]
    ctx = PageContext(registry, trace_id, query_values(search))
    return html.Div([_header(pages, registry, page.path, trace_id, ctx.query),
                     html.Main(page.layout(ctx), className="page")])


def create_app(traces: Iterable[str | Path] | TraceRegistry = (), *, samples: Iterable[str | Path] = (),
               pages: Sequence[Page] | None = None, title: str = "trnprof",
               allowed_hosts: Iterable[str] | HostPolicy | None = None) -> Dash:
    """Build the dashboard for ``traces``.

    Args:
        traces: databases, trace directories or importable files (ingested already, or ingested on first view),
            or a ready :class:`TraceRegistry`.
        samples: bundled sample traces listed after ``traces`` in the picker.
        pages: the pages to serve (default :func:`dashboard.pages.default_pages`).
        title: browser tab title.
        allowed_hosts: host names requests may be for besides the loopback ones (``*``: any), or a ready
            :class:`~dashboard.hosts.HostPolicy`; default: ``$TRNPROF_DASHBOARD_ALLOW_HOSTS``, else loopback only.
            Other requests get HTTP 403 (DNS rebinding, cross-site requests).

    Returns:
        The Dash app; ``app.server`` is its Flask server and ``app.trnprof_registry`` its trace registry.
    """
    registry = traces if isinstance(traces, TraceRegistry) else TraceRegistry(traces, samples=samples)
    page_list = list(pages) if pages is not None else default_pages(registry)
    app = Dash(
        __name__,
        assets_folder=str(ASSETS),
        title=title,
        update_title=None,
        suppress_callback_exceptions=True,
        serve_locally=True,
        compress=False,
        on_error=errors.callback_error,
    )
    app.layout = html.Div([
        dcc.Location(id="url", refresh=False),
        html.Div(id=errors.BANNER_ID, className="app-error", role="alert"),
        html.Div(id="page-content"),
    ])

    @app.callback(Output("page-content", "children"), Output(errors.BANNER_ID, "children"),
                  Input("url", "pathname"), Input("url", "search"))
    def _route(pathname: str | None, search: str | None) -> Any:
        return render_page(page_list, registry, pathname, search), None  # a new page clears the error banner

    @app.callback(Output("url", "search"), Input("trace-dropdown", "value"), State("url-query", "data"),
                  prevent_initial_call=True)
    def _switch_trace(trace_id: str | None, query: Any) -> Any:
        # It also runs when a page renders its header; it then gives back the page's own query, unchanged (the
        # page's callbacks that take url.search wait for it: a no_update here would leave them waiting for good).
        if trace_id not in registry:
            return dash.no_update
        named = query.get(TRACE_PARAM) if isinstance(query, dict) else None
        current = registry.default_id if named is None else named
        return with_trace(query, trace_id, same_trace=current == trace_id)

    for page in page_list:
        page.register_callbacks(app, registry)
    register_live_callbacks(app, registry)
    from dashboard.export import install_export_route  # (it imports this module)

    if isinstance(allowed_hosts, HostPolicy):
        policy = allowed_hosts
    elif allowed_hosts is None:
        policy = HostPolicy.from_environment()
    else:
        policy = HostPolicy.from_names([allowed_hosts] if isinstance(allowed_hosts, str) else allowed_hosts)
    install_host_check(app.server, policy)
    install_export_route(app.server, registry)
    errors.install_request_errors(app.server)
    _harden(app)
    app.trnprof_registry = registry  # type: ignore[attr-defined]
    return app


def _harden(app: Dash) -> None:
    """404 (not 500) for unregistered component files; headers that stop sniffing, framing and referrer leaks."""

    @app.server.errorhandler(dash.exceptions.DependencyException)
    def _not_served(_exc: Exception) -> Any:
        # Dash raises this for a component-suite path it did not register (e.g. a traversal attempt).
        return "not found", 404

    @app.server.after_request
    def _headers(response: Any) -> Any:
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "SAMEORIGIN")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response
