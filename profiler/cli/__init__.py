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
import re
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any, NoReturn, Protocol, runtime_checkable

from tracer._version import __version__
from tracer.errors import TrnprofError

PROG = "trnprof"
ENTRY_POINT_GROUP = "trnprof.commands"

#: The built-in subcommands: name -> (the module defining its ``COMMAND``, its one-line help).  The help is
#: repeated here so that ``trnprof --help`` lists every command without importing any (their modules import numpy,
#: pyarrow, duckdb...); ``tests/unit/test_cli.py`` checks it is each command's own ``help``.
BUILTIN_COMMANDS: dict[str, tuple[str, str]] = {
    "export": ("profiler.cli.export", "write a trace as Chrome trace JSON (Perfetto) or Neuron-shaped Parquet"),
    "info": ("profiler.cli.info", "show what a trace holds: tables, rows, metadata"),
    "kernels": ("profiler.cli.kernels", "list the shipped kernels and their parameters"),
    "record": ("profiler.cli.record", "run a kernel on the simulated NeuronCore and record its trace"),
    "sweep": ("profiler.cli.sweep",
              "simulate a kernel at every combination of parameter values and constants, and compare"),
    "ingest": ("profiler.cli.ingest", "ingest a trace into a DuckDB database"),
    "summary": ("profiler.cli.summary", "summarise a trace (engines, HFU/MFU, DMA)"),
    "sql": ("profiler.cli.sql", "run read-only SQL on a trace"),
    "search": ("profiler.cli.search",
               "find events by opcode, operator, layer, source line or name (text, \"whole field\" or /regex/)"),
    "synth": ("profiler.cli.synth", "write a synthetic trace"),
    "timeline": ("profiler.cli.timeline",
                 "write the timeline of a trace (or a window of it) as a self-contained HTML file"),
    # analyses (issue 7)
    "bounds": ("profiler.cli.bounds", "performance bounds, their gaps and the bottleneck engine"),
    "calltree": ("profiler.cli.calltree",
                 "time per stack of nested spans or of instructions' layer/operator/line/opcode (flame graph numbers)"),
    "critical-path": ("profiler.cli.critical_path", "the critical path and its time per engine and opcode"),
    "diff": ("profiler.cli.diff", "compare two traces (B relative to A)"),
    "dma": ("profiler.cli.dma", "DMA efficiency: sizes, queues, reloads, small transfers"),
    "memory": ("profiler.cli.memory", "SBUF/PSUM use: peak live bytes, when, and the bytes accessed"),
    "gaps": ("profiler.cli.gaps", "idle gaps per engine, longest first, with their causes"),
    "operators": ("profiler.cli.operators", "time, FLOPs, bytes and MFU per operator, opcode or source line"),
    "recommend": ("profiler.cli.recommend", "ranked recommendations, each citing its numbers"),
    "source": ("profiler.cli.source", "a kernel source file annotated with each line's instructions, time and waits"),
    "waits": ("profiler.cli.waits", "what each engine waited for (dependency waits)"),
}


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


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line naming the command, the argument and the fix.

    ``trnprof: error: export: argument --end: expected one argument (see `trnprof export --help`)`` instead of
    the usage text; exit code 2.  ``--help`` and ``--version`` print as usual.
    """

    _EXPECTED_ONE = re.compile(r"^argument (?P<names>\S+): expected (?:at most )?one argument$")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arg_strings: list[str] = []
        self._commands: argparse._SubParsersAction | None = None  # type: ignore[type-arg]

    def add_subparsers(self, **kwargs: Any) -> argparse._SubParsersAction:  # type: ignore[type-arg]
        kwargs.setdefault("parser_class", type(self))
        self._commands = super().add_subparsers(**kwargs)
        return self._commands

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._arg_strings = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self._arg_strings, namespace)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # blame the subcommand that was given them, so the hint points at its --help
            chosen = getattr(parsed, self._commands.dest, None) if self._commands is not None else None
            target = self._commands.choices.get(chosen, self) if self._commands is not None else self
            target.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line (with the command, a hint and where the help is) and exit with 2."""
        command = self.prog.partition(" ")[2]
        text = " ".join(message.split("\n")) + self._dash_value_hint(message)
        self.exit(2, f"{PROG}: error: {command + ': ' if command else ''}{text} (see `{self.prog} --help`)\n")

    def _dash_value_hint(self, message: str) -> str:
        """For ``--end -1us`` (a value read as an option): the attached spelling ``--end=-1us``."""
        if message.startswith("the following arguments are required"):  # `search DB -x`: -x read as an option
            unknown = [a for a in self._arg_strings if a.startswith("-") and a not in ("-", "--")
                       and a.split("=", 1)[0] not in self._option_string_actions]
            if unknown:
                return f"; a value starting with '-' goes after `--`: write `{self.prog} ... -- {unknown[0]}`"
            return ""
        m = self._EXPECTED_ONE.match(message)
        if not m:
            return ""
        names = m.group("names").split("/")
        long_name = next((n for n in names if n.startswith("--")), names[0])
        for given, value in zip(self._arg_strings, self._arg_strings[1:], strict=False):
            typed = given in names or (given.startswith("--") and long_name.startswith(given))
            if typed and value.startswith("-") and value not in ("-", "--"):
                return f"; a value starting with '-' must be attached: write {long_name}={value}"
        return ""


