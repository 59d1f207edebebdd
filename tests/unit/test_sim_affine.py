"""NKI's ``affine_range`` contract: a body traced once with a symbolic index, expanded by the simulator.

The expansion must write exactly the trace concrete execution writes (the body's Python run once per iteration,
general path): every shipped kernel, and random looped programs (hypothesis) that follow the contract -- nested
affine loops, sequential / static / plain loops inside them, on-chip slices selected by the index, scopes, affine
loops inside sequential ones.  Whatever breaks the contract is a one-line KernelError naming the kernel line.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_sim_dependencies import check_trace_dependencies
from tests.unit.test_sim_fastpath import issue_body
from tests.unit.test_sim_fastpath import plain_table as _plain
from tracer import TraceReader
from tracer.errors import KernelError
from tracer.sim import run_kernel
from tracer.sim.fastpath import controller

HERE = "test_sim_affine.py:"


def _run(tmp_path, kernel, params, arch, symbolic, fast):  # noqa: PLR0917
    path = tmp_path / f"{'sym' if symbolic else 'concrete'}{'_fast' if fast else ''}.trace"
    result = run_kernel(kernel, params, arch=arch, trace_path=path, overwrite=True, emit="inline", fast_path=fast,
                        expand_symbolic=symbolic)
    reader = TraceReader(path)
    return result, {name: _plain(reader.read_table(name)) for name in reader.table_names() if name != "Metadata"}


def _assert_same(concrete, symbolic):
    (rc, tc), (rs, ts) = concrete, symbolic
    assert tc.keys() == ts.keys()
    for name, table in tc.items():
        assert ts[name].num_rows == table.num_rows, f"table {name}: {ts[name].num_rows} rows, expected {table.num_rows}"
        assert ts[name].equals(table), f"table {name} differs when affine loops are expanded symbolically"
    skip = {"wall_s", "trace_path", "fast_path_instructions"}
    for f in dataclasses.fields(rc):
        if f.name not in skip:
            assert getattr(rs, f.name) == getattr(rc, f.name), f"result field {f.name} differs"


KERNELS = [
    ("matmul_naive", {"M": 256, "N": 1024, "K": 512}, "trn2"),
    ("matmul_blocked", {"M": 512, "N": 1024, "K": 512, "block_m": 2}, "trn1"),
    ("matmul_rowload", {"M": 512, "N": 2048, "K": 512}, "trn2"),
    ("linear", {"tokens": 512, "d_in": 256, "d_out": 1024, "transpose": "dma"}, "trn2"),
    ("linear", {"tokens": 256, "d_in": 256, "d_out": 512, "transpose": "pe"}, "trn1"),
    ("softmax", {"rows": 1000, "cols": 128}, "trn1"),             # full tiles, then a 104-row one
    ("rmsnorm", {"rows": 640, "cols": 128}, "trn2"),
    ("layernorm", {"rows": 700, "cols": 1024}, "trn1"),
    ("attention", {"seq": 512, "head_dim": 64, "kv_block": 64}, "trn2"),  # a sequential loop rolled in the body
    ("mlp", {"layers": 2, "d_model": 256, "d_ff": 256, "tokens": 128}, "trn2"),
    ("dma_stream", {"rows": 512, "cols": 1000, "tile_cols": 200}, "trn1"),
]


@pytest.mark.parametrize(("kernel", "params", "arch"), KERNELS,
                         ids=[k[0] + (f"-{k[1]['transpose']}" if "transpose" in k[1] else "") for k in KERNELS])
def test_symbolic_expansion_writes_the_concrete_trace(tmp_path, kernel, params, arch):
    concrete = _run(tmp_path, kernel, params, arch, False, False)
    symbolic = _run(tmp_path, kernel, params, arch, True, True)
    _assert_same(concrete, symbolic)


# -- random looped programs ------------------------------------------------------------------------------------------
OPS = ["load", "store", "vec", "act", "mm", "gp", "sb2sb", "wide", "scratch", "dmat"]
body_strategy = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
                         min_size=1, max_size=5)
INNER = ["affine", "sequential", "static", "plain"]


def _affine_kernel(body, n_outer, n_inner, inner, scoped, repeat, deep=False):  # noqa: PLR0917
    """A kernel following the affine contract: an outer nc.affine_range loop with per-iteration tiles, an inner
    loop of kind ``inner`` running ``body`` (HBM slices and a slice of a wide tile selected by the indices; with
    ``deep``, inside a third, affine, loop with a tile of its own), all of it ``repeat`` times from a top-level
    sequential loop, then a second affine loop using the first's tiles."""
    def kern(nc):
        n = n_outer * n_inner * 2
        x = nc.input("x", (128, 64 * (n + 4)), "bf16")
        y = nc.output("y", (128, 64 * (n + 4)), "bf16")
        scratch = nc.scratch("scratch", (128, 64), "bf16")
        outer = [nc.sbuf_tile((128, 64), "bf16", name=f"o{k}") for k in range(2)]
        for t in outer:
            nc.memset(t, 1.0)
        wide = nc.sbuf_tile((128, 64 * n_inner), "bf16", name="wide")
        nc.memset(wide, 0.0, engine="Vector")
        for _rep in nc.sequential_range(repeat):
            for i in nc.affine_range(n_outer):
                local = [nc.sbuf_tile((128, 64), "bf16", name=f"l{k}") for k in range(2)]
                nc.dma_copy(local[0], x[:, i * 64:(i + 1) * 64])
                nc.tensor_copy(local[1], local[0])
                tiles = [*local, *outer]
                loop = {"affine": nc.affine_range, "sequential": nc.sequential_range, "static": nc.static_range,
                        "plain": range}[inner](n_inner)
                for j in loop:
                    scope = nc.operator("step") if scoped else None
                    if scope is not None:
                        scope.__enter__()
                    for q in (nc.affine_range(2) if deep else range(1)):
                        col = ((i * n_inner + j) * 2 + q) * 64
                        if deep:
                            own = nc.sbuf_tile((128, 64), "bf16", name="deep")
                            nc.dma_copy(own, x[:, col:col + 64])
                            tiles = [own, *local, *outer]
                        issue_body(nc, body, tiles, x, y, scratch, col, wide=wide, j=j)
                    if scope is not None:
                        scope.__exit__(None, None, None)
                nc.dma_copy(y[:, i * 64:(i + 1) * 64], local[1])
            for k in nc.affine_range(2):  # the first loop's last tiles, now real, used by a second loop
                nc.tensor_tensor(wide[:, k * 32:(k + 1) * 32], local[1][:, 0:32], wide[:, k * 32:(k + 1) * 32], "add")

    return kern


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=body_strategy, n_outer=st.integers(1, 9), n_inner=st.integers(1, 4), inner=st.sampled_from(INNER),
       scoped=st.booleans(), repeat=st.integers(1, 2), deep=st.booleans(), arch=st.sampled_from(["trn1", "trn2"]),
       long_run=st.sampled_from([10 ** 12, 16, 64]))
