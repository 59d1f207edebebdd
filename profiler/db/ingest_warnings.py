"""The warnings an ingest produced, kept in the database and repeated whenever it is opened again.

A trace read with damage (a truncated table of an interrupted recording, events an importer skipped or repaired)
is ingested with warnings.  They are shown while it is ingested; :func:`collecting` also records them, the ingest
stores them in ``trnprof_info`` (key :data:`INFO_WARNINGS`, a JSON list of ``[category, message]``), and
:func:`repeat` issues them again each time the database answers for its input later (the ingest cache, or the
``.duckdb`` file opened directly), so a cached damaged trace never looks clean.

Only trnprof's own warnings (categories defined in the ``tracer`` and ``profiler`` packages) are kept, each once,
at most :data:`MAX_STORED` of them, each cut to :data:`MAX_CHARS` characters.
"""

from __future__ import annotations

import contextlib
import json
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from tracer.errors import IncompleteTraceWarning, TruncatedTraceWarning

R = TypeVar("R")

#: ``trnprof_info`` key of the stored warnings.
INFO_WARNINGS = "ingest_warnings"
#: At most this many warnings are stored (the rest are counted in a last one).
MAX_STORED = 20
#: A stored warning's message is cut to this many characters.
MAX_CHARS = 1000

#: One warning as stored: (category name, message).
Stored = tuple[str, str]


def _is_trnprof_warning(category: type[Warning]) -> bool:
    return issubclass(category, UserWarning) and category.__module__.split(".")[0] in ("tracer", "profiler")


#: The collectors active on each thread (a stack: blocks may nest).
_active = threading.local()
_install_lock = threading.Lock()


def _collectors() -> list[list[Stored]]:
    stack = getattr(_active, "stack", None)
    if stack is None:
        stack = _active.stack = []
    return stack


#: How many :func:`collecting` blocks are active, in all threads (the hook is in place while there are any).
_users = [0]


def _install_hook() -> None:
    """Put the recording hook in front of :func:`warnings.showwarning` (unless it is there already) for one more
    :func:`collecting` block.  It records only into blocks active on the warning's thread, so blocks running at
    the same time in several threads share it; the last one to end takes it out again (:func:`_remove_hook`)."""
    with _install_lock:
        shown = warnings.showwarning
        if not getattr(shown, "_trnprof_collector", False):

            def hook(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                     *rest: Any) -> None:
                stack = getattr(_active, "stack", None)
                if stack and _is_trnprof_warning(category):
                    for seen in stack:
                        seen.append((category.__name__, str(message)))
                    if getattr(_active, "quiet", 0):
                        return   # recorded, not shown (collecting(quiet=True))
                shown(message, category, filename, lineno, *rest)

            hook._trnprof_collector = True  # type: ignore[attr-defined]
            hook._trnprof_previous = shown  # type: ignore[attr-defined]
            warnings.showwarning = hook
        _users[0] += 1


def _remove_hook() -> None:
    """One :func:`collecting` block fewer; the last one puts back what the hook stood in front of (unless other
    code has replaced the hook meanwhile: then that code's function stays)."""
    with _install_lock:
        _users[0] -= 1
        shown = warnings.showwarning
        if _users[0] == 0 and getattr(shown, "_trnprof_collector", False):
            warnings.showwarning = shown._trnprof_previous


@contextlib.contextmanager
def collecting(*, quiet: bool = False) -> Iterator[list[Stored]]:
    """Record the trnprof warnings shown on this thread (or on threads started for its work with
    :func:`carrying`) while the block runs; they are still shown as usual, unless ``quiet`` (then this thread's
    trnprof warnings are only recorded: a followed recording's expected "not complete" on every refresh).

    Another thread's warnings (another ingest running at the same time) are not recorded.  Works through a hook in
    front of :func:`warnings.showwarning`, so it records what the active filters let through.
    """
    seen: list[Stored] = []
    _install_hook()
    stack = _collectors()
    stack.append(seen)
    quiet_before = getattr(_active, "quiet", 0)
    _active.quiet = quiet_before + int(quiet)
    try:
        yield seen
    finally:
        _active.quiet = quiet_before
        for i in range(len(stack) - 1, -1, -1):  # by identity (two empty lists are equal)
            if stack[i] is seen:
                del stack[i]
                break
        _remove_hook()


def carrying(fn: Callable[..., R]) -> Callable[..., R]:
    """``fn``, to be run on another thread, recording the warnings it shows into the :func:`collecting` blocks
    active on this thread now (a producer thread working for an ingest: its warnings are the ingest's)."""
    carried = list(getattr(_active, "stack", None) or ())
    quiet = getattr(_active, "quiet", 0)
    if not carried:
        return fn

    def run(*args: Any, **kwargs: Any) -> R:
        stack = _collectors()
        depth = len(stack)
        stack.extend(carried)
        quiet_before = getattr(_active, "quiet", 0)
        _active.quiet = quiet_before + quiet
        try:
            return fn(*args, **kwargs)
        finally:
            del stack[depth:]
            _active.quiet = quiet_before

    return run


def encode(items: Iterable[Stored]) -> str:
    """The ``trnprof_info`` value holding ``items`` (each kept once, in order, bounded)."""
    unique = list(dict.fromkeys((c, m[:MAX_CHARS]) for c, m in items))
    if len(unique) > MAX_STORED:
        rest = len(unique) - MAX_STORED + 1
        unique = [*unique[:MAX_STORED - 1], ("TraceImportWarning", f"... and {rest:,} more ingest warning(s)")]
    return json.dumps([list(item) for item in unique])


def decode(info: Mapping[str, str] | None) -> list[Stored]:
    """The warnings stored in a database's ``trnprof_info`` (empty when none, or unreadable)."""
    text = (info or {}).get(INFO_WARNINGS)
    if not text:
        return []
    try:
        items = json.loads(text)
    except ValueError:
        return []
    if not isinstance(items, list):
        return []
    return [(str(i[0]), str(i[1])[:MAX_CHARS]) for i in items[:MAX_STORED]
            if isinstance(i, list) and len(i) == 2]


def _category(name: str) -> type[Warning]:
    if name == TruncatedTraceWarning.__name__:
        return TruncatedTraceWarning
    if name == IncompleteTraceWarning.__name__:
        return IncompleteTraceWarning
    from profiler.importers.common import TraceImportWarning

    return TraceImportWarning if name == TraceImportWarning.__name__ else UserWarning


def repeat(stored: Iterable[Stored], *, already_shown: Iterable[Stored] = ()) -> None:
    """Issue ``stored`` warnings again (as their own category), except those in ``already_shown`` (shown again
    by this very open, e.g. a trace directory's "recording is not complete")."""
    skip = {m for _c, m in already_shown}
    for name, message in stored:
        if message not in skip:
            warnings.warn(_category(name)(message), stacklevel=3)


def read_stored(db: Path) -> list[Stored]:
    """The warnings stored in database file ``db``; empty when it has none or cannot be read (opening it later
    reports why)."""
    from profiler.db.connection import read_info

    try:
        con = duckdb.connect(str(db), read_only=True)
    except (duckdb.Error, OSError):
        return []
    try:
        return decode(read_info(con))
    except duckdb.Error:
        return []
    finally:
        con.close()


__all__ = ["INFO_WARNINGS", "MAX_CHARS", "MAX_STORED", "carrying", "collecting", "decode", "encode", "read_stored",
           "repeat"]
