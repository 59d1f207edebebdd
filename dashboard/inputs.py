"""Reading values that come back from the browser.

Everything a callback receives — store data, component values, click and zoom data — is JSON the client sent and
may be anything: strings for numbers, ``Infinity``, ``1e300``, nested lists, null.  These helpers turn such a value
into the plain Python value a logic function needs, or None when it is not one, so that a malformed request is
ignored or answered with a message instead of raising.
"""

from __future__ import annotations

import math
from typing import Any

from profiler.db.lod import TIME_LIMIT


def as_int(value: Any, low: int = -TIME_LIMIT, high: int = TIME_LIMIT) -> int | None:
    """``value`` as an int in ``[low, high]``: an int, or a finite float with an integral value; None otherwise
    (booleans, strings, non-finite or out-of-range numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def as_float(value: Any, low: float = -math.inf, high: float = math.inf) -> float | None:
    """``value`` as a finite float in ``[low, high]`` (a number, or a string holding one); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        v = float(value)
    except (ValueError, OverflowError):
        return None
    return v if math.isfinite(v) and low <= v <= high else None


def as_time_range(value: Any) -> tuple[int, int] | None:
    """A ``[start_ns, end_ns]`` pair of valid timestamps (:func:`as_int`), ordered; None for anything else."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    a, b = as_int(value[0]), as_int(value[1])
    if a is None or b is None:
        return None
    return (a, b) if a <= b else (b, a)


def is_checked(value: Any, token: str) -> bool:
    """Whether a ``dcc.Checklist`` value (a list of the checked options) has ``token`` checked."""
    return isinstance(value, list | tuple) and token in value