def test_random_affine_programs(tmp_path_factory, monkeypatch, body, n_outer, n_inner, inner, scoped, repeat,  # noqa: PLR0917
                                deep, arch, long_run):
    monkeypatch.setattr(controller, "TARGET", 8)  # small segments: the fast path records and matches expansions
    # a "long run" predicted by an expansion before it runs (FastPath.expect) or by a loop after its first iteration
    monkeypatch.setattr(controller, "LONG_RUN", long_run)
    kern = _affine_kernel(body, n_outer, n_inner, inner, scoped, repeat, deep)
    tmp = tmp_path_factory.mktemp("affine")
    concrete = _run(tmp, kern, {}, arch, False, False)
    symbolic = _run(tmp, kern, {}, arch, True, True)
    _assert_same(concrete, symbolic)
    check_trace_dependencies(symbolic[1])


# -- the contract's errors -------------------------------------------------------------------------------------------
def _error(kern) -> str:
    with pytest.raises(KernelError) as err:
        run_kernel(kern, {})
    return str(err.value)


def _branch(nc):
    x = nc.input("x", (128, 256))
    for i in nc.affine_range(4):
        t = nc.sbuf_tile((128, 64))
        if i == 0:
            nc.memset(t, 0.0)
        nc.dma_copy(t, x[:, i * 64:(i + 1) * 64])


