"""The loop fast path writes exactly the trace the general path writes.

Every shipped kernel, and random looped programs (hypothesis), run with the fast path forced off and on: every
table must be equal row for row, and so must the run's summary.  Each kernel must also actually have been replayed
(most of its instructions scheduled by the fast path), so the comparison cannot pass by the fast path silently
switching itself off.  Random programs use tiny segments so that recording, matching, falling back in the middle
of a segment and the lazy dependency records are all exercised on a few hundred instructions.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_sim_dependencies import check_trace_dependencies
from tracer import TraceReader
from tracer.errors import KernelError
from tracer.sim import run_kernel
from tracer.sim.fastpath import controller


def _run(tmp_path, kernel, params, arch, fast, overrides=None):  # noqa: PLR0917
    path = tmp_path / f"{'fast' if fast else 'general'}.trace"
    result = run_kernel(kernel, params, arch=arch, overrides=overrides, trace_path=path, overwrite=True,
                        emit="inline", fast_path=fast)
    reader = TraceReader(path)
    return result, {name: plain_table(reader.read_table(name)) for name in reader.table_names() if name != "Metadata"}


def plain_table(table: pa.Table) -> pa.Table:
    """``table`` with dictionary columns decoded and one chunk per column: its logical content.

    The writer flushes at least once a second, so how rows split into record batches depends on wall time, and
    each batch read back carries the dictionary as it was then: equal values can have different dictionaries
    (``Table.equals`` then says they differ).  The comparisons here must not depend on the machine's load."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.table(cols, names=table.column_names).combine_chunks()


def _assert_same(general, fast):
    (rg, tg), (rf, tf) = general, fast
    assert tg.keys() == tf.keys()
    for name, table in tg.items():
        assert tf[name].equals(table), f"table {name} differs with the fast path"
    skip = {"wall_s", "trace_path", "fast_path_instructions"}
    for f in dataclasses.fields(rg):
        if f.name not in skip:
            assert getattr(rf, f.name) == getattr(rg, f.name), f"result field {f.name} differs with the fast path"


KERNEL_CASES = [
    ("matmul_naive", {"M": 512, "N": 1024, "K": 2048}, "trn2", None),
    ("matmul_blocked", {"M": 1024, "N": 4096, "K": 1024, "block_m": 2}, "trn1", None),
    ("matmul_rowload", {"M": 1024, "N": 4096, "K": 1024}, "trn2", None),
    ("matmul_rowload", {"M": 1024, "N": 4096, "K": 1024, "dtype": "fp8_e4m3", "perf_mode": "double_row"}, "trn2",
     None),
    ("linear", {"tokens": 2048, "d_in": 256, "d_out": 1024, "transpose": "pe"}, "trn1", None),
    ("softmax", {"rows": 96000, "cols": 128}, "trn1", None),             # last tile of 0 < p < 128 rows
    ("rmsnorm", {"rows": 65536, "cols": 128}, "trn2", {"dma_start_latency_ns": "0"}),
    ("layernorm", {"rows": 16000, "cols": 640}, "trn1", None),
    ("attention", {"seq": 1024, "head_dim": 64, "kv_block": 64}, "trn2", None),
    ("attention", {"seq": 1024, "head_dim": 64, "kv_block": 64, "probs_transpose": "dma"}, "trn1", None),
    ("attention", {"seq": 1024, "head_dim": 64, "kv_block": 64, "causal": True}, "trn2", None),
    ("mlp", {"layers": 12, "d_model": 256, "d_ff": 512, "tokens": 128}, "trn2", None),
    ("dma_stream", {"rows": 8192, "cols": 2000, "tile_cols": 200}, "trn1", None),  # queues loaded unevenly
]
#: Test ids of KERNEL_CASES (a kernel's name, and its variant's parameters).
KERNEL_IDS = [c[0] + "".join(f"-{c[1][k]}" for k in ("probs_transpose", "transpose", "dtype", "perf_mode")
                             if k in c[1]) + ("-causal" if c[1].get("causal") else "")
              for c in KERNEL_CASES]


