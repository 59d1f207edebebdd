"""Bad kernels give clear KernelErrors naming the kernel source line; bad parameters give ConfigErrors."""

from __future__ import annotations

import inspect
import textwrap
import warnings

import pytest

from tracer.errors import ConfigError, KernelError
from tracer.kernels import load_file_kernel, resolve_kernel
from tracer.sim import run_kernel

HERE = "test_sim_errors.py"


def _line_of(fn, needle: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if needle in text)


def k_partitions(nc):
    nc.sbuf_tile((256, 64), "bf16")  # BAD


def k_sbuf_overflow(nc):
    keep = [nc.sbuf_tile((128, 16384), "fp32", name=f"big{i}") for i in range(8)]  # BAD
    return keep


def k_psum_overflow(nc):
    keep = [nc.psum_tile((128, 512), "fp32") for _ in range(9)]  # BAD
    return keep


def k_unwritten(nc):
    y = nc.output("y", (128, 64), "bf16")
    t = nc.sbuf_tile((128, 64), "bf16", name="never_written")
    nc.dma_copy(y, t)  # BAD


def k_partly_written(nc):
    a = nc.sbuf_tile((128, 64), "fp32")
    b = nc.sbuf_tile((128, 64), "fp32")
    nc.memset(a[:, 0:32], 1.0)
    nc.tensor_copy(b, a)  # BAD


def k_operand_text(nc):
    t = nc.sbuf_tile((128, 64), "fp32")
    nc.memset(t, 1.0)
    nc.tensor_scalar(t, t, "multiply", "two")  # BAD


def k_operand_hbm(nc):
    x = nc.input("x", (128, 1), "fp32")
    t = nc.sbuf_tile((128, 64), "fp32")
    nc.memset(t, 1.0)
    nc.activation(t, t, "exp", bias=x[:, :])  # BAD


def k_operand_bool(nc):
    t = nc.sbuf_tile((128, 64), "fp32")
    nc.memset(t, 1.0)
    nc.tensor_scalar(t, t, "multiply", True)  # BAD


def k_shape(nc):
    a = nc.sbuf_tile((128, 64), "fp32")
    b = nc.sbuf_tile((128, 32), "fp32")
    nc.memset(a, 0.0)
    nc.tensor_copy(b, a)  # BAD


def k_matmul_contraction(nc):
    s = nc.sbuf_tile((128, 128), "bf16")
    m = nc.sbuf_tile((64, 512), "bf16")
    p = nc.psum_tile((128, 512), "fp32")
    nc.memset(s, 1.0)
    nc.memset(m, 1.0)
    nc.matmul(p, s, m)  # BAD


def k_matmul_too_wide(nc):
    s = nc.sbuf_tile((128, 128), "bf16")
    m = nc.sbuf_tile((128, 1024), "bf16")
    p = nc.psum_tile((128, 1024), "fp32")
    nc.memset(s, 1.0)
    nc.memset(m, 1.0)
    nc.matmul(p, s, m)  # BAD


def k_dma_psum(nc):
    x = nc.input("x", (128, 64), "fp32")
    p = nc.psum_tile((128, 64), "fp32")
    nc.dma_copy(p, x)  # BAD


def k_dma_convert(nc):
    x = nc.input("x", (128, 64), "fp32")
    t = nc.sbuf_tile((128, 64), "bf16")
    nc.dma_copy(t, x)  # BAD


def k_bad_slice(nc):
    x = nc.input("x", (128, 64), "fp32")
    t = nc.sbuf_tile((128, 64), "fp32")
    nc.dma_copy(t, x[0:128, 0:128])  # BAD


def k_bad_tile_slice(nc):
    t = nc.sbuf_tile((128, 64), "fp32", name="small")
    nc.memset(t[0:200, :], 1.0)  # BAD


def k_bad_view_slice(nc):
    t = nc.sbuf_tile((128, 64), "fp32", name="small")
    v = t[:, 0:32]
    nc.memset(v[:, 16:48], 1.0)  # BAD


def k_bad_activation(nc):
    t = nc.sbuf_tile((128, 64), "fp32")
    nc.memset(t, 1.0)
    nc.activation(t, t, "softplusplus")  # BAD


