"""Errors as the browser sees them: one line, no server paths, never an HTTP 500 with a traceback.

Expected problems (a bad query, an unknown event) are answered by each page's logic with a message in the page;
:func:`public_message` makes such a message one line and replaces server-side paths (a trace's ingest cache file)
by the trace's name.  Anything unexpected inside a callback reaches :func:`callback_error`, Dash's ``on_error``
handler of every callback: it logs the exception with its traceback on the server and shows one line in the page's
error banner (:data:`BANNER_ID`) instead of failing the request.  :func:`install_request_errors` answers what
fails before a callback runs (a malformed callback request) with one line too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import dash
from flask import Flask, current_app, request
from werkzeug.exceptions import HTTPException

#: The page-wide banner showing an unexpected error (see :func:`callback_error`).
BANNER_ID = "app-error"
#: Longest message shown.
MAX_MESSAGE_CHARS = 500
#: An absolute path of two or more parts (not part of a word, a URL or a relative path).
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~-])/(?:[\w.+~-]+/)+[\w.+~-]*")


def _trace_paths(trace: Any) -> list[str]:
    paths = []
    for attr in ("db_path", "path"):
        value = getattr(trace, attr, None)
        if isinstance(value, str | Path):
            paths.append(str(value))
            paths.append(str(Path(value).resolve()))
    return sorted(set(paths), key=len, reverse=True)  # longest first: a path may contain another


def public_message(error: BaseException | str, trace: Any = None, *, label: str | None = None,
                   typed: str = "") -> str:
    """``error`` as one line for the page: its first line, the trace's paths replaced by its name (``label``, or
    ``trace.name``), any other absolute path by its last part -- except paths the user typed in ``typed`` (a
    query naming ``'/etc/passwd'`` reads it back as written) -- at most :data:`MAX_MESSAGE_CHARS` characters."""
    text = str(error)
    if not text.strip() and isinstance(error, BaseException):
        text = type(error).__name__
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    text = lines[0] if lines else "unknown error"
    if trace is not None:
        name = label or str(getattr(trace, "name", "") or "the trace")
        for path in _trace_paths(trace):
            text = text.replace(path, name)
    text = _ABSOLUTE_PATH.sub(lambda m: m.group(0) if m.group(0) in typed else _short(m.group(0)), text)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def _short(path: str) -> str:
    """``/srv/traces/x.trace.trnprof.duckdb`` -> ``…/x.trace`` (its last part, not the ingest cache's name);
    ``/etc/`` -> ``…/etc/``."""
    last = path.rstrip("/").rsplit("/", 1)[-1].removesuffix(".trnprof.duckdb")
    return "…/" + last + ("/" if path.endswith("/") else "")


def callback_error(exc: Exception) -> None:
    """Dash ``on_error`` handler: log ``exc`` with its traceback, show one line in the error banner, update
    nothing else (the callback's outputs keep what they show)."""
    try:
        outputs = ", ".join(str(o.get("id", "?")) + "." + str(o.get("property", "?"))
                            for o in _flat(dash.ctx.outputs_grouping))
    except Exception:  # naming the callback is best effort
        outputs = "?"
    current_app.logger.error("trnprof dashboard: callback for %s failed", outputs or "?", exc_info=exc)
    dash.set_props(BANNER_ID, {"children": f"Something went wrong ({type(exc).__name__}: "
                                           f"{public_message(exc)}); the server log has the details."})


def _flat(outputs: Any) -> list[dict[str, Any]]:
    if isinstance(outputs, dict):
        return [outputs] if "id" in outputs else [o for item in outputs.values() for o in _flat(item)]
    if isinstance(outputs, list):
        return [o for item in outputs for o in _flat(item)]
    return []


#: Largest request body the server reads (a callback's is kilobytes; a SQL query is at most 100,000 characters).
MAX_REQUEST_BYTES = 16 << 20


def install_request_errors(server: Flask) -> None:
    """Answer an exception that escapes a request (not a callback's: those go to :func:`callback_error`) with one
    line: 400 for a malformed callback request, 413 for a body over :data:`MAX_REQUEST_BYTES`, 500 otherwise; logged
    with its traceback either way."""

    server.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    text = {"Content-Type": "text/plain; charset=utf-8"}

    @server.errorhandler(Exception)
    def _one_line(exc: Exception) -> Any:
        callback = request.path.endswith("_dash-update-component")
        if isinstance(exc, HTTPException):
            if exc.code == 413:
                return f"request too large: the dashboard takes at most {MAX_REQUEST_BYTES >> 20} MiB\n", 413, text
            if exc.code == 400 and callback:  # JSON that does not parse, an empty body: Werkzeug's HTML page
                return "malformed callback request (not the JSON the dashboard's page sends)\n", 400, text
            return exc
        current_app.logger.error("trnprof dashboard: %s %s failed", request.method, request.path, exc_info=exc)
        if callback:  # the body's shape is wrong: what Python met on the way is the log's business, not the client's
            return "malformed callback request (not the JSON the dashboard's page sends)\n", 400, text
        return f"internal error: {type(exc).__name__} (the server log has the details)\n", 500, text
