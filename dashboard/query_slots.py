"""How many users' SQL queries a server runs at once (the SQL page's, and the timeline's query tracks).

Each served trace is a DuckDB instance of its own, whose memory limit (``profiler.db.connection``: a quarter of RAM,
at most 4 GiB) binds that instance only: heavy queries on several traces at once added up past the machine's memory.
:class:`UserQuerySlots` admits :data:`DEFAULT_SLOTS` at a time, server-wide; a query waits for a slot up to its own
timeout, then gets a one-line error.  trnprof's own queries (windows, lanes, analyses) do not take a slot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from profiler.errors import QueryError

#: Users' SQL queries a server runs at once: with each instance's memory limit, at most half the RAM.
DEFAULT_SLOTS = 2


class UserQuerySlots:
    """At most ``slots`` users' queries at once (see the module docstring)."""

    def __init__(self, slots: int = DEFAULT_SLOTS) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be a positive int, not {slots!r}")
        self.slots = slots
        self._free = threading.BoundedSemaphore(slots)

    @contextmanager
    def slot(self, wait_s: float | None) -> Iterator[None]:
        """Hold a slot for the block, waiting up to ``wait_s`` seconds (None: as long as it takes) for one;
        QueryError when none frees up in time."""
        if not self._free.acquire(timeout=wait_s):
            raise QueryError(f"the server is already running {self.slots} SQL queries, the most it runs at once "
                             f"(each may use a quarter of its memory); none ended within {wait_s:g} s: try again "
                             "when they have")
        try:
            yield
        finally:
            self._free.release()
