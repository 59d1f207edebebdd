"""The loop fast path: recorded loop segments replayed with generated scheduling code.

See :mod:`tracer.sim.fastpath.controller` for how segments are cut, recorded, matched and committed, and
``docs/cost-model.md`` ("Simulator speed") for what it guarantees: the same trace as the general path.
"""

from tracer.sim.fastpath.controller import FastPath

__all__ = ["FastPath"]