def _list_index(nc):
    tiles = [nc.sbuf_tile((128, 64)) for _ in range(4)]
    for t in tiles:
        nc.memset(t, 0.0)
    for i in nc.affine_range(4):
        u = nc.sbuf_tile((128, 64))
        nc.tensor_copy(u, tiles[i])


def _name(nc):
    for i in nc.affine_range(4):
        t = nc.sbuf_tile((128, 64), name=f"t{i}")
        nc.memset(t, 0.0)


def _product(nc):
    x = nc.input("x", (128, 64 * 16))
    for i in nc.affine_range(4):
        for j in nc.affine_range(4):
            t = nc.sbuf_tile((128, 64))
            nc.dma_copy(t, x[:, i * j * 64:(i * j + 1) * 64])


def _modulo(nc):
    x = nc.input("x", (128, 64 * 4))
    for i in nc.affine_range(4):
        t = nc.sbuf_tile((128, 64))
        nc.dma_copy(t, x[:, (i % 2) * 64:(i % 2 + 1) * 64])


def _kept(nc):
    kept = []
    for _ in nc.affine_range(4):
        t = nc.sbuf_tile((128, 64))
        nc.memset(t, 0.0)
        kept.append(t)


def _carried(nc):
    prev = nc.sbuf_tile((128, 64))
    nc.memset(prev, 0.0)
    for _ in nc.affine_range(4):
        t = nc.sbuf_tile((128, 64))
        nc.tensor_copy(t, prev)
        prev = t


def _early(nc):
    for i in nc.affine_range(4):
        t = nc.sbuf_tile((128, 64))
        nc.memset(t, 0.0)
        if nc.cm.partitions == 128:
            break
        _ = i


def _tensor_inside(nc):
    for _ in nc.affine_range(2):
        nc.input("x", (128, 64))


def _size(nc):
    x = nc.input("x", (128, 64 * 4))
    for i in nc.affine_range(4):
        t = nc.sbuf_tile((128, 64))
        nc.dma_copy(t, x[:, i * 64:i * 128 + 64])


CONTRACT_ERRORS = [
    (_branch, "comparing (==) a symbolic loop index (i); loop indices of nc.affine_range are symbolic"),
    (_list_index, "using as a Python int (list index, range bound, ...) a symbolic loop index (i)"),
    (_name, "formatting a symbolic loop index (i)"),
    (_product, "the product of two loop indices is not affine"),
    (_modulo, "i % 2 is not affine in the loop index"),
    (_kept, "is still referenced two iterations later"),
    (_carried, "uses a tile of the previous iteration"),
    (_early, "leaving an nc.affine_range loop early (break or return) is not supported"),
    (_tensor_inside, "declare HBM tensors (nc.input/output/scratch) before the nc.affine_range loop"),
    (_size, "depends on the loop index"),
]


@pytest.mark.parametrize(("kern", "text"), CONTRACT_ERRORS, ids=[k.__name__.strip("_") for k, _ in CONTRACT_ERRORS])
def test_breaking_the_contract_is_a_kernel_error_naming_the_line(kern, text):
    message = _error(kern)
    assert message.startswith(HERE), message
    assert text in message, message
    assert "\n" not in message


