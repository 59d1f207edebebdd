"""Results computed once per served trace and kept: :class:`ComputedCache`.

Pages whose content reads every event of a trace (the summary's breakdowns, the source page's listings) compute it
once per trace and key, and later visits reuse it; concurrent requests for the same key wait for the first one
instead of computing it again.  A failure is not kept (nor anything for its key): the next request tries again.
A result is kept for the ``Trace`` object it was computed from: a followed recording (:mod:`profiler.live`) swaps
in a new object as it grows, and the next request computes the result again from that one.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any


class ComputedCache:
    """Per served trace and key, the computed result (computed once; concurrent requests wait for the first)."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, Hashable], tuple[Any, Any]] = {}
        self._locks: dict[tuple[str, Hashable], threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, trace_id: str, key: Hashable, compute: Callable[[], Any], *, trace: Any = None) -> Any:
        """The cached ``key`` of ``trace_id``, computed by ``compute()`` the first time (and again when ``trace``,
        the object it is computed from, is not the one the kept result was computed from)."""
        k = (trace_id, key)
        with self._guard:
            lock = self._locks.setdefault(k, threading.Lock())
        with lock:
            kept = self._values.get(k)
            if kept is None or not same_trace(kept[0], trace):
                try:
                    value = compute()
                except BaseException:
                    with self._guard:  # nothing is kept for a key that failed (a page asked for a file not there)
                        if k not in self._values:
                            self._locks.pop(k, None)
                    raise
                self._values[k] = (None if trace is None else weakref.ref(trace), value)
            return self._values[k][1]


def same_trace(ref: Any, trace: Any) -> bool:
    """Whether the weak reference ``ref`` (None: no trace) refers to ``trace``."""
    return (ref is None and trace is None) or (ref is not None and trace is not None and ref() is trace)
