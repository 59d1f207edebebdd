"""FP8 (fp8_e4m3, fp8_e5m2): rounding against every representable value, the PE array's double-row mode, FLOP
weights, errors, a shipped kernel in FP8, and the same trace from the fast path."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_sim_fastpath import _assert_same, _run
from tracer import TraceReader
from tracer.errors import KernelError
from tracer.sim import cost_model, run_kernel
from tracer.sim.dtypes import DTYPES, dtype
from tracer.sim.fastpath import controller

FORMATS = {"fp8_e4m3": (4, 3, False), "fp8_e5m2": (5, 2, True)}


def _finite_values(exp_bits: int, man_bits: int, has_inf: bool) -> list[tuple[float, int]]:
    """Every finite non-negative value of the format with its code, decoded from the bit patterns (independent
    of tracer.sim.dtypes), plus the first value past the largest (the code rounding overflows to) as ``inf``."""
    bias = 2 ** (exp_bits - 1) - 1
    out = []
    for code in range(2 ** (exp_bits + man_bits)):
        e, m = code >> man_bits, code & (2 ** man_bits - 1)
        top = e == 2 ** exp_bits - 1
        if (has_inf and top) or (not has_inf and top and m == 2 ** man_bits - 1):   # inf/NaN, or E4M3FN's NaN
            continue
        frac = m / 2 ** man_bits
        out.append(((frac if e == 0 else 1 + frac) * 2.0 ** ((1 if e == 0 else e) - bias), code))
    biggest, code = out[-1]
    step = biggest - out[-2][0]
    out.append((biggest + step, code + 1))   # overflow
    return out


def _oracle(x: float, table: list[tuple[float, int]], has_inf: bool) -> float:
    """Round ``x`` to the nearest value of ``table``, ties to the even code; past the largest: inf or NaN."""
    mag = abs(x)
    best = min(table, key=lambda vc: (abs(vc[0] - mag), vc[1] % 2))
    if best is table[-1]:
        return np.copysign(np.inf, x) if has_inf else np.nan
    return float(np.copysign(best[0], x))


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_representable_value_and_every_midpoint_rounds_as_the_oracle_says(name):
    table = _finite_values(*FORMATS[name])
    values = [v for v, _c in table[:-1]]
    mids = [(a + b) / 2 for a, b in zip(values, [*values[1:], table[-1][0]], strict=True)]
    xs = np.array(values + mids + [-v for v in values + mids], np.float64)
    got = DTYPES[name].round(xs.astype(np.float32))
    want = np.array([_oracle(x, table, FORMATS[name][2]) for x in xs])
    np.testing.assert_array_equal(got, want)
    assert len(set(values)) == 127 if name == "fp8_e4m3" else 124   # 0 .. 448, 0 .. 57344 (no -0)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(list(FORMATS)),
       x=st.one_of(st.floats(-70000, 70000, width=32), st.floats(-0.0078125, 0.0078125, width=32)))
def test_rounding_matches_the_oracle(name, x):
    table = _finite_values(*FORMATS[name])
    got = float(DTYPES[name].round(np.array([x], np.float32))[0])
    want = _oracle(float(np.float32(x)), table, FORMATS[name][2])
    assert (np.isnan(got) and np.isnan(want)) or got == want


def test_nan_and_infinity():
    e4, e5 = DTYPES["fp8_e4m3"], DTYPES["fp8_e5m2"]
    special = np.array([np.nan, np.inf, -np.inf], np.float32)
    assert np.isnan(e4.round(special)).all()                     # E4M3FN has no infinities
    got = e5.round(special)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf
    assert dtype("float8_e4m3") is e4 and dtype("float8_e5m2") is e5 and e4.itemsize == e5.itemsize == 1


def _mm(dt: str, mode: str, n: int = 512, iters: int = 1):
    def kern(nc):
        a = nc.input("a", (128, 128), dt)
        b = nc.input("b", (128, n * iters), dt)
        c = nc.output("c", (128, n * iters), "fp32")
        at = nc.sbuf_tile((128, 128), dt, name="a")
        nc.dma_copy(at, a)
        for j in nc.affine_range(iters):
            bt = nc.sbuf_tile((128, n), dt, name="b")
            nc.dma_copy(bt, b[:, j * n:(j + 1) * n])
            ps = nc.psum_tile((128, n), "fp32", name="ps")
            nc.matmul(ps, at, bt, perf_mode=mode)
            ct = nc.sbuf_tile((128, n), "fp32", name="c")
            nc.tensor_copy(ct, ps)
            nc.dma_copy(c[:, j * n:(j + 1) * n], ct)
    return kern


def _matmuls(tmp_path, kern, arch, name, overrides=None):
    path = tmp_path / f"{name}.trace"
    # (the trn2 throttle off: the PE array's clock ramp would stretch these few matmuls)
    run_kernel(kern, arch=arch, overrides={"throttle_enabled": "false", **(overrides or {})}, trace_path=path,
               emit="inline")
    ins = TraceReader(path).read_table("Instruction").to_pydict()
    rows = [i for i, op in enumerate(ins["opcode"]) if op == "MATMUL"]
    return {k: [ins[k][i] for i in rows] for k in ("duration_ns", "adjusted_flops", "performance_mode",
                                                      "operands")}


@pytest.mark.parametrize(("n", "cycles_bf16", "cycles_double"), [(512, 512, 256), (256, 256, 128), (96, 96, 64),
                                                                 (64, 64, 64)])
def test_double_row_halves_the_moving_time_down_to_the_minimum_interval(tmp_path, n, cycles_bf16, cycles_double):
    cm = cost_model("trn2")
    bf16 = _matmuls(tmp_path, _mm("bf16", "none", n), "trn2", "bf16")
    fp8 = _matmuls(tmp_path, _mm("fp8_e4m3", "none", n), "trn2", "fp8")
    double = _matmuls(tmp_path, _mm("fp8_e4m3", "double_row", n), "trn2", "double")
    assert bf16["duration_ns"] == fp8["duration_ns"] == [cm.cycles_to_ns(cycles_bf16, cm.pe_clock_ghz)]
    assert double["duration_ns"] == [cm.cycles_to_ns(cycles_double, cm.pe_clock_ghz)]
    raw = 2 * 128 * 128 * n
    # Neuron's adjusted (BF16-equivalent) FLOPs: FP8 x0.5 on NeuronCore-v3, however it ran
    assert bf16["adjusted_flops"] == [raw] and fp8["adjusted_flops"] == double["adjusted_flops"] == [raw // 2]
    assert double["performance_mode"] == ["double_row"] and "perf_mode=double_row" in double["operands"][0]
    assert fp8["performance_mode"] == [None]


def test_fp8_counts_its_full_flops_on_trn1_and_double_row_can_be_asked_for(tmp_path):
    raw = 2 * 128 * 128 * 512
    assert _matmuls(tmp_path, _mm("fp8_e5m2", "none"), "trn1", "t1")["adjusted_flops"] == [raw]
    with pytest.raises(KernelError, match="needs NeuronCore-v3 .trn2.; trn1's PE array has no double-row mode"):
        run_kernel(_mm("fp8_e4m3", "double_row"), arch="trn1")
    what_if = _matmuls(tmp_path, _mm("fp8_e4m3", "double_row"), "trn1", "what_if",
                       {"pe_double_row": "true", "pe_double_row_speedup": "4"})
    cm = cost_model("trn1")
    assert what_if["duration_ns"] == [cm.cycles_to_ns(128, cm.pe_clock_ghz)]


@pytest.mark.parametrize(("dt", "mode", "message"), [
    ("bf16", "double_row", "multiplies FP8 tiles .fp8_e4m3, fp8_e5m2., not bf16"),
    ("fp8_e4m3", "quad_row", "unknown matmul perf_mode 'quad_row'; choose none or double_row"),
])
def test_bad_perf_modes_name_the_line(dt, mode, message):
    with pytest.raises(KernelError, match=message) as err:
        run_kernel(_mm(dt, mode), arch="trn2")
    assert "test_sim_fp8.py:" in str(err.value)


def test_fp8_matmul_values_are_products_of_the_rounded_inputs():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 4, (128, 128)), rng.normal(0, 4, (128, 512))

    def kern(nc):
        at = nc.sbuf_tile((128, 128), "fp8_e5m2", name="a")
        nc.dma_copy(at, nc.input("a", (128, 128), "fp8_e5m2", init=a))
        bt = nc.sbuf_tile((128, 512), "fp8_e5m2", name="b")
        nc.dma_copy(bt, nc.input("b", (128, 512), "fp8_e5m2", init=b))
        ps = nc.psum_tile((128, 512), "fp32")
        nc.matmul(ps, at, bt, perf_mode="double_row")
        ct = nc.sbuf_tile((128, 512), "fp32")
        nc.tensor_copy(ct, ps)
        nc.dma_copy(nc.output("c", (128, 512), "fp32"), ct)

    c = run_kernel(kern, arch="trn2", numerics=True).outputs["c"]
    e5m2 = DTYPES["fp8_e5m2"]
    want = e5m2.round(a.astype(np.float32)).astype(np.float64).T @ e5m2.round(b.astype(np.float32))
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-3)   # products exact, sums in fp32
    assert np.abs(want - a.T @ b).max() > 1.0                     # (and not what unrounded inputs give)


@pytest.mark.parametrize("dt", ["fp8_e4m3", "fp8_e5m2"])
def test_matmul_rowload_in_fp8_checks_and_double_row_is_faster_on_trn2(dt):
    params = {"M": 1024, "N": 1024, "K": 1024}
    bf16 = run_kernel("matmul_rowload", params, arch="trn2")
    fp8 = run_kernel("matmul_rowload", {**params, "dtype": dt}, arch="trn2", check=True)
    double = run_kernel("matmul_rowload", {**params, "dtype": dt, "perf_mode": "double_row"}, arch="trn2",
                        check=True)
    assert fp8.checks[0].ok and double.checks[0].ok
    assert double.simulated_ns < 0.8 * bf16.simulated_ns
    assert double.engine_busy_ns["Tensor"] < 0.6 * fp8.engine_busy_ns["Tensor"]
    assert fp8.dma_bytes < bf16.dma_bytes                     # 1-byte inputs (C stays bf16)
    assert double.pe_flops == fp8.pe_flops == bf16.pe_flops / 2


def test_fp8_double_row_through_the_fast_path(tmp_path, monkeypatch):
    monkeypatch.setattr(controller, "TARGET", 8)
    monkeypatch.setattr(controller, "MIN_SEGMENT", 2)
    kern = _mm("fp8_e4m3", "double_row", 256, 24)
    general = _run(tmp_path, kern, {}, "trn2", False)
    fast = _run(tmp_path, kern, {}, "trn2", True)
    assert fast[0].fast_path_instructions > 0.5 * fast[0].instructions
    _assert_same(general, fast)


def test_the_memory_map_reads_fp8_operands(tmp_path):
    import profiler
    from profiler.analyses.memory_access import accesses

    path = tmp_path / "fp8.trace"
    run_kernel(_mm("fp8_e4m3", "double_row"), arch="trn2", trace_path=path, emit="inline")
    with profiler.open(path) as trace:
        got = accesses(trace, "SBUF", 0, 10 ** 12)
    # a (128 x 128 B) and b (128 x 512 B) written by DMA, read by LDWEIGHTS / MATMUL; c (fp32) written and read
    sizes = set((got.hi - got.lo).tolist())
    assert {128, 512, 2048} <= sizes


def test_fp8_matmuls_without_double_row_are_a_recommendation_on_trn2_only(tmp_path):
    import profiler
    from profiler.analyses import performance_bounds, recommendations
    from profiler.analyses import schema as rs

    params = {"M": 512, "N": 1024, "K": 512, "dtype": "fp8_e4m3"}

    def rules(name, arch, **extra):
        path = tmp_path / f"{name}.trace"
        run_kernel("matmul_rowload", {**params, **extra}, arch=arch, trace_path=path, emit="inline")
        with profiler.open(path) as trace:
            table = recommendations(trace).to_pylist()
            b = performance_bounds(trace)
        return {r[rs.RULE]: r for r in table} | {"active": b[rs.ENGINE_ACTIVE_NS], "total": b[rs.TOTAL_TIME_NS]}

    found = rules("single", "trn2")
    single = found["fp8_double_row"]
    assert "perf_mode=\"double_row\"" in single[rs.MESSAGE] and "2x as fast" in single[rs.MESSAGE]
    evidence = json.loads(single[rs.EVIDENCE])
    assert evidence["fp8_matmuls"] == (512 // 128) * (1024 // 512) * (512 // 128)
    assert single[rs.IMPACT_NS] == pytest.approx(evidence["fp8_matmul_ns"] / 2)
    # bottleneck-aware: the run shortens by the time saved at most, and not below another engine's active time
    active, total = found["active"], found["total"]
    others = [v for e, v in active.items() if e != "Tensor"]
    assert active["Tensor"] == max(active.values())      # (Tensor-bound at this size)
    assert single[rs.SPEEDUP] == pytest.approx(total / max(total - single[rs.IMPACT_NS], *others))
    assert single[rs.SPEEDUP] > 1.05
    # the under-utilisation rules point to it rather than only to tile sizes
    pointed = [found[r][rs.MESSAGE] for r in ("low_mfu", "low_active_flops") if r in found]
    assert pointed and all(m.endswith("reach at most half the peak: see fp8_double_row.") for m in pointed)
    double = rules("double", "trn2", perf_mode="double_row")
    assert "fp8_double_row" not in double
    assert not any("fp8_double_row" in r[rs.MESSAGE] for k, r in double.items() if k not in ("active", "total"))
    assert "fp8_double_row" not in rules("trn1", "trn1")  # NeuronCore-v2 has no double-row mode