@pytest.mark.parametrize("lengthen", [False, True], ids=["segments", "longer-segments"])
@pytest.mark.parametrize(("kernel", "params", "arch", "overrides"), KERNEL_CASES,
                         ids=KERNEL_IDS)
def test_fast_path_writes_the_general_paths_trace(tmp_path, monkeypatch, kernel, params, arch, overrides,  # noqa: PLR0917
                                                  lengthen):
    monkeypatch.setattr(controller, "TARGET", 32)  # segments of a few loop iterations: these kernels are small
    monkeypatch.setattr(controller, "MIN_SEGMENT", 2)  # (scaled down alike)
    # longer-segments: a "long run" early in every kernel, so loops decide their strides again mid-run
    monkeypatch.setattr(controller, "LONG_RUN", 64 if lengthen else 10 ** 12)
    calls = []
    real = controller.FastPath._lengthen
    monkeypatch.setattr(controller.FastPath, "_lengthen", lambda self: calls.append(self.count()) or real(self))
    general = _run(tmp_path, kernel, params, arch, False, overrides)
    fast = _run(tmp_path, kernel, params, arch, True, overrides)
    assert general[0].fast_path_instructions == 0
    _assert_same(general, fast)
    share = fast[0].fast_path_instructions / fast[0].instructions
    # (with longer segments these small kernels are mostly recording: test_a_long_run_... measures the replay)
    assert lengthen or share > 0.5, f"the fast path replayed only {share:.0%} of the instructions"
    assert len(calls) == (1 if lengthen else 0)  # once per run, and only in a long one


def _triangular(nc):
    """A triangular nest: the inner loop's first run has one iteration, its last 80 (as causal attention's kv
    loop over the query blocks)."""
    x = nc.input("x", (128, 64 * 80), "bf16")
    y = nc.output("y", (128, 64 * 80), "bf16")
    for i in nc.sequential_range(80):
        acc = nc.sbuf_tile((128, 64), "fp32", name="acc")
        nc.memset(acc, 0.0, engine="Vector")
        for j in nc.sequential_range(i + 1):
            t = nc.sbuf_tile((128, 64), "bf16", name="t")
            nc.dma_copy(t, x[:, j * 64:(j + 1) * 64])
            e = nc.sbuf_tile((128, 64), "fp32", name="e")
            nc.activation(e, t, "exp")
            nc.tensor_scalar(e, e, "multiply", 0.5, op1="add", operand1=1.0)
            nc.tensor_tensor(acc, acc, e, "add")
        out = nc.sbuf_tile((128, 64), "bf16", name="out")
        nc.tensor_copy(out, acc)
        nc.dma_copy(y[:, i * 64:(i + 1) * 64], out, engine="GpSimd")


@pytest.mark.parametrize(("kernel", "params"), [(_triangular, {}), ("attention", {"seq": 4096, "causal": True})],
                         ids=["triangular", "causal-attention"])
def test_a_loop_whose_later_runs_are_long_is_promoted_from_a_step(tmp_path, monkeypatch, kernel, params):
    """The inner loop's first run is too short to commit, so it is decided to be a step; a later, long run
    promotes it, so the segments inside it repeat and are replayed (without the promotion: none were)."""
    monkeypatch.setattr(controller, "TARGET", 64)  # (scaled down: runs of over 15 iterations hold a segment)
    promoted = []
    real = controller.FastPath.promote
    monkeypatch.setattr(controller.FastPath, "promote", lambda self, site: promoted.append(site) or real(self, site))
    general = _run(tmp_path, kernel, params, "trn2", False)
    fast = _run(tmp_path, kernel, params, "trn2", True)
    _assert_same(general, fast)
    assert len(promoted) == 1
    assert fast[0].fast_path_instructions > 0.5 * fast[0].instructions


