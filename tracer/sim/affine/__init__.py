"""NKI's contract for ``nc.affine_range``: the loop body is traced once with a symbolic index, then expanded.

* :mod:`~tracer.sim.affine.index` -- symbolic loop indices (affine expressions of loop variables);
* :mod:`~tracer.sim.affine.views` -- slices with symbolic bounds;
* :mod:`~tracer.sim.affine.events` -- what tracing a body records;
* :mod:`~tracer.sim.affine.recorder` -- the kernel API while a body is traced;
* :mod:`~tracer.sim.affine.analysis` -- checking a trace against the contract (independent iterations);
* :mod:`~tracer.sim.affine.codegen` -- compiling a traced loop nest to the Python loop nest that issues every
  iteration with concrete operands;
* :mod:`~tracer.sim.affine.rolling` -- how iterations share one piece of that code (entry moves, rolled loops);
* :mod:`~tracer.sim.affine.loops` -- ``nc.affine_range`` itself: tracing, checking, expanding.

See ``docs/kernels.md`` ("Loops") for the rules a kernel follows and ``docs/cost-model.md`` ("Simulator speed")
for how the expansion is scheduled.
"""
