"""The traces one dashboard serves, by server-side id.

The browser only ever names a trace by the short id this registry gave it (``t0``, ``t1``, ...); a path never
travels from the client to the server, so no request can make the dashboard open a file it was not started on.
Each trace is opened once (lazily) and shared by every browser session; the registry is created by
:func:`dashboard.app.create_app`, never at import time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler.errors import CommandError


class UnknownTraceError(CommandError):
    """A request named a trace id the dashboard does not serve."""


@dataclass(frozen=True)
class ServedTrace:
    """One served trace: its id (what the browser sees), a label, and where it lives (server side only)."""

    id: str
    label: str
    path: Path
    #: True for the bundled samples (the picker lists them apart).
    sample: bool = False


class TraceRegistry:
    """Served traces by id, each opened on first use and kept open.

    Args:
        paths: databases, trace directories or importable files, in display order.
        opener: how to open one (default :func:`profiler.open`); tests pass their own.
        samples: paths of bundled samples, listed after ``paths``.
    """

    def __init__(self, paths: Iterable[str | Path] = (), *, opener: Callable[[Path], Any] | None = None,
                 samples: Iterable[str | Path] = ()) -> None:
        entries: list[ServedTrace] = []
        seen: set[Path] = set()
        for sample, group in ((False, paths), (True, samples)):
            for p in group:
                path = Path(p).expanduser().resolve()
                if path in seen:
                    continue
                seen.add(path)
                entries.append(ServedTrace(f"t{len(entries)}", _label(path), path, sample))
        self._entries = {e.id: e for e in entries}
        self._opener = opener
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._trace_locks = {e.id: threading.RLock() for e in entries}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, trace_id: object) -> bool:
        return isinstance(trace_id, str) and trace_id in self._entries

    @property
    def entries(self) -> list[ServedTrace]:
        """Every served trace, in display order."""
        return list(self._entries.values())

    @property
    def default_id(self) -> str | None:
        """Id of the trace shown when a URL names none."""
        return next(iter(self._entries), None)

    def entry(self, trace_id: str | None) -> ServedTrace:
        """The served trace ``trace_id`` (the default one for None); UnknownTraceError otherwise."""
        if trace_id is None:
            trace_id = self.default_id
        if not isinstance(trace_id, str) or trace_id not in self._entries:
            known = ", ".join(self._entries) or "none"
            raise UnknownTraceError(f"no served trace has id {str(trace_id)[:40]!r} (served: {known})")
        return self._entries[trace_id]

    def open(self, trace_id: str | None) -> Any:
        """The opened ``Trace`` of ``trace_id`` (opened on first use)."""
        entry = self.entry(trace_id)
        with self._lock:
            trace = self._open.get(entry.id)
            if trace is None:
                trace = self._opener(entry.path) if self._opener else _default_open(entry.path)
                self._open[entry.id] = trace
        return trace

    def lock(self, trace_id: str | None) -> threading.RLock:
        """A lock serialising queries on one trace (a DuckDB connection serves one query at a time)."""
        return self._trace_locks[self.entry(trace_id).id]

    def close(self) -> None:
        """Close every opened trace."""
        with self._lock:
            for trace in self._open.values():
                close = getattr(trace, "close", None)
                if callable(close):
                    close()
            self._open.clear()


def _default_open(path: Path) -> Any:
    import profiler

    return profiler.open(path)


def _label(path: Path) -> str:
    name = path.name
    for suffix in (".duckdb", ".trace"):
        if name.endswith(suffix):
            return name[: -len(suffix)] or name
    return name
