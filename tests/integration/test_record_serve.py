"""``trnprof record --serve``: the dashboard follows the recording in a ``trnprof serve`` child, which Ctrl-C
stops with the recording; what it cannot follow is refused before anything is simulated."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from profiler.cli import main
from tests.browser.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_what_serve_cannot_follow_is_refused_first(tmp_path, capsys):
    out = tmp_path / "x.trace"
    assert main(["record", "softmax", "--serve", "--no-trace"]) == 2
    assert "--serve shows the trace being recorded: leave out --no-trace" in capsys.readouterr().err
    assert main(["record", "softmax", "--port", "9000", "-o", str(out)]) == 2
    assert "--port goes with --serve" in capsys.readouterr().err
    assert main(["record", "softmax", "--no-browser", "-o", str(out)]) == 2
    assert "--no-browser goes with --serve" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["record", "softmax", "--serve", "--port", str(port), "-o", str(out)]) == 2
        assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    assert not out.exists()                                # nothing was recorded
    assert main(["record", "softmax", "-p", "rows=256", "-p", "cols=256", "-q", "-o", str(out)]) == 0
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    assert main(["record", "softmax", "--force", "--serve", "-o", str(out)]) == 2
    assert "--serve follows a new trace as it is written" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before   # the old trace is untouched


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read()
    except OSError:
        return None


def test_the_dashboard_serves_the_recording_until_ctrl_c(tmp_path):
    port = free_port()
    out = tmp_path / "live.trace"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "profiler", "record", "softmax", "-p", "rows=4096", "-p",
                             "cols=512", "--arch", "trn1", "-q", "-o", str(out), "--serve", "--port", str(port),
                             "--no-browser"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        layout = None
        while layout is None and time.monotonic() < deadline and proc.poll() is None:
            layout = _get(f"http://127.0.0.1:{port}/_dash-layout")
            time.sleep(0.2)
        assert layout is not None, "the dashboard never answered"
        csv = _get(f"http://127.0.0.1:{port}/export.csv?trace=t0&table=Instruction&start=0&end={2**62}")
        assert csv is not None and b'"opcode"' in csv.splitlines()[0]   # it serves the recording
        while (not (out / "Metadata.arrows").exists() or _complete(out) is False) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None                              # the recording is done; the dashboard goes on
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read().decode()
    assert code == 0, err
    assert "shows the complete trace on" in err and "Traceback" not in err
    assert "kernel softmax on trn1" in proc.stdout.read().decode()
    assert _processes_naming(str(out)) == []                    # the dashboard child has ended too
    with socket.socket() as s:                                  # and its port is free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
    assert not [p for p in tmp_path.iterdir() if ".live-" in p.name]   # no generation file left behind


def _processes_naming(text: str) -> list[int]:
    """Pids of this machine's processes whose command line holds ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _complete(path: Path) -> bool:
    from tracer.reader import TraceReader

    try:
        return TraceReader(path).recording_complete
    except Exception:   # (being written)
        return False