def _nest(n_outer, inner_len, before=0, outer_op=False):
    """An outer sequential loop (with one op of its own if ``outer_op``) over an inner one of ``inner_len(i)``
    iterations of five instructions, after ``before`` memsets."""
    def kern(nc):
        x = nc.input("x", (128, 64), "bf16")
        t = nc.sbuf_tile((128, 64), "bf16", name="t")
        acc = nc.sbuf_tile((128, 64), "fp32", name="acc")
        for _ in range(before):
            nc.memset(acc, 0.0)
        for i in nc.sequential_range(n_outer):
            if outer_op:
                nc.memset(acc, 0.0, engine="Vector")
            for _j in nc.sequential_range(inner_len(i)):
                nc.dma_copy(t, x)
                nc.tensor_copy(acc, t)
                nc.tensor_scalar(acc, acc, "multiply", 0.5, op1="add", operand1=1.0)
                nc.activation(acc, acc, "exp")
                nc.tensor_tensor(acc, acc, t, "add")
        nc.dma_copy(nc.output("y", (128, 64), "fp32"), acc)
    return kern


def _fast_run(kern, monkeypatch, params=None):
    """(result, the run's FastPath) with the fast path on."""
    runs = []
    real = controller.FastPath.__init__
    monkeypatch.setattr(controller.FastPath, "__init__", lambda self, ctx: runs.append(self) or real(self, ctx))
    return run_kernel(kern, params, fast_path=True), runs[-1]


def test_an_empty_first_run_decides_nothing(monkeypatch):
    """A strictly triangular nest (``range(i)``) begins with an empty run, and nothing was issued before it: that
    run, and an outer iteration that issued nothing, must not decide the loops' strides (the instructions issued so
    far made the inner loop a step for good and nothing was replayed); the same nest replays either way."""
    for before in (0, 3):   # (before the fix: 0% replayed with nothing before the nest, 83% after 3 memsets)
        result, fast = _fast_run(_nest(400, lambda i: i, before), monkeypatch)
        assert result.fast_path_instructions > 0.5 * result.instructions, before
        assert fast.promoted


def test_one_long_run_does_not_cut_every_later_short_one(monkeypatch):
    """A loop promoted by one long run keeps its short runs silent inside their enclosing segment: the segments
    stay as long (as few) as without the long run, instead of one per short run (MIN_SEGMENT)."""
    def inner(spike):
        return lambda i: 300 if spike and i == 10 else 3
    _plain, fast_plain = _fast_run(_nest(10000, inner(False), outer_op=True), monkeypatch)
    spiked, fast_spiked = _fast_run(_nest(10000, inner(True), outer_op=True), monkeypatch)
    assert fast_spiked.promoted and not fast_plain.promoted
    assert fast_spiked.stats["matched"] < 1.5 * fast_plain.stats["matched"]
    assert spiked.fast_path_instructions > 0.9 * spiked.instructions


