"""The bundled sample traces: what they are, where they live, and how to regenerate them.

``sample_trace_paths()`` lists the trace directories under ``sample_traces/`` in the repository (the package is
installed in editable mode); ``trnprof serve`` opens them when given no argument.  They are small (a few MB in
all) and deterministic: ``sample_traces/make_samples.py`` rebuilds them from :data:`SAMPLES` and the same inputs
always give the same table contents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Directory holding the sample traces (``<repo>/sample_traces``).
SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_traces"


@dataclass(frozen=True)
class Sample:
    """One bundled trace: a kernel, its parameters and the architecture it ran on."""

    name: str
    kernel: str
    arch: str
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    @property
    def path(self) -> Path:
        """Directory of this sample under :data:`SAMPLE_DIR`."""
        return SAMPLE_DIR / f"{self.name}.trace"


SAMPLES: tuple[Sample, ...] = (
    Sample("matmul_naive-trn2", "matmul_naive", "trn2", {"M": 2048, "N": 2048, "K": 1024},
           "V0: naive tiling, DMA-bound"),
    Sample("matmul_blocked-trn2", "matmul_blocked", "trn2", {"M": 2048, "N": 2048, "K": 1024},
           "V1: blocked, B tiles reused across an A block"),
    Sample("matmul_rowload-trn2", "matmul_rowload", "trn2", {"M": 2048, "N": 2048, "K": 1024},
           "V2: blocked with whole-row loads, Tensor engine near peak"),
    Sample("mlp-trn2", "mlp", "trn2", {"layers": 4, "d_model": 256, "d_ff": 1024, "tokens": 512},
           "four transformer MLP blocks with layer and operator spans"),
    Sample("attention-trn2", "attention", "trn2", {"seq": 1024, "head_dim": 128},
           "flash attention: PE, Vector, Scalar and GpSimd interleaved"),
    Sample("softmax-trn1", "softmax", "trn1", {"rows": 1024, "cols": 2048}, "row softmax on NeuronCore-v2"),
    Sample("rmsnorm-trn1", "rmsnorm", "trn1", {"rows": 1024, "cols": 2048}, "RMSNorm on NeuronCore-v2"),
)


def sample_trace_paths() -> list[Path]:
    """The bundled sample trace directories that exist, in :data:`SAMPLES` order."""
    return [s.path for s in SAMPLES if (s.path / "Metadata.arrows").is_file()]


def make_sample(sample: Sample, out: Path | None = None, *, overwrite: bool = True) -> Path:
    """Record ``sample`` into ``out`` (default: its place under ``sample_traces/``); returns the directory."""
    from tracer.sim import run_kernel

    target = out if out is not None else sample.path
    run_kernel(sample.kernel, sample.params, arch=sample.arch, trace_path=target, overwrite=overwrite)
    return target
