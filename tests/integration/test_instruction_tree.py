"""The instruction tree on simulator recordings: engine time by layer, operator, source line, engine and opcode,
checked against SQL over the same instructions; the CLI; the page's default for a recording without spans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.call_tree_views import folded, top_frames
from profiler.analyses.instruction_tree import NONE, instruction_tree
from profiler.cli import main
from profiler.errors import QueryError

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
WAITS = "('EVENT_SEMAPHORE', 'EVENT_SEMAPHORE_RANGE_CLEAR', 'SEMAPHORE_WAIT', 'WAIT')"


@pytest.fixture(scope="module")
def mlp():
    with profiler.open(SAMPLES / "mlp-trn2.trace") as t:
        yield t


def test_layers_operators_lines_engines_and_opcodes_add_up_to_sql(mlp):
    tree = instruction_tree(mlp)
    rows = tree.table.to_pylist()
    assert tree.what == "instructions" and rows[0][rs.NAME] == "NeuronCore 0" and rows[0][rs.FRAME_KIND] == "thread"
    n, ns = mlp.sql(f"SELECT count(*), sum(end_ts - start_ts) FROM Instruction WHERE opcode NOT IN {WAITS}") \
        .fetchall()[0]
    assert (tree.spans, rows[0][rs.COUNT], rows[0][rs.TOTAL_NS]) == (n, n, ns)
    by_path = {tuple(r[rs.PATH].split(rs.PATH_SEPARATOR)): r for r in rows}
    per_operator = mlp.sql(f"SELECT coalesce(layer, '{NONE}'), coalesce(hlo_name, '{NONE}'), count(*), "
                           f"sum(end_ts - start_ts) FROM Instruction WHERE opcode NOT IN {WAITS} GROUP BY ALL")
    for layer, operator, count, total in per_operator.fetchall():
        frame = by_path[("NeuronCore 0", layer, operator)]
        assert (frame[rs.COUNT], frame[rs.TOTAL_NS], frame[rs.SELF_NS]) == (count, total, 0)
    leaves = [r for r in rows if r[rs.DEPTH] == 5]
    assert sum(r[rs.SELF_NS] for r in leaves) == ns and all(r[rs.TOTAL_NS] == r[rs.SELF_NS] for r in leaves)
    assert {r[rs.NAME] for r in leaves} <= {o for (o,) in mlp.sql("SELECT DISTINCT opcode FROM Instruction")
                                            .fetchall()}


def test_a_window_clips_and_levels_without_values_are_left_out(mlp, tmp_path):
    lo, hi = mlp.time_range
    mid = (lo + hi) // 2
    tree = instruction_tree(mlp, mid, hi, levels=("engine", "opcode"))
    (n, ns), = mlp.sql(f"SELECT count(*), sum(least(end_ts, {hi}) - greatest(start_ts, {mid})) FROM Instruction "
                       f"WHERE start_ts < {hi} AND end_ts > {mid} AND opcode NOT IN {WAITS}").fetchall()
    assert (tree.spans, tree.table.column(rs.TOTAL_NS)[0].as_py()) == (n, ns)
    assert max(tree.table.column(rs.DEPTH).to_pylist()) == 2
    with profiler.open(SAMPLES / "softmax-trn1.trace") as softmax:   # no layer or operator names: lines first
        tree = instruction_tree(softmax)
    depth1 = {r[rs.NAME] for r in tree.table.to_pylist() if r[rs.DEPTH] == 1}
    assert depth1 and all(name.startswith("softmax.py:") for name in depth1)


def test_top_frames_and_folded_of_an_instruction_tree(mlp):
    tree = instruction_tree(mlp, levels=("engine", "opcode"))
    top = {r[rs.NAME]: r for r in top_frames(tree).to_pylist()}
    (matmul_ns,), = mlp.sql("SELECT sum(end_ts - start_ts) FROM Instruction WHERE opcode = 'MATMUL'").fetchall()
    assert top["MATMUL"][rs.SELF_NS] == matmul_ns and top["Tensor"][rs.SELF_NS] == 0
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded(tree)) == tree.span_ns


def test_errors(mlp):
    with pytest.raises(QueryError, match="unknown level"):
        instruction_tree(mlp, levels=("layer", "nope"))
    with pytest.raises(QueryError, match="twice"):
        instruction_tree(mlp, levels=("engine", "engine"))
    with pytest.raises(QueryError, match="no core 3"):
        instruction_tree(mlp, core=3)
    torch = Path(__file__).resolve().parents[1] / "data" / "pytorch" / "sampled_rank-0.json.gz"
    with profiler.open(torch) as host, pytest.raises(QueryError, match="no instructions or DMA packets"):
        instruction_tree(host)


def test_cli_instructions(capsys):
    db = str(SAMPLES / "matmul_naive-trn2.trace")
    assert main(["calltree", db, "--instructions", "--levels", "engine,opcode", "--json", "--limit", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["name"] == "NeuronCore 0" and {r["name"] for r in rows if r["depth"] == 1} >= {"Tensor", "Sync"}
    rowload = str(SAMPLES / "matmul_rowload-trn2.trace")
    assert main(["calltree", db, "--instructions", "--against", rowload, "--top", "--json", "--limit", "0"]) == 0
    diff = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert diff["MATMUL"]["presence"] == "both" and diff["MATMUL"]["delta_self_ns"] < 0   # row loads: faster
    for argv, message in ((["--instructions", "--merge-steps"], "applies to spans"),
                          (["--levels", "engine"], "add --instructions"),
                          (["--instructions", "--levels", "bad"], "unknown level")):
        assert main(["calltree", db, *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
