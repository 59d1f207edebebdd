"""The loop fast path: recorded loop segments replayed with generated scheduling code.

See :mod:`tracer.sim.fastpath.controller` for how segments are cut, recorded, matched and committed, and
``docs/cost-model.md`` ("Simulator speed") for what it guarantees: the same trace as the general path.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracer.sim.fastpath.controller import FastPath

__all__ = ["FastPath"]


def __getattr__(name: str) -> Any:
    # imported on first use: the trace writer process needs only ``edges`` and must not load the rest
    if name == "FastPath":
        from tracer.sim.fastpath.controller import FastPath

        return FastPath
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