def k_gpsimd_psum(nc):
    p = nc.psum_tile((128, 64), "fp32")
    t = nc.sbuf_tile((128, 64), "fp32")
    nc.memset(t, 1.0)
    nc.tensor_copy(p, t, engine="GpSimd")  # BAD


def k_both_inputs_psum(nc):
    a = nc.psum_tile((128, 64), "fp32")
    b = nc.psum_tile((128, 64), "fp32")
    nc.memset(a, 1.0, engine="Vector")
    nc.memset(b, 2.0, engine="Vector")
    s = nc.sbuf_tile((128, 64), "fp32")
    nc.tensor_tensor(s, a, b, "add")  # BAD


def k_python_error(nc):
    t = nc.sbuf_tile((128, 64), "fp32")
    return t.no_such_attribute  # BAD


def k_duplicate_tensor(nc):
    nc.input("x", (128, 64), "fp32")
    nc.input("x", (128, 64), "fp32")  # BAD


def k_huge_tensor(nc):
    nc.input("x", (1 << 20, 1 << 20), "bf16")  # BAD


def k_tensor_after_many_names(nc):
    for i in range(4):
        with nc.layer(f"layer{i}"):
            pass
    nc.input("late", (128, 64), "bf16")  # BAD


def k_memset_text(nc):
    t = nc.sbuf_tile((128, 64), "fp32", name="t")
    nc.memset(t, "zero")  # BAD


def k_memset_tile(nc):
    t = nc.sbuf_tile((128, 64), "fp32", name="t")
    s = nc.sbuf_tile((128, 1), "fp32", name="s")
    nc.memset(s, 0.0)
    nc.memset(t, s)  # BAD


def k_iota_text(nc):
    t = nc.sbuf_tile((128, 64), "fp32", name="t")
    nc.iota(t, base="a")  # BAD


def k_float_slice_bound(nc):
    x = nc.input("x", (128, 64), "fp32")
    t = nc.sbuf_tile((128, 32), "fp32", name="t")
    nc.dma_copy(t, x[:, 0:32.0])  # BAD


def k_float_loop(nc):
    for _ in nc.affine_range(4.0):  # BAD
        pass


def k_huge_sequential_loop(nc):
    for _ in nc.sequential_range(10**20):  # BAD
        pass


def k_scope_left_twice(nc):
    scope = nc.layer("L0")
    with scope:
        t = nc.sbuf_tile((128, 64), "fp32", name="t")
        nc.memset(t, 0.0)
    scope.__exit__(None, None, None)  # BAD


def k_fractional_shape(nc):
    t = nc.sbuf_tile((128, 64.7), "fp32", name="t")  # BAD
    nc.memset(t, 0.0)


def k_accumulate_text(nc):
    a = nc.sbuf_tile((128, 128), "bf16", name="a")
    nc.memset(a, 1.0)
    p = nc.psum_tile((128, 128), "fp32", name="p")
    nc.matmul(p, a, a, accumulate="False")  # BAD


def k_shape_of_loop_index(nc):
    for i in nc.affine_range(4):
        t = nc.sbuf_tile((128, 64 * (i + 1)), "fp32", name="t")  # BAD
        nc.memset(t, 0.0)


def k_broadcast_text(nc):
    x = nc.input("x", (128, 64), "fp32")
    t = nc.sbuf_tile((128, 64), "fp32", name="t")
    nc.dma_copy(t, x[0:1, :].broadcast("128"))  # BAD


def k_broadcast_zero(nc):
    x = nc.input("x", (128, 64), "fp32")
    t = nc.sbuf_tile((1, 64), "fp32", name="t")
    nc.dma_copy(t, x[0:1, :].broadcast(0))  # BAD


