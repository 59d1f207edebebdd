"""The golden cases: tiny traces recorded by the real simulator, the analyses run on them, and how each result is
serialised (perfetto diff-test style: trace + analysis -> expected CSV or JSON under ``tests/golden/expected``).

Regenerate the expected files (after an intended change) with ``python -m tests.golden.regenerate``; add
``--traces`` to re-record the traces too (after a simulator or trace-format change).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from profiler.analyses import (
    bounds_table,
    critical_path,
    critical_path_breakdown,
    dma_efficiency,
    idle_gaps,
    performance_bounds,
    recommendations,
    time_by,
    wait_summary,
)
from profiler.analyses import schema as rs
from profiler.analyses.diff import diff
from profiler.analyses.memory_map import memory_summary
from profiler.trace import Trace

GOLDEN_DIR = Path(__file__).resolve().parent
TRACE_DIR = GOLDEN_DIR / "traces"
EXPECTED_DIR = GOLDEN_DIR / "expected"


@dataclass(frozen=True)
class GoldenTrace:
    """A trace recorded by the simulator for the golden tests."""

    name: str
    kernel: str
    params: dict[str, Any]
    arch: str = "trn2"
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        """Where the recorded trace is stored."""
        return TRACE_DIR / f"{self.name}.trace"


TRACES: tuple[GoldenTrace, ...] = (
    GoldenTrace("matmul_naive", "matmul_naive", {"M": 256, "N": 512, "K": 256}),
    GoldenTrace("matmul_naive_fast_dma", "matmul_naive", {"M": 256, "N": 512, "K": 256},
                overrides={"dma_bandwidth_gbps": 736}),
    GoldenTrace("matmul_rowload", "matmul_rowload", {"M": 512, "N": 1024, "K": 256}),
    GoldenTrace("mlp", "mlp", {"layers": 1, "d_model": 128, "d_ff": 256, "tokens": 256}),
    GoldenTrace("softmax", "softmax", {"rows": 256, "cols": 512}, arch="trn1"),
)
TRACES_BY_NAME = {t.name: t for t in TRACES}


def _round(value: Any) -> Any:
    """Floats to 9 significant digits (stable across platforms), recursively."""
    if isinstance(value, float):
        return None if not math.isfinite(value) else float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_round(v) for v in value]
    return value


def to_csv(table: pa.Table) -> str:
    """A table as CSV text (floats rounded)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.column_names)
    for row in table.to_pylist():
        writer.writerow(["" if v is None else _round(v) for v in row.values()])
    return out.getvalue()


def to_json(value: Any) -> str:
    """A dict (tables as row lists) as sorted, indented JSON text (floats rounded)."""
    def plain(v: Any) -> Any:
        if isinstance(v, pa.Table):
            return v.to_pylist()
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v
    return json.dumps(_round(plain(value)), indent=1, sort_keys=True) + "\n"


def _diff_json(a: Trace, b: Trace) -> str:
    result = diff(a, b)
    for side in result[rs.DIFF_TRACES].values():
        side.pop("path", None)  # where the trace was copied to differs from run to run
        side.pop("name", None)
    return to_json(result)


def _dma_json(t: Trace) -> str:
    return to_json(dma_efficiency(t))


@dataclass(frozen=True)
class GoldenCase:
    """One analysis of one (or two) golden traces and the file its expected output lives in."""

    name: str
    traces: tuple[str, ...]
    run: Callable[..., str]
    suffix: str

    @property
    def expected_path(self) -> Path:
        """The expected output file."""
        return EXPECTED_DIR / f"{self.name}.{self.suffix}"


def _cases() -> list[GoldenCase]:
    out: list[GoldenCase] = []
    for t in ("matmul_naive", "matmul_rowload", "mlp", "softmax"):
        out += [
            GoldenCase(f"{t}.bounds", (t,), lambda tr: to_json(performance_bounds(tr)), "json"),
            GoldenCase(f"{t}.bounds_table", (t,), lambda tr: to_csv(bounds_table(performance_bounds(tr))), "csv"),
            GoldenCase(f"{t}.waits", (t,), lambda tr: to_csv(wait_summary(tr)), "csv"),
            GoldenCase(f"{t}.critical_path", (t,), lambda tr: to_csv(critical_path_breakdown(critical_path(tr))),
                       "csv"),
            GoldenCase(f"{t}.idle_gaps", (t,), lambda tr: to_csv(idle_gaps(tr, limit=25)), "csv"),
            GoldenCase(f"{t}.opcodes", (t,), lambda tr: to_csv(time_by(tr, "opcode")), "csv"),
            GoldenCase(f"{t}.dma", (t,), _dma_json, "json"),
            GoldenCase(f"{t}.recommendations", (t,), lambda tr: to_csv(recommendations(tr)), "csv"),
            GoldenCase(f"{t}.memory", (t,), lambda tr: to_csv(memory_summary(tr)), "csv"),
        ]
    out.append(GoldenCase("mlp.operators", ("mlp",), lambda tr: to_csv(time_by(tr, "operator")), "csv"))
    out.append(GoldenCase("what_if_dma_bandwidth.diff", ("matmul_naive", "matmul_naive_fast_dma"), _diff_json,
                          "json"))
    return out


CASES: tuple[GoldenCase, ...] = tuple(_cases())
