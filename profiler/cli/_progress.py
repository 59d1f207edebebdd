"""Progress on a terminal for long-running commands: tqdm bars (ingest, synth), a "working…" line (analyses)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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


#: Seconds of silence before :func:`working` says what the command is doing.
WORKING_AFTER_S = 1.0


@contextmanager
def working(what: str, *, after_s: float = WORKING_AFTER_S) -> Iterator[None]:
    """On a terminal, when the block runs longer than ``after_s``: ``what…  12 s`` on stderr, updated each half
    second, and cleared when the block ends or first prints (analyses of 10^7 events take tens of seconds, silent
    otherwise)."""
    import threading
    import time

    err = sys.stderr
    if not err.isatty():
        yield
        return
    lock = threading.Lock()
    done = threading.Event()
    shown = False
    t0 = time.monotonic()

    def stop() -> None:
        nonlocal shown
        with lock:
            done.set()
            if shown:
                err.write("\r\x1b[2K")
                err.flush()
                shown = False

    def tick() -> None:
        nonlocal shown
        if done.wait(after_s):
            return
        while True:
            with lock:
                if done.is_set():
                    return
                err.write(f"\r{what}…  {time.monotonic() - t0:.0f} s")
                err.flush()
                shown = True
            done.wait(0.5)

    real_out = sys.stdout
    sys.stdout = _StopOnWrite(real_out, stop)   # the command's first output ends the line
    thread = threading.Thread(target=tick, name="trnprof-working", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop()
        thread.join()
        sys.stdout = real_out


class _StopOnWrite:
    """``stream`` that calls ``stop`` before its first write."""

    def __init__(self, stream: Any, stop: Callable[[], None]) -> None:
        self._stream = stream
        self._stop: Callable[[], None] | None = stop

    def write(self, text: str) -> int:
        if self._stop is not None:
            self._stop()
            self._stop = None
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
