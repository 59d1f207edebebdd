"""The dependency graph names NeuronCore-v2 access conflicts: on a trn1 recording an instruction that waited for
the conflicting engine to leave a memory has an ``access`` edge from it, so the critical path shows the other
engine's instruction instead of an unexplained gap; without the rule (trn2, or the constant off) there is none."""

from __future__ import annotations

import pytest

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.critical_path import critical_path
from profiler.analyses.event_graph import build_graph
from profiler.analyses.inputs import resolve_scope
from tests.unit.test_sim_access_conflicts import two_streams
from tracer.sim import run_kernel


def _record(tmp_path, arch="trn1", overrides=None, **params):
    path = tmp_path / f"{arch}-{bool(overrides)}.trace"
    run_kernel(two_streams, params, arch=arch, overrides=overrides, trace_path=path)
    return path


def _graph(path):
    with profiler.open(path) as trace:
        g = build_graph(trace, resolve_scope(trace))
        rows = trace.sql("SELECT id, engine, opcode, start_ts, end_ts, operands FROM Instruction ORDER BY id")\
            .fetchall()
        return g, rows, critical_path(trace)


@pytest.mark.parametrize(("other", "mem"), [("GpSimd", "SBUF"), ("Scalar", "PSUM")])
def test_every_access_wait_has_an_edge_from_the_instruction_it_waited_for(tmp_path, other, mem):
    g, rows, path = _graph(_record(tmp_path, other=other, mem=mem))
    by_node = dict(enumerate(g.ident.tolist()))
    access = {(by_node[u], by_node[v]) for u, v, k in zip(g.src, g.dst, g.edge_kind, strict=True)
              if k == rs.EDGE_ACCESS}
    assert access
    info = {r[0]: r for r in rows}
    tag = f"@{mem}"
    for u, v in access:  # from the other engine, on the same memory, ended by the start
        a, b = info[u], info[v]
        assert {a[1], b[1]} == {"Vector", other} and tag in a[5] and tag in b[5]
        assert a[4] <= b[3]
    # each compute instruction starting exactly when one of the other engine's ended on that memory is joined to it
    ends = {}
    for r in rows:
        if r[1] in ("Vector", other) and r[2] != "DMA_TRIGGER" and tag in r[5]:
            ends.setdefault((r[1], r[4]), r[0])
    for r in rows:
        if r[1] in ("Vector", other) and r[2] != "DMA_TRIGGER" and tag in r[5]:
            mate = "Vector" if r[1] == other else other
            if (mate, r[3]) in ends:
                assert (ends[(mate, r[3])], r[0]) in access
    # the critical path goes through both engines' instructions and leaves no gap between them unexplained
    resources = set(path.column(rs.RESOURCE).to_pylist())
    assert {"Vector", other} <= resources
    kinds = path.column(rs.EDGE).to_pylist()
    assert rs.EDGE_ACCESS in kinds


@pytest.mark.parametrize(("arch", "overrides"), [("trn2", None), ("trn1", {"access_conflicts": False})])
def test_no_access_edges_without_the_rule(tmp_path, arch, overrides):
    g, _rows, _path = _graph(_record(tmp_path, arch, overrides))
    assert rs.EDGE_ACCESS not in set(g.edge_kind.tolist())
