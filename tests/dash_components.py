"""Walking a Dash component tree in tests: every component under one, in document order, and their texts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def walk(component: Any) -> Iterator[Any]:
    """``component`` and every component under it, depth first in document order (strings and numbers left out)."""
    if component is None or isinstance(component, str | int | float):
        return
    if isinstance(component, list | tuple):
        for child in component:
            yield from walk(child)
        return
    yield component
    yield from walk(getattr(component, "children", None))


def texts(component: Any) -> list[str]:
    """The strings under ``component``, in document order."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, list | tuple):
        return [t for child in component for t in texts(child)]
    if component is None or isinstance(component, int | float):
        return []
    return texts(getattr(component, "children", None))
