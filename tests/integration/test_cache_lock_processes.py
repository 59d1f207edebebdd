"""Two processes opening the same stale input at once ingest it once (profiler.db.cache: the flock on
``<cache>.lock``): the second waits for the first, then reuses its database."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SAMPLE_TRACE = Path(__file__).resolve().parents[2] / "sample_traces" / "mlp-trn2.trace"

#: Opens argv[1]; prints one JSON line: whether this process ingested (its progress callback ran) and the summary's
#: total time.  With argv[2], the first progress call creates that file and then stalls a while (the other process
#: arrives while this one is ingesting).
OPENER = """
import json, pathlib, sys, time
import profiler
ingested = []
def progress(phase, done, total):
    if not ingested and len(sys.argv) > 2:
        pathlib.Path(sys.argv[2]).touch()
        time.sleep(1.5)
    ingested.append(phase)
with profiler.open(sys.argv[1], progress=progress) as t:
    print(json.dumps({"ingested": bool(ingested), "total": t.summary()["total_time_ns"]}))
"""


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", OPENER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_two_processes_opening_one_stale_trace_ingest_it_once(tmp_path):
    trace = tmp_path / "mlp.trace"
    shutil.copytree(SAMPLE_TRACE, trace)
    env = {**os.environ, "TRNPROF_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    marker = tmp_path / "first-is-ingesting"
    first = _start([str(trace), str(marker)], env)
    deadline = time.monotonic() + 60
    while not marker.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.exists(), first.communicate(timeout=60)
    second = _start([str(trace)], env)
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    r1, r2 = json.loads(out1.strip().splitlines()[-1]), json.loads(out2.strip().splitlines()[-1])
    assert r1["ingested"] is True
    assert r2["ingested"] is False       # it waited for the first ingest and reused the database
    assert r1["total"] == r2["total"] > 0
    caches = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert [n for n in caches if n.endswith(".trnprof.duckdb")] and not [n for n in caches if ".tmp" in n]
    assert not [n for n in caches if n.endswith(".lock")]  # the lock file goes with its last holder


def test_processes_racing_for_one_trace_ingest_it_once_and_leave_no_lock_file(tmp_path):
    # the lock file is removed by each holder on release: a process that waited on the removed file must notice
    # and lock the new one, or two processes would ingest at once
    trace = tmp_path / "mlp.trace"
    shutil.copytree(SAMPLE_TRACE, trace)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [_start([str(trace)], env) for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["ingested"] for r in results) == 1
    assert len({r["total"] for r in results}) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.trace", "mlp.trace.trnprof.duckdb"]


def test_a_failed_ingest_leaves_nothing_beside_its_input(tmp_path):
    import profiler
    from tracer.errors import TrnprofError

    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": ')  # truncated
    with pytest.raises(TrnprofError):
        profiler.open(bad).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]
