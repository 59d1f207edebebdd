"""``trnprof serve``: registered through the ``trnprof.commands`` entry point so the profiler never imports us."""

from __future__ import annotations

import argparse

from profiler.errors import CommandError


class ServeCommand:
    """Serve the trnprof dashboard on http://127.0.0.1:8050 for the given traces (default: the samples)."""

    name = "serve"
    help = "open the dashboard on traces or databases (default: the bundled samples)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("inputs", nargs="*", metavar="DB_OR_TRACE", help="databases or trace directories")
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
        parser.add_argument("--port", type=int, default=8050, help="port (default: 8050)")
        parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")

    def run(self, args: argparse.Namespace) -> int:
        raise CommandError("the dashboard is not built yet (issue 5); `trnprof info TRACE` shows a trace's contents",
                           exit_code=3)
