"""Dependency correctness of simulated traces: nothing starts before what it waits for has finished.

Checked two ways: over whole traces of the shipped kernels (every Flow edge, every semaphore wait in the operand
text, in-order engines, non-overlapping DMA engines), and against a brute-force oracle on random programs (every
pair of operations touching overlapping data, one of them writing, runs in program order).
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer import TraceReader
from tracer.schema import DMA_TRANSFER
from tracer.sim import run_kernel

WAIT_RE = re.compile(r"\$(\S+?)>=(\d+)")


def record(tmp_path, kernel, params=None, arch="trn2", **kw):
    """Record ``kernel`` into tmp_path and return (result, {table: pyarrow.Table})."""
    path = tmp_path / f"{getattr(kernel, '__name__', kernel)}-{arch}.trace"
    result = run_kernel(kernel, params or {}, arch=arch, trace_path=path, overwrite=True, **kw)
    reader = TraceReader(path)
    return result, {name: reader.read_table(name) for name in reader.table_names()}


def packet_end_by_transfer(tables) -> dict[int, int]:
    pk = tables["DmaPacket"]
    agg = np.asarray(pk["packet_aggregation_id"])
    end = np.asarray(pk["end_ts"])
    out: dict[int, int] = {}
    order = np.argsort(agg, kind="stable")
    agg, end = agg[order], end[order]
    bounds = np.flatnonzero(np.diff(agg)) + 1
    for a, e in zip(np.split(agg, bounds), np.split(end, bounds), strict=True):
        if len(a):
            out[int(a[0])] = int(e.max())
    return out


def check_trigger_edges(tables, edges) -> None:
    """Exactly one Flow edge per DMA transfer, from its DMA_TRIGGER instruction to its first packet."""
    ins, pk = tables["Instruction"], tables.get("DmaPacket")
    n_transfers = 0 if pk is None else len(set(pk["packet_aggregation_id"].to_pylist()))
    assert edges.num_rows == n_transfers, "one trigger edge per DMA transfer"
    if not n_transfers:
        return
    out_ids = np.asarray(edges["out_id"])
    in_ids = np.asarray(edges["in_id"])
    assert set(edges["out_table"].to_pylist()) == {"Instruction"}
    assert set(edges["dependency_type"].to_pylist()) == {"flow"}
    opcodes = np.asarray(ins["opcode"].to_pylist())
    assert (opcodes[out_ids] == "DMA_TRIGGER").all()
    assert len(np.unique(out_ids)) == len(out_ids) == (opcodes == "DMA_TRIGGER").sum()
    agg = np.asarray(pk["packet_aggregation_id"])
    first = {}
    for i, a in enumerate(agg.tolist()):
        first.setdefault(a, i)
    assert sorted(in_ids.tolist()) == sorted(first.values()), "each edge points at its transfer's first packet"
    assert (np.asarray(pk["packet_idx"])[in_ids] == 0).all()
    gap = np.asarray(pk["start_ts"])[in_ids] - np.asarray(ins["end_ts"])[out_ids]
    assert (gap == np.asarray(edges["gap_time"])).all() and (gap >= 0).all()
    # transfers are numbered in trigger order
    assert (np.diff(agg[in_ids]) > 0).all() and (np.diff(out_ids) > 0).all()


def dma_idle_while_ready(tables, latency_ns: int) -> list[tuple[int, int, int]]:
    """Packets that waited while their DMA engine sat idle long enough to move them: (packet id, idle start, idle
    end) for each, where a packet is ready once its transfer's trigger started plus ``latency_ns`` and the packet
    before it in its queue has ended (brute force over each engine's idle stretches)."""
    pk = tables.get("DmaPacket")
    if pk is None or not pk.num_rows:
        return []
    ins, flow = tables["Instruction"], tables["Flow"]
    trig = flow.filter(pa.array(np.asarray(flow["in_table"].to_pylist()) == "DmaPacket"))
    agg = np.asarray(pk["packet_aggregation_id"])
    ready_x = dict(zip(agg[np.asarray(trig["in_id"])].tolist(),
                       (np.asarray(ins["start_ts"])[np.asarray(trig["out_id"])] + latency_ns).tolist(), strict=True))
    start, end = np.asarray(pk["start_ts"]).tolist(), np.asarray(pk["end_ts"]).tolist()
    eng, queue = np.asarray(pk["engine_idx"]).tolist(), pk["queue_name"].to_pylist()
    idle: dict[int, list[tuple[int, int]]] = defaultdict(list)  # per engine, its idle stretches between packets
    for e in set(eng):
        spans = sorted((start[i], end[i]) for i in range(len(start)) if eng[i] == e)
        reach = spans[0][1]
        for s, en in spans[1:]:
            if s > reach:
                idle[e].append((reach, s))
            reach = max(reach, en)
    prev_end: dict[str, int] = {}
    bad = []
    for i in range(len(start)):  # packet ids are in queue order
        ready = max(ready_x[int(agg[i])], prev_end.get(queue[i], 0))
        prev_end[queue[i]] = end[i]
        need = end[i] - start[i]
        for lo, hi in idle[eng[i]]:
            if lo >= start[i]:
                break
            if min(hi, start[i]) - max(lo, ready) >= need:
                bad.append((i, lo, hi))
                break
    return bad


def check_trace_dependencies(tables) -> int:
    """Assert every dependency invariant of a simulated trace; returns the number of Flow edges checked."""
    ins = tables["Instruction"]
    ids = np.asarray(ins["id"])
    assert (ids == np.arange(len(ids))).all(), "instruction ids are 0..n-1 in issue order"
    start = np.asarray(ins["start_ts"])
    end = np.asarray(ins["end_ts"])
    assert (end >= start).all() and (np.asarray(ins["duration_ns"]) == end - start).all()
    pk = tables.get("DmaPacket")
    pk_start = pk_end = np.zeros(0, np.int64)
    if pk is not None and pk.num_rows:
        pk_ids = np.asarray(pk["id"])
        assert (pk_ids == np.arange(len(pk_ids))).all()
        pk_start, pk_end = np.asarray(pk["start_ts"]), np.asarray(pk["end_ts"])
        # one DMA engine moves one packet at a time
        eng = np.asarray(pk["engine_idx"])
        for e in np.unique(eng):
            s = np.sort(pk_start[eng == e])
            en = np.sort(pk_end[eng == e])
            assert (s[1:] >= en[:-1]).all(), f"packets overlap on DMA engine {e}"
    # in-order engines: instructions on one timeline track never overlap and start in issue order
    tracks = np.asarray(ins["timeline_track"].to_pylist())
    for track in np.unique(tracks):
        m = tracks == track
        assert (start[m][1:] >= end[m][:-1]).all(), f"instructions overlap on track {track}"
    # every Flow edge: the dependent starts after its predecessor ends; every id exists
    flow = tables["Flow"]
    in_table = np.asarray(flow["in_table"].to_pylist())
    assert set(in_table.tolist()) <= {"Instruction", "DmaPacket"}
    check_trigger_edges(tables, flow.filter(pa.array(in_table == "DmaPacket")))
    flow = flow.filter(pa.array(in_table == "Instruction"))
    in_ids = np.asarray(flow["in_id"])
    out_ids = np.asarray(flow["out_id"])
    out_table = np.asarray(flow["out_table"].to_pylist())
    assert set(flow["dependency_type"].to_pylist()) <= {"flow", "anti", "output"}
    assert (in_ids >= 0).all() and (in_ids < len(ids)).all()
    is_pk = out_table == "DmaPacket"
    assert (out_ids[~is_pk] < len(ids)).all() and (out_ids[is_pk] < len(pk_start)).all()
    out_end = np.where(is_pk, pk_end[np.where(is_pk, out_ids, 0)] if len(pk_end) else 0,
                       end[np.where(is_pk, 0, out_ids)])
    assert (start[in_ids] >= out_end).all(), "an instruction started before what it waits for finished"
    assert (out_ids[~is_pk] < in_ids[~is_pk]).all(), "dependencies point back in program order"
    assert (np.asarray(flow["gap_time"]) >= 0).all()
    # every semaphore wait in the operand text was satisfied (the update happened) before the start
    sem = tables["SemaphoreUpdate"]
    reached: dict[tuple[str, int], int] = {}
    for sid, value, ts in zip(sem["id"].to_pylist(), sem["value"].to_pylist(), sem["timestamp"].to_pylist(),
                              strict=True):
        reached[(sid, value)] = ts
    n_waits = 0
    for i, text in enumerate(ins["operands"].to_pylist()):
        for name, value in WAIT_RE.findall(text):
            ts = reached.get((name, int(value)))
            assert ts is not None, f"instruction {i} waits for {name}>={value}, which never happens"
            assert ts <= start[i], f"instruction {i} starts before {name} reached {value}"
            n_waits += 1
    assert n_waits == flow.num_rows, "one Flow edge per semaphore wait"
    return flow.num_rows


@pytest.mark.parametrize(("kernel", "params", "arch"), [
    ("matmul_naive", {"M": 256, "N": 512, "K": 512}, "trn2"),
    ("matmul_blocked", {"M": 512, "N": 512, "K": 512}, "trn1"),
    ("matmul_rowload", {"M": 512, "N": 1024, "K": 512}, "trn2"),
    ("softmax", {"rows": 300, "cols": 512}, "trn1"),
    ("rmsnorm", {"rows": 256, "cols": 512}, "trn2"),
    ("layernorm", {"rows": 300, "cols": 1200}, "trn1"),
    ("attention", {"seq": 256, "head_dim": 64}, "trn2"),
    ("mlp", {"layers": 2, "d_model": 256, "d_ff": 256, "tokens": 256}, "trn1"),
    ("dma_stream", {"rows": 256, "cols": 1024, "tile_cols": 512}, "trn2"),
])
def test_whole_traces_respect_every_dependency(tmp_path, kernel, params, arch):
    result, tables = record(tmp_path, kernel, params, arch)
    assert check_trace_dependencies(tables) > 0
    assert dma_idle_while_ready(tables, result.cost.dma_start_latency_ns) == []


def _stores_then_loads(nc, loads: int = 8, cols: int = 256):
    """A load, a Vector op, a GpSimd store of its result (issued first, ready late), then independent Sync loads
    (issued later, ready early): the loads' packets fill the engines' time before the store's."""
    x = nc.input("x", (128, cols * (loads + 1)), "bf16")
    y = nc.output("y", (128, cols), "bf16")
    t0 = nc.sbuf_tile((128, cols), "bf16", name="t0")
    nc.dma_copy(t0, x[:, 0:cols])
    u = nc.sbuf_tile((128, cols), "bf16", name="u")
    nc.tensor_scalar(u, t0, "multiply", 2.0)
    nc.dma_copy(y[:, 0:cols], u, engine="GpSimd")
    keep = []
    for i in range(1, loads + 1):
        t = nc.sbuf_tile((128, cols), "bf16", name=f"t{i}")
        nc.dma_copy(t, x[:, i * cols:(i + 1) * cols])
        keep.append(t)


@pytest.mark.parametrize("dve_clock_ghz", [0.4, 0.5, 0.96])
def test_dma_engines_never_idle_while_a_packet_waits(tmp_path, dve_clock_ghz):
    """An audit's reproduction: with the store's shares placed whole, a load's share that did not fit the idle
    stretch before the store waited behind it, so a faster Vector clock (0.4 -> 0.5 GHz) made the kernel 5.7%
    slower (4564 -> 4822 ns).  Packet by packet, the load fills the stretch: no idle time while a packet is ready,
    and the time no longer moves with the Vector clock by more than a packet's worth."""
    result, tables = record(tmp_path, _stores_then_loads, {}, "trn2", overrides={"dve_clock_ghz": dve_clock_ghz})
    assert dma_idle_while_ready(tables, result.cost.dma_start_latency_ns) == []
    stored = pa.ipc.open_stream(tmp_path / f"_stores_then_loads-trn2.trace/{DMA_TRANSFER.file_name}").read_all()
    if dve_clock_ghz == 0.5:  # the case the audit measured: the loads' shares split around the store
        assert sum(len(v) for v in stored["split_packet"].to_pylist()) > 0
    slow = run_kernel(_stores_then_loads, {}, arch="trn2", overrides={"dve_clock_ghz": 0.4}).simulated_ns
    assert result.simulated_ns <= slow + 40


def test_the_idle_checker_catches_a_packet_that_waited(tmp_path):
    result, tables = record(tmp_path, _stores_then_loads, {}, "trn2")
    pk = tables["DmaPacket"]
    start, end = np.asarray(pk["start_ts"]).copy(), np.asarray(pk["end_ts"]).copy()
    last = int(np.flatnonzero(np.asarray(pk["engine_idx"]) == 0)[-1])
    start[last] += 10_000
    end[last] += 10_000
    moved = pk.set_column(pk.schema.get_field_index("start_ts"), "start_ts", pa.array(start))
    moved = moved.set_column(moved.schema.get_field_index("end_ts"), "end_ts", pa.array(end))
    bad = dma_idle_while_ready({**tables, "DmaPacket": moved}, result.cost.dma_start_latency_ns)
    assert [b[0] for b in bad] == [last]


def test_checker_catches_a_broken_trace(tmp_path):
    _result, tables = record(tmp_path, "matmul_naive", {"M": 128, "N": 512, "K": 256})
    flow = tables["Flow"]
    ins = tables["Instruction"]
    waits = np.asarray(flow["in_table"].to_pylist()) == "Instruction"
    victim = int(np.asarray(flow["in_id"])[waits][0])
    starts = np.asarray(ins["start_ts"]).copy()
    starts[victim] = 0  # pretend it started at time 0, before its producer finished
    broken = dict(tables)
    broken["Instruction"] = ins.set_column(ins.schema.get_field_index("start_ts"), "start_ts",
                                           pa.array(starts))
    with pytest.raises(AssertionError):
        check_trace_dependencies(broken)


# -- random programs against a brute-force oracle -----------------------------------------------------------------
F = 256
GRAIN = 64
ops_strategy = st.lists(st.tuples(
    st.sampled_from(["load", "store", "vector", "gpsimd", "act", "copy_sb", "matmul", "spill", "reload"]),
    st.integers(0, 2), st.integers(0, 2), st.integers(0, 2),
    st.integers(0, F // GRAIN - 1), st.integers(1, F // GRAIN),
), min_size=1, max_size=24)


def _random_kernel(ops):
    """A kernel running ``ops`` on three SBUF tiles; returns (kernel, per-op access list)."""
    accesses: list[tuple[int, list[tuple[str, int, int]], list[tuple[str, int, int]]]] = []

    def kern(nc):
        x = nc.input("x", (128, 4 * F), "bf16")
        y = nc.output("y", (128, 4 * F), "bf16")
        scratch = nc.scratch("scratch", (128, F), "bf16")
        tiles = [nc.sbuf_tile((128, F), "bf16", name=f"t{i}") for i in range(3)]
        ps = nc.psum_tile((128, 128), "fp32", name="ps")
        for i, t in enumerate(tiles):
            nc.memset(t, float(i))
            accesses.append((1, [], [(f"t{i}", 0, F)]))
        col = 0
        spilled = False
        for kind, a, b, c, lo, width in ops:
            spilled = spilled or kind == "spill"
            f0 = lo * GRAIN
            f1 = min(F, f0 + width * GRAIN)
            ta, tb, tc = tiles[a], tiles[b], tiles[c]
            if kind == "load":
                nc.dma_copy(ta[:, f0:f1], x[:, col:col + f1 - f0])
                accesses.append((1, [], [(f"t{a}", f0, f1)]))
            elif kind == "store":
                nc.dma_copy(y[:, col:col + f1 - f0], ta[:, f0:f1], engine="GpSimd" if b else "Sync")
                accesses.append((1, [(f"t{a}", f0, f1)], []))
            elif kind in ("vector", "gpsimd"):
                nc.tensor_tensor(ta[:, f0:f1], tb[:, f0:f1], tc[:, f0:f1], "add",
                                 engine="Vector" if kind == "vector" else "GpSimd")
                accesses.append((1, [(f"t{b}", f0, f1), (f"t{c}", f0, f1)], [(f"t{a}", f0, f1)]))
            elif kind == "act":
                nc.activation(ta[:, f0:f1], tb[:, f0:f1], "exp")
                accesses.append((1, [(f"t{b}", f0, f1)], [(f"t{a}", f0, f1)]))
            elif kind == "copy_sb":
                nc.dma_copy(ta[:, f0:f1], tb[:, f0:f1])
                accesses.append((1, [(f"t{b}", f0, f1)], [(f"t{a}", f0, f1)]))
            elif kind == "spill":  # HBM dependencies are tracked per tensor
                nc.dma_copy(scratch[:, f0:f1], ta[:, f0:f1], engine="Scalar" if b else "Sync")
                accesses.append((1, [(f"t{a}", f0, f1)], [("scratch", 0, F)]))
            elif kind == "reload":
                if not spilled:
                    continue
                nc.dma_copy(ta[:, f0:f1], scratch[:, f0:f1], engine="GpSimd" if b else "Sync")
                accesses.append((1, [("scratch", 0, F)], [(f"t{a}", f0, f1)]))
            else:  # matmul into PSUM, then copy back into a tile
                nc.matmul(ps, ta[:, 0:128], tb[:, 0:128], accumulate=False)
                accesses.append((1, [(f"t{a}", 0, 128)], []))                      # LDWEIGHTS
                accesses.append((1, [(f"t{b}", 0, 128)], [("ps", 0, 128)]))        # MATMUL
                nc.tensor_copy(tc[:, 0:128], ps, engine="Scalar" if lo % 2 else "Vector")
                accesses.append((1, [("ps", 0, 128)], [(f"t{c}", 0, 128)]))
            col = (col + F) % (3 * F)

    return kern, accesses


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops_strategy, arch=st.sampled_from(["trn1", "trn2"]))
def test_random_programs_against_brute_force_oracle(tmp_path_factory, ops, arch):
    kern, accesses = _random_kernel(ops)
    tmp = tmp_path_factory.mktemp("rand")
    _result, tables = record(tmp, kern, {}, arch)
    ins = tables["Instruction"]
    assert ins.num_rows == len(accesses) + 1  # + the final barrier
    start = np.asarray(ins["start_ts"])
    end = np.asarray(ins["end_ts"]).copy()
    opcodes = ins["opcode"].to_pylist()
    xfer_end = packet_end_by_transfer(tables) if "DmaPacket" in tables else {}
    # completion of a DMA trigger's work = the end of its transfer's last packet
    x = 0
    done = end.copy()
    for i, op in enumerate(opcodes):
        if op == "DMA_TRIGGER":
            done[i] = xfer_end[x]
            x += 1
    by_region: dict[str, list[tuple[int, int, int, bool]]] = defaultdict(list)
    for i, (_n, reads, writes) in enumerate(accesses):
        for name, f0, f1 in reads:
            by_region[name].append((i, f0, f1, False))
        for name, f0, f1 in writes:
            by_region[name].append((i, f0, f1, True))
    checked = 0
    for name, items in by_region.items():
        for a in range(len(items)):
            i, a0, a1, aw = items[a]
            for b in range(a + 1, len(items)):
                j, b0, b1, bw = items[b]
                if j == i or not (aw or bw) or not (a0 < b1 and b0 < a1):
                    continue
                if name == "scratch" and aw and bw:
                    continue  # two DMA writes to one HBM tensor are not ordered (docs/cost-model.md)
                first, second = min(i, j), max(i, j)
                assert start[second] >= done[first], (
                    f"op {second} ({opcodes[second]}) started at {start[second]} before conflicting op {first} "
                    f"({opcodes[first]}) finished at {done[first]}")
                checked += 1
    assert checked > 0 or len(accesses) == 3  # only the initial memsets: nothing conflicts
    check_trace_dependencies(tables)