def test_the_same_kernels_run_concretely_with_sequential_range():
    def kern(nc):
        x = nc.input("x", (128, 256))
        prev = nc.sbuf_tile((128, 64))
        nc.memset(prev, 0.0)
        for i in nc.sequential_range(4):  # branches on i and carries a tile: allowed here
            t = nc.sbuf_tile((128, 64), name=f"t{i}")
            if i == 0:
                nc.memset(t, 1.0)
            else:
                nc.dma_copy(t, x[:, i * 64:(i + 1) * 64])
            nc.tensor_tensor(t, t, prev, "add")
            prev = t

    assert run_kernel(kern, {}).instructions == run_kernel(kern, {}, expand_symbolic=False).instructions == 10


def test_loop_variables_keep_their_last_value_and_loops_their_length():
    seen = {}

    def kern(nc):
        x = nc.input("x", (128, 64 * 12))
        rows = nc.affine_range(3, 12, 3)
        seen["len"] = len(rows)
        for i in rows:
            t = nc.sbuf_tile((128, 64))
            nc.dma_copy(t, x[:, i * 64:(i + 1) * 64])
            offset = i * 64 + 1
        seen["i"], seen["offset"] = int(i), offset + 0
        for _ in nc.affine_range(0):  # no iteration: nothing traced
            raise AssertionError("an empty loop runs no body")

    result = run_kernel(kern, {})
    assert seen == {"len": 3, "i": 9, "offset": 577}
    assert result.instructions == 4


def test_identical_loops_on_other_lines_keep_their_own_lines(tmp_path):
    def kern(nc):
        x = nc.input("x", (128, 64 * 4))
        for i in nc.affine_range(4):
            t = nc.sbuf_tile((128, 64))
            nc.dma_copy(t, x[:, i * 64:(i + 1) * 64])
        for i in nc.affine_range(4):
            t = nc.sbuf_tile((128, 64))
            nc.dma_copy(t, x[:, i * 64:(i + 1) * 64])

    concrete = _run(tmp_path, kern, {}, "trn2", False, False)
    symbolic = _run(tmp_path, kern, {}, "trn2", True, True)
    _assert_same(concrete, symbolic)
    assert len(set(symbolic[1]["Instruction"].column("nki_source_location").to_pylist())) == 3  # 2 loops + barrier


def test_an_error_in_an_expanded_body_is_the_concrete_error_with_the_same_partial_trace(tmp_path):
    def kern(nc):
        x = nc.input("x", (128, 64 * 4))
        t0 = nc.sbuf_tile((128, 64))
        nc.dma_copy(t0, x[:, 0:64])
        for i in nc.affine_range(4):
            t = nc.sbuf_tile((128, 64))
            nc.dma_copy(t, x[:, i * 64:(i + 1) * 64])
            u = nc.sbuf_tile((128, 32))
            nc.tensor_copy(u, t)  # shape mismatch: raised by the first iteration's call

    messages, tables = [], []
    for symbolic in (False, True):
        path = tmp_path / f"{symbolic}.trace"
        with pytest.raises(KernelError) as err:
            run_kernel(kern, {}, trace_path=path, emit="inline", expand_symbolic=symbolic)
        messages.append(str(err.value))
        reader = TraceReader(path)
        tables.append({n: _plain(reader.read_table(n)) for n in reader.table_names() if n != "Metadata"})
    assert messages[0] == messages[1] and "shape mismatch" in messages[0] and messages[0].startswith(HERE)
    assert tables[0].keys() == tables[1].keys()
    for name, table in tables[0].items():
        assert tables[1][name].equals(table), name
    assert tables[1]["Instruction"].num_rows == 2  # the load before the loop and the first iteration's load


