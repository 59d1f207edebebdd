"""Shared fixtures: small synthetic trace columns and helpers used across the test suite."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings

# The suite must not depend on what this machine's trnprof cache holds, nor start background builds into it:
# ahead-of-time kernels are off unless a test turns them on (tests/integration/test_aot.py, with its own cache).
os.environ["TRNPROF_AOT"] = "0"

from tracer import schema

# tests/run.sh (the CI command) runs the property tests with `--hypothesis-profile=ci`: the same examples every
# run, so a red CI means a change broke something; plain `pytest` keeps exploring new examples.  Without a
# deadline: the property tests check results, not time (benchmarks/ does), and on a loaded 2-vCPU machine one
# example of the row filter's oracle test once took 256 ms against hypothesis's default 200 ms.
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)

ENGINE_CYCLE = schema.ENGINES
OPCODES = ("MATMUL", "LDWEIGHTS", "ACTIVATE", "TENSOR_TENSOR", "DMA_TRIGGER")


def instruction_columns(n: int, first_id: int = 0) -> dict[str, object]:
    """Deterministic Instruction columns whose every value is a function of the row id (so damage is visible)."""
    ids = np.arange(first_id, first_id + n, dtype=np.int64)
    start = ids * 10
    dur = (ids % 7) + 1
    return {
        schema.ID: ids,
        schema.START_TS: start,
        schema.END_TS: start + dur,
        schema.DURATION_NS: dur,
        schema.ENGINE: [ENGINE_CYCLE[i % len(ENGINE_CYCLE)] for i in ids],
        schema.OPCODE: [OPCODES[i % len(OPCODES)] for i in ids],
        schema.OPERANDS: [f"S[{i % 3}]>=1" for i in ids],
        schema.PC: ids // len(ENGINE_CYCLE),
        schema.RAW_FLOPS: ids * 2,
    }


def check_instruction_rows(table) -> None:
    """Assert every row of an Instruction table is exactly what :func:`instruction_columns` wrote."""
    ids = np.asarray(table.column(schema.ID))
    np.testing.assert_array_equal(np.asarray(table.column(schema.START_TS)), ids * 10)
    np.testing.assert_array_equal(np.asarray(table.column(schema.DURATION_NS)), (ids % 7) + 1)
    np.testing.assert_array_equal(np.asarray(table.column(schema.RAW_FLOPS)), ids * 2)
    engines = table.column(schema.ENGINE).to_pylist()
    opcodes = table.column(schema.OPCODE).to_pylist()
    operands = table.column(schema.OPERANDS).to_pylist()
    for i, e, o, a in zip(ids.tolist(), engines, opcodes, operands, strict=True):
        assert e == ENGINE_CYCLE[i % len(ENGINE_CYCLE)]
        assert o == OPCODES[i % len(OPCODES)]
        assert a == f"S[{i % 3}]>=1"


@pytest.fixture
def small_trace(tmp_path):
    """A finished trace directory with 1,000 Instruction rows in several batches."""
    from tracer import TraceWriter

    path = tmp_path / "small.trace"
    with TraceWriter(path, metadata={"arch": "trn2", "is_simulation": True}, batch_rows=128,
                     background_flush=False) as w:
        for first in range(0, 1000, 250):
            w.append("Instruction", instruction_columns(250, first))
    return path


@pytest.fixture(scope="module")
def mlp_sample(tmp_path_factory):
    """A copy of the bundled ``mlp-trn2`` sample trace (its ingest cache lands beside the copy), per test module."""
    import shutil
    from pathlib import Path

    path = tmp_path_factory.mktemp("sample") / "mlp.trace"
    shutil.copytree(Path(__file__).resolve().parents[1] / "sample_traces" / "mlp-trn2.trace", path)
    return path


# -- notebook API (tests/unit/test_notebook_*.py) ------------------------------------------------------------
NOTEBOOK_SYNTH_EVENTS = 300_000
NOTEBOOK_SYNTH_TRACKS = 42  # two NeuronCores


@pytest.fixture(scope="session")
def notebook_synth_trace(tmp_path_factory):
    """A synthetic two-core trace directory big enough that a whole-trace view is drawn from index buckets."""
    from profiler.synth import synth_trace

    path = tmp_path_factory.mktemp("notebook") / "synth.trace"
    return synth_trace(path, events=NOTEBOOK_SYNTH_EVENTS, tracks=NOTEBOOK_SYNTH_TRACKS)


@pytest.fixture(scope="session")
def two_core_trace(tmp_path_factory):
    """A small synthetic trace of two NeuronCores (5 engines and 16 DMA queues each)."""
    from profiler.synth import synth_trace

    return synth_trace(tmp_path_factory.mktemp("two_cores") / "two.trace", events=20_000, tracks=42)
