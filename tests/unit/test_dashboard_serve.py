"""`trnprof serve`: one-line errors for bad inputs and ports, a loud warning off loopback."""

from __future__ import annotations

import socket
import warnings

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


def test_a_public_host_is_warned_about(tmp_path, capsys, monkeypatch):
    import werkzeug.serving

    def no_server(*args, **kwargs):
        raise OSError("stopped by the test")

    monkeypatch.setattr(werkzeug.serving, "make_server", no_server)
    trace = write_kernel_trace(tmp_path / "k.trace", iterations=5)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.warns(RuntimeWarning, match="NO authentication"):
        assert main(["serve", str(trace), "--host", "0.0.0.0", "--port", str(port), "--no-browser"]) == 2
    assert "stopped by the test" in capsys.readouterr().err
