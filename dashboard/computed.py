"""Results computed once per served trace and kept: :class:`ComputedCache`.

Pages whose content reads every event of a trace (the summary's breakdowns, the source page's listings) compute it
once per trace and key, and later visits reuse it; concurrent requests for the same key wait for the first one
instead of computing it again.  A failure is not kept: the next request tries again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any


class ComputedCache:
    """Per served trace and key, the computed result (computed once; concurrent requests wait for the first)."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, Hashable], Any] = {}
        self._locks: dict[tuple[str, Hashable], threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, trace_id: str, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The cached ``key`` of ``trace_id``, computed by ``compute()`` the first time."""
        k = (trace_id, key)
        with self._guard:
            lock = self._locks.setdefault(k, threading.Lock())
        with lock:
            if k not in self._values:
                self._values[k] = compute()
            return self._values[k]
