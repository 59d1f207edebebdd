"""Every example query of the SQL page runs, read-only, on a recording and on an imported PyTorch trace."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

import profiler
from profiler.sql_examples import EXAMPLE_QUERIES

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "mlp-trn2.trace"


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("examples")
    shutil.copytree(SAMPLE, root / "mlp.trace")
    shutil.copy(DATA / "sampled_rank-0.json.gz", root / "rank0.json.gz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opened = {"device": profiler.open(root / "mlp.trace"), "host": profiler.open(root / "rank0.json.gz")}
    yield opened
    for t in opened.values():
        t.close()


@pytest.mark.parametrize(("title", "query"), EXAMPLE_QUERIES, ids=[t for t, _q in EXAMPLE_QUERIES])
def test_every_example_runs_on_both_kinds_of_trace(traces, title, query):
    device = traces["device"].sql(query).fetchall()
    host = traces["host"].sql(query).fetchall()
    assert device, f"{title}: no rows on a recording"
    if title.startswith(("Slices", "Tracks", "Timeline rows: the longest 1% of slices")):
        assert host, f"{title}: no rows on a PyTorch trace"


def test_the_nesting_example_splits_a_thread_by_depth(traces):
    query = dict(EXAMPLE_QUERIES)["Slices per thread and nesting level"]
    rows = traces["host"].sql(query.replace("LIMIT 20", "")).fetchall()
    depths = {depth for row_name, depth, *_ in rows if row_name == "thread 4037 (python3.8)"}
    assert depths == set(range(11))
    assert sum(n for row_name, _d, _name, n, _t in rows if row_name == "thread 4037 (python3.8)") == 1828


@pytest.mark.parametrize("sample", ["mlp-trn2.trace", "matmul_blocked-trn2.trace", "attention-trn2.trace"])
def test_the_small_dma_band_example_draws_trnprof_dmas_small_transfer_regions(sample, tmp_path):
    """Its rows, drawn as a timeline row, cover exactly the regions of ``small_transfer_regions``: each interval
    lies in a region, each region starts and ends with intervals of its own, and nothing else is drawn."""
    from profiler.analyses.dma import small_transfer_regions
    from profiler.query_track import query_tracks

    shutil.copytree(SAMPLE.parent / sample, tmp_path / sample)
    query = dict(EXAMPLE_QUERIES)["Timeline rows: where small DMA transfers take most of the DMA time"]
    with profiler.open(tmp_path / sample) as trace:
        regions = [(r["start_ns"], r["end_ns"]) for r in small_transfer_regions(trace).to_pylist()]
        tracks = query_tracks(trace, query)
    assert regions and [r.label for r in tracks.rows] == ["small DMA transfers"]
    events = tracks.rows[0].events
    intervals = list(zip(events.start.tolist(), events.end.tolist(), strict=True))
    owner = [next(i for i, (a, b) in enumerate(regions) if a <= s and e <= b) for s, e in intervals]
    assert sorted(set(owner)) == list(range(len(regions)))
    for i, (a, b) in enumerate(regions):
        mine = [iv for iv, o in zip(intervals, owner, strict=True) if o == i]
        assert min(s for s, _ in mine) == a and max(e for _, e in mine) == b