CASES = [
    # "shape mismatch: dst 128x64, src 128x64" for "128"; 0 silently copied one row
    (k_broadcast_text, r"broadcast takes a number of partitions from 1 to 128, not '128'"),
    (k_broadcast_zero, r"broadcast takes a number of partitions from 1 to 128, not '0'"),
    # silently accepted: 64.7 columns made 64, "False" accumulated
    (k_fractional_shape, r"tile shape must be a pair of ints, got \(128, 64.7\)"),
    (k_accumulate_text, r"accumulate must be True or False, not str 'False'"),
    # named context.py, the simulator's line, instead of the kernel's
    (k_shape_of_loop_index, r"a symbolic loop index"),
    # arguments of the wrong kind: each was an internal error (exit 70) naming no kernel line
    (k_memset_text, r"memset value must be a number, not str 'zero'"),
    (k_memset_tile, r"memset value must be a number, not Tile"),
    (k_iota_text, r"iota base must be a number, not str 'a'"),
    (k_float_slice_bound, r"slice bound '32.0' on the columns of x must be an int"),
    (k_float_loop, r"nc.affine_range\(4.0\): a loop takes ints"),
    (k_huge_sequential_loop, r"nc.sequential_range\(100000000000000000000\): a loop takes ints .* 2\*\*63"),
    (k_scope_left_twice, r"scope 'L0' is left but is not open"),
    (k_partitions, r"tile has 256 partitions; the partition dimension is at most 128"),
    (k_sbuf_overflow, r"SBUF overflow allocating tile big\d .*live tiles"),
    (k_psum_overflow, r"PSUM overflow"),
    (k_unwritten, r"reads tile never_written .* before it was written"),
    (k_partly_written, r"before it was written \(its part \[0:128, 32:64\] was never written\)"),
    (k_shape, r"shape mismatch: dst 128x32, src 128x64"),
    # said an operand "must be a tile, a tile slice or an HBM tensor slice": numbers are allowed, HBM is not
    (k_operand_text, r"operand must be a number or a \[128, 1\] slice of an SBUF or PSUM tile, not str$"),
    (k_operand_hbm, r"bias must be a number or a \[128, 1\] slice .* not a view of HBM; dma_copy it to SBUF first"),
    (k_operand_bool, r"operand must be a number .* not bool$"),
    (k_matmul_contraction, r"shape mismatch: stationary has 128 partitions \(contraction\), moving 64"),
    (k_matmul_too_wide, r"moving tile has 1024 columns; at most 512"),
    (k_dma_psum, r"DMA cannot access PSUM"),
    (k_dma_convert, r"cannot convert fp32 to bf16"),
    (k_bad_slice, r"slice 0:128 out of range for columns of x"),
    (k_bad_tile_slice, r"slice 0:200 out of range for partitions of small"),
    (k_bad_view_slice, r"slice 16:48 out of range for free dimension of small"),
    (k_bad_activation, r"unknown activation function 'softplusplus'"),
    (k_gpsimd_psum, r"GpSimd cannot access PSUM"),
    (k_both_inputs_psum, r"tensor_tensor reads a and b both from PSUM; at most one input may be in PSUM"),
    (k_python_error, r"kernel k_python_error raised AttributeError"),
    (k_duplicate_tensor, r"tensor 'x' is declared twice"),
    (k_huge_tensor, r"tensor 'x' of shape \(1048576, 1048576\) has 2\*\*40 elements or more"),
]


@pytest.mark.parametrize(("fn", "pattern"), CASES, ids=[c[0].__name__ for c in CASES])
def test_bad_kernel_gives_a_clear_error_naming_its_line(fn, pattern):
    with pytest.raises(KernelError, match=pattern) as info:
        run_kernel(fn)
    line = _line_of(fn, "# BAD")
    assert str(info.value).startswith(f"{HERE}:{line}: "), str(info.value)
    assert "\n" not in str(info.value)


def test_a_tensor_declared_after_too_many_names_is_refused(monkeypatch):
    """A DMA trigger's aux holds its tensor's name code in 23 bits (records.dma_aux)."""
    from tracer.sim import context

    monkeypatch.setattr(context, "AUX_MAX_TENSOR_CODE", 3)
    with pytest.raises(KernelError, match=r"tensor .late. is declared after 4 layer, operator and tensor") as info:
        run_kernel(k_tensor_after_many_names)
    assert str(info.value).startswith(f"{HERE}:{_line_of(k_tensor_after_many_names, '# BAD')}: ")


def k_fails_after_one(nc):
    t = nc.sbuf_tile((128, 64), "bf16", name="t")
    nc.memset(t, 0.0)
    k_unwritten(nc)


