"""A recording process killed with SIGKILL at random moments leaves a trace whose flushed batches read back intact."""

import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from tests.conftest import check_instruction_rows
from tracer import TraceReader
from tracer.errors import TruncatedTraceWarning

ROOT = Path(__file__).resolve().parents[2]
KILLS = 16


def test_sigkill_at_random_moments_leaves_readable_traces(tmp_path):
    rng = random.Random(1234)
    totals = []
    warned = 0
    for i in range(KILLS):
        path = tmp_path / f"run{i}"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "tests.integration.recorder_script", str(path)],
                                cwd=ROOT, env=env)
        if i % 4 == 0:
            # a kill during interpreter start-up or while the writer opens its files
            time.sleep(rng.uniform(0.0, 0.6))
        else:
            # a kill at a random moment of the recording itself: timed from the writer's first file, so a slow,
            # loaded machine shifts start-up but not where in the writing the kill lands
            _wait_for(path / "Metadata.arrows", proc)
            time.sleep(rng.uniform(0.0, 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not (path / "Metadata.arrows").exists():
            totals.append(0)  # killed before the writer was created: nothing to read, nothing claimed
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reader = TraceReader(path)
            table = reader.read_table("Instruction")
            sem = reader.read_table("SemaphoreUpdate")
        assert all(issubclass(w.category, TruncatedTraceWarning) for w in caught), [str(w.message) for w in caught]
        warned += bool(caught)
        assert reader.recording_complete is False
        assert reader.metadata["profile_name"] == "crash-test"
        # rows are a gap-free prefix of what was appended, every value intact
        np.testing.assert_array_equal(np.asarray(table.column("id")), np.arange(table.num_rows))
        check_instruction_rows(table)
        assert sem.column("id").to_pylist() == ["S[0]"] * sem.num_rows
        totals.append(table.num_rows)
    # the random kills really did land while rows were being written
    assert sum(1 for t in totals if t > 0) >= KILLS // 2, totals


def _wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Wait until ``path`` exists (the recorder created its writer); fail if the recorder died first."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"recorder exited with {proc.returncode} before writing"
        assert time.monotonic() < deadline, f"recorder wrote nothing in {timeout_s} s"
        time.sleep(0.005)
