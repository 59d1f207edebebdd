"""The ``trnprof`` command line: argument parsing, the command registry, and one-line error reporting.

Each subcommand lives in its own module and implements the :class:`Command` protocol; this module only finds
the commands, builds the parser and turns errors into one line on stderr and an exit code.  Commands from
packages above the profiler layer (the dashboard's ``serve``) register through the ``trnprof.commands``
entry-point group, so the profiler never imports them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from tracer._version import __version__
from tracer.errors import TrnprofError

PROG = "trnprof"
ENTRY_POINT_GROUP = "trnprof.commands"

#: Modules of the built-in subcommands; each defines ``COMMAND``.
BUILTIN_COMMAND_MODULES: tuple[str, ...] = (
    "profiler.cli.export", "profiler.cli.info", "profiler.cli.kernels", "profiler.cli.record",
    "profiler.cli.ingest", "profiler.cli.summary", "profiler.cli.sql", "profiler.cli.synth",
    # analyses (issue 7)
    "profiler.cli.bounds", "profiler.cli.critical_path", "profiler.cli.diff", "profiler.cli.dma",
    "profiler.cli.gaps", "profiler.cli.operators", "profiler.cli.recommend", "profiler.cli.waits",
)


@runtime_checkable
class Command(Protocol):
    """A ``trnprof`` subcommand."""

    #: Subcommand name as typed on the command line.
    name: str
    #: One-line summary shown in ``trnprof --help``.
    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare the subcommand's arguments."""

    def run(self, args: argparse.Namespace) -> int:
        """Do the work; return the exit code.  Raise a TrnprofError for user errors."""


def load_commands() -> list[Command]:
    """Built-in commands, then those registered by installed packages, sorted by name."""
    commands: dict[str, Command] = {}
    for module_name in BUILTIN_COMMAND_MODULES:
        cmd = importlib.import_module(module_name).COMMAND
        commands[cmd.name] = cmd
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in commands:
            continue
        try:
            factory = ep.load()
        except ImportError as exc:  # a broken plugin must not take the whole CLI down
            warnings.warn(f"command {ep.name!r} unavailable: {exc}", RuntimeWarning, stacklevel=2)
            continue
        cmd = factory() if isinstance(factory, type) else factory
        commands[cmd.name] = cmd
    return [commands[name] for name in sorted(commands)]


def get_argument_parser(commands: Sequence[Command] | None = None) -> argparse.ArgumentParser:
    """The full ``trnprof`` argument parser (public so docs can be generated from it)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="trnprof: profile and analyse AWS Trainium NeuronCore traces.",
        epilog="Run `trnprof COMMAND --help` for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    sub.required = True
    for cmd in commands if commands is not None else load_commands():
        doc = (type(cmd).__doc__ or cmd.help).strip()
        p = sub.add_parser(cmd.name, help=cmd.help, description=doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        cmd.add_arguments(p)
        p.set_defaults(_command=cmd)
    return parser


def _format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                    line: str | None = None) -> str:
    return f"{PROG}: warning: {str(message).splitlines()[0] if str(message) else category.__name__}\n"


def _error(message: str) -> None:
    text = message.strip().splitlines()[0] if message.strip() else "unknown error"
    print(f"{PROG}: error: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``trnprof`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    warnings.formatwarning = _format_warning  # type: ignore[assignment]
    parser = get_argument_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return int(exc.code or 0) if isinstance(exc.code, int) or exc.code is None else 2
    try:
        return int(args._command.run(args) or 0)
    except TrnprofError as exc:
        _error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:
        # The reader of our output went away (`trnprof sql ... | head`); not an error worth reporting.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps Python's exit-time flush quiet
        return 0
    except MemoryError:
        _error("out of memory; work on a smaller window (--start/--end) or a smaller trace")
        return 1
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        _error(f"{where}{exc.strerror or exc}")
        return 1
    except Exception as exc:
        if os.environ.get("TRNPROF_DEBUG"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc} (a trnprof bug: rerun with TRNPROF_DEBUG=1 "
               "for the traceback and report it)")
        return 70


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