def test_failed_recording_is_marked_incomplete(tmp_path):
    from tracer import TraceReader

    with pytest.raises(KernelError):
        run_kernel(k_fails_after_one, trace_path=tmp_path / "t")
    reader = TraceReader(tmp_path / "t")
    assert reader.recording_complete is False
    assert reader.read_table("Instruction").num_rows == 1  # what was issued before the error is kept


def test_a_recording_failing_before_its_first_instruction_leaves_no_trace(tmp_path):
    """A directory holding only Metadata would look like a recording (and ingest as an empty one)."""
    with pytest.raises(KernelError):
        run_kernel(k_unwritten, trace_path=tmp_path / "new")
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()  # a directory the user made stays, empty
    with pytest.raises(ConfigError):
        run_kernel("matmul_naive", {"N": 256}, trace_path=tmp_path / "empty", emit="process")
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())


def test_bad_parameters():
    with pytest.raises(ConfigError, match="has no parameter 'Q'; its parameters: M, N, K"):
        run_kernel("matmul_naive", {"Q": 1})
    with pytest.raises(ConfigError, match="parameter M='big' is not a valid int"):
        run_kernel("matmul_naive", {"M": "big"})
    with pytest.raises(ConfigError, match="M=100 must be a positive multiple of 128"):
        run_kernel("matmul_naive", {"M": 100})
    with pytest.raises(ConfigError, match="unknown kernel 'nope'"):
        resolve_kernel("nope")
    with pytest.raises(KernelError, match="unknown dtype 'int4'"):
        run_kernel("softmax", {"dtype": "int4"})


@pytest.mark.parametrize(("kernel", "params", "message"), [
    ("matmul_naive", {"tile_n": 0}, "tile_n=0 must be positive"),            # was a ZeroDivisionError
    ("matmul_naive", {"tile_n": -512}, "tile_n=-512 must be positive"),      # was an empty kernel
    ("matmul_blocked", {"tile_n": 0}, "tile_n=0 must be positive"),
    ("matmul_rowload", {"tile_n": 0}, "tile_n=0 must be positive"),
    ("matmul_rowload", {"row_n": -1024}, "row_n=-1024 must be a positive multiple of tile_n"),
    ("matmul_rowload", {"row_n": 1000}, "row_n=1000 must be a positive multiple of tile_n=512"),
    ("dma_stream", {"tile_cols": -2048}, "tile_cols=-2048 must be positive"),
])
def test_tile_sizes_must_be_positive(kernel, params, message):
    with pytest.raises(ConfigError, match=message):
        run_kernel(kernel, params)


def test_a_kernel_calling_sys_exit_is_a_kernel_error(tmp_path):
    """Not a silent exit of `trnprof record` with no trace."""
    src = tmp_path / "quits.py"
    src.write_text("def k(nc):\n    import sys\n    sys.exit(3)\n")
    with pytest.raises(KernelError, match=r"quits.py:3: kernel k called sys.exit\(3\); a kernel must return"):
        run_kernel(f"{src}:k", {})


def test_errors_name_the_users_line_not_a_library_line(tmp_path):
    src = tmp_path / "big.py"
    src.write_text("import numpy as np\n\ndef k(nc):\n    np.zeros((1 << 62,))\n")
    with pytest.raises(KernelError, match=r"^big.py:4: kernel k raised ValueError"):
        run_kernel(f"{src}:k", {})


REFERENCE_KERNEL = """
from tracer.kernels import kernel

def ref(inputs):
    {body}

@kernel(reference=ref)
def k(nc):
    x = nc.input("x", (128, 64), "fp32")
    y = nc.output("y", (128, 64), "fp32")
    t = nc.sbuf_tile((128, 64), "fp32")
    nc.dma_copy(t, x)
    nc.dma_copy(y, t)
"""


