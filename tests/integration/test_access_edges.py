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


def stored_streams(nc, *, n: int = 16, cols: int = 512):
    """Vector and GpSimd element-wise chains on SBUF, both results stored at the end (the kernel's DMA window,
    which the bounds and recommendations use, covers them)."""
    x = nc.input("x", (128, cols), "fp32")
    y = nc.output("y", (128, cols), "fp32")
    z = nc.output("z", (128, cols), "fp32")
    u = nc.sbuf_tile((128, cols), "fp32", name="u")
    v = nc.sbuf_tile((128, cols), "fp32", name="v")
    nc.dma_copy(u, x)
    nc.dma_copy(v, x)
    for _ in range(n):
        nc.tensor_scalar(u, u, "multiply", 1.0)
        nc.tensor_scalar(v, v, "multiply", 1.0, engine="GpSimd")
    nc.dma_copy(y, u)
    nc.dma_copy(z, v)


def _late_by_brute_force(rows):
    """(engine, other) -> (instructions, ns) started late by a conflict: later than the engine's previous end plus
    the semaphore wait, exactly when a conflicting instruction on SBUF ended."""
    prev: dict[str, int] = {}
    ends = {(r[1], r[4]) for r in rows if r[1] in ("Vector", "GpSimd") and r[2] != "DMA_TRIGGER"}
    out: dict[tuple[str, str], list[int]] = {}
    for r in sorted(rows, key=lambda r: r[0]):
        _rid, engine, opcode, s, e, wait = r
        if engine in ("Vector", "GpSimd") and opcode != "DMA_TRIGGER":
            other = "GpSimd" if engine == "Vector" else "Vector"
            late = s - (prev.get(engine, 0) + wait)
            if late > 0 and (other, s) in ends:
                acc = out.setdefault((engine, other), [0, 0])
                acc[0] += 1
                acc[1] += late
        prev[engine] = e
    return {k: tuple(v) for k, v in out.items()}


def test_the_recommendation_counts_the_time_lost_to_conflicts(tmp_path):
    import json

    from profiler.analyses.recommendations import recommendations

    path = tmp_path / "s.trace"
    run_kernel(stored_streams, {}, arch="trn1", trace_path=path)
    with profiler.open(path) as trace:
        recs = {r[rs.RULE]: r for r in recommendations(trace).to_pylist()}
        rows = trace.sql("SELECT id, engine, opcode, start_ts, end_ts, evt_wait_time_ns FROM Instruction").fetchall()
    rec = recs["access_conflicts"]
    got = {(b["engine"], b["other"]): (b["n"], b["ns"]) for b in json.loads(rec[rs.EVIDENCE])["by_engine"]}
    expected = _late_by_brute_force(rows)
    assert got == expected and sum(ns for _n, ns in got.values()) > 0
    assert "Vector and GpSimd cannot access SBUF at the same time" in rec[rs.MESSAGE]
    # the idle bottleneck's gaps name the conflict as what the engine waited for
    idle = recs["bottleneck_idle"]
    other = "GpSimd" if "Bottleneck Vector" in idle[rs.TITLE] else "Vector"
    assert f"waiting for {other} to leave a memory they take turns on" in idle[rs.MESSAGE]
    assert rec[rs.IMPACT_NS] == max(ns for _n, ns in got.values())
    for arch, over in (("trn2", None), ("trn1", {"access_conflicts": False})):
        other = tmp_path / f"{arch}-{bool(over)}.trace"
        run_kernel(stored_streams, {}, arch=arch, overrides=over, trace_path=other)
        with profiler.open(other) as trace:
            assert "access_conflicts" not in set(recommendations(trace).column(rs.RULE).to_pylist())


def test_idle_gaps_name_the_instruction_the_engine_took_turns_with(tmp_path):
    from profiler.analyses.idle_gaps import idle_gaps

    for arch, over, expect in (("trn1", None, True), ("trn1", {"access_conflicts": False}, False)):
        path = tmp_path / f"{arch}-{bool(over)}.trace"
        run_kernel(stored_streams, {}, arch=arch, overrides=over, trace_path=path)
        with profiler.open(path) as trace:
            gaps = idle_gaps(trace, engines=["Vector", "GpSimd"]).to_pylist()
            rows = {r[0]: r for r in trace.sql(
                "SELECT id, engine, opcode, start_ts, end_ts, operands FROM Instruction").fetchall()}
        turns = [g for g in gaps if g[rs.CAUSE] == rs.CAUSE_ACCESS]
        assert bool(turns) == expect
        for g in turns:  # the instruction named ended when the gap ended, on the other engine, on SBUF
            other = rows[g[rs.CAUSE_ID]]
            nxt = rows[g[rs.NEXT_ID]]
            assert other[4] == g[rs.END_NS] == nxt[3]
            assert {other[1], g[rs.ENGINE]} == {"Vector", "GpSimd"} and g[rs.CAUSE_RESOURCE] == other[1]
            assert g[rs.CAUSE_NAME] == other[2] and "@SBUF" in other[5] and "@SBUF" in nxt[5]
        if expect:  # every Vector / GpSimd instruction the conflict held back starts a gap named so
            late = {k for k, _ in _late_ids(rows)}
            assert late <= {g[rs.NEXT_ID] for g in turns}


def _late_ids(rows):
    prev: dict[str, int] = {}
    ends = {(r[1], r[4]) for r in rows.values() if r[1] in ("Vector", "GpSimd") and r[2] != "DMA_TRIGGER"}
    for rid in sorted(rows):
        _id, engine, opcode, s, e, _ops = rows[rid]
        if engine in ("Vector", "GpSimd") and opcode != "DMA_TRIGGER":
            other = "GpSimd" if engine == "Vector" else "Vector"
            if s > prev.get(engine, 0) and (other, s) in ends:
                yield rid, s
        prev[engine] = e
