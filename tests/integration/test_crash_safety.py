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
        # kill anywhere from during interpreter start-up to well into the recording
        time.sleep(rng.uniform(0.0, 1.2))
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
