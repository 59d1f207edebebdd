"""Category colours of the timeline strips and the discrete colour scale that encodes them.

Every pixel of a timeline strip is a ``uint8`` *code*: ``0`` for an idle pixel, otherwise ``1 + slot * SHADES +
shade`` where ``slot`` is the pixel's colour category (an opcode, an engine or a layer) and ``shade`` its busy
fraction in ``SHADES - 1`` steps (the last shade, darker, marks where an event starts when events are wide enough to
show their edges).  The strips travel as a palette PNG whose palette maps every code to its colour
(:mod:`profiler.figures.strip_png`), so a zoom only ships the codes.

Colours stay stable while zooming: :class:`CategoryPalette` gives the names it is built with (a trace's opcodes,
most time first) fixed slots, and any other name a slot chosen by a stable hash.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from profiler import db_schema as dbs
from tracer import schema as ts

#: How the timeline colours its strips.
COLOUR_MODES: tuple[str, ...] = ("opcode", "engine", "layer")

#: Named colours (Tableau 10 then Dark 24, without greys); the slot after them is "other".
PALETTE: tuple[str, ...] = (
    "#4C78A8", "#F58518", "#E45756", "#72B7B2", "#54A24B", "#EECA3B", "#B279A2", "#FF9DA6", "#9D755D",
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#B68100", "#750D86", "#EB663B", "#511CFB",
    "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE", "#862A16", "#A777F1", "#620042",
    "#1616A7", "#DA60CA",
)
OTHER_COLOUR = "#9E9E9E"

#: Width of the one coarse whole-trace window that ranks a trace's names for their colours.
RANKING_WIDTH_PX = 2048
OTHER = "other"
#: Colour slots: the palette plus "other".
N_SLOTS = len(PALETTE) + 1
OTHER_SLOT = N_SLOTS - 1
#: Busy-fraction shades per slot; the last one is the darker "event edge" shade.
SHADES = 8
EDGE_SHADE = SHADES - 1
BUSY_SHADES = SHADES - 1
#: Largest code: 1 + N_SLOTS * SHADES - 1 (fits uint8).
MAX_CODE = N_SLOTS * SHADES
IDLE_COLOUR = "#FFFFFF"

#: Fixed colours of the engine colour mode.
ENGINE_CATEGORIES: tuple[str, ...] = ("Tensor", "Vector", "Scalar", "GpSimd", "Sync", "DMA", "Span", "Host")


def _hex_to_rgb(colour: str) -> tuple[int, int, int]:
    c = colour.lstrip("#")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)


def _rgb(r: float, g: float, b: float) -> str:
    return f"rgb({round(r)},{round(g)},{round(b)})"


def shade_colour(colour: str, shade: int) -> str:
    """The colour of busy shade ``shade`` of a base colour: paler for less busy, darker for an event edge."""
    r, g, b = _hex_to_rgb(colour)
    if shade >= EDGE_SHADE:
        return _rgb(r * 0.55, g * 0.55, b * 0.55)
    alpha = 0.3 + 0.7 * (shade + 1) / BUSY_SHADES
    return _rgb(255 + (r - 255) * alpha, 255 + (g - 255) * alpha, 255 + (b - 255) * alpha)


def slot_colour(slot: int) -> str:
    """The full-strength colour of a slot."""
    return OTHER_COLOUR if slot == OTHER_SLOT else PALETTE[slot]


def encode(slots: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """Strip codes from per-pixel colour slots and busy fractions (0 busy -> idle code 0).

    Args:
        slots: integer slot per pixel, 0..N_SLOTS-1.
        busy: busy fraction per pixel (values above 1 are clipped).

    Returns:
        ``uint8`` codes of the same shape.
    """
    frac = np.clip(np.asarray(busy, dtype=np.float64), 0.0, 1.0)
    shade = np.clip(np.ceil(frac * BUSY_SHADES).astype(np.int64) - 1, 0, BUSY_SHADES - 1)
    codes = 1 + np.asarray(slots, dtype=np.int64) * SHADES + shade
    return np.where(frac > 0, codes, 0).astype(np.uint8)


def decode(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(slot, shade)`` of strip codes; slot is -1 for idle pixels."""
    c = np.asarray(codes, dtype=np.int64)
    slot = np.where(c > 0, (c - 1) // SHADES, -1)
    shade = np.where(c > 0, (c - 1) % SHADES, -1)
    return slot, shade


def _stable_hash(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


class CategoryPalette:
    """Stable name -> colour-slot assignment.

    Args:
        names: names that get their own slot, in priority order (e.g. opcodes by total time); the first
            ``len(PALETTE)`` get distinct colours.  Names beyond those and names never seen before get a slot
            by stable hash among the slots the ranked names left free (among all slots when none is free).
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._slots: dict[str, int] = {}
        for name in names:
            if name is None or name in self._slots:
                continue
            if len(self._slots) >= len(PALETTE):
                break
            self._slots[name] = len(self._slots)
        free = [s for s in range(len(PALETTE)) if s not in set(self._slots.values())]
        self._free: tuple[int, ...] = tuple(free) if free else tuple(range(len(PALETTE)))

    @classmethod
    def for_engines(cls) -> CategoryPalette:
        """The palette of the engine colour mode (fixed colours per engine, DMA and spans)."""
        return cls(ENGINE_CATEGORIES)

    @property
    def ranked(self) -> tuple[str, ...]:
        """Names with a reserved slot, in slot order."""
        return tuple(self._slots)

    def slot(self, name: str | None) -> int:
        """The slot of ``name`` (``OTHER_SLOT`` for None / empty)."""
        if not name:
            return OTHER_SLOT
        slot = self._slots.get(name)
        if slot is None:
            slot = self._free[_stable_hash(name) % len(self._free)]
        return slot

    def slots(self, names: Sequence[str | None]) -> np.ndarray:
        """Vectorised :meth:`slot` over a sequence of names (call it on the distinct names of a column)."""
        return np.fromiter((self.slot(n) for n in names), dtype=np.int64, count=len(names))

    def colour(self, name: str | None) -> str:
        """Full-strength colour of ``name``."""
        return slot_colour(self.slot(name))


def names_by_time(trace: Any) -> list[str]:
    """Names (opcodes, DMA names, spans) ranked by the time they dominate in a whole-trace view, most first.

    Computed from one coarse ``Trace.window`` (cost set by pixels, not events): each bucket's busy time is credited
    to its dominant name, each raw event's duration to its name.  The dashboard and the notebook figures build
    their :class:`CategoryPalette` from it, so a trace gets the same colours in both.
    """
    t0, t1 = (int(t) for t in trace.time_range)
    if t1 <= t0:
        return []
    window = trace.window(t0, t1, RANKING_WIDTH_PX)
    credit: dict[str, float] = defaultdict(float)
    b = window.buckets
    for name, busy in zip(b.column(dbs.TOP_NAME).to_pylist(), b.column(dbs.BUSY_NS).to_pylist(), strict=True):
        if name:
            credit[name] += busy
    e = window.events
    for name, s, en in zip(e.column(ts.NAME).to_pylist(), e.column(ts.START_TS).to_pylist(),
                           e.column(ts.END_TS).to_pylist(), strict=True):
        if name:
            credit[name] += en - s
    return [name for name, _ in sorted(credit.items(), key=lambda kv: (-kv[1], kv[0]))]
