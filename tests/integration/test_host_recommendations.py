"""Recommendations for host traces of GPU runs: a hand-made trace whose every number is worked out, the real
PyTorch trace against SQL, `trnprof recommend` and the summary page on a host trace."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.host_recommendations import host_recommendations
from profiler.cli import main
from profiler.errors import QueryError
from tests.span_traces import write_spans

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
CPU, GPU = ("node (CPU)", "thread 1"), ("node (GPU 0)", "stream 7")


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    spans = [{"id": 1, "name": "step", "start": 0, "end": 1_000_000, "row": CPU, "category": "user_annotation"}]
    gpu = [("ncclAllReduce", 10_000, 110_000, 1), ("gemm", 90_000, 130_000, 2)]
    gpu += [("relu", 200_000 + 2_000 * i, 201_000 + 2_000 * i, 100 + i) for i in range(120)]
    for k, (name, s, e, corr) in enumerate(gpu):
        spans.append({"id": 10 + k, "parent": 1, "name": "cudaLaunchKernel", "start": s - 600, "end": s - 100,
                      "row": CPU, "category": "cuda_runtime", "correlation": corr})
        spans.append({"id": 1000 + k, "name": name, "start": s, "end": e, "row": GPU, "category": "kernel",
                      "correlation": corr})
    return write_spans(tmp_path_factory.mktemp("hostrec") / "h.trace", spans)


def test_the_rules_fire_with_worked_out_numbers(hand):
    with profiler.open(hand) as t:
        recs = host_recommendations(t).to_pylist()
    assert [r[rs.RULE] for r in recs] == ["gpu_idle", "communication", "short_kernels"]
    idle, comm, short = ({**r, "ev": json.loads(r[rs.EVIDENCE])} for r in recs)
    # busy: [10 us, 130 us) and 120 x 1 us = 240 us of the 1 ms window
    assert idle["ev"]["busy_ns"] == 240_000 and idle[rs.IMPACT_NS] == 760_000 and "76.0%" in idle[rs.TITLE]
    # NCCL 100 us, of which [90 us, 110 us) runs beside gemm: 80 us exposed
    assert (comm["ev"]["communication_ns"], comm["ev"]["overlapped_ns"], comm[rs.IMPACT_NS]) == \
        (100_000, 20_000, 80_000)
    assert "41.7%" in comm[rs.TITLE] and "20.0% of that overlaps" in comm[rs.MESSAGE]
    # 120 of 122 kernels under 10 us; their launches took 120 x 500 ns
    assert (short["ev"]["short_kernels"], short["ev"]["kernels"], short[rs.IMPACT_NS]) == (120, 122, 60_000)
    assert [r[rs.RANK] for r in recs] == [1, 2, 3] and all(r[rs.SPEEDUP] is None for r in recs)


def test_a_window_and_quiet_gpus(hand):
    with profiler.open(hand) as t:
        # [10 us, 130 us): the GPU is busy all along, half of it communication, overlapped for 20 of its 100 us
        recs = host_recommendations(t, 10_000, 130_000).to_pylist()
        assert [r[rs.RULE] for r in recs] == ["communication"]
        with pytest.raises(QueryError, match="empty window"):
            host_recommendations(t, 5, 5)
    softmax = Path(__file__).resolve().parents[2] / "sample_traces" / "softmax-trn1.trace"
    with profiler.open(softmax) as t:   # no GPU events: nothing to say
        assert host_recommendations(t).num_rows == 0


def test_the_real_pytorch_trace(tmp_path, capsys):
    src = tmp_path / "rank0.json.gz"
    shutil.copy(DATA / "sampled_rank-0.json.gz", src)
    with profiler.open(src) as t:
        recs = {r[rs.RULE]: json.loads(r[rs.EVIDENCE]) for r in host_recommendations(t).to_pylist()}
        (nccl,), = [(n,) for (n,) in t.sql("SELECT sum(end_ts - start_ts) FROM slice WHERE category = 'kernel' "
                                            "AND name ILIKE '%nccl%'").fetchall()]
    assert set(recs) >= {"gpu_idle", "communication"}
    assert recs["communication"]["communication_ns"] <= nccl   # (the union: overlapping NCCL kernels count once)
    assert recs["gpu_idle"]["busy_ns"] < 0.5 * recs["gpu_idle"]["window_ns"]
    assert main(["recommend", str(src)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1. pyper:trainer:0:0 (GPU 0) is idle") and "[communication:" in out


def test_the_summary_page_of_a_host_trace_shows_them(hand):
    from dashboard.analysis_views import analysis_section
    from tests.dash_components import walk

    with profiler.open(hand) as t:
        section = analysis_section(t)
    rules = [c.to_plotly_json()["props"].get("data-rule") for c in walk(section)
             if type(c).__name__ == "Li"]
    assert rules == ["gpu_idle", "communication", "short_kernels"]
    assert any(getattr(c, "id", None) == "summary-no-device" for c in walk(section))
