"""The traces one dashboard serves, by server-side id.

The browser only ever names a trace by the short id this registry gave it (``t0``, ``t1``, ...); a path never
travels from the client to the server, so no request can make the dashboard open a file it was not started on.
Each trace is opened once (lazily) and shared by every browser session; the registry is created by
:func:`dashboard.app.create_app`, never at import time.

A trace directory whose recording has not completed is *followed* (:mod:`profiler.live`): :meth:`TraceRegistry.poll`,
which the pages call every few seconds while such a trace is shown, re-ingests it in a background thread when its
files have grown, and :meth:`TraceRegistry.open` then returns the new trace.  The pages' caches keep a result for the
``Trace`` object it was computed from (or, for a pair of traces, by :meth:`TraceRegistry.version`), so a result of the
old rows is never shown for the new.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.query_slots import UserQuerySlots
from profiler.errors import CommandError
from profiler.live import LiveStatus, LiveTrace, NothingToShowYet, is_recording


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
        follow: follow the trace directories whose recording is still running (:class:`profiler.live.LiveTrace`)
            instead of showing the rows they held when first opened.
        live_options: keyword arguments for each :class:`~profiler.live.LiveTrace` (tests set its clock and
            spacing).
    """

    def __init__(self, paths: Iterable[str | Path] = (), *, opener: Callable[[Path], Any] | None = None,
                 samples: Iterable[str | Path] = (), follow: bool = True,
                 live_options: dict[str, Any] | None = None) -> None:
        entries: list[ServedTrace] = []
        seen: set[Path] = set()
        for sample, group in ((False, paths), (True, samples)):
            for p in group:
                path = Path(p).expanduser().resolve()
                if path in seen:
                    continue
                seen.add(path)
                entries.append(ServedTrace(f"t{len(entries)}", _label(path), path, sample))
        entries = _distinct_labels(entries)
        self._entries = {e.id: e for e in entries}
        #: Users' SQL queries run at once, over every served trace (each trace's memory limit binds only itself).
        self.sql_slots = UserQuerySlots()
        self._opener = opener
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._trace_locks = {e.id: threading.RLock() for e in entries}
        self._follow = follow
        self._live_options = dict(live_options or {})
        self._live: dict[str, LiveTrace] = {}

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
        """The opened ``Trace`` of ``trace_id`` (opened on first use); for a followed recording, its latest."""
        entry = self.entry(trace_id)
        trace = self._open.get(entry.id)
        if trace is not None:   # (most calls: no lock, no look at the trace's files)
            return trace
        live = self._live.get(entry.id) or self._start_following(entry)
        if live is not None:
            return live.trace   # (NothingToShowYet while it has no event)
        with self._lock:
            trace = self._open.get(entry.id)
            if trace is None:
                trace = self._opener(entry.path) if self._opener else _default_open(entry.path)
                self._open[entry.id] = trace
        return trace

    def _start_following(self, entry: ServedTrace) -> LiveTrace | None:
        """The followed recording of ``entry`` (read first now), or None when it is not one to follow."""
        with self._lock:
            live = self._live.get(entry.id)
            if live is None and self._follow and entry.id not in self._open and is_recording(entry.path):
                live = self._live[entry.id] = LiveTrace(entry.path, **self._live_options)
            return live

    def followed(self, trace_id: str | None) -> bool:
        """True when ``trace_id`` is a followed recording: one already followed, or a trace directory whose
        recording has not completed, not opened yet (reads its Metadata)."""
        entry = self.entry(trace_id)
        if entry.id in self._live:
            return True
        return self._follow and entry.id not in self._open and is_recording(entry.path)

    def version(self, trace_id: str | None) -> int:
        """How many times ``trace_id``'s trace was replaced by a newer one (0 for a trace that is not followed)."""
        live = self._live.get(self.entry(trace_id).id)
        return live.generation if live is not None else 0

    def live_status(self, trace_id: str | None) -> LiveStatus | None:
        """Where a followed recording stands (None for a trace that is not followed)."""
        live = self._live.get(self.entry(trace_id).id)
        return live.status() if live is not None else None

    def poll(self, trace_id: str | None) -> LiveStatus | None:
        """Start a refresh of a followed recording in the background when one is due (:meth:`LiveTrace.poll`);
        where it stands.  None for a trace that is not followed (a recording not opened yet is opened)."""
        entry = self.entry(trace_id)
        live = self._live.get(entry.id) or self._start_following(entry)
        if live is None:
            return None
        if live.poll():
            threading.Thread(target=_refresh, args=(live,), name="trnprof-live-refresh", daemon=True).start()
        return live.status()

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
            for live in self._live.values():
                live.close()
            self._live.clear()


def _refresh(live: LiveTrace) -> None:
    """A background refresh: its failure is in the live status (the previous trace stays in use)."""
    with contextlib.suppress(Exception):
        live.refresh()


def _default_open(path: Path) -> Any:
    import profiler

    return profiler.open(path)


def _label(path: Path, parents: int = 0) -> str:
    """The trace's file name without ``.trace`` / ``.duckdb``, after its last ``parents`` folders' names."""
    name = path.name
    for suffix in (".duckdb", ".trace"):
        if name.endswith(suffix):
            name = name[: -len(suffix)] or name
            break
    folders = _folders(path)
    return "/".join((*folders[len(folders) - parents:], name)) if parents else name


def _folders(path: Path) -> tuple[str, ...]:
    """The names of the folders holding ``path`` (its root left out)."""
    parts = path.parent.parts
    return parts[1:] if parts and parts[0] == path.anchor else parts


def _distinct_labels(entries: list[ServedTrace]) -> list[ServedTrace]:
    """Entries whose labels are shared (``v1/mm.trace`` and ``v2/mm.trace``) get as many of their folders' names
    as tell them apart (``v1/mm``, ``v2/mm``): the trace picker and the compare page name A and B by them."""
    depth = [0] * len(entries)
    for _ in range(64):
        labels = [_label(e.path, d) for e, d in zip(entries, depth, strict=True)]
        shared = {lb for lb in labels if labels.count(lb) > 1}
        grow = [i for i, lb in enumerate(labels) if lb in shared and depth[i] < len(_folders(entries[i].path))]
        if not grow:
            break
        for i in grow:
            depth[i] += 1
    return [dataclasses.replace(e, label=_label(e.path, d)) if d else e
            for e, d in zip(entries, depth, strict=True)]


__all__ = ["NothingToShowYet", "ServedTrace", "TraceRegistry", "UnknownTraceError"]
