"""NeuronCore-v2 access conflicts: Vector and GpSimd never access SBUF at the same time, nor Vector and Scalar PSUM.

Checked against a brute force on random programs on every scheduling path (every access starts at the earliest time
from its engine's turn and its semaphores on that overlaps no access of the other engine issued before it), with the
constant off and on trn2, and the conflict lists' own functions against a plain list of intervals.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer import TraceReader
from tracer.sim import run_kernel
from tracer.sim.arch import cost_model
from tracer.sim.fastpath import schedule_kernel as K
from tracer.sim.fastpath.schedule_jit import ENV_SWITCH
from tracer.sim.records import PORT_GPSIMD_SBUF, PORT_SCALAR_PSUM, PORT_STREAM, PORT_VECTOR_PSUM, PORT_VECTOR_SBUF

#: Which engines conflict on which memory (NeuronCore-v2).
PAIRS = (("Vector", "GpSimd", "@SBUF"), ("Vector", "Scalar", "@PSUM"))


def _instructions(path):
    t = TraceReader(path).read_table("Instruction")
    cols = {c: t.column(c).to_pylist() for c in ("id", "engine", "opcode", "start_ts", "end_ts", "operands",
                                                  "evt_wait_time_ns")}
    return [dict(zip(cols, row, strict=True)) for row in zip(*cols.values(), strict=True)]


def _accesses(rows, engine: str, mem: str):
    return [r for r in rows if r["engine"] == engine and r["opcode"] != "DMA_TRIGGER" and mem in r["operands"]]


def _overlaps(rows) -> int:
    n = 0
    for a_engine, b_engine, mem in PAIRS:
        for a in _accesses(rows, a_engine, mem):
            n += sum(a["start_ts"] < b["end_ts"] and b["start_ts"] < a["end_ts"]
                     for b in _accesses(rows, b_engine, mem))
    return n


def two_streams(nc, *, n: int = 8, cols: int = 512, other: str = "GpSimd", mem: str = "SBUF"):
    """Two independent element-wise streams on the same memory: Vector and ``other``."""
    x = nc.input("x", (128, cols), "fp32")
    y = nc.output("y", (128, cols), "fp32")
    a = nc.sbuf_tile((128, cols), "fp32", name="a")
    nc.dma_copy(a, x)
    make = nc.psum_tile if mem == "PSUM" else nc.sbuf_tile
    u, v = make((128, cols), "fp32", name="u"), make((128, cols), "fp32", name="v")
    nc.tensor_copy(u, a)
    nc.tensor_copy(v, a, engine="Scalar" if other == "Scalar" else "Vector")
    for _ in range(n):
        nc.tensor_scalar(u, u, "multiply", 1.0)
        if other == "Scalar":
            nc.activation(v, v, "copy")
        else:
            nc.tensor_scalar(v, v, "multiply", 1.0, engine=other)
    nc.dma_copy(y, a)


@pytest.mark.parametrize(("other", "mem", "conflict"), [
    ("GpSimd", "SBUF", True), ("Scalar", "PSUM", True),
    ("Scalar", "SBUF", False),   # Scalar and Vector may share SBUF
])
def test_conflicting_engines_take_turns_on_trn1_only(tmp_path, other, mem, conflict):
    params = {"other": other, "mem": mem}
    times, overlaps = {}, {}
    for label, arch, over in (("trn1", "trn1", None), ("off", "trn1", {"access_conflicts": False}),
                              ("trn2", "trn2", None)):
        path = tmp_path / f"{label}.trace"
        times[label] = run_kernel(two_streams, params, arch=arch, overrides=over, trace_path=path).simulated_ns
        rows = _instructions(path)
        overlaps[label] = sum(
            a["start_ts"] < b["end_ts"] and b["start_ts"] < a["end_ts"]
            for a in rows if a["engine"] == "Vector" and a["opcode"] != "DMA_TRIGGER"
            for b in rows if b["engine"] == other and b["opcode"] != "DMA_TRIGGER")
    assert overlaps["off"] > 0 and overlaps["trn2"] > 0  # the two streams do run side by side without conflicts
    if conflict:
        assert overlaps["trn1"] == 0
        assert times["trn1"] > times["off"]
    else:
        assert overlaps["trn1"] == overlaps["off"] and times["trn1"] == times["off"]


def test_the_constant_is_on_for_trn1_only_and_can_be_asked_for():
    assert cost_model("trn1").access_conflicts is True
    assert cost_model("trn2").access_conflicts is False
    assert cost_model("trn2", {"access_conflicts": "true"}).access_conflicts is True


# -- random programs against a brute force -----------------------------------------------------------------------
OPS = st.lists(st.tuples(st.sampled_from(["vs", "vp", "vps", "gs", "as", "ap", "dma"]),
                         st.integers(0, 3), st.integers(0, 3), st.sampled_from([64, 256, 1024])),
               min_size=1, max_size=24)


def _program(ops, reps):
    """A kernel issuing ``ops``: (kind, source tile, destination tile, columns).  Kinds: ``vs`` Vector on SBUF,
    ``vp`` Vector on PSUM, ``vps`` Vector from PSUM to SBUF, ``gs`` GpSimd on SBUF, ``as`` / ``ap`` Scalar on
    SBUF / PSUM, ``dma`` a load into an SBUF tile (a dependency the accesses wait for); ``reps`` times over in an
    ``nc.sequential_range`` (which the loop fast path replays)."""

    def kernel(nc):
        x = nc.input("x", (128, 1024), "fp32")
        y = nc.output("y", (128, 1024), "fp32")
        sb = [nc.sbuf_tile((128, 1024), "fp32", name=f"s{i}") for i in range(4)]
        ps = [nc.psum_tile((128, 512), "fp32", name=f"p{i}") for i in range(4)]
        for t in sb:
            nc.dma_copy(t, x)
        for t in ps:
            nc.tensor_copy(t, sb[0][:, 0:512])
        for _ in nc.sequential_range(reps):
            _body(nc, x, sb, ps, ops)
        nc.dma_copy(y, sb[0])

    return kernel


def _body(nc, x, sb, ps, ops) -> None:
        for kind, a, b, cols in ops:
            c = min(cols, 512)
            if kind == "vs":
                nc.tensor_scalar(sb[b][:, 0:cols], sb[a][:, 0:cols], "add", 1.0)
            elif kind == "vp":
                nc.tensor_scalar(ps[b][:, 0:c], ps[a][:, 0:c], "add", 1.0)
            elif kind == "vps":
                nc.tensor_copy(sb[b][:, 0:c], ps[a][:, 0:c])
            elif kind == "gs":
                nc.tensor_scalar(sb[b][:, 0:cols], sb[a][:, 0:cols], "multiply", 2.0, engine="GpSimd")
            elif kind == "as":
                nc.activation(sb[b][:, 0:cols], sb[a][:, 0:cols], "exp")
            elif kind == "ap":
                nc.activation(ps[b][:, 0:c], ps[a][:, 0:c], "exp")
            else:
                nc.dma_copy(sb[b][:, 0:cols], x[:, 0:cols])


def _brute_force_starts(rows):
    """Each port access's start by the rule, from the trace's own turn and wait: the earliest time from
    (its engine's previous end + its semaphore wait) on that overlaps no conflicting access issued before it."""
    conflicts = {("Vector", "@SBUF"): "GpSimd", ("GpSimd", "@SBUF"): "Vector",
                 ("Vector", "@PSUM"): "Scalar", ("Scalar", "@PSUM"): "Vector"}
    prev_end: dict[str, int] = {}
    placed: list[tuple[str, str, int, int]] = []  # engine, memory, start, end
    expected = {}
    for r in sorted(rows, key=lambda r: r["id"]):
        eng = r["engine"]
        ports = [] if r["opcode"] == "DMA_TRIGGER" else [m for m in ("@SBUF", "@PSUM")
                                                          if (eng, m) in conflicts and m in r["operands"]]
        if ports and eng in ("Vector", "GpSimd", "Scalar"):
            d = r["end_ts"] - r["start_ts"]
            t = prev_end.get(eng, 0) + r["evt_wait_time_ns"]
            moved = True
            while moved:
                moved = False
                for e2, m2, s2, e2_end in placed:
                    if m2 in ports and e2 == conflicts[(eng, m2)] and s2 < t + d and t < e2_end:
                        t = e2_end
                        moved = True
            expected[r["id"]] = t
            placed.extend((eng, m, r["start_ts"], r["end_ts"]) for m in ports)
        prev_end[eng] = r["end_ts"]
    return expected


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=OPS, reps=st.sampled_from([1, 30]), mode=st.sampled_from(["general", "python loop", "compiled loop"]))
def test_random_programs_against_the_brute_force(tmp_path_factory, ops, reps, mode):
    """On every scheduling path: the general path, the fast path's Python loop and its compiled loop (numba,
    from the first segment of 16 instructions)."""
    path = tmp_path_factory.mktemp("ac") / "p.trace"
    _record(ops, reps, mode, path)
    rows = _instructions(path)
    assert _overlaps(rows) == 0
    expected = _brute_force_starts(rows)
    got = {r["id"]: r["start_ts"] for r in rows if r["id"] in expected}
    assert got == expected