@pytest.mark.parametrize(("body", "message"), [
    ("raise ValueError('refboom')", r"ref.py:5: the numpy reference of kernel k raised ValueError: refboom"),
    ("return [1]", "the numpy reference of kernel k returned list; it must return a dict"),
    ("return {'y': 'notarray'}", "gives output 'y' a value that is not a numeric array"),
])
def test_a_failing_reference_is_the_users_error(tmp_path, body, message):
    """--check with a reference that fails: a KernelError (exit 2), not an internal error blamed on trnprof."""
    src = tmp_path / "ref.py"
    src.write_text(REFERENCE_KERNEL.format(body=body))
    with pytest.raises(KernelError, match=message):
        run_kernel(f"{src}:k", {}, check=True)


def test_check_compares_with_the_inputs_as_given_not_as_the_kernel_left_them(tmp_path):
    # the reference got the inputs after the run: a kernel writing zeros over x and to y passed a check of y = 2x
    src = tmp_path / "clobber.py"
    src.write_text(textwrap.dedent('''
        import numpy as np
        from tracer.kernels import kernel

        def ref(inputs):
            return {"y": inputs["x"].astype(np.float64) * 2}

        @kernel(reference=ref)
        def k(nc):
            x = nc.input("x", (128, 64), "fp32")
            y = nc.output("y", (128, 64), "fp32")
            z = nc.sbuf_tile((128, 64), "fp32", name="z")
            nc.memset(z, 0.0)
            nc.dma_copy(x[:, :], z)
            nc.dma_copy(y[:, :], z)
    '''))
    with pytest.raises(KernelError, match="output y differs from the numpy reference"):
        run_kernel(f"{src}:k", check=True)


def test_an_init_that_is_not_numbers_names_the_line(tmp_path):
    src = tmp_path / "init.py"
    src.write_text("def k(nc):\n    x = nc.input('x', (128, 64), 'fp32', init='zeros')\n")
    with pytest.raises(KernelError, match=r"init.py:2: init of x must be an array of numbers or a function"):
        run_kernel(f"{src}:k", numerics=True)


def test_user_kernel_files(tmp_path, monkeypatch):
    good = tmp_path / "mine.py"
    good.write_text(textwrap.dedent("""
        from tracer.kernels import kernel

        def ref(inputs, n=64):
            return {"y": inputs["x"] * 2}

        @kernel(reference=ref)
        def double(nc, n=64):
            '''Doubles x.'''
            x = nc.input("x", (128, n), "fp32")
            y = nc.output("y", (128, n), "fp32")
            t = nc.sbuf_tile((128, n), "fp32")
            nc.dma_copy(t, x)
            nc.tensor_scalar(t, t, "multiply", 2.0)
            nc.dma_copy(y, t)
    """))
    spec = load_file_kernel(f"{good}:double")
    assert spec.summary == "Doubles x." and [p.name for p in spec.params] == ["n"]
    result = run_kernel(f"{good}:double", {"n": "32"}, check=True)
    assert result.checks[0].ok and result.kernel == "double"
    with pytest.raises(ConfigError, match=r"no function 'triple' \(functions there: double, ref\)"):
        load_file_kernel(f"{good}:triple")
    with pytest.raises(ConfigError, match="no such kernel file"):
        load_file_kernel(f"{tmp_path}/missing.py:f")
    with pytest.raises(ConfigError, match="is a directory; name the kernel's Python file"):
        load_file_kernel(f"{tmp_path}:f")
    with pytest.raises(ConfigError, match="expected path/to/file.py:function"):
        resolve_kernel(str(good))
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\nraise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match=r"broken.py:2: importing the kernel file failed: RuntimeError: boom"):
        load_file_kernel(f"{broken}:f")
    # relative to the working directory, the line is still found (the module's code names its absolute path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^broken.py:2: importing the kernel file failed"):
        load_file_kernel("broken.py:f")
    # exiting while imported, even with status 0, is an error (it ended `trnprof record` silently, exit 0)
    for code, shown in (("0", "0"), ("'bye'", "'bye'")):
        (tmp_path / "exits.py").write_text(f"import sys\nsys.exit({code})\ndef f(nc):\n    pass\n")
        with pytest.raises(ConfigError, match=rf"exits.py:2: importing the kernel file called sys.exit\({shown}\)"):
            load_file_kernel("exits.py:f")
    nodefault = tmp_path / "nd.py"
    nodefault.write_text("def k(nc, n):\n    pass\n")
    with pytest.raises(ConfigError, match="parameter 'n' needs a default value"):
        load_file_kernel(f"{nodefault}:k")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kernel": None}, "a kernel is a name, path/to/file.py:function or a function, not NoneType"),
    ({"kernel": 5}, "not int 5"),
    ({"params": 5}, "parameters must be a mapping of name -> value, not int 5"),
    ({"trace_path": 5}, "trace_path must be a path"),
    ({"seed": "x"}, "seed must be an integer >= 0, not 'x'"),
    ({"seed": -1}, "seed must be an integer >= 0"),
    ({"emit": "bogus"}, "trace emission must be process, thread or inline, not 'bogus'"),
])
def test_run_kernel_arguments_of_the_wrong_kind(kwargs, message):
    args = {"kernel": "softmax", "params": {"rows": 128, "cols": 128}, **kwargs}
    with pytest.raises(ConfigError, match=message):
        run_kernel(args.pop("kernel"), args.pop("params"), **args)


