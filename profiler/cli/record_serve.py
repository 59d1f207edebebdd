"""``trnprof record --serve``: the dashboard following the recording while it runs, in a ``trnprof serve`` child.

The child is started as soon as the trace directory holds its Metadata (the writer writes it first), so the
dashboard opens on the first rows and follows the rest as they are flushed (:mod:`profiler.live`).  It runs in
its own process (Dash and the re-ingests do not share this process's interpreter with the simulation).  After the
recording, the dashboard goes on serving the complete trace until Ctrl-C, which stops both.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path

from tracer.trace_dir import METADATA_FILE_NAME

#: The dashboard's port unless --port says otherwise (``trnprof serve``'s default).
DEFAULT_PORT = 8050
#: Seconds the child is given to stop after Ctrl-C before it is killed.
STOP_WAIT_S = 10.0


class DashboardFollower:
    """A ``trnprof serve TRACE_DIR`` child process started once the recording has begun (see the module docstring).

    Args:
        trace_dir: the trace directory being recorded.
        port: the dashboard's port (loopback only).
        browser: open a web browser on it.
    """

    def __init__(self, trace_dir: Path, port: int, *, browser: bool = True) -> None:
        self.trace_dir = trace_dir
        self.port = port
        self.browser = browser
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Where the dashboard answers."""
        return f"http://127.0.0.1:{self.port}/"

    def command(self) -> list[str]:
        """The child's command line."""
        cmd = [sys.executable, "-m", "profiler", "serve", str(self.trace_dir), "--port", str(self.port)]
        return cmd if self.browser else [*cmd, "--no-browser"]

    def poll(self, *_progress: object) -> None:
        """A progress callback: start the child once the trace directory holds its Metadata."""
        if self.process is None and (self.trace_dir / METADATA_FILE_NAME).exists():
            self.start()

    def start(self) -> None:
        """Start the child (once)."""
        if self.process is None:
            self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL)

    def serve_until_interrupted(self) -> int:
        """After the recording: keep the child serving until Ctrl-C (or until it exits by itself); 0, or 1 when
        it failed (its own error line is on stderr already)."""
        self.start()
        assert self.process is not None
        if self.process.poll() is None:
            print(f"trnprof: the dashboard shows the complete trace on {self.url}; Ctrl-C stops it",
                  file=sys.stderr, flush=True)
        try:
            code = self.process.wait()
        except KeyboardInterrupt:
            self.stop()
            return 0
        except BaseException:   # terminated: the child goes too
            self.stop()
            raise
        if code:
            print(f"trnprof: error: the dashboard stopped (exit code {code}); the trace is complete at "
                  f"{self.trace_dir}: run `trnprof serve {self.trace_dir}`", file=sys.stderr, flush=True)
            return 1
        return 0

    def stop(self) -> None:
        """Stop the child (a Ctrl-C in the terminal reaches it too; it is given :data:`STOP_WAIT_S` to end, then
        killed)."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        # SIGTERM: `trnprof` turns it into an exception, so the server closes its traces and removes its files (a
        # SIGINT would do the same, but a recording started in the background ignores SIGINT, and so would the child)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            _kill(proc)
        except KeyboardInterrupt:   # Ctrl-C again: at once
            _kill(proc)
            raise


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_WAIT_S)


__all__ = ["DEFAULT_PORT", "DashboardFollower"]