def _record(ops, reps, mode, path) -> None:
    """Record the program of ``ops`` on trn1 through ``mode``: the general path, or the fast path with its Python or
    its compiled scheduling loop."""
    old = os.environ.get(ENV_SWITCH)
    os.environ[ENV_SWITCH] = "1" if mode == "compiled loop" else "0"
    try:
        run_kernel(_program(ops, reps), {}, arch="trn1", trace_path=path, overwrite=True,
                   fast_path=mode != "general", emit="inline")
    finally:
        if old is None:
            del os.environ[ENV_SWITCH]
        else:
            os.environ[ENV_SWITCH] = old


def _timings(ops, reps, mode, path):
    _record(ops, reps, mode, path)
    t = TraceReader(path).read_table("Instruction")
    return list(zip(*(t.column(c).to_pylist() for c in ("id", "start_ts", "end_ts", "evt_wait_time_ns")),
                    strict=True))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_long_random_programs_take_the_same_turns_on_every_path(tmp_path_factory, ops):
    """400 iterations: long enough for the fast path to replay segments, in Python and compiled, with the
    conflict lists handed between the compiled loop and Python at every recording."""
    d = tmp_path_factory.mktemp("paths")
    general = _timings(ops, 400, "general", d / "g.trace")
    assert _timings(ops, 400, "python loop", d / "p.trace") == general
    assert _timings(ops, 400, "compiled loop", d / "c.trace") == general


