"""The call tree on real traces: a PyTorch profiler trace (nested CPU operators, GPU kernels) and a recording's
layer and operator spans; checked against SQL over the same spans and against the tree's own identities."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.call_tree import call_tree
from profiler.analyses.call_tree_views import folded, limit_depth, roots, subtree, top_frames
from profiler.analyses.kernel_tree import kernel_tree
from profiler.cli import main
from profiler.errors import QueryError
from profiler.figures.call_tree import call_tree_figure
from profiler.figures.timefmt import format_duration

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
THREAD = "pyper:trainer:0:0 (CPU) / thread 4037 (python3.8)"


@pytest.fixture(scope="module")
def torch_db(tmp_path_factory):
    src = tmp_path_factory.mktemp("calltree") / "rank0.json.gz"
    shutil.copy(DATA / "sampled_rank-0.json.gz", src)
    db = src.with_suffix(".duckdb")
    assert main(["ingest", str(src), "-o", str(db), "--quiet"]) == 0
    return db


@pytest.fixture(scope="module")
def torch_trace(torch_db):
    with profiler.open(torch_db) as t:
        yield t


def _rows(tree):
    return tree.table.to_pylist()


def test_every_span_is_counted_once_under_its_row(torch_trace):
    tree = call_tree(torch_trace)
    total_spans = torch_trace.sql("SELECT count(*) FROM slice").fetchall()[0][0]
    assert tree.spans == total_spans == 4811
    span_rows = [r for r in _rows(tree) if r[rs.FRAME_KIND] == rs.FRAME_SPAN]
    assert sum(r[rs.COUNT] for r in span_rows) == total_spans
    # the CPU thread's stacks hold exactly the thread's 1828 spans (tests/integration/test_import_cli.py)
    assert subtree(tree, THREAD).spans == 1828
    # each row's root frame: its depth-0 spans
    per_label = dict(torch_trace.sql(
        "SELECT k.group_name || ' / ' || k.name, sum(s.end_ts - s.start_ts) FROM slice s JOIN track k "
        "USING (track_id) WHERE s.parent_id IS NULL GROUP BY ALL").fetchall())
    for name, total in roots(tree):
        assert per_label[name] == total


def test_self_time_is_total_minus_children_on_properly_nested_stacks(torch_trace):
    tree = subtree(call_tree(torch_trace), THREAD)
    rows = _rows(tree)
    kids: dict[int, int] = {}
    for r in rows:
        if r[rs.PARENT] is not None:
            kids[r[rs.PARENT]] = kids.get(r[rs.PARENT], 0) + r[rs.TOTAL_NS]
    checked = 0
    for r in rows[1:]:  # the thread's frame has no self time of its own
        assert r[rs.TOTAL_NS] >= kids.get(r[rs.NODE], 0)
        assert r[rs.SELF_NS] == r[rs.TOTAL_NS] - kids.get(r[rs.NODE], 0)
        checked += r[rs.NODE] in kids
    assert checked > 100


def test_a_frame_is_its_spans_durations_and_a_window_clips_them(torch_trace):
    (sid, s, e), = torch_trace.sql("SELECT id, start_ts, end_ts FROM slice WHERE name = 'ProfilerStep#552'").fetchall()
    whole = {r[rs.PATH]: r for r in _rows(call_tree(torch_trace))}
    step = whole[THREAD + rs.PATH_SEPARATOR + "ProfilerStep#552"]
    assert (step[rs.COUNT], step[rs.TOTAL_NS]) == (1, e - s)
    mid = (s + e) // 2
    half = {r[rs.PATH]: r for r in _rows(call_tree(torch_trace, mid, e + 10**9))}
    assert half[THREAD + rs.PATH_SEPARATOR + "ProfilerStep#552"][rs.TOTAL_NS] == e - mid
    # a child entirely before the cut is gone, one across it is clipped the same way
    before = torch_trace.sql("SELECT count(*) FROM slice WHERE parent_id = $p AND end_ts <= $m",
                             params={"p": sid, "m": mid}).fetchall()[0][0]
    kids_all = [r for r in whole.values() if r[rs.PATH].startswith(step[rs.PATH] + rs.PATH_SEPARATOR)
                and r[rs.DEPTH] == step[rs.DEPTH] + 1]
    kids_half = [r for r in half.values() if r[rs.PATH].startswith(step[rs.PATH] + rs.PATH_SEPARATOR)
                 and r[rs.DEPTH] == step[rs.DEPTH] + 1]
    assert sum(r[rs.COUNT] for r in kids_all) - sum(r[rs.COUNT] for r in kids_half) == before


def test_top_frames_and_folded_add_up_to_the_tree(torch_trace):
    tree = call_tree(torch_trace)
    span_rows = [r for r in _rows(tree) if r[rs.FRAME_KIND] == rs.FRAME_SPAN]
    top = top_frames(tree).to_pylist()
    assert sum(r[rs.SELF_NS] for r in top) == sum(r[rs.SELF_NS] for r in span_rows)
    assert sum(r[rs.COUNT] for r in top) == tree.spans
    assert abs(sum(r[rs.FRACTION] for r in top) - 1) < 1e-9
    assert [r[rs.SELF_NS] for r in top] == sorted((r[rs.SELF_NS] for r in top), reverse=True)
    lines = folded(tree)
    stacks = [line.rsplit(" ", 1) for line in lines]
    assert sum(int(v) for _, v in stacks) == sum(r[rs.SELF_NS] for r in span_rows)
    assert all(st.split(";")[0] in dict(roots(tree)) for st, _ in stacks)


def test_merged_rows_have_span_roots(torch_trace):
    tree = call_tree(torch_trace, by_thread=False)
    assert all(r[rs.FRAME_KIND] == rs.FRAME_SPAN for r in _rows(tree))
    assert tree.spans == 4811
    assert {n for n, _ in roots(tree)} >= {"ProfilerStep#552", "ProfilerStep#551"}


def test_limit_depth_keeps_the_frames_above(torch_trace):
    tree = limit_depth(call_tree(torch_trace), 2)
    depths = tree.table.column(rs.DEPTH).to_pylist()
    assert max(depths) == 2 and len(tree.outermost) == len(depths)
    nodes = set(tree.table.column(rs.NODE).to_pylist())
    assert all(p is None or p in nodes for p in tree.table.column(rs.PARENT).to_pylist())


def _figure_is_consistent(fig):
    d = fig.data[0]
    ids = list(d.ids)
    assert len(set(ids)) == len(ids)
    assert all(p == "" or p in set(ids) for p in d.parents)
    value = dict(zip(ids, d.values, strict=True))
    kids: dict[str, int] = {}
    for i, p in zip(ids, d.parents, strict=True):
        if p:
            kids[p] = kids.get(p, 0) + value[i]
    # branchvalues="total": plotly draws nothing of a box whose children are wider than it
    assert all(value[p] >= w for p, w in kids.items())


def test_the_figure_draws_every_kept_frame_consistently(torch_trace):
    tree = call_tree(torch_trace)
    fig = call_tree_figure(tree)
    _figure_is_consistent(fig)
    assert "102 of 1,005 frames" in fig.layout.title.text or len(fig.data[0].ids) <= tree.table.num_rows
    sub = call_tree_figure(subtree(tree, THREAD))
    _figure_is_consistent(sub)
    assert len(sub.data[0].ids) > 50  # a subtree keeps its frames (their parents are found by node, not row)
    # a height plotly refuses was its multi-line ValueError
    for bad in (0, -5, "10", 1.5, True, 10**6):
        with pytest.raises(QueryError, match=r"^height must be a whole number of pixels from 10 to 20,000"):
            call_tree_figure(tree, height=bad)
    assert call_tree_figure(tree, height=np.int64(300)).layout.height == 300


def test_the_box_over_the_roots_reports_the_whole_trees_time_and_kernels_say_gpu_time(torch_trace):
    tree = call_tree(torch_trace, by_thread=False, merge_steps=True)
    d = call_tree_figure(tree).data[0]
    assert d.labels[0] == "all stacks"
    drawn = int(d.values[0])
    assert drawn < tree.span_ns     # frames under the drawing threshold are left out of the box's width ...
    assert f"{format_duration(int(tree.span_ns))} of span time" in d.hovertext[0]   # ... not of its time
    assert f"({format_duration(int(tree.span_ns) - drawn)} in stacks too small to draw)" in d.hovertext[0]
    kernels = call_tree_figure(kernel_tree(torch_trace)).data[0]
    assert all("of GPU time" in h for h in kernels.hovertext) and not any("span time" in h for h in kernels.hovertext)


def test_a_recordings_pipelined_operators_overlap_their_layer(tmp_path):
    from tracer.sim import run_kernel

    path = tmp_path / "mlp.trace"
    run_kernel("mlp", {"layers": 2}, arch="trn2", trace_path=path)
    with profiler.open(path) as t:
        tree = call_tree(t)
    rows = {r[rs.PATH]: r for r in _rows(tree)}
    layer = next(r for r in rows.values() if r[rs.NAME] == "layer1")
    ops = [r for r in rows.values() if r[rs.PARENT] == layer[rs.NODE]]
    assert ops and all(r[rs.NAME].startswith("layer1.") for r in ops)
    # operators run in parallel lanes: together longer than their layer, which keeps no self time
    assert sum(r[rs.TOTAL_NS] for r in ops) > layer[rs.TOTAL_NS] and layer[rs.SELF_NS] == 0
    _figure_is_consistent(call_tree_figure(tree))


def test_a_trace_without_spans_and_bad_windows_are_one_line_errors(torch_trace):
    softmax = Path(__file__).resolve().parents[2] / "sample_traces" / "softmax-trn1.trace"
    with profiler.open(softmax) as t, pytest.raises(QueryError, match="no spans"):
        call_tree(t)
    with pytest.raises(QueryError, match="empty window"):
        call_tree(torch_trace, 10, 10)
    with pytest.raises(QueryError, match="more than 100 spans"):
        call_tree(torch_trace, max_spans=100)
    with pytest.raises(QueryError, match="no root frame"):
        subtree(call_tree(torch_trace), "nope")


def test_cli_tree_top_folded_and_errors(torch_db, capsys):
    assert main(["calltree", str(torch_db), "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "Call tree of 4,811 spans" in out and "Spans / PyTorch Profiler" in out and "(5 of 1005 rows" in out
    assert main(["calltree", str(torch_db), "--top", "--json", "--limit", "0"]) == 0
    top = json.loads(capsys.readouterr().out)
    assert sum(r["count"] for r in top) == 4811 and top[0]["self_ns"] >= top[-1]["self_ns"]
    assert main(["calltree", str(torch_db), "--format", "folded", "--limit", "0", "--max-depth", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(len(line.rsplit(" ", 1)[0].split(";")) <= 2 for line in lines)
    assert main(["calltree", str(torch_db), "--merge-rows", "--format", "csv", "--limit", "3"]) == 0
    csv_lines = capsys.readouterr().out.splitlines()
    assert csv_lines[0].split(",")[:3] == ["node", "parent", "depth"] and len(csv_lines) == 4
    for argv, message in ((["--top", "--format", "folded"], "does not go with --top"),
                          (["--top", "--max-depth", "1"], "does not go with --top"),
                          (["--start", "5", "--end", "5"], "empty window"),
                          (["--max-depth", "-1"], "--max-depth")):
        assert main(["calltree", str(torch_db), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err
    softmax = Path(__file__).resolve().parents[2] / "sample_traces" / "softmax-trn1.trace"
    assert main(["calltree", str(softmax)]) == 2
    assert "no spans" in capsys.readouterr().err


def test_folded_escapes_separators():
    import pyarrow as pa

    from profiler.analyses.call_tree import CallTree

    table = pa.table({rs.NODE: [0, 1], rs.PARENT: [None, 0], rs.DEPTH: [0, 1], rs.FRAME_KIND: ["span", "span"],
                      rs.NAME: ["a;b", "c\nd"], rs.COUNT: [1, 1], rs.TOTAL_NS: [5, 3], rs.SELF_NS: [2, 3],
                      rs.PATH: ["a;b", "a;b › c\nd"]}, schema=rs.CALL_TREE)
    assert folded(CallTree(table, 0, 10, 2, False, (True, True))) == ["a,b 2", "a,b;c d 3"]
    assert np.isclose(top_frames(CallTree(table, 0, 10, 2, False, (True, True)))
                      .column(rs.FRACTION).to_numpy().sum(), 1.0)


def test_merged_steps_make_one_frame_of_a_loops_iterations(torch_trace, torch_db, capsys):
    steps = dict(torch_trace.sql("SELECT name, end_ts - start_ts FROM slice WHERE name LIKE 'ProfilerStep#%'")
                 .fetchall())
    assert set(steps) == {"ProfilerStep#551", "ProfilerStep#552"}
    tree = call_tree(torch_trace, merge_steps=True)
    rows = {r[rs.PATH]: r for r in _rows(tree)}
    merged = rows[THREAD + rs.PATH_SEPARATOR + "ProfilerStep#N"]
    assert (merged[rs.COUNT], merged[rs.TOTAL_NS]) == (2, sum(steps.values()))
    assert not any("ProfilerStep#55" in p for p in rows)
    # the frames below merge too: the step's children are the union of both steps'
    plain = {r[rs.PATH]: r for r in _rows(call_tree(torch_trace))}
    for child in ("## forward ##", "## backward ##", "## optimizer ##"):
        want = sum(plain[THREAD + rs.PATH_SEPARATOR + f"ProfilerStep#{n}" + rs.PATH_SEPARATOR + child][rs.TOTAL_NS]
                   for n in (551, 552))
        assert rows[merged[rs.PATH] + rs.PATH_SEPARATOR + child][rs.TOTAL_NS] == want
    assert main(["calltree", str(torch_db), "--merge-steps", "--limit", "0"]) == 0
    assert "ProfilerStep#N" in capsys.readouterr().out


def test_trnprof_summary_of_a_host_trace_lists_its_rows_and_names(torch_db, capsys):
    from profiler.analyses.call_tree_views import root_summary

    assert main(["summary", str(torch_db)]) == 0
    out = capsys.readouterr().out
    assert "no instructions or DMA packets" in out and "engine        active" not in out
    assert "4,811 spans; per row: its spans (count), the time in its outermost spans" in out
    assert "names with the most self time; fraction: share of the self time of all spans" in out
    with profiler.open(torch_db) as t:
        rows = root_summary(call_tree(t), t.time_range[1] - t.time_range[0]).to_pylist()
    assert sum(r["count"] for r in rows) == 4811 and rows[0]["fraction"] == 1.0
    assert next(r for r in rows if r["name"] == THREAD)["count"] == 1828
    assert main(["summary", str(torch_db), "--json"]) == 0   # the JSON keeps its keys, and adds the host's
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"total_time_ns", "engines", "hfu_pct", "mfu_pct", "dma", "host"}
    assert data["host"]["spans"] == 4811 and data["host"]["rows"] == rows


def test_rows_follow_the_files_process_and_thread_order(torch_trace):
    """Chrome's order (process sort index, then thread sort index: the pid and tid by default), not the names as
    text: stream 7 before stream 23 before stream 203, thread 4037 before thread 23695."""
    from profiler.figures.raster import timeline_rows

    labels = [r.label for r in timeline_rows(torch_trace.tracks()) if "›" not in r.label]
    streams = [lb for lb in labels if lb.startswith("stream ")]
    assert streams == ["stream 7", "stream 23", "stream 25", "stream 84", "stream 203"]
    threads = [lb for lb in labels if lb.startswith("thread ")]
    assert threads == ["thread 4037 (python3.8)", "thread 23695 (python3.8)"]
    order = torch_trace.sql("SELECT t.sort_order, min(s.track_order) FROM slice s JOIN track t USING (track_id) "
                            "GROUP BY ALL ORDER BY 1").fetchall()
    assert [o for _, o in order] == sorted(o for _, o in order)     # the rows in the importer's order
