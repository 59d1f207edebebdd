"""The simulated, instrumented NeuronCore: runs NKI-style kernels and records instruction-level traces.

Public surface: :func:`run_kernel` (and its :class:`RunResult`), :class:`KernelContext` (the ``nc`` object a
kernel receives), :func:`cost_model` and :class:`CostModel` (the architecture presets and their constants).
See ``docs/kernels.md`` for writing a kernel and ``docs/cost-model.md`` for the timing rules.
"""

from typing import TYPE_CHECKING

from tracer._lazy import lazy_attributes
from tracer.sim.arch import PRESETS, CostModel, cost_model, overridable_names

if TYPE_CHECKING:
    from tracer.sim.check import CheckResult
    from tracer.sim.context import KernelContext
    from tracer.sim.runner import RunResult, run_kernel

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


#: Imported on first use: the trace writer process (tracer.sim.emit_child) must not load the simulator.
_LAZY = {"KernelContext": "tracer.sim.context", "CheckResult": "tracer.sim.check", "RunResult": "tracer.sim.runner",
         "run_kernel": "tracer.sim.runner"}
__getattr__ = lazy_attributes(__name__, _LAZY)
