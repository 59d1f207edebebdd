"""``time_by``'s per-group unions (``busy_ns``, ``tensor_ns``) and sums against a brute force, on random
instructions written with the real TraceWriter and read back through the database."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.operators import time_by
from tracer import TraceWriter
from tracer import schema as ts

ROWS = st.lists(st.tuples(st.sampled_from(["Tensor", "Vector", "Scalar"]), st.sampled_from(["L0", "L1", None]),
                          st.sampled_from(["mm", "add"]), st.integers(0, 400), st.integers(0, 120)),
                min_size=1, max_size=30)


def _union(intervals: list[tuple[int, int]]) -> int:
    """Length of the union of [s, e) intervals, by marking every covered ns."""
    covered: set[int] = set()
    for s, e in intervals:
        covered.update(range(s, e))
    return len(covered)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ROWS, st.sampled_from([None, 250]))
def test_unions_and_sums_per_operator_match_a_brute_force(tmp_path_factory, rows, end_ns):
    path = tmp_path_factory.mktemp("time_by") / "t.trace"
    n = len(rows)
    start = np.array([r[3] for r in rows], np.int64)
    end = start + np.array([r[4] for r in rows], np.int64)
    with TraceWriter(path, metadata={"arch": "trn2", "is_simulation": True}) as w:
        w.append(ts.INSTRUCTION.name, {
            ts.ID: np.arange(n, dtype=np.int64), ts.START_TS: start, ts.END_TS: end, ts.DURATION_NS: end - start,
            ts.ENGINE: [r[0] for r in rows], ts.OPCODE: ["OP"] * n, ts.OPERANDS: [""] * n,
            ts.PC: np.arange(n, dtype=np.int64), ts.PCORE_IDX: np.zeros(n, np.int64),
            ts.LAYER: [r[1] for r in rows], ts.HLO_NAME: [r[2] for r in rows],
            ts.RAW_FLOPS: np.full(n, 10, np.int64)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(path)
    try:
        t1 = max(int(end.max()), int(start.max()) + 1) if end_ns is None else end_ns
        got = {(r[rs.LAYER], r[rs.OPERATOR]): r for r in time_by(trace, "operator", 0, t1).to_pylist()}
    finally:
        trace.close()
    groups: dict[tuple[object, object], list[tuple[str, int, int]]] = {}
    for engine, layer, op, s, length in rows:
        if s < t1:  # instructions starting in the window [0, t1), clipped to its end
            groups.setdefault((layer, op), []).append((engine, s, min(s + length, t1)))
    assert set(got) == set(groups)
    for key, members in groups.items():
        r = got[key]
        assert r[rs.INSTRUCTIONS] == len(members)
        assert r[rs.BUSY_NS] == _union([(s, e) for _eng, s, e in members]), key
        assert r[rs.TENSOR_NS] == _union([(s, e) for eng, s, e in members if eng == "Tensor"]), key
        assert r[rs.START_NS] == min(s for _eng, s, _e in members)
        assert r[rs.END_NS] == max(e for _eng, _s, e in members)
