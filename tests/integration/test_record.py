"""`trnprof record` and `trnprof kernels` end to end, including a recording killed with SIGKILL."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from profiler.cli import main
from tracer import TraceReader
from tracer.errors import TruncatedTraceWarning

ROOT = Path(__file__).resolve().parents[2]


def test_record_writes_a_trace_and_prints_a_summary(tmp_path, capsys):
    out = tmp_path / "mm.trace"
    assert main(["record", "matmul_rowload", "-p", "M=512", "-p", "N=1024", "-p", "K=256", "--arch", "trn1",
                 "-o", str(out), "--check", "-q"]) == 0
    text = capsys.readouterr().out
    assert "kernel matmul_rowload on trn1: simulated time" in text
    assert "engines busy: Tensor" in text and f"trace: {out}" in text and "check c: OK" in text
    rate = re.search(r"s wall \(([0-9.,]+)( [KM])? instructions/s\)", text)  # a small run's rate is not "0.00 M"
    assert rate and float(rate.group(1).replace(",", "")) > 0, text
    reader = TraceReader(out)
    assert reader.recording_complete and reader.metadata["arch"] == "trn1"
    assert reader.num_rows("Instruction") > 0 and reader.num_rows("DmaPacket") > 0


def test_record_refuses_to_overwrite_and_replaces_with_force(tmp_path, capsys):
    out = tmp_path / "s.trace"
    args = ["record", "softmax", "-p", "rows=128", "-p", "cols=128", "-o", str(out), "-q"]
    assert main(args) == 0
    before = TraceReader(out).read_table("Instruction")
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trnprof: error: {out}: a trace already exists here; pass --force") and err.count("\n") == 1
    assert TraceReader(out).read_table("Instruction").equals(before), "the refused run left the old trace intact"
    # --force with a failing kernel keeps the old trace; a good run replaces it
    assert main(["record", "softmax", "-p", "rows=128", "-p", "cols=128", "-p", "dtype=int3", "-o", str(out),
                 "--force", "-q"]) == 2
    assert TraceReader(out).read_table("Instruction").equals(before)
    assert main(["record", "softmax", "-p", "rows=256", "-p", "cols=128", "-o", str(out), "--force", "-q"]) == 0
    assert TraceReader(out).num_rows("Instruction") > before.num_rows
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.trace"], "no temporary directories left behind"


def test_force_never_replaces_files_that_are_not_part_of_a_trace(tmp_path, capsys):
    out = tmp_path / "s.trace"
    args = ["record", "softmax", "-p", "rows=128", "-p", "cols=128", "-o", str(out), "-q", "--force"]
    assert main(args) == 0
    (out / "notes.txt").write_text("precious")
    (out / "sub").mkdir()
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trnprof: error: {out}: holds 'notes.txt', which is not part of a trace") \
        and err.count("\n") == 1
    assert (out / "notes.txt").read_text() == "precious" and (out / "sub").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.trace"]


def test_record_errors_are_one_line(tmp_path, capsys):
    cases = [
        (["record", "nope", "--no-trace"], "unknown kernel 'nope'"),
        (["record", "softmax", "-p", "rows", "--no-trace"], "-p 'rows': expected KEY=VALUE"),
        (["record", "softmax", "--set", "warp_speed=9", "--no-trace"], "unknown cost-model constant 'warp_speed'"),
        (["record", "softmax", "--set", "pe_clock_ghz=x", "--no-trace"], "expected a number"),
        (["record", f"{tmp_path}/none.py:k", "--no-trace"], "no such kernel file"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_record_no_trace_and_user_kernel(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "k.py"
    src.write_text("def copy(nc, n=64):\n    x = nc.input('x', (128, n), 'fp32')\n"
                   "    y = nc.output('y', (128, n), 'fp32')\n    t = nc.sbuf_tile((128, n), 'fp32')\n"
                   "    nc.dma_copy(t, x)\n    nc.dma_copy(y, t)\n")
    assert main(["record", f"{src}:copy", "-p", "n=32", "-q"]) == 0
    assert "trace: copy-trn2.trace" in capsys.readouterr().out
    assert TraceReader(tmp_path / "copy-trn2.trace").metadata["profile_name"] == "copy"
    assert main(["record", f"{src}:copy", "--no-trace", "-q"]) == 0
    assert "trace: not written (--no-trace)" in capsys.readouterr().out


def test_kernels_command_lists_every_kernel(capsys):
    assert main(["kernels"]) == 0
    text = capsys.readouterr().out
    for name in ("matmul_naive", "matmul_blocked", "matmul_rowload", "linear", "softmax", "rmsnorm", "layernorm",
                 "attention", "mlp"):
        assert f"{name}: " in text
    assert "parameters: M=1024  N=1024  K=1024" in text
    assert "dtypes: bf16, fp16, fp32, fp8_e4m3, fp8_e5m2" in text
    assert main(["kernels", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    mlp = next(k for k in data if k["name"] == "mlp")
    assert mlp["params"]["layers"] == {"default": 2, "type": "int"} and mlp["has_reference"]


def _children(pid: int) -> list[int]:
    """Pids of the live processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie or a vanished process counts as gone)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_killed_record_leaves_a_readable_trace(tmp_path):
    out = tmp_path / "big.trace"
    proc = subprocess.Popen(
        [sys.executable, "-m", "profiler", "record", "matmul_naive", "-p", "M=8192", "-p", "N=8192", "-p", "K=8192",
         "-o", str(out), "-q"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    files = [out / "Instruction.arrows", out / "Flow.arrows"]  # everything is flushed at least once a second

    def flushed() -> bool:
        return all(f.exists() and f.stat().st_size > 20_000 for f in files)

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not flushed():
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    writers = _children(proc.pid)
    assert writers, "the trace is written by a child process"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    # the child process writing the trace notices its parent is gone, closes the trace and exits
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(p) for p in writers):
        time.sleep(0.05)
    assert not any(_alive(p) for p in writers), "a trace-writing process outlived the killed recording"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = TraceReader(out)
        tables = {n: reader.read_table(n) for n in ("Instruction", "DmaPacket", "Flow")}
    assert all(issubclass(w.category, TruncatedTraceWarning) for w in caught)
    assert reader.recording_complete is False and reader.metadata["profile_name"] == "matmul_naive"
    ids = np.asarray(tables["Instruction"]["id"])
    assert len(ids) > 1000 and (ids == np.arange(len(ids))).all()
    assert tables["DmaPacket"].num_rows > 0 and tables["Flow"].num_rows > 0
    # the kernel's source file is written when the recording starts, so a killed one keeps it too
    assert reader.read_table("SourceFile").column("file").to_pylist() == ["matmul_naive.py"]
