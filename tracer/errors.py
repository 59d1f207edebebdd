"""The trnprof exception hierarchy.

Every error a user can cause (a wrong file, a bad kernel, a bad option) is raised as a subclass of
:class:`TrnprofError` with a one-line message that names the file or thing at fault and, where there is one,
the fix.  The CLI prints such errors as one line on stderr without a traceback.  The hierarchy lives in the
lowest layer (``tracer``) so that ``profiler`` and ``dashboard`` extend it rather than invent their own.
"""

from __future__ import annotations


class TrnprofError(Exception):
    """Base class of every error trnprof raises for bad input or misuse."""

    #: Exit code the CLI returns for this error.
    exit_code: int = 1


class TraceFormatError(TrnprofError):
    """A trace file or directory is missing, unreadable, corrupt, or of an unsupported format version."""

    exit_code = 2


class TraceExistsError(TrnprofError):
    """A writer was asked to create a trace where one already exists without permission to overwrite."""

    exit_code = 2


class KernelError(TrnprofError):
    """A kernel misuses the simulated NeuronCore (shape mismatch, SBUF overflow, unknown tile, ...)."""

    exit_code = 2


class ConfigError(TrnprofError):
    """An option or setting has an invalid value (unknown constant, bad number, ...)."""

    exit_code = 2


class TruncatedTraceWarning(UserWarning):
    """A trace file ends in an incomplete record batch: the recording was interrupted.

    Every complete batch before the damaged tail is still returned.
    """


class IncompleteTraceWarning(UserWarning):
    """A trace whose recording did not finish (still running, killed, or stopped by an error) is being read:
    it holds what was flushed so far."""
