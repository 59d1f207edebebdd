"""Helpers shared by the shipped kernels (parameter checks)."""

from __future__ import annotations

from tracer.errors import ConfigError


def require(condition: bool, kernel: str, message: str) -> None:
    """Raise ConfigError ``kernel: message`` unless ``condition``."""
    if not condition:
        raise ConfigError(f"kernel {kernel}: {message}")


def multiple(value: int, of: int, name: str, kernel: str) -> int:
    """``value // of``, requiring a positive multiple."""
    require(value > 0 and value % of == 0, kernel, f"{name}={value} must be a positive multiple of {of}")
    return value // of
