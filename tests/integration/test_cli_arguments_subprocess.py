"""Ctrl-C during a long DuckDB query, with a real SIGINT: one line ``interrupted`` and exit code 130."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from profiler.cli import main

#: Runs ``trnprof`` and sends itself SIGINT half a second after the user query starts (not while starting up).
WRAPPER = """
import os, signal, sys, threading
import profiler.trace as trace_module
from profiler.cli import main
real = trace_module.run_user_sql
def run_user_sql(*args, **kwargs):
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    return real(*args, **kwargs)
trace_module.run_user_sql = run_user_sql
sys.exit(main(sys.argv[1:]))
"""
#: A few seconds of single-threaded work.  DuckDB notices Ctrl-C between tasks when the main thread runs the
#: query, but only at the end when a worker thread does (about half the runs), so the query must end soon.
LONG_QUERY = "SELECT count(*) FROM range(1000000000) t WHERE hash(t.range) % 7 = 0"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_during_a_query_is_one_line_and_130(tmp_path, capsys):
    db = tmp_path / "s.trace"
    assert main(["synth", "--events", "1000", "-o", str(db)]) == 0
    assert main(["sql", str(db), "SELECT 1"]) == 0  # ingest now, so the child only runs the query
    capsys.readouterr()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, "sql", str(db), LONG_QUERY, "--timeout", "600"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "trnprof: error: interrupted\n"
    assert proc.stdout == ""
    assert time.monotonic() - t0 < 60
