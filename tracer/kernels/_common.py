"""Helpers shared by the shipped kernels (parameter checks, row tiling)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tracer.errors import ConfigError


def require(condition: bool, kernel: str, message: str) -> None:
    """Raise ConfigError ``kernel: message`` unless ``condition``."""
    if not condition:
        raise ConfigError(f"kernel {kernel}: {message}")


def multiple(value: int, of: int, name: str, kernel: str, of_name: str | None = None) -> int:
    """``value // of``, requiring a positive multiple; ``of_name`` names ``of`` when it is a parameter too (then
    it must be positive itself)."""
    if of_name is not None:
        require(of > 0, kernel, f"{of_name}={of} must be positive")
    require(value > 0 and value % of == 0, kernel, f"{name}={value} must be a positive multiple of "
            + (f"{of_name}={of}" if of_name else str(of)))
    return value // of


def row_tiles(nc: Any, rows: int, size: int = 128) -> Iterator[tuple[Any, int]]:
    """``(first row, rows)`` of each tile of ``size`` rows: the full tiles from an ``nc.affine_range`` loop (the
    first row symbolic, the size static, as NKI needs), then the partial last tile, if any, with concrete ints."""
    full, rest = divmod(rows, size)
    for t in nc.affine_range(full):
        yield t * size, size
    if rest:
        yield full * size, rest
