"""`trnprof serve`: one-line errors for bad inputs and ports, a loud warning off loopback."""

from __future__ import annotations

import socket
import warnings
from pathlib import Path

import pytest

from dashboard.command import is_loopback
from profiler.cli import main
from tests.browser.trace_factory import write_kernel_trace


def test_loopback_detection():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("127.8.0.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.com")


@pytest.mark.parametrize("args, needle", [
    (["serve", "--port", "0", "--no-browser", "x"], "--port 0"),
    (["serve", "--port", "70000", "--no-browser", "x"], "--port 70000"),
    (["serve", "--no-browser", "/no/such/trace.duckdb"], "/no/such/trace.duckdb"),
])
def test_bad_arguments_fail_in_one_line(capsys, args, needle):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_busy_port_and_public_host(tmp_path, capsys):
    trace = write_kernel_trace(tmp_path / "k.trace", iterations=5)
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        with warnings.catch_warnings(record=True) as caught:  # the address is checked first: one line, no warning
            warnings.simplefilter("always")
            assert main(["serve", str(trace), "--host", "0.0.0.0", "--port", str(port), "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 0.0.0.0:{port}" in err and "--port" in err
    assert len(err.strip().splitlines()) == 1 and not caught


def test_a_public_host_is_warned_about_on_stderr_whatever_the_warning_filters(tmp_path, capsys, monkeypatch):
    import werkzeug.serving

    def no_server(*args, **kwargs):
        raise OSError("stopped by the test")

    monkeypatch.setattr(werkzeug.serving, "make_server", no_server)
    trace = write_kernel_trace(tmp_path / "k.trace", iterations=5)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # `python -W ignore` must not hide it
        assert main(["serve", str(trace), "--host", "0.0.0.0", "--port", str(port), "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "trnprof: warning: binding 0.0.0.0: the dashboard has NO authentication" in err
    assert "any IP address or localhost are answered; host names need --allow-host" in err
    assert "stopped by the test" in err


class _FakeServer:
    def __init__(self, host, port, app, threaded):
        self.server_port = port
        self.app = app

    def serve_forever(self):
        raise KeyboardInterrupt

    def server_close(self):
        pass


@pytest.mark.parametrize("host, shown", [("::1", "http://[::1]:{port}/"), ("[::1]", "http://[::1]:{port}/"),
                                         ("127.0.0.1", "http://127.0.0.1:{port}/"),
                                         ("0.0.0.0", "http://127.0.0.1:{port}/"), ("::", "http://[::1]:{port}/")])
def test_the_printed_and_opened_url_is_valid_for_ipv6(tmp_path, capsys, monkeypatch, host, shown):
    import threading

    import werkzeug.serving

    from dashboard import command

    servers = []
    monkeypatch.setattr(werkzeug.serving, "make_server", lambda *a, **k: servers.append(_FakeServer(*a, **k))
                        or servers[-1])
    monkeypatch.setattr(command, "_check_can_listen", lambda host, port: None)
    opened = []

    class NowTimer:
        def __init__(self, _delay, fn, args):
            self.fn, self.args = fn, args

        def start(self):
            opened.append(self.args[0])

    monkeypatch.setattr(threading, "Timer", NowTimer)
    trace = write_kernel_trace(tmp_path / "k.trace", iterations=5)
    assert main(["serve", str(trace), "--host", host, "--port", "8765"]) == 0
    url = shown.format(port=8765)
    assert f"trnprof dashboard on {url} " in capsys.readouterr().err
    assert opened == [url]
    assert command.served_url(host, 8765) == url


def test_serve_answers_the_hosts_it_is_bound_for(tmp_path, monkeypatch):
    import werkzeug.serving

    from dashboard import command

    servers = []
    monkeypatch.setattr(werkzeug.serving, "make_server", lambda *a, **k: servers.append(_FakeServer(*a, **k))
                        or servers[-1])
    monkeypatch.setattr(command, "_check_can_listen", lambda host, port: None)
    trace = write_kernel_trace(tmp_path / "k.trace", iterations=5)

    def status(args, host):
        servers.clear()
        assert main(["serve", str(trace), "--no-browser", *args]) == 0
        return servers[0].app.test_client().get("/", headers={"Host": host}).status_code

    assert status([], "localhost:8050") == 200 and status([], "evil.example:8050") == 403
    assert status(["--allow-host", "my.box"], "my.box:8050") == 200
    assert status(["--host", "192.0.2.7"], "192.0.2.7:8050") == 200
    assert status(["--host", "192.0.2.7"], "evil.example") == 403
    assert status(["--host", "0.0.0.0"], "anything.example") == 403  # a name: could be a DNS-rebinding page
    assert status(["--host", "0.0.0.0"], "10.0.0.5:8050") == 200
    assert status(["--host", "0.0.0.0", "--allow-host", "*"], "anything.example") == 200
    assert status(["--host", "0.0.0.0", "--allow-host", "my.box"], "anything.example") == 403


def test_sigterm_stops_the_server_quietly_and_a_running_recording_is_followed(tmp_path, monkeypatch, capsys):
    """A service manager (or `trnprof record --serve`) stops the server with SIGTERM: exit 0, no error line, the
    traces closed.  A recording still running is read before the server starts and followed, not pre-opened."""
    import werkzeug.serving

    import dashboard.app
    from dashboard import command
    from profiler.cli import Terminated
    from tests.unit.test_live import rows
    from tracer import TraceWriter
    from tracer import schema as ts

    apps = []
    real_create_app = dashboard.app.create_app
    monkeypatch.setattr(dashboard.app, "create_app", lambda *a, **k: apps.append(real_create_app(*a, **k)) or apps[-1])
    seen = []

    class Stopped(_FakeServer):
        def serve_forever(self):
            seen.append(apps[0].trnprof_registry.live_status("t0"))   # read (and followed) before serving
            raise Terminated

    monkeypatch.setattr(werkzeug.serving, "make_server", Stopped)
    monkeypatch.setattr(command, "_check_can_listen", lambda host, port: None)
    path = tmp_path / "run.trace"
    writer = TraceWriter(path, background_flush=False)
    writer.append(ts.INSTRUCTION.name, rows(0, 10))
    writer.flush()
    try:
        assert main(["serve", str(path), "--no-browser"]) == 0
        assert seen[0] is not None and seen[0].instructions == 10
        err = capsys.readouterr().err
        assert "the recording has not completed: the dashboard shows its rows so far and follows it" in err
        assert "error" not in err and "not complete (still running" not in err   # (no warning, no error line)
    finally:
        writer.close(complete=False)


def test_serve_takes_a_folder_of_traces_and_refuses_one_without_any(tmp_path, monkeypatch, capsys):
    import werkzeug.serving

    import dashboard.app
    from dashboard import command

    apps = []
    real_create_app = dashboard.app.create_app
    monkeypatch.setattr(dashboard.app, "create_app", lambda *a, **k: apps.append(real_create_app(*a, **k)) or apps[-1])
    monkeypatch.setattr(werkzeug.serving, "make_server", _FakeServer)
    monkeypatch.setattr(command, "_check_can_listen", lambda host, port: None)
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("b.trace", "a.trace"):
        write_kernel_trace(folder / name, iterations=5)
    (folder / "notes.txt").write_text("not a trace")
    lone = write_kernel_trace(tmp_path / "lone.trace", iterations=5)
    import profiler

    opened = []
    real_open = profiler.open

    def counting_open(path, *args, **kwargs):
        opened.append(Path(path).name)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(profiler, "open", counting_open)
    assert main(["serve", str(folder), str(lone), "--no-browser"]) == 0
    assert "(3 traces)" in capsys.readouterr().err
    registry = apps[0].trnprof_registry
    assert [e.path.name for e in registry.entries] == ["a.trace", "b.trace", "lone.trace"]
    # a trace named on the command line is ingested before serving; those found in a folder when first shown
    assert opened == ["lone.trace"]
    registry.open("t0")
    assert opened == ["lone.trace", "a.trace"]
    registry.close()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["serve", str(empty), "--no-browser"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"trnprof: error: {empty}: holds no trace (trace directories, .duckdb databases or importable "
                   "profiles); pass a trace, or a folder of them"]
