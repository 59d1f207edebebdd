"""Analyses: pure functions over a :class:`~profiler.Trace` that turn a timeline into answers.

Each analysis is ``f(trace, start_ns=None, end_ns=None, core=None, ...) -> pyarrow.Table | dict`` over the public
Trace API; the same functions serve the ``trnprof`` commands, notebooks and the dashboard.  Result names live in
:mod:`profiler.analyses.schema`; definitions, formulas and caveats in ``docs/analyses.md``.

- :func:`performance_bounds` / :func:`bounds_table` — memory, compute and pipeline bounds, gaps, bottleneck.
- :func:`dependency_waits` / :func:`wait_summary` — what each semaphore wait waited for.
- :func:`critical_path` / :func:`critical_path_breakdown` — the chain of work that sets the kernel's end;
  :func:`chain_to` — the chain that ends at one event (why it started when it did).
- :func:`idle_gaps` — idle stretches per engine with their causes.
- :func:`time_by` / :func:`operator_table` — time, FLOPs, bytes, MFU per operator, opcode or source line.
- :func:`dma_efficiency` — DMA size histogram, per-queue traffic, reloads per tensor, small-transfer regions.
- :func:`recommendations` — ranked, rule-based advice citing its numbers.
- :func:`diff` — two traces compared: total, engines, bounds, per-identity deltas.

In their own modules (imported by name): :mod:`~profiler.analyses.memory_map` (SBUF/PSUM over time),
:mod:`~profiler.analyses.call_tree`, :mod:`~profiler.analyses.instruction_tree`,
:mod:`~profiler.analyses.kernel_tree` (call trees of spans, instructions and GPU kernels),
:mod:`~profiler.analyses.call_tree_views` and :mod:`~profiler.analyses.call_tree_diff` (what is read off them, two
compared), :mod:`~profiler.analyses.host_recommendations` (a host trace's GPUs).
"""

from profiler.analyses.bounds import bounds_table, performance_bounds
from profiler.analyses.critical_path import chain_to, critical_path, critical_path_breakdown
from profiler.analyses.diff import diff
from profiler.analyses.dma import dma_efficiency, queue_table, size_histogram, small_transfer_regions, tensor_table
from profiler.analyses.idle_gaps import idle_gaps
from profiler.analyses.operators import operator_table, time_by
from profiler.analyses.recommendations import recommendations
from profiler.analyses.waits import dependency_waits, wait_sentences, wait_summary

__all__ = [
    "bounds_table",
    "chain_to",
    "critical_path",
    "critical_path_breakdown",
    "dependency_waits",
    "diff",
    "dma_efficiency",
    "idle_gaps",
    "operator_table",
    "performance_bounds",
    "queue_table",
    "recommendations",
    "size_histogram",
    "small_transfer_regions",
    "tensor_table",
    "time_by",
    "wait_sentences",
    "wait_summary",
]