def test_a_promoted_loop_cuts_base_segments_in_a_long_run(monkeypatch):
    """In a long run (segments of LONG_FACTOR x TARGET) a promoted loop still commits every TARGET instructions:
    the remainders of runs of ever other lengths are as many segments to record as its stride has iterations."""
    monkeypatch.setattr(controller, "LONG_RUN", 100)   # (the outer loop predicts a few hundred instructions)
    result, fast = _fast_run(_nest(300, lambda i: i), monkeypatch)
    assert fast.target == controller.TARGET * controller.LONG_FACTOR
    (site,) = fast.promoted
    per = 5   # instructions per inner iteration: the DMA trigger, the copy, tensor_scalar, activation, tensor_tensor
    assert fast.strides[site] == -(-controller.TARGET // per)   # not the long run's 768
    assert result.fast_path_instructions > 0.6 * result.instructions


def test_a_long_run_cuts_longer_segments_from_its_prediction_on(monkeypatch):
    """Loops decide their strides for LONG_FACTOR x TARGET once a loop predicts LONG_RUN more instructions: the
    loop that predicts it at once, the others at their next run; fewer, longer segments, the same instructions."""
    monkeypatch.setattr(controller, "MIN_SEGMENT", 2)
    seen = {}
    real_finish = controller.FastPath.finish

    def finish(self):
        seen.update(self.stats, target=self.target, strides=dict(self.strides))
        return real_finish(self)

    monkeypatch.setattr(controller.FastPath, "finish", finish)
    runs = {}
    for long_run in (10 ** 12, 1_000):
        monkeypatch.setattr(controller, "LONG_RUN", long_run)
        result = run_kernel("matmul_rowload", {"M": 32768, "N": 4096, "K": 1024}, arch="trn2")
        runs[long_run] = (result.instructions, dict(seen))
    (n_short, short), (n_long, long_) = runs[10 ** 12], runs[1_000]
    assert n_short == n_long
    assert short["target"] == controller.TARGET and long_["target"] == controller.TARGET * controller.LONG_FACTOR
    assert long_["matched"] < 0.6 * short["matched"]  # segments about LONG_FACTOR times longer
    assert long_["instructions"] > 0.8 * n_long


def test_a_long_affine_nest_cuts_longer_segments_from_its_first_instruction(monkeypatch):
    """An nc.affine_range nest predicted long before it runs (FastPath.expect) lengthens the segments before its
    first one, so its first segments are not recorded twice (cut short, then again after its outermost loop's first
    iteration predicted a long run); the trace is the same (test_fast_path_writes_the_general_paths_trace)."""
    monkeypatch.setattr(controller, "LONG_RUN", 1_000)
    calls = []
    real = controller.FastPath._lengthen
    monkeypatch.setattr(controller.FastPath, "_lengthen", lambda self: calls.append(self.count()) or real(self))
    result = run_kernel("matmul_rowload", {"M": 4096, "N": 4096, "K": 1024}, arch="trn2")
    assert calls == [0] and result.instructions > 1_000


def _nested(nc):
    """An outer loop whose iterations hold an inner commit loop between a few instructions."""
    x = nc.input("x", (128, 64 * 8), "bf16")
    for i in nc.sequential_range(8):
        head = nc.sbuf_tile((128, 64), "bf16", name="head")
        nc.dma_copy(head, x[:, i * 64:(i + 1) * 64])
        for j in nc.sequential_range(300):
            t = nc.sbuf_tile((128, 64), "bf16", name="t")
            nc.tensor_copy(t, head, engine="Vector" if j % 2 else "Scalar")
        nc.memset(head, 0.0)


@pytest.mark.parametrize("min_segment", [1, 16])
def test_commit_points_close_to_the_last_one_cut_no_tiny_segments(tmp_path, monkeypatch, min_segment):
    """The inner loop's start and end come 1 instruction after the outer loop's iteration starts and 1 before it
    ends: a commit there is a step instead (fewer than MIN_SEGMENT instructions since the last one), with the
    same trace."""
    sizes: list[int] = []
    commit = controller.commit

    def counting(fast, var):
        sizes.append(len(var.positions))
        commit(fast, var)

    monkeypatch.setattr(controller, "commit", counting)
    monkeypatch.setattr(controller, "MIN_SEGMENT", min_segment)
    general = _run(tmp_path, _nested, {}, "trn2", False)
    sizes.clear()
    fast = _run(tmp_path, _nested, {}, "trn2", True)
    _assert_same(general, fast)
    assert fast[0].fast_path_instructions > fast[0].instructions / 2
    if min_segment == 1:  # the kernel does have commit points 1-2 instructions apart
        assert min(sizes) <= 2, sizes
    else:
        assert min(sizes) >= 16, sizes


def _steps_inside(nc):
    """A commit loop whose iterations hold small inner loops (steps inside its segments), as mlp's static loops."""
    x = nc.input("x", (128, 64), "bf16")
    for _i in nc.sequential_range(400):
        for _j in nc.static_range(4):
            t = nc.sbuf_tile((128, 64), "bf16", name="t")
            nc.dma_copy(t, x)
            for _k in nc.static_range(3):
                nc.tensor_copy(t, t, engine="Vector")


def test_loops_inside_segments_tell_the_fast_path_nothing_once_known(tmp_path, monkeypatch):
    """An inner loop found to be a step inside segments stops calling the fast path's marker at every iteration
    (mlp makes ~0.65 marker calls per instruction otherwise); segments are recorded and matched the same way and
    the trace is the same."""
    calls: list[int] = []
    marker = controller.FastPath.marker
    monkeypatch.setattr(controller.FastPath, "marker", lambda self, loop, i: calls.append(i) or marker(self, loop, i))
    general = _run(tmp_path, _steps_inside, {}, "trn2", False)
    calls.clear()
    fast = _run(tmp_path, _steps_inside, {}, "trn2", True)
    _assert_same(general, fast)
    assert fast[0].fast_path_instructions > 0.6 * fast[0].instructions
    # the outer loop's 401 markers, and the inner loops' first runs (each decided after its first iteration)
    assert len(calls) < 401 + 50, len(calls)  # every step marked would be 401 + 400 * (5 + 4 * 4) = 8801


def test_a_finished_run_keeps_nothing_alive(monkeypatch):
    """Everything a run built (core, templates, recorded segments, generated matching code) is freed when it ends,
    so a notebook can record many kernels in one process.  A module-wide cache of the generated matching
    functions once kept every run's fast path, and with it the whole run, alive (~6 MB per 48-layer mlp)."""
    import gc

    from tracer.sim.fastpath.trie import Node
    from tracer.sim.records import Template

    def live() -> tuple[int, int]:
        gc.collect()
        objs = gc.get_objects()
        # type(), not isinstance: a dead weakref.proxy left by an earlier test raises ReferenceError on the latter
        return sum(type(o) is Template for o in objs), sum(type(o) is Node for o in objs)

    monkeypatch.setattr(controller, "TARGET", 32)
    before = live()
    for _ in range(2):
        result = run_kernel("mlp", {"layers": 12, "d_model": 256, "d_ff": 512, "tokens": 128})
        assert result.fast_path_instructions > result.instructions / 2  # the fast path did build its structures
    assert live() == before


def test_a_loop_site_names_one_code_object_for_the_whole_run():
    """Loop sites are (id of the code object, offset), hashed cheaply; the fast path keeps each such code object
    alive, so a code object freed during the run (an expanded loop nest once its loop is done) cannot pass its id
    on to a new one, whose loops would then be taken for the old one's."""
    import gc
    import sys
    from types import SimpleNamespace

    fast = SimpleNamespace(_site_codes={})
    sites = []
    for i in range(20):
        ns: dict[str, object] = {}
        exec(compile(f"def body(site, fast, gf):\n    return site(fast, gf(0)), {i}\n", f"<loop {i}>", "exec"), ns)
        sites.append(ns["body"](controller.FastPath.site, fast, sys._getframe)[0])  # type: ignore[operator]
        del ns
        gc.collect()
    assert len(set(sites)) == len(sites)
    assert all(type(a) is int and type(b) is int for a, b in sites)


def test_an_error_inside_a_replayed_loop_is_the_general_paths_error(tmp_path):
    def kern(nc):
        x = nc.input("x", (128, 64 * 200), "bf16")
        for i in nc.sequential_range(200):  # the body branches on the index: concrete iterations
            t = nc.sbuf_tile((128, 64), "bf16", name="t")
            if i != 150:
                nc.dma_copy(t, x[:, i * 64:(i + 1) * 64])
            u = nc.sbuf_tile((128, 64), "bf16", name="u")
            nc.tensor_copy(u, t)  # iteration 150 reads t before anything wrote it

    messages = []
    for fast in (False, True):
        with pytest.raises(KernelError) as err:
            run_kernel(kern, {}, trace_path=tmp_path / f"{fast}.trace", emit="inline", fast_path=fast)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "before it was written" in messages[0]
    tables = [TraceReader(tmp_path / f"{fast}.trace") for fast in (False, True)]
    # every instruction issued before the error is in the trace: the general path lost those issued since its last
    # hand-over to the writer (257 of 300 when this test ran alone, all when other tests had run before it)
    assert tables[0].read_table("Instruction").num_rows == 300
    for name in tables[0].table_names():
        if name != "Metadata":
            assert plain_table(tables[1].read_table(name)).equals(plain_table(tables[0].read_table(name))), name


# -- random looped programs ------------------------------------------------------------------------------------------
OPS = ["load", "store", "vec", "act", "mm", "gp", "sb2sb", "scratch", "dmat"]
body_strategy = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
                         min_size=1, max_size=6)