def test_a_body_calling_helpers_of_another_file_keeps_their_lines(tmp_path, monkeypatch):
    (tmp_path / "affine_helper_mod.py").write_text(
        "def load(nc, x, i):\n"
        "    t = nc.sbuf_tile((128, 64), name='h')\n"
        "    nc.dma_copy(t, x[:, i * 64:(i + 1) * 64])\n"
        "    return t\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from affine_helper_mod import load  # written by this test

    def kern(nc):
        x = nc.input("x", (128, 64 * 6))
        y = nc.output("y", (128, 64 * 6))
        for i in nc.affine_range(6):
            t = load(nc, x, i)
            u = nc.sbuf_tile((128, 64), name="u")
            nc.tensor_copy(u, t)
            nc.dma_copy(y[:, i * 64:(i + 1) * 64], u)

    concrete = _run(tmp_path, kern, {}, "trn2", False, False)
    symbolic = _run(tmp_path, kern, {}, "trn2", True, True)
    _assert_same(concrete, symbolic)
    assert "affine_helper_mod.py:3" in symbolic[1]["Instruction"].column("nki_source_location").to_pylist()


def test_names_with_digits_in_rolled_sequential_loops_stay_names(tmp_path):
    def kern(nc):
        x = nc.input("x", (128, 64 * 24))
        for i in nc.affine_range(3):
            for k in nc.sequential_range(6):  # rolled back into a loop; its names must not be rewritten
                with nc.operator(f"step:{k}"):
                    t = nc.sbuf_tile((128, 64), name=f"t-{k % 2}")
                    nc.dma_copy(t, x[:, (i * 6 + k) * 64:(i * 6 + k + 1) * 64])

    concrete = _run(tmp_path, kern, {}, "trn2", False, False)
    symbolic = _run(tmp_path, kern, {}, "trn2", True, True)
    _assert_same(concrete, symbolic)
    assert "step:5" in symbolic[1]["Span"].column("name").to_pylist()


def _tile_slices(nc, n=4):
    """On-chip slices selected by loop indices: of whole tiles and of fixed regions, by slice and by index, one
    written across two lines of the call, one used three times."""
    x = nc.input("x", (128, 128 * n))
    wide = nc.sbuf_tile((128, 128 * n), "bf16", name="wide")
    nc.dma_copy(wide, x)
    for i in nc.affine_range(n):
        acc = nc.sbuf_tile((128, 128), "bf16", name="acc")
        nc.tensor_copy(acc[:, 0:64], wide[:, i * 64:(i + 1) * 64])
        nc.tensor_copy(acc[:, 64:128],
                       wide[:, 64 * n:128 * n][:, i * 64:(i + 1) * 64])  # a region of wide, then the index
        for j in nc.affine_range(2):
            part = acc[j * 64:(j + 1) * 64, :]
            nc.tensor_tensor(part, part, part, "add")
            nc.tensor_copy(acc[i, j * 64:(j + 1) * 64], wide[j, i * 64:(i + 1) * 64])
        row = nc.sbuf_tile((1, 64), "bf16", name="row")
        nc.dma_copy(row, x[i, 64:128])  # an HBM row selected by the index
        nc.tensor_copy(acc[i + 1, 0:64], row)


def test_tile_slices_selected_by_indices_are_made_without_parsing_their_keys(tmp_path, monkeypatch):
    """In-range on-chip slices of the expansion are built directly, not by ``Tile.__getitem__`` (only tracing
    slices: as many calls for 8 iterations as for 4), with the same trace as concrete execution."""
    from tracer.sim import memory

    concrete = _run(tmp_path, _tile_slices, {}, "trn2", False, False)
    calls = []
    for cls in (memory.Tile, memory.TileView):
        def counting(self, key, _original=cls.__getitem__):
            calls.append(key)
            return _original(self, key)

        monkeypatch.setattr(cls, "__getitem__", counting)
    symbolic = _run(tmp_path, _tile_slices, {}, "trn2", True, True)
    _assert_same(concrete, symbolic)
    counts = []
    for n in (4, 8):
        calls.clear()
        run_kernel(_tile_slices, {"n": n})
        counts.append(len(calls))
    assert counts[0] == counts[1] > 0, counts


def _tile_slice_out_of_range(nc):
    x = nc.input("x", (128, 64 * 4))
    wide = nc.sbuf_tile((128, 64 * 3), "bf16", name="wide")
    nc.dma_copy(wide, x[:, 0:192])
    for i in nc.affine_range(4):
        t = nc.sbuf_tile((128, 64), "bf16", name="t")
        nc.tensor_copy(t, wide[:, i * 64:(i + 1) * 64])  # the 4th iteration is past the end of wide


def test_a_tile_slice_out_of_range_in_a_later_iteration_is_the_concrete_error(tmp_path):
    messages, tables = [], []
    for symbolic in (False, True):
        path = tmp_path / f"{symbolic}.trace"
        with pytest.raises(KernelError) as err:
            run_kernel(_tile_slice_out_of_range, {}, trace_path=path, emit="inline", expand_symbolic=symbolic)
        messages.append(str(err.value))
        reader = TraceReader(path)
        tables.append({n: _plain(reader.read_table(n)) for n in reader.table_names() if n != "Metadata"})
    assert messages[0] == messages[1] and messages[0].startswith(HERE), messages
    for name, table in tables[0].items():
        assert tables[1][name].equals(table), name
    assert tables[1]["Instruction"].num_rows == 4  # the load and three iterations' copies


# -- slices picked by loop indices, every form ---------------------------------------------------------------------
SLICE_FORMS = ["hbm_row", "hbm_cols", "hbm_block", "hbm_negative", "hbm_whole_row", "hbm_broadcast", "tile_row",
               "tile_cols", "tile_region", "tile_negative", "tile_whole_row", "slice_of_slice", "tile_to_tile",
               "tile_to_hbm_row"]


def _slicing_kernel(n, m, nested, forms):
    """An affine loop (and, with ``nested``, a second one inside it) whose body slices HBM tensors and a tile with
    bounds and indices picked by the loop indices, in each of ``forms``."""
    def kern(nc):
        w = 64 * (n + 1) * (m + 1)
        x = nc.input("x", (128, w), "bf16")
        y = nc.output("y", (128, w), "bf16")
        big = nc.sbuf_tile((128, w), "bf16", name="big")
        nc.dma_copy(big, x)
        for i in nc.affine_range(n):
            for j in (nc.affine_range(m) if nested else range(1)):
                for form in forms:
                    if form == "hbm_row":
                        t = nc.sbuf_tile((1, 64), "bf16", name="r")
                        nc.dma_copy(t, x[i + j, 64:128])
                    elif form == "hbm_cols":
                        t = nc.sbuf_tile((128, 32), "bf16", name="c")
                        nc.dma_copy(t, x[:, i * 32 + j * 8:i * 32 + j * 8 + 32])
                    elif form == "hbm_block":
                        t = nc.sbuf_tile((2, 16), "bf16", name="b")
                        nc.dma_copy(t, x[2 * i:2 * i + 2, 16 * j:16 * j + 16])
                    elif form == "hbm_negative":
                        t = nc.sbuf_tile((128, 32), "bf16", name="n")
                        nc.dma_copy(t, x[:, -32:])
                        nc.dma_copy(y[:, i * 32:(i + 1) * 32], t)
                    elif form == "hbm_whole_row":
                        t = nc.sbuf_tile((1, w), "bf16", name="o")
                        nc.dma_copy(t, x[i])
                    elif form == "hbm_broadcast":
                        t = nc.sbuf_tile((64, 16), "bf16", name="bc")
                        nc.dma_copy(t, x[i:i + 1, 16 * j:16 * j + 16].broadcast(64))
                    elif form == "tile_row":
                        t = nc.sbuf_tile((1, 64), "bf16", name="tr")
                        nc.tensor_copy(t, big[i + j, 0:64])
                    elif form == "tile_cols":
                        t = nc.sbuf_tile((128, 32), "bf16", name="tc")
                        nc.tensor_copy(t, big[:, i * 32 + j:i * 32 + j + 32])
                    elif form == "tile_region":
                        t = nc.sbuf_tile((64, 16), "bf16", name="tg")
                        nc.tensor_copy(t, big[32:96, 64:w][:, 16 * i + j:16 * i + j + 16])
                    elif form == "tile_negative":
                        t = nc.sbuf_tile((128, 32), "bf16", name="tn")
                        nc.tensor_copy(t, big[:, -32:])
                        nc.tensor_copy(big[:, i * 32:(i + 1) * 32], t)
                    elif form == "tile_whole_row":
                        t = nc.sbuf_tile((1, w), "bf16", name="t1")
                        nc.tensor_copy(t, big[i])
                    elif form == "slice_of_slice":
                        t = nc.sbuf_tile((16, 8), "bf16", name="sv")
                        nc.tensor_copy(t, big[:, i * 32:(i + 1) * 32][16:32, 8 * j:8 * j + 8])
                    elif form == "tile_to_tile":
                        nc.tensor_copy(big[i, j * 8:(j + 1) * 8], big[j, i * 8:(i + 1) * 8])
                    else:  # tile_to_hbm_row
                        nc.dma_copy(y[i, 8 * j:8 * j + 8], big[j + 1, 0:8])

    return kern


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 5), m=st.integers(1, 3), nested=st.booleans(),
       forms=st.lists(st.sampled_from(SLICE_FORMS), min_size=1, max_size=5))
