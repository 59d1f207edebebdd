"""Checks of the arguments users pass to the library's functions, shared by ``tracer`` and ``profiler``."""

from __future__ import annotations

from typing import Any


def sequence_of(value: Any, kind: type | tuple[type, ...]) -> list[Any] | None:
    """``value``'s items as a list when it is an iterable of ``kind`` instances (a str or bytes is not: it would
    be taken apart into characters), else None."""
    if isinstance(value, str | bytes):
        return None
    try:
        items = list(value)
    except TypeError:
        return None
    return items if all(isinstance(v, kind) for v in items) else None