def issue_body(nc, body, tiles, x, y, scratch, col, *, wide=None, j=0):  # noqa: PLR0917
    """Issue the operations of a generated body (``col``: the HBM column its slices start at; ``wide``/``j``: the
    tile and inner index of ``wide`` operations)."""
    for kind, a, b, c in body:
        ta, tb, tc = (tiles[k % len(tiles)] for k in (a, b, c))
        if kind == "load":
            nc.dma_copy(ta, x[:, col + a * 64:col + (a + 1) * 64], engine="Scalar" if b % 2 else "Sync")
        elif kind == "store":
            nc.dma_copy(y[:, col + b * 64:col + (b + 1) * 64], ta, engine="GpSimd")
        elif kind == "vec":  # Vector: two inputs, or a fused form (scalar then tile, a scan, a fused reduction)
            if c % 4 == 3:
                nc.scalar_tensor_tensor(ta[:, 0:32], tb[:, 0:32], "subtract", tc[:, 0:1], "multiply", tc[:, 32:64])
            elif c % 4 == 2 and a % 2:
                nc.tensor_tensor_scan(ta[:, 0:32], tb[:, 0:32], tc[:, 32:64], 0.5, "multiply", "add")
            elif c % 4 == 1 and a % 2:
                nc.max8(ta[:, 32:40], tb[:, 0:32])
            elif c % 4 == 1 and b % 2:
                nc.match_replace8(ta[:, 0:32], tb[:, 0:32], tc[:, 32:40], 0.0)
            elif c % 4 == 0 and a % 2:
                nc.select_reduce(ta[:, 0:32], tb[:, 0:32], tc[:, 0:32], -1.0, reduce_res=tc[:, 63:64])
            elif c % 4 == 2:
                nc.tensor_scalar_reduce(ta[:, 0:32], tb[:, 0:32], "add", 1.0, reduce_dst=tc[:, 63:64], reduce_op="max")
            else:
                nc.tensor_tensor(ta[:, 0:32], tb[:, 0:32], tc[:, 32:64], "add")
        elif kind == "act":
            nc.activation(ta, tb, "exp", bias=tc[:, 0:1])
        elif kind == "gp":  # GpSimd: one operator, two (the second's operand a tile, reversed), a select
            if c % 3 == 0:
                nc.tensor_scalar(ta, tb, "multiply", 0.5, engine="GpSimd")
            elif c % 3 == 1:
                nc.tensor_scalar(ta, tb, "multiply", 0.5, op1="subtract", operand1=tc[:, 0:1], reverse1=True,
                                 engine="GpSimd")
            else:
                nc.affine_select(ta, tb, -1.0, cmp="greater_equal", offset=a - b, channel_multiplier=1, step=-1)
        elif kind == "sb2sb":
            nc.dma_copy(ta[:, 0:32], tb[:, 32:64])
        elif kind == "dmat":  # a DMA transpose from HBM or from SBUF (in place when ta is tb)
            src = x[0:64, col + a * 64:col + (a + 1) * 64] if b % 2 else tb[0:64, 0:64]
            nc.dma_transpose(ta[0:64, 0:64], src, engine="Scalar" if c % 2 else "Sync")
        elif kind == "wide":
            nc.tensor_copy(wide[:, j * 64:(j + 1) * 64], ta, engine="Scalar" if c % 2 else "Vector")
        elif kind == "scratch":
            nc.dma_copy(scratch, ta)
            nc.dma_copy(tb, scratch, engine="GpSimd")
        else:
            ps = nc.psum_tile((64, 64), "fp32", name="ps")
            nc.matmul(ps, ta[:, 0:64], tb[:, 0:64])
            nc.tensor_copy(tc[0:64, :], ps, engine="Scalar" if c % 2 else "Vector")


