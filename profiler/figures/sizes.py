"""Byte counts as the views show them (binary units), and a source line's DMA transfers in one phrase."""

from __future__ import annotations

from profiler.figures.timefmt import format_duration

_UNITS: tuple[tuple[int, str], ...] = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def format_bytes(n: float) -> str:
    """``512 B``, ``32 KiB``, ``1.5 MiB``: three significant digits in the largest binary unit that fits."""
    for scale, unit in _UNITS:
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def transfers_text(count: int, nbytes: int, duration_ns: int, *, times: str = "x") -> str:
    """``512 x 32 KiB, 122.9 µs``: how many transfers, their mean size, their summed duration ("" for none)."""
    if not count:
        return ""
    return f"{count:,} {times} {format_bytes(nbytes / count)}, {format_duration(duration_ns)}"
