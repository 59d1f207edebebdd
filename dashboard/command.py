"""``trnprof serve``: open the dashboard on traces or databases (default: the bundled samples).

Registered through the ``trnprof.commands`` entry point so the profiler never imports the dashboard.  Inputs are
ingested (or found in the ingest cache) before the server starts, with a progress bar, so a bad input fails here
with one line instead of in the browser.  The server binds the loopback interface unless told otherwise, and says
so loudly (on stderr, whatever the warning filters) when it is told otherwise: the dashboard has no
authentication and its SQL page reads every served trace.  Requests must name an accepted host
(:mod:`dashboard.hosts`: loopback names, the ``--host`` address, ``--allow-host`` names), which stops DNS rebinding.
"""

from __future__ import annotations

import argparse
import sys
import threading
import webbrowser
from pathlib import Path
from typing import Any

from dashboard.hosts import WILDCARD_ADDRESSES, HostPolicy, is_loopback, strip_brackets, url_host
from profiler.cli._listen import check_can_listen as _check_can_listen
from profiler.errors import CommandError

__all__ = ["ServeCommand", "expand_folders", "is_loopback", "open_inputs", "public_warning", "served_url"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050


def _sample_paths() -> list[Path]:
    try:
        from tracer.samples import sample_trace_paths
    except ImportError:
        return []
    return [Path(p) for p in sample_trace_paths()]


def open_inputs(paths: list[Path], opener: Any = None) -> dict[Path, Any]:
    """Open (ingesting when needed) every input, with a progress bar; TrnprofError names the bad one.  A recording
    still running is left to the registry, which follows it (:mod:`profiler.live`)."""
    from tqdm import tqdm

    from profiler.live import is_recording

    if opener is None:
        import profiler

        opener = profiler.open
    opened: dict[Path, Any] = {}
    for path in tqdm(paths, desc="opening traces", unit="trace", disable=len(paths) < 2 or not sys.stderr.isatty()):
        if not path.exists():
            raise CommandError(f"{path}: no such file or directory (pass a trace directory, a .duckdb database "
                               "or an importable file)")
        if is_recording(path):
            # read by the registry as it follows it (profiler.live); its "recording is not complete" warning is what
            # following it is for: one line saying so instead
            print(f"trnprof: {path}: the recording has not completed: the dashboard shows its rows so far and "
                  "follows it while it is written", file=sys.stderr, flush=True)
            continue
        opened[path.resolve()] = opener(path)
    return opened


def expand_folders(paths: list[Path]) -> list[Path]:
    """``paths`` with each folder of traces (a directory that is not a trace itself: a sweep's ``--trace-dir``)
    replaced by the traces in it (:func:`profiler.trace_folders.traces_in_folder`); TrnprofError names a folder
    that holds none."""
    from profiler.trace_folders import is_trace_folder, traces_in_folder

    out: list[Path] = []
    for path in paths:
        out.extend(traces_in_folder(path) if is_trace_folder(path) else [path])
    return out


def served_url(host: str, port: int) -> str:
    """The URL to open for a server bound to ``host``: loopback for every interface, IPv6 in brackets."""
    host = strip_brackets(host)
    if host in WILDCARD_ADDRESSES:
        host = "::1" if host == "::" else "127.0.0.1"
    return f"http://{url_host(host)}:{port}/"


def public_warning(host: str, port: int, policy: HostPolicy) -> str:
    """The warning printed when the server binds a non-loopback address."""
    if policy.any_host:
        hosts = "requests for any Host name are answered, so any web page you open can use it too, through DNS " \
                "rebinding; restrict with --allow-host NAME"
    elif policy.any_address:
        hosts = "requests for any IP address or localhost are answered; host names need --allow-host NAME"
    else:
        hosts = "requests for Host names " + ", ".join(sorted({"localhost", *policy.names})) + " are answered"
    return (f"trnprof: warning: binding {host}: the dashboard has NO authentication and anyone who can reach port "
            f"{port} can read every served trace ({hosts}); use the default 127.0.0.1 unless you mean it")


class ServeCommand:
    """Serve the trnprof dashboard on http://127.0.0.1:8050 for the given traces (default: the samples).

    Each input is a trnprof trace directory, a .duckdb database written by `trnprof ingest`, a file an importer
    recognises, or a folder of those (every trace in it; a sweep's --trace-dir adds the Sweep page); each trace is
    ingested once and cached.  The dashboard binds the loopback interface only, unless --host
    says otherwise, and answers only requests naming an accepted host (localhost, 127.0.0.1, [::1], the --host
    address, --allow-host names), which protects it from DNS rebinding: open it at the URL it prints.
    """

    name = "serve"
    help = "open the dashboard on traces or databases (default: the bundled samples)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Inputs, --host, --allow-host, --port, --no-browser."""
        parser.add_argument("inputs", nargs="*", metavar="DB_OR_TRACE", help="databases, trace directories, "
                            "importable files, or folders of them (a sweep's --trace-dir: its Sweep page too; "
                            "default: the bundled sample traces)")
        parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default: 127.0.0.1, loopback "
                            "only; anything else exposes every served trace to the network)")
        parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                            help="also answer requests for this host name (repeatable; '*' for any).  Requests "
                            "naming another host get HTTP 403 (DNS rebinding): by default loopback names, plus the "
                            "--host address; with --host 0.0.0.0 or :: any name unless --allow-host lists them")
        parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
        parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")

    def run(self, args: argparse.Namespace) -> int:
        """Ingest the inputs, build the app, open the browser, serve until Ctrl-C."""
        host = strip_brackets(args.host)
        _check_can_listen(host, args.port)  # before any work (ingesting inputs can take a while)
        given = [Path(p) for p in args.inputs]
        inputs = expand_folders(given)
        # traces found in a folder are opened (ingested) when first shown: a sweep of hundreds of points would
        # otherwise wait for every one before serving (each was recognised as a trace already)
        in_folders = set(inputs) - set(given)
        samples: list[Path] = []
        if not inputs:
            samples = _sample_paths()
            if not samples:
                raise CommandError("no trace given and no bundled samples found; pass a trace directory or database "
                                   "(record one with `trnprof record`)")
        opened = open_inputs([p for p in inputs if p not in in_folders] + samples)
        policy = HostPolicy.for_server(host, args.allow_host)
        if not is_loopback(host):
            print(public_warning(host, args.port, policy), file=sys.stderr, flush=True)
        from werkzeug.serving import make_server

        import profiler
        from dashboard.app import create_app
        from dashboard.registry import TraceRegistry

        registry = TraceRegistry(inputs, samples=samples, opener=lambda p: opened.get(p.resolve()) or profiler.open(p))
        for entry in registry.entries:   # followed recordings are read before the server starts too
            registry.poll(entry.id)
        app = create_app(registry, allowed_hosts=policy)
        try:
            server = make_server(host, args.port, app.server, threaded=True)
        except (OSError, SystemExit) as exc:  # werkzeug exits when it cannot bind
            raise CommandError(f"cannot listen on {args.host}:{args.port}: {exc} (pick another --port, or stop "
                               "the program using it)") from None
        url = served_url(host, server.server_port)
        print(f"trnprof dashboard on {url} ({len(registry)} trace{'s' if len(registry) != 1 else ''}); "
              "Ctrl-C stops it", file=sys.stderr, flush=True)
        if not args.no_browser:
            threading.Timer(0.8, webbrowser.open, (url,)).start()
        from profiler.cli import Terminated

        try:
            server.serve_forever()
        except (KeyboardInterrupt, Terminated):   # Ctrl-C, or SIGTERM (a service manager, `record --serve`): a stop
            pass
        finally:
            server.server_close()
            registry.close()
        return 0