def test_the_compiled_loop_places_accesses(tmp_path, monkeypatch):
    """A program whose replayed segments go through the compiled loop: the same turns as the general path."""
    from tracer.sim.fastpath import schedule as fast_schedule
    from tracer.sim.fastpath import schedule_jit

    calls = []
    real = schedule_jit.schedule
    monkeypatch.setattr(fast_schedule.schedule_jit, "schedule", lambda *a, **k: calls.append(1) or real(*a, **k))
    # two independent chains on each memory: the engines take turns in every iteration
    ops = [("vs", 0, 0, 512), ("gs", 1, 1, 512), ("vp", 0, 0, 512), ("ap", 1, 1, 512)]
    compiled = _timings(ops, 400, "compiled loop", tmp_path / "c.trace")
    assert len(calls) >= 2
    assert compiled == _timings(ops, 400, "general", tmp_path / "g.trace")
    assert _overlaps(_instructions(tmp_path / "c.trace")) == 0


# -- the conflict lists themselves -------------------------------------------------------------------------------
OWN = {"V": (1 << PORT_VECTOR_SBUF) | (1 << PORT_VECTOR_PSUM), "Vs": 1 << PORT_VECTOR_SBUF,
       "Vp": 1 << PORT_VECTOR_PSUM, "G": 1 << PORT_GPSIMD_SBUF, "A": 1 << PORT_SCALAR_PSUM}
