"""Errors raised by the profiler layer, extending the hierarchy of :mod:`tracer.errors`."""

from __future__ import annotations

from tracer.errors import ConfigError, KernelError, TraceExistsError, TraceFormatError, TrnprofError


class QueryError(TrnprofError):
    """A SQL query failed: syntax error, unknown table, forbidden statement, or timeout."""

    exit_code = 2


class CommandError(TrnprofError):
    """A command cannot do what was asked (bad combination of arguments, nothing to show, ...)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


__all__ = [
    "CommandError",
    "ConfigError",
    "KernelError",
    "QueryError",
    "TraceExistsError",
    "TraceFormatError",
    "TrnprofError",
]
