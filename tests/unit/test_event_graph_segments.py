"""The DMA segments of a window, found through the packets starting in it, against grouping every packet."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

import profiler
from profiler.analyses.event_graph import _segments
from profiler.analyses.inputs import resolve_scope

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"

#: The definition: group every packet of the core by (transfer, queue), keep the groups starting in the window.
ORACLE = """
SELECT coalesce(packet_aggregation_id, -1 - id) AS agg, queue_name AS queue, min(start_ts) AS s, max(end_ts) AS e,
       arg_max(id, (end_ts, id)) AS last_id, arg_max(track_id, (end_ts, id)) AS track
FROM DmaPacket WHERE {core}
GROUP BY 1, 2 HAVING min(start_ts) >= {a} AND min(start_ts) < {b} ORDER BY agg, queue"""


@pytest.mark.parametrize("name", ["matmul_naive-trn2", "attention-trn2", "softmax-trn1", "two_cores"])
def test_the_segments_of_random_windows_are_those_of_the_definition(name, two_core_trace, tmp_path):
    if name == "two_cores":
        path = two_core_trace
    else:
        path = tmp_path / f"{name}.trace"
        shutil.copytree(SAMPLES / f"{name}.trace", path)
    rng = random.Random(name)
    with profiler.open(path) as t:
        lo, hi = t.time_range
        windows = [(None, None, None), (lo, hi + 1, None), (lo - 5, lo + 1, None)]
        windows += [(*sorted(rng.sample(range(lo, hi), 2)), None) for _ in range(10)]
        windows += [(*sorted(rng.sample(range(lo, hi), 2)), 1) for _ in range(3)] if name == "two_cores" else []
        for a, b, core in windows:
            scope = resolve_scope(t, a, b, core)
            got = _segments(t, scope).select(["agg", "queue", "s", "e", "last_id", "track"]).to_pylist()
            where = "TRUE" if core is None else f"coalesce(pcore_idx, 0) = {core}"
            want = t.sql(ORACLE.format(core=where, a=scope.start_ns, b=scope.end_ns)).to_arrow_table().to_pylist()
            assert got == want, (name, a, b, core)
            assert got or a is not None     # (the whole trace has segments)


@pytest.mark.parametrize("name", ["matmul_naive-trn2", "mlp-trn2"])
def test_a_windows_transfers_are_whole_and_their_triggers_those_of_the_whole_trace(name, tmp_path):
    from profiler.analyses.dma_transfers import transfers

    path = tmp_path / f"{name}.trace"
    shutil.copytree(SAMPLES / f"{name}.trace", path)
    rng = random.Random(name)
    with profiler.open(path) as t:
        every = transfers(t, resolve_scope(t))
        assert every.trigger_source == "flow"
        by_agg = {r["agg"]: (r, trig) for r, trig in zip(every.table.to_pylist(), every.trigger.tolist(), strict=True)}
        lo, hi = t.time_range
        for _ in range(8):
            a, b = sorted(rng.sample(range(lo, hi), 2))
            scope = resolve_scope(t, a, b)
            part = transfers(t, scope, window_only=True)
            touching = {r[0] for r in t.sql(
                f"SELECT DISTINCT coalesce(packet_aggregation_id, -1 - id) FROM DmaPacket WHERE start_ts < {b} "
                f"AND (end_ts > {a} OR start_ts >= {a})").fetchall()}
            got = {r["agg"]: (r, trig) for r, trig in zip(part.table.to_pylist(), part.trigger.tolist(), strict=True)}
            assert set(got) == touching and (part.trigger_source == "flow" or not got)
            assert all(got[k] == by_agg[k] for k in got)   # each whole: its every packet, its trigger
