"""The simulated, instrumented NeuronCore: runs NKI-style kernels and records instruction-level traces.

Public surface: :func:`run_kernel` (and its :class:`RunResult`), :class:`KernelContext` (the ``nc`` object a
kernel receives), :func:`cost_model` and :class:`CostModel` (the architecture presets and their constants).
See ``docs/kernels.md`` for writing a kernel and ``docs/cost-model.md`` for the timing rules.
"""

from tracer.sim.arch import PRESETS, CostModel, cost_model, overridable_names
from tracer.sim.context import KernelContext
from tracer.sim.runner import CheckResult, RunResult, run_kernel

__all__ = [
    "PRESETS",
    "CheckResult",
    "CostModel",
    "KernelContext",
    "RunResult",
    "cost_model",
    "overridable_names",
    "run_kernel",
]
