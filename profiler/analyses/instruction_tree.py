"""The call tree of a device trace's instructions: engine time by layer, operator, source line, engine and opcode.

Neuron Explorer's hierarchy view as a flame graph: every instruction (wait-only opcodes left out, as in the busy
analyses) belongs to the frame of its values at each *level* -- by default its ``layer``, operator (``hlo_name``),
kernel source line (``nki_source_location``), ``engine`` and ``opcode`` -- under a root per NeuronCore.  Levels
no instruction of the window has a value for are left out (a kernel without layer names starts at its source
lines); a missing value in a level others fill is ``(none)``; with no level left the tree is its roots.  Each
frame's ``count`` is its instructions that overlap the window (a zero-length one: that lies in it, or at the end
of the default window), ``total_ns`` their durations clipped to the window, summed: **engine time**, which adds up
across engines working at once, so a layer's total can exceed the wall time it spans.  ``self_ns`` is the leaves'
(a frame's time is all in its children).  The result is a :class:`~profiler.analyses.call_tree.CallTree`, so the
per-name table, folded stacks, subtrees, comparisons and the icicle of :mod:`profiler.analyses.call_tree_views`,
:mod:`profiler.analyses.call_tree_diff` and :mod:`profiler.figures.call_tree` work on it unchanged.  DMA transfers
are not instructions: their triggers are (on the engine that issues them).
"""

from __future__ import annotations

from collections.abc import Sequence

from profiler.analyses.call_tree import INSTRUCTIONS, CallTree, in_window_sql, tree_of_paths
from profiler.analyses.inputs import INSTRUCTION, WAIT_OPCODES, fetch, q, resolve_scope
from profiler.errors import QueryError
from profiler.trace import Trace
from tracer import schema as ts

#: Levels an instruction tree can have, and the Instruction column of each.
LEVELS: dict[str, str] = {"layer": ts.LAYER, "operator": ts.HLO_NAME, "source": ts.NKI_SOURCE_LOCATION,
                          "engine": ts.ENGINE, "opcode": ts.OPCODE}
DEFAULT_LEVELS: tuple[str, ...] = ("layer", "operator", "source", "engine", "opcode")
#: A missing value in a level other instructions fill.
NONE = "(none)"


def check_levels(levels: Sequence[str]) -> tuple[str, ...]:
    """``levels`` (a list or tuple of level names) as a tuple, each known and given once; QueryError otherwise."""
    if not isinstance(levels, list | tuple) or not levels:
        raise QueryError(f"levels must be a non-empty list of {', '.join(LEVELS)}, not {str(levels)[:60]!r}")
    out = tuple(levels)
    bad = [x for x in out if not isinstance(x, str) or x not in LEVELS]
    if bad:
        raise QueryError(f"unknown level {str(bad[0])[:40]!r}; the levels are {', '.join(LEVELS)}")
    if len(set(out)) != len(out):
        raise QueryError(f"a level is given twice in {', '.join(out)}")
    return out


def instruction_tree(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, *,
                     levels: Sequence[str] = DEFAULT_LEVELS, core: int | None = None) -> CallTree:
    """The instructions of ``[start_ns, end_ns)`` (default: the first to the last instruction or DMA packet) as a
    call tree of ``levels`` under a root per core (``NeuronCore N``).

    Raises:
        QueryError: a trace without instructions, a bad window, core or level.
    """
    chosen = check_levels(levels)
    scope = resolve_scope(trace, start_ns, end_ns, core)
    t0, t1 = scope.start_ns, scope.end_ns
    cols = [f"{q(LEVELS[x])}::VARCHAR AS l{i}" for i, x in enumerate(chosen)]
    waits = ", ".join(repr(o) for o in WAIT_OPCODES)
    rows = fetch(trace, f"""
        SELECT coalesce({q(ts.PCORE_IDX)}, 0) AS core, {", ".join(cols)}, count(*) AS n,
               sum(least({q(ts.END_TS)}, $t1) - greatest({q(ts.START_TS)}, $t0))::BIGINT AS ns
        FROM {INSTRUCTION}
        WHERE {in_window_sql()} AND {scope.core_sql()}
          AND {q(ts.OPCODE)} NOT IN ({waits})
        GROUP BY ALL""", {"t0": t0, "t1": t1, "closed": end_ns is None}).to_pylist()
    used = [i for i in range(len(chosen)) if any(r[f"l{i}"] is not None for r in rows)]
    leaves = [((f"NeuronCore {r['core']}", *(NONE if r[f"l{i}"] is None else str(r[f"l{i}"]) for i in used)),
               r["n"], r["ns"]) for r in rows]
    return tree_of_paths(leaves, (t0, t1), what=INSTRUCTIONS)