def test_slices_picked_by_loop_indices_expand_to_the_concrete_trace(tmp_path_factory, n, m, nested, forms):
    kern = _slicing_kernel(n, m, nested, forms)
    tmp = tmp_path_factory.mktemp("slices")
    _assert_same(_run(tmp, kern, {}, "trn2", False, False), _run(tmp, kern, {}, "trn2", True, True))


@pytest.mark.parametrize(("kernel", "params", "arch"), [
    ("matmul_naive", {"M": 512, "N": 1024, "K": 512}, "trn2"),
    ("matmul_blocked", {"M": 512, "N": 1024, "K": 512}, "trn2"),
    ("matmul_rowload", {"M": 1024, "N": 2048, "K": 512}, "trn2"),
    ("softmax", {"rows": 2048, "cols": 256}, "trn1"),
    ("rmsnorm", {"rows": 1024, "cols": 256}, "trn2"),
    ("attention", {"seq": 512, "head_dim": 64}, "trn2"),
    ("dma_stream", {"rows": 2048, "cols": 2000, "tile_cols": 200}, "trn1"),
    ("linear", {"tokens": 512, "d_in": 256, "d_out": 1024, "transpose": "pe"}, "trn2"),
    ("linear", {"tokens": 512, "d_in": 256, "d_out": 1024, "transpose": "dma"}, "trn2"),
])
def test_an_expansion_knows_the_instructions_it_issues(monkeypatch, kernel, params, arch):
    """events.instruction_count over a traced nest is exactly what its expansion then issues (every shipped kernel
    with affine loops): the fast path's up-front prediction of the run (FastPath.expect) is that count."""
    from tracer.sim.affine import codegen
    from tracer.sim.affine.events import instruction_count
    from tracer.sim.ops import INSTRUCTIONS_ISSUED

    pairs, expected = [], []
    real_expand, real_expect = codegen.expand, controller.FastPath.expect

    def expand(ctx, rec, root):
        n0 = ctx.core.n
        real_expand(ctx, rec, root)
        pairs.append((instruction_count(root, INSTRUCTIONS_ISSUED), ctx.core.n - n0))

    monkeypatch.setattr(codegen, "expand", expand)
    monkeypatch.setattr(controller.FastPath, "expect", lambda self, n: expected.append(n) or real_expect(self, n))
    result = run_kernel(kernel, params, arch=arch)
    assert pairs and all(predicted == issued for predicted, issued in pairs), pairs
    assert expected == [predicted for predicted, _issued in pairs]
    assert sum(issued for _p, issued in pairs) <= result.instructions