STREAM = {"V": PORT_STREAM[PORT_VECTOR_SBUF], "Vs": PORT_STREAM[PORT_VECTOR_SBUF],
          "Vp": PORT_STREAM[PORT_VECTOR_PSUM], "G": PORT_STREAM[PORT_GPSIMD_SBUF],
          "A": PORT_STREAM[PORT_SCALAR_PSUM]}


def _place_all(place, accesses):
    """Place ``accesses`` (who, delay after the engine is free, duration) in order; returns the starts."""
    pa, pn = K.new_ports()
    sf = np.zeros(6, np.int64)
    out = []
    for who, gap, d in accesses:
        s = place(pa, pn, OWN[who], int(sf[STREAM[who]]) + gap, d, sf)
        out.append(int(s))
        sf[STREAM[who]] = s + d
    return out


def _place_lists_all(accesses):
    """:func:`_place_all` with the Python lists' version (the general path's)."""
    ps, pe, pf = [[], [], [], []], [[], [], [], []], [0] * 4
    sf = [0] * 6
    out = []
    for who, gap, d in accesses:
        s = K.place_lists(ps, pe, pf, OWN[who], sf[STREAM[who]] + gap, d, sf)
        out.append(s)
        sf[STREAM[who]] = s + d
    return out


def _oracle(accesses):
    lists: dict[int, list[tuple[int, int]]] = {b: [] for b in range(4)}
    free = dict.fromkeys(range(6), 0)
    out = []
    for who, gap, d in accesses:
        own = OWN[who]
        t = free[STREAM[who]] + gap
        moved = True
        while moved:
            moved = False
            for b in range(4):
                if own >> b & 1:
                    for s, e in lists[b ^ 1]:
                        if s < t + d and t < e:
                            t, moved = e, True
        for b in range(4):
            if own >> b & 1:
                lists[b].append((t, t + d))
        free[STREAM[who]] = t + d
        out.append(t)
    return out


ACCESSES = st.lists(st.tuples(st.sampled_from(sorted(OWN)), st.integers(0, 50), st.integers(1, 40)),
                    max_size=300)


@given(ACCESSES)
def test_place_matches_a_plain_list_of_intervals(accesses):
    assert _place_all(K.place, accesses) == _oracle(accesses)
    assert _place_lists_all(accesses) == _oracle(accesses)


def test_a_list_too_far_ahead_forgets_its_oldest_accesses_as_a_floor():
    """An idle GpSimd while Vector makes over PORT_CAP accesses: the oldest PORT_TRIM are forgotten and GpSimd's next
    access starts no earlier than the last of them ends (documented approximation), later ones are exact."""
    accesses = [("Vs", 10, 5)] * (K.PORT_CAP + 1) + [("G", 0, 3)]
    starts = _place_all(K.place, accesses)
    assert _place_lists_all(accesses) == starts
    vec_ends = [s + 5 for s in starts[:-1]]
    assert starts[-1] == vec_ends[K.PORT_TRIM - 1]  # not the gap at 0 the oracle finds
    assert _oracle(accesses)[-1] == 0
    assert starts[:-1] == _oracle(accesses)[:-1]


@settings(max_examples=40, deadline=None)
@given(ACCESSES)
def test_the_compiled_place_matches_too(accesses):
    numba = pytest.importorskip("numba")
    compiled = _compiled(numba)
    assert _place_all(compiled, accesses) == _oracle(accesses)
    long = [("Vs", 10, 5)] * (K.PORT_CAP + 1) + [("G", 0, 3)]
    assert _place_all(compiled, long) == _place_all(K.place, long)


def _compiled(numba):
    fn = getattr(_compiled, "fn", None)
    if fn is None:
        fn = _compiled.fn = numba.njit(getattr(K.place, "py_func", K.place))
    return fn
