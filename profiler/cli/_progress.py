"""tqdm progress bars for long-running commands (ingest, synth), shown only on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm import tqdm

#: Human labels of ingest phases.
PHASES = {"read": "reading", "index": "indexing"}


@contextmanager
def ingest_bars(enabled: bool | None = None) -> Iterator[Callable[[str, int, int], None]]:
    """A ``progress(phase, done, total)`` callback drawing one bar per phase; closes them on exit."""
    show = sys.stderr.isatty() if enabled is None else enabled
    bars: dict[str, tqdm] = {}

    def progress(phase: str, done: int, total: int) -> None:
        if not show:
            return
        bar = bars.get(phase)
        if bar is None:
            unit = {"read": "B", "index": "event"}.get(phase, "item")
            bar = tqdm(total=total, desc=PHASES.get(phase, phase), unit=unit, unit_scale=unit != "item",
                       leave=False, file=sys.stderr)
            bars[phase] = bar
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        yield progress
    finally:
        for bar in bars.values():
            bar.close()
