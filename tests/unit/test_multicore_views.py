"""Traces of several NeuronCores: each core's DMA queues apart, shares of the cores' time, notes saying merged."""

from __future__ import annotations

import json

import numpy as np
import pytest

import profiler
from profiler.analyses import queue_table
from profiler.cli import main
from profiler.figures import summary as sfig
from tracer import schema as ts


def _union(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    covered = np.zeros(hi - lo, bool)
    for s, e in intervals:
        covered[max(s, lo) - lo:max(min(e, hi) - lo, 0)] = True
    return int(covered.sum())


def test_dma_active_is_a_share_of_every_cores_time(two_core_trace):
    with profiler.open(two_core_trace) as t:
        s = t.summary()
        rows = t.sql(f"SELECT {ts.PCORE_IDX}, {ts.START_TS}, {ts.END_TS} FROM {ts.DMA_PACKET.name}").fetchall()
        lo, hi = t.time_range
    active = sum(_union([(a, b) for c, a, b in rows if c == core], lo, hi) for core in (0, 1))
    assert s["dma"]["active_time_ns"] == active
    share = s["dma"]["utilization_pct"]
    assert share == round(100 * active / (s["total_time_ns"] * 2), 4) and 0 < share <= 100
    assert active > s["total_time_ns"]          # summed over two cores: a share of one core's time passed 100%
    cards = {label: value for label, value, _ in sfig.headline_numbers(s)}
    assert cards["DMA active"] == share
    # the throughput while active: over the time any core's DMA moved data, as `trnprof dma` says (it was the
    # bytes over the cores' summed time: half of it on two busy cores)
    both = _union([(a, b) for _c, a, b in rows], lo, hi)
    assert s["dma"]["cores"] == 2 and s["dma"]["throughput_gbps"] == round(s["dma"]["transfer_bytes"] / both, 4)
    from profiler.summary import format_summary
    assert "us (summed over 2 cores)" in format_summary(s)


def test_each_cores_queues_are_rows_of_their_own(two_core_trace):
    with profiler.open(two_core_trace) as t:
        table = queue_table(t).to_pylist()
        rows = t.sql(f"SELECT {ts.PCORE_IDX}, {ts.QUEUE_NAME}, {ts.START_TS}, {ts.END_TS}, {ts.TRANSFER_BYTES} "
                     f"FROM {ts.DMA_PACKET.name}").fetchall()
        one = queue_table(t, core=1).to_pylist()
        lo, hi = t.time_range
        fig = sfig.queues_figure(queue_table(t))
    assert len(table) == 32 and {r["queue_name"].split()[0] for r in table} == {"NC0", "NC1"}
    for r in table:
        core, queue = int(r["queue_name"][2]), r["queue_name"].split()[1]
        mine = [(a, b, n) for c, q, a, b, n in rows if c == core and q == queue]
        assert r["bytes"] == sum(n for *_, n in mine)
        assert r["busy_ns"] == _union([(a, b) for a, b, _ in mine], lo, hi)
    assert len(one) == 16 and not any(r["queue_name"].startswith("NC") for r in one)   # one core: names as stored
    assert len(fig.data[0].y) == 32 and all(y.startswith("NC") for y in fig.data[0].y)


def test_diff_notes_merged_cores_and_prints_whole_nanoseconds(two_core_trace, capsys):
    assert main(["diff", str(two_core_trace), str(two_core_trace), "--json", "--by", "opcode"]) == 0
    out = capsys.readouterr()
    assert out.err.count("has 2 cores (pcore_idx 0, 1)") == 1     # the same trace twice: said once
    data = json.loads(out.out)
    assert data["engine_active"] and all(isinstance(r["a"], int) and isinstance(r["delta"], int)
                                         for r in data["engine_active"])
    assert main(["diff", str(two_core_trace), str(two_core_trace), "--core", "1", "--by", "opcode"]) == 0
    assert "cores" not in capsys.readouterr().err


def test_device_analyses_refuse_a_window_of_a_host_trace(tmp_path):
    from profiler.analyses import performance_bounds
    from profiler.errors import QueryError

    path = tmp_path / "host.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 10, "dur": 50}]}))
    with profiler.open(path) as t:
        for window in ((None, None), (0, 50_000)):
            with pytest.raises(QueryError, match="no instructions or DMA packets to analyse"):
                performance_bounds(t, *window)
    assert main(["bounds", str(path), "--start", "0", "--end", "50000"]) != 0