def _looped_kernel(body, iters, deviate, carry, inner, scoped):  # noqa: PLR0917
    """A kernel whose loop body runs ``body`` on tiles allocated in the iteration, tiles from before the loop,
    and (``carry``) a tile carried from the previous iteration; ``deviate`` = (every, at) adds an extra operation
    on the iterations ``i % every == at``; ``inner`` repeats the body in an inner loop; ``scoped`` wraps it in
    operator scopes."""
    def kern(nc):
        x = nc.input("x", (128, 64 * (iters + 4)), "bf16")
        y = nc.output("y", (128, 64 * (iters + 4)), "bf16")
        scratch = nc.scratch("scratch", (128, 64), "bf16")
        outer = [nc.sbuf_tile((128, 64), "bf16", name=f"o{i}") for i in range(2)]
        for t in outer:
            nc.memset(t, 1.0)
        prev = nc.sbuf_tile((128, 64), "bf16", name="prev")
        nc.memset(prev, 0.0, engine="Vector")
        for i in nc.sequential_range(iters):  # branches on i and carries tiles: concrete iterations
            local = [nc.sbuf_tile((128, 64), "bf16", name=f"l{j}") for j in range(2)]
            nc.dma_copy(local[0], x[:, i * 64:(i + 1) * 64])
            nc.tensor_copy(local[1], local[0])
            tiles = [*local, *outer, prev] if carry else [*local, *outer]
            for _ in (nc.sequential_range(2) if inner else range(1)):
                scope = nc.operator(f"step{i % 2}") if scoped else None
                if scope is not None:
                    scope.__enter__()
                issue_body(nc, body, tiles, x, y, scratch, i * 64)
                if scope is not None:
                    scope.__exit__(None, None, None)
            every, at = deviate
            if every and i % every == at:
                extra = nc.sbuf_tile((128, 64), "bf16", name="extra")
                nc.tensor_tensor(extra, local[1], outer[0], "multiply", engine="GpSimd")
                nc.dma_copy(y[:, i * 64:(i + 1) * 64], extra)
            if carry:
                prev = local[1]

    return kern


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=body_strategy, iters=st.integers(6, 40), deviate=st.tuples(st.integers(0, 7), st.integers(0, 6)),
       carry=st.booleans(), inner=st.booleans(), scoped=st.booleans(), arch=st.sampled_from(["trn1", "trn2"]),
       long_run=st.sampled_from([10 ** 12, 8, 40]))