def shown_value(text: str) -> str:
    """A value the user typed, cut to 40 characters for an error message."""
    return text if len(text) <= 40 else text[:37] + "..."


def int_arg(what: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]``, else an error naming ``what`` and the range."""

    def parse(text: str) -> int:
        shown = shown_value(text)
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what} from {low} to {high}, not {shown!r}")
        return value

    return parse


#: Largest ``--seed`` (numpy's generators take any non-negative integer; 64 bits is plenty).
MAX_SEED = 2**64 - 1


#: ``--seed N``: a seed of the random inputs (``record``, ``synth``).
seed_arg = int_arg("a seed", 0, MAX_SEED)


def load_commands() -> list[Command]:
    """Built-in commands, then those registered by installed packages, sorted by name (every module imported)."""
    commands: dict[str, Command] = {name: _builtin(name) for name in BUILTIN_COMMANDS}
    _add_plugins(commands)
    return [commands[name] for name in sorted(commands)]


class _Listed:
    """A command that is only listed (``trnprof --help``, or a run of another command): its name and help,
    without importing its module."""

    def __init__(self, name: str, help: str) -> None:
        self.name = name
        self.help = help

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """No arguments: the parser only lists the command."""

    def run(self, args: argparse.Namespace) -> int:  # pragma: no cover - main() loads the command it runs
        raise RuntimeError(f"trnprof: command {self.name!r} was not loaded")


def _builtin(name: str) -> Command:
    return importlib.import_module(BUILTIN_COMMANDS[name][0]).COMMAND


def _plugins() -> dict[str, Any]:
    """Entry points of the ``trnprof.commands`` group by name (the first of a name wins)."""
    found: dict[str, Any] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def _add_plugins(commands: dict[str, Command]) -> None:
    """Load the installed plugin commands into ``commands`` (a name already there keeps its command)."""
    for name, ep in _plugins().items():
        if name not in commands:
            cmd = _plugin(ep)
            if cmd is not None:
                commands[cmd.name] = cmd


def _plugin(ep: Any) -> Command | None:
    try:
        factory = ep.load()
    except ImportError as exc:  # a broken plugin must not take the whole CLI down
        warnings.warn(f"command {ep.name!r} unavailable: {exc}", RuntimeWarning, stacklevel=4)
        return None
    return factory() if isinstance(factory, type) else factory


def _command_word(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line: the first word that is not an option (the top-level options,
    ``--help`` and ``--version``, take no value); None when the top-level help comes first (``trnprof --help
    record`` lists every command)."""
    for word in argv:
        if word in ("-h", "--help", "--"):
            return None
        if not word.startswith("-"):
            return word
    return None


