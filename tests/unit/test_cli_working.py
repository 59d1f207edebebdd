"""The "working…" line long analyses show on a terminal: after a second of silence, gone before their output."""

from __future__ import annotations

import io
import time

from profiler.cli import _progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_block_says_what_it_does_and_clears_the_line_before_printing(monkeypatch):
    err, out = _Tty(), io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr("sys.stdout", out)
    with _progress.working("computing the critical path", after_s=0.05):
        time.sleep(0.7)
        shown = err.getvalue()
        print("result")
        cleared = err.getvalue()
        time.sleep(0.6)           # nothing more once the command printed
    assert "\rcomputing the critical path…  0 s" in shown
    assert cleared.endswith("\r\x1b[2K") and err.getvalue() == cleared
    assert out.getvalue() == "result\n"
    import sys
    assert sys.stdout is out      # put back


def test_a_short_block_or_no_terminal_shows_nothing(monkeypatch):
    err = _Tty()
    monkeypatch.setattr("sys.stderr", err)
    with _progress.working("x", after_s=5):
        pass
    assert err.getvalue() == ""
    plain = io.StringIO()
    monkeypatch.setattr("sys.stderr", plain)
    with _progress.working("x", after_s=0):
        time.sleep(0.2)
    assert plain.getvalue() == ""