def test_random_looped_programs(tmp_path_factory, monkeypatch, body, iters, deviate, carry, inner, scoped,  # noqa: PLR0917
                                arch, long_run):
    monkeypatch.setattr(controller, "TARGET", 4)  # tiny segments: many recordings, matches and fallbacks
    monkeypatch.setattr(controller, "MIN_SEGMENT", 1)  # (elsewhere, commit points are also skipped: TARGET 8, 32)
    monkeypatch.setattr(controller, "LONG_RUN", long_run)  # strides decided again mid-run (8, 40) or never
    kern = _looped_kernel(body, iters, deviate, carry, inner, scoped)
    tmp = tmp_path_factory.mktemp("loop")
    general = _run(tmp, kern, {}, arch, False)
    fast = _run(tmp, kern, {}, arch, True)
    _assert_same(general, fast)
    check_trace_dependencies(fast[1])


def test_generated_api_methods_are_compiled_once_and_bound_per_run(monkeypatch):
    """The fast path's and the affine tracer's replacements for the API methods are compiled once per process (they
    were written and compiled again for every run: 5 ms of a small kernel's ~15 ms), yet each run's methods call its
    own fast path, never an earlier run's."""
    from tracer.sim.fastpath import match

    runs = []
    real = controller.FastPath.__init__
    monkeypatch.setattr(controller.FastPath, "__init__", lambda self, ctx: runs.append(self) or real(self, ctx))
    run_kernel("softmax", None, fast_path=True)
    compiled = len(match._COMPILED)
    run_kernel("softmax", None, fast_path=True)
    assert len(match._COMPILED) == compiled > 0
    first, second = runs[-2], runs[-1]
    for name in ("tensor_tensor", "sbuf_tile", "dma_copy"):
        a, b = first.match_methods[name], second.match_methods[name]
        assert a is not b and a.__code__ is b.__code__
        assert a.__globals__["FP"] is first and b.__globals__["FP"] is second
        ra, rb = first.record_methods[name], second.record_methods[name]
        assert ra.__globals__["T"] is first and rb.__globals__["T"] is second