def commands_for(argv: Sequence[str]) -> list[Command]:
    """What :func:`main` needs to parse ``argv``: the named command loaded, every other built-in one only listed.
    Plugins are left out when a built-in command is named (argparse needs no other name to run it), else loaded
    to be run or listed with their help; their modules are light (the dashboard's ``serve`` imports Dash only
    when it runs)."""
    chosen = _command_word(argv)
    commands: dict[str, Command] = {
        name: _builtin(name) if name == chosen else _Listed(name, help_)
        for name, (_module, help_) in BUILTIN_COMMANDS.items()}
    if chosen not in BUILTIN_COMMANDS:
        _add_plugins(commands)
    return [commands[name] for name in sorted(commands)]


def get_argument_parser(commands: Sequence[Command] | None = None) -> argparse.ArgumentParser:
    """The full ``trnprof`` argument parser (public so docs can be generated from it)."""
    parser = ArgumentParser(
        prog=PROG,
        description="trnprof: profile and analyse AWS Trainium NeuronCore traces.",
        epilog="Run `trnprof COMMAND --help` for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands", parser_class=ArgumentParser)
    sub.required = True
    for cmd in commands if commands is not None else load_commands():
        doc = cmd.help if isinstance(cmd, _Listed) else (type(cmd).__doc__ or cmd.help).strip()
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


def is_query_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is DuckDB's answer to Ctrl-C during a query (``RuntimeError: Query interrupted``), or
    its InterruptException, possibly as the cause of another error."""
    duckdb = sys.modules.get("duckdb")
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, RuntimeError) and str(seen).strip().lower() == "query interrupted":
            return True
        if duckdb is not None and isinstance(seen, duckdb.InterruptException):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``trnprof`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    warnings.formatwarning = _format_warning  # type: ignore[assignment]
    words = list(sys.argv[1:] if argv is None else argv)
    try:   # (importing a command's modules takes up to a second or two: Ctrl-C then is "interrupted" too)
        parser = get_argument_parser(commands_for(words))
        args = parser.parse_args(words)
    except SystemExit as exc:  # --help, --version and usage errors
        return int(exc.code or 0) if isinstance(exc.code, int) or exc.code is None else 2
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    previous = _terminate_as_interrupt()
    try:
        return int(args._command.run(args) or 0)
    except Terminated:
        _error("terminated")
        return 143
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
        if is_query_interrupt(exc):  # Ctrl-C while DuckDB runs a query: DuckDB turns it into an exception
            _error("interrupted")
            return 130
        duckdb = sys.modules.get("duckdb")
        if duckdb is not None and _is_damaged_database(exc, duckdb):  # damage found while reading the data
            from pathlib import Path

            from profiler.db.connection import last_opened_path, reingest_hint

            path = last_opened_path()
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            fix = reingest_hint(path if path is not None else Path("FILE"))
            _error(f"{path if path is not None else 'the database'}: cannot read the database: {reason}; the file "
                   f"may be damaged: {fix}")
            return 2
        if os.environ.get("TRNPROF_DEBUG"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc} (a trnprof bug: rerun with TRNPROF_DEBUG=1 "
               "for the traceback and report it)")
        return 70
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _is_damaged_database(exc: Exception, duckdb: Any) -> bool:
    """DuckDB's errors for a database file damaged where only reading its data finds it (a bad block checksum,
    a block past the end)."""
    text = str(exc)
    return isinstance(exc, duckdb.IOException) or (
        isinstance(exc, duckdb.Error) and ("Corrupt database file" in text or "Could not read enough bytes" in text))


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread so that cleanup (``finally``, temporary outputs) runs."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


def _terminate_as_interrupt() -> Any:
    """Make SIGTERM raise :class:`Terminated` while a command runs (the default would end the process at once and
    leave temporary files behind); returns the handler to restore, None when it cannot be set (not the main
    thread)."""
    try:
        return signal.signal(signal.SIGTERM, _raise_terminated)
    except (ValueError, OSError):  # only the main thread may set handlers
        return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
