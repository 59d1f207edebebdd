"""GPU time under the CPU stacks that launched it: a hand-made trace whose every number is worked out (including
a correlation shared by two launches and a kernel without one), a real PyTorch trace against SQL, the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.call_tree_views import top_frames
from profiler.analyses.kernel_tree import NO_LAUNCH, kernel_tree
from profiler.cli import main
from profiler.errors import QueryError
from tests.span_traces import write_spans

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
CPU, GPU = ("proc", "thread 1"), ("proc", "stream 7")


def _write(path: Path, spans: list[tuple]) -> Path:
    """Spans ``(id, parent, name, start, end, row, category, correlation)``."""
    return write_spans(path, [{"id": i, "parent": p, "name": n, "start": s, "end": e, "row": row, "category": cat,
                               "correlation": corr} for i, p, n, s, e, row, cat, corr in spans])


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    path = tmp_path_factory.mktemp("kt") / "k.trace"
    return _write(path, [
        (1, None, "ProfilerStep#3", 0, 100, CPU, "user_annotation", None),
        (2, 1, "aten::mm", 10, 50, CPU, "cpu_op", None),
        (3, 2, "cudaLaunchKernel", 20, 22, CPU, "cuda_runtime", 7),
        (4, 1, "cudaLaunchKernel", 25, 26, CPU, "cuda_runtime", 7),     # the same correlation, later: the launch
        (5, 1, "cudaMemcpyAsync", 60, 61, CPU, "cuda_runtime", 8),
        (6, 1, "cudaLaunchKernel", 95, 96, CPU, "cuda_runtime", 9),     # starts after its kernel: not its launch
        (10, None, "gemm", 30, 60, GPU, "kernel", 7),
        (11, None, "Memcpy HtoD", 70, 75, GPU, "gpu_memcpy", 8),
        (12, None, "relu", 80, 90, GPU, "Kernel", 9),                   # (categories compared lower-case)
        (13, None, "memset", 91, 91, GPU, "gpu_memset", 5),             # zero-length, no launch in the trace
    ])


def test_each_gpu_event_hangs_under_its_launch(hand):
    with profiler.open(hand) as t:
        tree = kernel_tree(t)
    rows = {tuple(r[rs.PATH].split(rs.PATH_SEPARATOR)): r for r in tree.table.to_pylist()}
    cpu, gpu = " / ".join(CPU), " / ".join(GPU)
    assert tree.what == "kernels" and tree.spans == 4
    assert (rows[(cpu,)][rs.COUNT], rows[(cpu,)][rs.TOTAL_NS], rows[(cpu,)][rs.SELF_NS]) == (2, 35, 0)
    gemm = rows[(cpu, "ProfilerStep#3", "cudaLaunchKernel", "gemm")]
    assert (gemm[rs.COUNT], gemm[rs.TOTAL_NS], gemm[rs.SELF_NS]) == (1, 30, 30)
    assert (cpu, "ProfilerStep#3", "aten::mm", "cudaLaunchKernel", "gemm") not in rows
    assert rows[(cpu, "ProfilerStep#3", "cudaMemcpyAsync", "Memcpy HtoD")][rs.TOTAL_NS] == 5
    assert rows[(cpu, "ProfilerStep#3")][rs.TOTAL_NS] == 35
    assert rows[(gpu, NO_LAUNCH, "relu")][rs.TOTAL_NS] == 10
    assert rows[(gpu, NO_LAUNCH, "memset")][rs.COUNT] == 1 and rows[(gpu, NO_LAUNCH)][rs.COUNT] == 2
    top = {r[rs.NAME]: r[rs.SELF_NS] for r in top_frames(tree).to_pylist()}
    assert top == {"gemm": 30, "relu": 10, "Memcpy HtoD": 5, "memset": 0, "ProfilerStep#3": 0,
                   "cudaLaunchKernel": 0, "cudaMemcpyAsync": 0, NO_LAUNCH: 0}


def test_a_window_clips_gpu_time_and_steps_merge(hand):
    with profiler.open(hand) as t:
        tree = kernel_tree(t, 50, 85, merge_steps=True)
    rows = {tuple(r[rs.PATH].split(rs.PATH_SEPARATOR)): r for r in tree.table.to_pylist()}
    cpu = " / ".join(CPU)
    assert rows[(cpu, "ProfilerStep#N", "cudaLaunchKernel", "gemm")][rs.TOTAL_NS] == 10
    assert rows[(" / ".join(GPU), NO_LAUNCH, "relu")][rs.TOTAL_NS] == 5
    assert tree.spans == 3     # gemm, the copy and relu overlap [50, 85); the memset lies after it


def test_a_real_pytorch_trace_against_sql(tmp_path, capsys):
    src = tmp_path / "rank0.json.gz"
    shutil.copy(DATA / "sampled_rank-0.json.gz", src)
    with profiler.open(src) as t:
        tree = kernel_tree(t)
        (n, ns), = t.sql("SELECT count(*), sum(end_ts - start_ts) FROM slice "
                         "WHERE category IN ('kernel', 'gpu_memcpy', 'gpu_memset')").fetchall()
    assert (tree.spans, tree.span_ns) == (n, ns) == (1204, 607_844_000)
    rows = tree.table.to_pylist()
    leaves = [r for r in rows if r[rs.SELF_NS] > 0]
    # every GPU event sits under a runtime call (its launch) or, launched outside the trace, under "(no launch)"
    parents = {r[rs.NODE]: r for r in rows}
    assert all(parents[r[rs.PARENT]][rs.NAME].startswith("cuda") or parents[r[rs.PARENT]][rs.NAME] == NO_LAUNCH
               for r in leaves)
    assert main(["calltree", str(src), "--kernels", "--top", "--json", "--limit", "3"]) == 0
    top = json.loads(capsys.readouterr().out)
    assert top[0]["name"].startswith("ncclKernel_SendRecv") and top[0]["self_ns"] == 396_199_000


def test_no_gpu_events_is_one_line(tmp_path, capsys):
    softmax = Path(__file__).resolve().parents[2] / "sample_traces" / "softmax-trn1.trace"
    with profiler.open(softmax) as t, pytest.raises(QueryError, match="no GPU kernels"):
        kernel_tree(t)
    assert main(["calltree", str(softmax), "--kernels"]) == 2
    assert "no GPU kernels" in capsys.readouterr().err
    assert main(["calltree", str(softmax), "--kernels", "--instructions"]) == 2
    assert "two kinds of tree" in capsys.readouterr().err
