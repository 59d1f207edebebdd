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
#: In a trnprof recording: each run of a (transfer, queue)'s packets back to back (a packet starting after the one
#: before it in time ended starts a run), keep the runs starting in the window.
RUNS_ORACLE = """
WITH p AS (
    SELECT coalesce(packet_aggregation_id, -1 - id) AS agg, queue_name AS queue, id, start_ts, end_ts, track_id,
           CASE WHEN start_ts > lag(end_ts) OVER w THEN 1 ELSE 0 END AS gap
    FROM DmaPacket WHERE {core}
    WINDOW w AS (PARTITION BY coalesce(packet_aggregation_id, -1 - id), queue_name ORDER BY start_ts, id)),
r AS (SELECT *, sum(gap) OVER (PARTITION BY agg, queue ORDER BY start_ts, id) AS run FROM p)
SELECT agg, queue, min(start_ts) AS s, max(end_ts) AS e, arg_max(id, (end_ts, id)) AS last_id,
       arg_max(track_id, (end_ts, id)) AS track
FROM r GROUP BY agg, queue, run HAVING min(start_ts) >= {a} AND min(start_ts) < {b} ORDER BY agg, queue, s"""


def _gappy_import(tmp_path: Path) -> Path:
    """A Neuron Explorer profile (Parquet) whose transfers' packets on a queue have gaps between them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.unit.test_import_neuron import METADATA_74, instruction_part

    d = tmp_path / "gappy@latest"
    d.mkdir()
    pq.write_table(pa.table(METADATA_74), d / "Metadata.parquet")
    pq.write_table(instruction_part([0, 1, 2], ["tensor", "Tensor", "pool"]), d / "Instruction_0.parquet")
    start = [100, 200, 300, 120, 400, 500]
    n = len(start)
    pq.write_table(pa.table({
        "start_ts": start, "end_ts": [t + 50 for t in start], "duration_ns": [50] * n, "pcore_idx": [0] * n,
        "id": list(range(n)), "packet_idx": pa.array(range(n), pa.int32()), "packet_aggregation_id": [1, 1, 1, 2, 2, 3],
        "engine_idx": [4, 4, 4, 5, 5, 4], "read_bytes": [2048] * n, "write_bytes": [2048] * n,
        "transfer_bytes": [2048] * n, "throughput": pa.array([4e10] * n, pa.float32()), "crc": [0] * n,
        "queue_type": ["input"] * n, "variable": ["x"] * n, "queue_idx": [4, 4, 4, 5, 5, 4]}),
        d / "DmaPacket.parquet")
    return d


@pytest.mark.parametrize("name", ["matmul_naive-trn2", "attention-trn2", "softmax-trn1", "two_cores", "split",
                                  "imported"])
def test_the_segments_of_random_windows_are_those_of_the_definition(name, two_core_trace, tmp_path):
    """Also in a recording whose shares split around other queues' packets (runs), and in an imported profile
    whose packets of a transfer on a queue do not run back to back (one segment each)."""
    if name == "two_cores":
        path = two_core_trace
    elif name == "split":
        from tests.unit.test_sim_dependencies import _stores_then_loads
        from tracer.sim import run_kernel

        path = tmp_path / "split.trace"
        run_kernel(_stores_then_loads, {"loads": 24}, arch="trn2", overrides={"dve_clock_ghz": 0.5}, trace_path=path)
    elif name == "imported":
        path = _gappy_import(tmp_path)
    else:
        path = tmp_path / f"{name}.trace"
        shutil.copytree(SAMPLES / f"{name}.trace", path)
    rng = random.Random(name)
    with profiler.open(path) as t:
        oracle = RUNS_ORACLE if t.sql("SELECT cost_model IS NOT NULL FROM Metadata").fetchall()[0][0] else ORACLE
        if name == "split":   # the case: some (transfer, queue) pair has more than one run
            assert len(t.sql(RUNS_ORACLE.format(core="TRUE", a=-1, b=2**62)).fetchall()) > len(
                t.sql(ORACLE.format(core="TRUE", a=-1, b=2**62)).fetchall())
        if name == "imported":   # the case: packets of a pair with gaps between them, kept one segment
            assert oracle is ORACLE and len(t.sql(RUNS_ORACLE.format(core="TRUE", a=-1, b=2**62)).fetchall()) > len(
                t.sql(ORACLE.format(core="TRUE", a=-1, b=2**62)).fetchall())
        lo, hi = t.time_range
        windows = [(None, None, None), (lo, hi + 1, None), (lo - 5, lo + 1, None)]
        windows += [(*sorted(rng.sample(range(lo, hi), 2)), None) for _ in range(10)]
        windows += [(*sorted(rng.sample(range(lo, hi), 2)), 1) for _ in range(3)] if name == "two_cores" else []
        for a, b, core in windows:
            scope = resolve_scope(t, a, b, core)
            got = _segments(t, scope).select(["agg", "queue", "s", "e", "last_id", "track"]).to_pylist()
            where = "TRUE" if core is None else f"coalesce(pcore_idx, 0) = {core}"
            want = t.sql(oracle.format(core=where, a=scope.start_ns, b=scope.end_ns)).to_arrow_table().to_pylist()
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


@pytest.mark.parametrize("name", ["matmul_naive-trn2", "attention-trn2", "mlp-trn2"])
def test_dma_gaps_of_random_windows_are_those_found_from_every_transfer(name, tmp_path, monkeypatch):
    """The DMA gaps' next transfers, looked up among a window's transfers (falling back to every one when a gap's
    next transfer starts after the window), against looking them up among every transfer of the trace."""
    import importlib

    gaps_module = importlib.import_module("profiler.analyses.idle_gaps")   # (the package's name is the function)
    from profiler.analyses.dma_transfers import transfers

    path = tmp_path / f"{name}.trace"
    shutil.copytree(SAMPLES / f"{name}.trace", path)
    rng = random.Random(name)
    calls: list[bool] = []

    def spy(trace, scope=None, *, window_only=False):
        calls.append(window_only)
        return transfers(trace, scope, window_only=window_only)

    with profiler.open(path) as t:
        lo, hi = t.time_range
        windows = [(None, None)] + [tuple(sorted(rng.sample(range(lo, hi), 2))) for _ in range(12)]
        fell_back = narrow_only = 0
        for a, b in windows:
            calls.clear()
            monkeypatch.setattr(gaps_module, "transfers", spy)
            got = gaps_module.idle_gaps(t, a, b, engines=["DMA"])
            fell_back += calls == [True, False]
            narrow_only += calls == [True]
            monkeypatch.setattr(gaps_module, "transfers", lambda tr, sc=None, **_: transfers(tr, sc))
            want = gaps_module.idle_gaps(t, a, b, engines=["DMA"])
            assert got.equals(want), (name, a, b)
        assert narrow_only >= 1 and fell_back + narrow_only == len(windows)


def test_a_dma_gap_whose_next_transfer_starts_after_the_window_finds_it(tmp_path):
    """Transfer 0's packets [0,10) and [50,60) leave the DMA idle in [10,50); the next transfer to start after
    that gap is transfer 1 at 100, past the window [0,80): it is still named (looked up among every transfer)."""
    from tracer import TraceWriter
    from tracer import schema as ts

    path = tmp_path / "late.trace"
    with TraceWriter(path, metadata={"is_simulation": True, "arch": "handmade"}, background_flush=False) as w:
        w.append_rows(ts.INSTRUCTION.name, [
            {ts.ID: i, ts.START_TS: s, ts.END_TS: s + 5, ts.DURATION_NS: 5, ts.ENGINE: "Sync",
             ts.OPCODE: "DMA_TRIGGER", ts.OPERANDS: "", ts.PC: i, ts.PCORE_IDX: 0, ts.TIMELINE_TRACK: "Sync"}
            for i, s in ((0, 0), (1, 90))])
        w.append_rows(ts.DMA_PACKET.name, [
            {ts.ID: i, ts.QUEUE_NAME: "qSyncIO0", ts.START_TS: s, ts.END_TS: s + 10, ts.DURATION_NS: 10,
             ts.READ_BYTES: 64, ts.WRITE_BYTES: 64, ts.TRANSFER_BYTES: 64, "packet_aggregation_id": agg,
             ts.PCORE_IDX: 0}
            for i, s, agg in ((0, 0, 0), (1, 50, 0), (2, 100, 1))])
        w.append_rows(ts.FLOW.name, [
            {ts.OUT_TABLE: "Instruction", ts.OUT_ID: o, ts.IN_TABLE: "DmaPacket", ts.IN_ID: p,
             ts.DEPENDENCY_TYPE: "flow"} for o, p in ((0, 0), (0, 1), (1, 2))])
    with profiler.open(path) as t:
        gaps = profiler.analyses.idle_gaps(t, 0, 80, engines=["DMA"]).to_pylist()
    rows = [(g["start_ns"], g["end_ns"], g["cause"], g["cause_id"]) for g in gaps]
    assert rows == [(10, 50, "trigger", 1), (60, 80, "end_of_work", None)]


@pytest.mark.parametrize("name", ["matmul_naive-trn2", "matmul_rowload-trn2", "mlp-trn2"])
def test_the_hbm_regions_of_random_windows_are_those_placed_by_every_transfer(name, tmp_path, monkeypatch):
    """A window's HBM regions (bounds' necessary bytes, the reload factors), placed by the window's own transfers
    and those its remaining instructions triggered, against placing them by every transfer of the trace."""
    import importlib

    from profiler.analyses.dma_transfers import transfers

    regions_module = importlib.import_module("profiler.analyses.hbm_regions")
    path = tmp_path / f"{name}.trace"
    shutil.copytree(SAMPLES / f"{name}.trace", path)
    rng = random.Random(name)
    extra_found = []

    def spy(trace, scope=None, **kw):
        got = transfers(trace, scope, **kw)
        if kw.get("triggered_by") is not None:
            extra_found.append(len(got))
        return got

    monkeypatch.setattr(regions_module, "transfers", spy)
    with profiler.open(path) as t:
        lo, hi = t.time_range
        windows = [tuple(sorted(rng.sample(range(lo, hi), 2))) for _ in range(15)]
        windows += [(lo, lo + (hi - lo) // k) for k in (2, 3, 5, 7)]
        for a, b in windows:
            scope = resolve_scope(t, a, b)
            got = regions_module.regions(t, scope)
            want = regions_module.regions(t, scope, transfers(t, scope))
            fields = ("side", "name", "r0", "r1", "c0", "c1", "itemsize")
            assert [getattr(got, f).tolist() for f in fields] == [getattr(want, f).tolist() for f in fields], (a, b)
            assert regions_module.necessary_bytes(t, scope) == regions_module.necessary_bytes(
                t, scope, transfers(t, scope))
    assert any(extra_found), "no window had an instruction whose transfer starts after it"
