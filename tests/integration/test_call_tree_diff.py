"""Two call trees compared (the flame-graph diff): by stack and by name, a hand-made pair whose every number is
worked out, two real PyTorch traces through `trnprof calltree --against`, the differential icicle and the compare
page of two host traces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import profiler
from dashboard.app import create_app
from dashboard.compare_logic import DiffCache, compare_outputs
from profiler.analyses import schema as rs
from profiler.analyses.call_tree import call_tree
from profiler.analyses.call_tree_diff import diff_names, diff_stacks
from profiler.cli import main
from profiler.figures.call_tree import ALL_ID, call_tree_diff_figure
from tests.span_traces import write_spans

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"


def _spans(path: Path, rows: list[tuple[int, int | None, str, int, int]]) -> Path:
    """A trace of spans ``(id, parent_id, name, start, end)`` on one thread."""
    return write_spans(path, [{"id": i, "parent": p, "name": n, "start": s, "end": e} for i, p, n, s, e in rows])


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctdiff")
    # A: step(0-100) { fwd(0-60) { mm(10-40) }, bwd(60-100) }
    a = _spans(d / "a.trace", [(1, None, "step", 0, 100), (2, 1, "fwd", 0, 60), (3, 2, "mm", 10, 40),
                               (4, 1, "bwd", 60, 100)])
    # B: step(0-80) { fwd(0-30) { mm(5-25), mm(25-30) }, opt(30-80) }: bwd gone, opt new, mm twice
    b = _spans(d / "b.trace", [(1, None, "step", 0, 80), (2, 1, "fwd", 0, 30), (3, 2, "mm", 5, 25),
                               (4, 2, "mm", 25, 30), (5, 1, "opt", 30, 80)])
    return a, b


def test_stacks_and_names_compare_as_worked_out(pair):
    with profiler.open(pair[0]) as a, profiler.open(pair[1]) as b:
        ta, tb = call_tree(a, by_thread=False), call_tree(b, by_thread=False)
    sep = rs.PATH_SEPARATOR
    stacks = {r[rs.PATH]: r for r in diff_stacks(ta, tb).to_pylist()}
    assert set(stacks) == {"step", f"step{sep}fwd", f"step{sep}fwd{sep}mm", f"step{sep}bwd", f"step{sep}opt"}
    step = stacks["step"]
    assert (step[rs.PRESENCE], step[rs.A_NS], step[rs.B_NS], step[rs.DELTA_NS], step[rs.RATIO]) == \
        ("both", 100, 80, -20, 0.8)
    assert (step[rs.A_SELF_NS], step[rs.B_SELF_NS]) == (0, 0)
    fwd = stacks[f"step{sep}fwd"]
    assert (fwd[rs.A_NS], fwd[rs.B_NS], fwd[rs.A_SELF_NS], fwd[rs.B_SELF_NS], fwd[rs.DELTA_SELF_NS]) == \
        (60, 30, 30, 5, -25)
    mm = stacks[f"step{sep}fwd{sep}mm"]
    assert (mm[rs.A_COUNT], mm[rs.B_COUNT], mm[rs.A_NS], mm[rs.B_NS], mm[rs.DEPTH]) == (1, 2, 30, 25, 2)
    assert (stacks[f"step{sep}bwd"][rs.PRESENCE], stacks[f"step{sep}bwd"][rs.B_NS]) == ("only_a", 0)
    opt = stacks[f"step{sep}opt"]
    assert (opt[rs.PRESENCE], opt[rs.A_NS], opt[rs.B_NS], opt[rs.RATIO]) == ("only_b", 0, 50, None)
    # largest change of total first: opt +50, then bwd -40, fwd -30, step -20, mm -5
    assert [r[rs.NAME] for r in diff_stacks(ta, tb).to_pylist()] == ["opt", "bwd", "fwd", "step", "mm"]
    names = diff_names(ta, tb).to_pylist()
    assert [r[rs.NAME] for r in names] == ["opt", "bwd", "fwd", "mm", "step"]
    assert {r[rs.NAME]: r[rs.DELTA_SELF_NS] for r in names} == {"opt": 50, "bwd": -40, "fwd": -25, "mm": -5,
                                                               "step": 0}


def test_the_differential_icicle_colours_by_the_change(pair):
    with profiler.open(pair[0]) as a, profiler.open(pair[1]) as b:
        ta, tb = call_tree(a, by_thread=False), call_tree(b, by_thread=False)
    fig = call_tree_diff_figure(ta, tb)
    d = fig.data[0]
    colour = dict(zip(d.labels, d.marker.colors, strict=True))
    assert colour["opt"] == 1.0                      # new in B
    assert colour["step"] == pytest.approx(-20 / 100) and colour["fwd"] == pytest.approx(-30 / 60)
    assert colour["mm"] == pytest.approx(-5 / 30)
    assert "bwd" not in colour and "1 stack only in A" in fig.layout.title.text
    assert d.ids[0] != ALL_ID                         # one root: no box over the roots


@pytest.fixture(scope="module")
def torch_pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctdiff_torch")
    out = []
    for name in ("sampled_rank-0.json.gz", "alexnet_flows.json.gz"):
        shutil.copy(DATA / name, d / name)
        out.append(d / name)
    return out


def test_cli_against_a_real_pair(torch_pair, capsys):
    a, b = map(str, torch_pair)
    assert main(["calltree", a, "--against", b, "--top", "--json", "--limit", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_name = {r["name"]: r for r in rows}
    assert by_name["cudaLaunchKernel"]["a_count"] == 1154 and by_name["cudaLaunchKernel"]["presence"] == "both"
    assert sum(r["a_count"] for r in rows) == 4811
    deltas = [abs(r["delta_self_ns"]) for r in rows]
    assert deltas == sorted(deltas, reverse=True)
    assert main(["calltree", a, "--against", b, "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "4,811 spans" in out and "change per stack (total time)" in out and "(3 of" in out
    assert main(["calltree", a, "--against", b, "--format", "folded"]) == 2
    assert "does not go with --against" in capsys.readouterr().err


def test_the_compare_page_of_two_host_traces_compares_their_spans(torch_pair):
    app = create_app(torch_pair)
    try:
        reg = app.trnprof_registry
        pair, headline, charts, deltas, title_a, title_b = compare_outputs(reg, DiffCache(), "t0", "t1", by="opcode")
        assert pair == {"a": "t0", "b": "t1"} and title_a.startswith("A: ") and title_b.startswith("B: ")
        assert "spans: 4,811 → 870" in headline.children[0].children
        assert charts[0].id == "cmp-calltree-diff" and charts[0].figure.data[0].type == "icicle"
        # both are GPU runs: B's GPU time by launching stack too, its launches' frames in it
        assert charts[1].id == "cmp-kernels-diff" and "cudaLaunchKernel" in set(charts[1].figure.data[0].labels)
        table = deltas.children[1]
        assert table.id == "cmp-name-deltas" and len(table.children[1].children) == 20
    finally:
        reg.close()
    # a device trace beside a host trace: the spans cannot be compared either (the recording has none)
    softmax = Path(__file__).resolve().parents[2] / "sample_traces" / "softmax-trn1.trace"
    app = create_app([torch_pair[0], softmax])
    try:
        out = compare_outputs(app.trnprof_registry, DiffCache(), "t0", "t1", by="opcode")
        assert out[1].id == "cmp-error" and out[2] == [] and out[3] == []
    finally:
        app.trnprof_registry.close()


def test_diff_of_empty_trees_is_empty():
    from profiler.analyses.call_tree import CallTree

    empty = CallTree(pa.table({k: [] for k in rs.CALL_TREE.names}, schema=rs.CALL_TREE), 0, 1, 0, False, ())
    assert diff_stacks(empty, empty).num_rows == 0 and diff_names(empty, empty).num_rows == 0