def test_a_nan_output_is_named_as_such(tmp_path):
    # it read "max abs error inf", with numpy's "All-NaN slice encountered" warning beside it
    src = tmp_path / "nan.py"
    src.write_text(textwrap.dedent('''
        import numpy as np
        from tracer.kernels import kernel

        def ref(inputs):
            return {"y": np.zeros((128, 64))}

        @kernel(reference=ref)
        def k(nc):
            y = nc.output("y", (128, 64), "fp32")
            t = nc.sbuf_tile((128, 64), "fp32", name="t")
            nc.memset(t, float("nan"))
            nc.dma_copy(y[:, :], t)
    '''))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(KernelError, match=r"the output has 8,192 NaN values where the other has none "
                                              r"\(first at \[0, 0\]\)"):
            run_kernel(f"{src}:k", check=True)


def k_list_from_nested_affine(nc, K=512):
    x = nc.input("x", (K, 128), "bf16")
    for _m in nc.affine_range(2):
        tiles = []
        for k in nc.affine_range(K // 128):
            t = nc.sbuf_tile((128, 128), "bf16", name="t")
            nc.dma_copy(t, x[k * 128:(k + 1) * 128, :])
            tiles.append(t)
        for k in nc.static_range(K // 128):
            nc.tensor_copy(tiles[k], tiles[k])  # BAD: tiles holds two entries while the body is traced


def k_list_after_affine(nc):
    x = nc.input("x", (512, 128), "bf16")
    offsets = []
    for i in nc.affine_range(4):
        t = nc.sbuf_tile((128, 128), "bf16", name="t")
        nc.dma_copy(t, x[i * 128:(i + 1) * 128, :])
        offsets.append(i)
    return [offsets[j] for j in range(4)]  # BAD: two entries


def k_key_error_in_affine(nc):
    x = nc.input("x", (256, 128), "bf16")
    for i in nc.affine_range(2):
        t = nc.sbuf_tile((128, 128), "bf16", name="t")
        nc.dma_copy(t, x[i * 128:(i + 1) * 128, :])
        _ = {"present": 1}["missing"]  # BAD


def k_index_error_outside_affine(nc):
    tiles = [nc.sbuf_tile((128, 8), "fp32")]
    return tiles[3]  # BAD


def test_an_index_error_while_an_affine_body_is_traced_says_why():
    """The NKI 'hoist loads into a list' pattern in a nested nc.affine_range failed with a bare IndexError on a
    later line (an audit of NKI ports): the error says the list holds two iterations' entries while traced."""
    hint = (r"raised IndexError: list index out of range \(if the list was filled in an nc.affine_range loop: its "
            r"body's Python runs for two iterations only, .*fill it in an nc.static_range loop\)")
    with pytest.raises(KernelError, match=hint):
        run_kernel(k_list_from_nested_affine)
    with pytest.raises(KernelError, match=hint):      # (indexed after the loop, which ended)
        run_kernel(k_list_after_affine)
    with pytest.raises(KernelError, match=r"raised IndexError: list index out of range$"):
        run_kernel(k_index_error_outside_affine)
    with pytest.raises(KernelError, match=r"raised KeyError: 'missing'$"):   # (not a list)
        run_kernel(k_key_error_in_affine)
