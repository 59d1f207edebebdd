"""Parameter sweeps (``tracer.sim.sweep``, ``profiler.sweep_table``, ``trnprof sweep``): every combination, in
order, each point the same run as ``run_kernel`` alone; a point the kernel rejects is a row, not the end."""

from __future__ import annotations

import csv
import io
import itertools
import json
from types import SimpleNamespace

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler.cli import main
from profiler.sweep import fastest_first_table
from profiler.sweep_table import BUSIEST, ENGINE_BUSY_PCT, ERROR, SIMULATED_US, VS_FASTEST, sweep_table
from tracer.errors import ConfigError, KernelError
from tracer.schema import ENGINES
from tracer.sim import cost_model, run_kernel
from tracer.sim import sweep as sw
from tracer.sim.sweep import SweepPoint, SweepRow, run_sweep, split_values, sweep_points, varied_names

SMALL = {"M": ["512"], "N": ["512"], "K": ["256"]}


def test_split_values():
    assert split_values("block_m=2, 4,8", "-p") == ("block_m", ["2", "4", "8"])
    assert split_values("dtype=bf16", "-p") == ("dtype", ["bf16"])
    for bad in ("block_m", "=2", "block_m=", "block_m=2,,4", "block_m=2,"):
        with pytest.raises(ConfigError, match="NAME=VALUE"):
            split_values(bad, "-p")
    with pytest.raises(ConfigError, match="given twice"):
        split_values("block_m=2,2", "-p")


@given(st.integers(-50, 50), st.integers(0, 60), st.integers(1, 9))
def test_a_range_is_pythons_range_both_ends_included(lo, length, step):
    hi = lo + length
    assert split_values(f"x={lo}..{hi}:{step}", "-p")[1] == [str(v) for v in range(lo, hi + 1, step)]
    assert split_values(f"x={lo}..{hi}", "-p")[1] == [str(v) for v in range(lo, hi + 1)]


@given(st.integers(1, 10**6), st.integers(0, 10**9), st.integers(2, 10))
def test_a_geometric_range_multiplies_until_past_its_end(lo, extra, factor):
    values = [int(v) for v in split_values(f"x={lo}..{lo + extra}*{factor}", "-p")[1]]
    assert values[0] == lo and all(b == a * factor for a, b in itertools.pairwise(values))
    assert values[-1] <= lo + extra < values[-1] * factor


def test_ranges_mix_with_values_and_bad_ones_are_one_line():
    assert split_values("M=512..4096*2", "-p") == ("M", ["512", "1024", "2048", "4096"])
    assert split_values("b=1,3..5", "-p")[1] == ["1", "3", "4", "5"]
    for bad, needle in (("M=4..1", "ends before it starts"), ("M=1..9*1", "factor of 2"), ("M=0..8*2", "start of 1"),
                        ("M=1..5:0", "step must be 1"), ("M=1..100000", "more than 1,000"),
                        ("M=a..b", "not a range"), ("M=1.5..3", "not a range"), ("M=1..3,2", "given twice")):
        with pytest.raises(ConfigError, match=needle):
            split_values(bad, "-p")


def test_points_are_every_combination_with_the_last_name_varying_fastest():
    points = sweep_points("matmul_rowload", {"block_m": ["1", "2"], "row_n": ["512", "1024", "2048"]},
                          {"dma_bandwidth_gbps": ["100", "200"]}, ["trn1", "trn2"])
    assert len(points) == 2 * 2 * 3 * 2
    expected = [(a, {"block_m": b, "row_n": r}, {"dma_bandwidth_gbps": d}) for a, b, r, d in
                itertools.product(["trn1", "trn2"], ["1", "2"], ["512", "1024", "2048"], ["100", "200"])]
    assert [(p.arch, dict(p.params), dict(p.overrides)) for p in points] == expected
    assert points[1].label() == "arch=trn1 block_m=1 row_n=512 dma_bandwidth_gbps=200"


@pytest.mark.parametrize(("params", "overrides", "archs", "needle"), [
    ({"nope": ["1"]}, {}, ["trn2"], "no parameter 'nope'"),
    ({"M": ["1024", "x"]}, {}, ["trn2"], "M='x' is not a valid int"),
    ({}, {"nope": ["1"]}, ["trn2"], "unknown cost-model constant 'nope'"),
    ({}, {"dma_bandwidth_gbps": ["100", "-1"]}, ["trn2"], "must be positive"),
    ({}, {}, ["trn9"], "unknown architecture 'trn9'"),
    ({}, {}, [], "at least one architecture"),
    ({"M": []}, {}, ["trn2"], "non-empty list"),
    ({"M": "128"}, {}, ["trn2"], "non-empty list"),
    ({"M": [str(i) for i in range(1, 33)], "N": [str(i) for i in range(1, 33)]}, {}, ["trn2"], "1,024 points"),
])
def test_a_bad_sweep_is_refused_before_anything_runs(monkeypatch, params, overrides, archs, needle):
    ran = []
    monkeypatch.setattr("tracer.sim.runner.run_kernel", lambda *a, **k: ran.append(a))
    with pytest.raises(ConfigError, match=needle):
        sweep_points("matmul_rowload", params, overrides, archs)
    assert not ran


def test_each_point_is_the_run_kernel_alone_and_rejected_points_are_rows():
    points = sweep_points("matmul_rowload", {**SMALL, "N": ["512", "1024"], "row_n": ["512", "2048"]},
                          {"dma_bandwidth_gbps": ["100", "400"]})
    rows = list(run_sweep("matmul_rowload", points))
    assert [r.point for r in rows] == points
    failed = [r for r in rows if r.error is not None]
    # row_n=2048 divides neither N: the kernel's own check refuses those points, the others run
    assert {r.point.params["row_n"] for r in failed} == {"2048"} and len(failed) == 4
    assert all(r.result is None and "multiple of row_n" in r.error for r in failed)
    for row in rows:
        if row.result is None:
            continue
        alone = run_kernel("matmul_rowload", row.point.params, overrides=row.point.overrides)
        assert (row.result.simulated_ns, row.result.instructions, row.result.dma_bytes) == \
            (alone.simulated_ns, alone.instructions, alone.dma_bytes)
    by = {(r.point.params["N"], r.point.overrides["dma_bandwidth_gbps"]): r.result.simulated_ns
          for r in rows if r.result is not None}
    assert by[("1024", "400")] < by[("1024", "100")]   # the what-if moves the time


def _user_kernel(tmp_path) -> str:
    """``path/to/k.py:k``: a user's kernel loading a 128 x cols fp32 tile."""
    kernel = tmp_path / "k.py"
    kernel.write_text(
        "def k(nc, *, cols: int = 128):\n"
        "    x = nc.input('x', (128, cols), 'fp32')\n"
        "    t = nc.sbuf_tile((128, cols), 'fp32')\n"
        "    nc.dma_copy(t, x)\n")
    return f"{kernel}:k"


def test_a_kernel_error_at_one_point_is_that_points_error(tmp_path):
    target = _user_kernel(tmp_path)
    rows = list(run_sweep(target, sweep_points(target, {"cols": ["128", "1000000"]})))
    assert rows[0].result is not None and rows[0].error is None
    assert rows[1].result is None and "SBUF" in rows[1].error


def test_other_errors_end_the_sweep(monkeypatch):
    def boom(*_a, **_k):
        raise RuntimeError("not a kernel error")

    monkeypatch.setattr("tracer.sim.runner.run_kernel", boom)
    with pytest.raises(RuntimeError):
        list(run_sweep("softmax", sweep_points("softmax")))


def _result(ns, busy, dma_bytes=0, flops=0.0):
    return SimpleNamespace(simulated_ns=ns, engine_busy_ns=busy, dma_bytes=dma_bytes, pe_flops=flops,
                           sbuf_peak_bytes=2048, instructions=7, wall_s=0.5, cost=cost_model("trn2"))


def test_table_measures_fastest_and_busiest():
    cm = cost_model("trn2")
    a = SweepPoint("trn2", {"M": "1"}, {})
    b = SweepPoint("trn2", {"M": "2"}, {})
    c = SweepPoint("trn2", {"M": "3"}, {})
    t_ns = 1000
    # a: Tensor busy 80%; b: DMA at 90% of its bandwidth, Tensor 50%
    rows = [SweepRow(a, _result(t_ns, {"Tensor": 800})),
            SweepRow(b, _result(2 * t_ns, {"Tensor": 1000}, dma_bytes=int(0.9 * cm.dma_bandwidth_gbps * 2 * t_ns))),
            SweepRow(c, error="kernel k: no")]
    table = sweep_table(rows)
    assert table.column_names[0] == "M"  # arch does not vary: left out
    got = table.to_pylist()
    assert got[0][VS_FASTEST] == 1.0 and got[1][VS_FASTEST] == 2.0 and got[2][VS_FASTEST] is None
    assert got[0][BUSIEST] == "Tensor" and got[1][BUSIEST] == "DMA"
    assert got[0][ENGINE_BUSY_PCT["Tensor"]] == pytest.approx(80.0)
    assert got[1]["dma_peak_pct"] == pytest.approx(90.0, rel=1e-6)
    assert got[2][ERROR] == "kernel k: no" and got[2][SIMULATED_US] is None
    assert set(ENGINE_BUSY_PCT.values()) <= set(table.column_names) and len(ENGINE_BUSY_PCT) == len(ENGINES)


def test_varied_names_keep_every_name_when_nothing_varies():
    p = [SweepPoint("trn2", {"M": "1"}, {"dma_queues": "4"})]
    assert varied_names(p) == ["arch", "M", "dma_queues"]
    q = [SweepPoint("trn1", {"M": "1"}, {}), SweepPoint("trn2", {"M": "1"}, {})]
    assert varied_names(q) == ["arch"]


@given(st.lists(st.one_of(st.none(), st.floats(0.001, 1e6, allow_nan=False)), max_size=30))
def test_fastest_first_sorts_times_with_failures_last_and_ties_in_order(times):
    table = pa.table({"simulated_us": pa.array(times, pa.float64()), "i": list(range(len(times)))})
    got = fastest_first_table(table).to_pylist()
    oracle = sorted(({"simulated_us": t, "i": i} for i, t in enumerate(times)),
                    key=lambda r: (r["simulated_us"] is None, r["simulated_us"] or 0.0, r["i"]))
    assert got == oracle


# -- the command -----------------------------------------------------------------------------------------------------
SMALL_ARGS = ["-p", "M=512", "-p", "N=1024", "-p", "K=256"]


def test_cli_table(capsys):
    assert main(["sweep", "matmul_rowload", *SMALL_ARGS, "-p", "block_m=1,2", "--set",
                 "dma_bandwidth_gbps=100,400", "--sort", "time"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("sweep of matmul_rowload: 4 of 4 points ran; fastest: block_m=")
    header = out[1].split()
    assert header[:3] == ["block_m", "dma_bandwidth_gbps", "simulated_us"] and "error" not in header
    times = [float(line.split()[2].replace(",", "")) for line in out[3:]]
    assert len(times) == 4 and times == sorted(times)


def test_cli_csv_and_json_have_every_column(capsys):
    assert main(["sweep", "matmul_rowload", *SMALL_ARGS, "-p", "row_n=512,2048", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["row_n"] for r in rows] == ["512", "2048"]
    assert float(rows[0]["simulated_us"]) > 0 and rows[0]["error"] == ""
    assert rows[1]["simulated_us"] == "" and "multiple of row_n" in rows[1]["error"]
    assert all(name in rows[0] for name in ENGINE_BUSY_PCT.values())
    assert main(["sweep", "softmax", "-p", "rows=128,256", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["rows"] for d in data] == ["128", "256"] and data[1]["simulated_us"] > data[0]["simulated_us"]


def test_cli_every_point_failing_is_an_error_after_the_table(capsys):
    assert main(["sweep", "softmax", "-p", "rows=0,-1"]) == 2
    cap = capsys.readouterr()
    assert "0 of 2 points ran" in cap.out and "rows and cols must be positive" in cap.out
    assert cap.err.strip().splitlines() == [
        "trnprof: error: no point of the sweep ran; the first error: kernel softmax: rows and cols must be positive"]


@pytest.mark.parametrize(("argv", "needle"), [
    (["-p", "rows=1,1"], "a value is given twice"),
    (["-p", "rows=1", "-p", "rows=2"], "given twice; list every value once"),
    (["-p", "rows"], "expected NAME=VALUE"),
    (["--arch", "trn1,,trn2"], "--arch"),
    (["--arch", "trn1,trn1"], "--arch"),
    (["--set", "dma_queues=0"], "must be positive"),
])
def test_cli_bad_sweeps_are_one_line(capsys, argv, needle):
    assert main(["sweep", "softmax", *argv]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trnprof: error:") and needle in lines[0]


def interrupt_after(monkeypatch, points: int) -> None:
    """Make sweeps raise KeyboardInterrupt (Ctrl-C) once ``points`` points are done."""
    real = sw.run_sweep

    def interrupted(*args, **kwargs):
        for i, row in enumerate(real(*args, **kwargs)):
            if i == points:
                raise KeyboardInterrupt
            yield row

    monkeypatch.setattr("profiler.sweep.run_sweep", interrupted)


def test_cli_ctrl_c_prints_the_points_done(monkeypatch, capsys):
    interrupt_after(monkeypatch, 2)
    assert main(["sweep", "softmax", "-p", "rows=128,256,384,512", "--format", "csv"]) == 130
    cap = capsys.readouterr()
    assert [r["rows"] for r in csv.DictReader(io.StringIO(cap.out))] == ["128", "256"]
    assert "interrupted after 2 of 4 points" in cap.err


def test_trace_dir_records_each_point_that_ran(tmp_path, capsys):
    import profiler

    out = tmp_path / "sweep"
    assert main(["sweep", "matmul_rowload", *SMALL_ARGS, "-p", "row_n=512,2048", "--trace-dir", str(out),
                 "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["trace"] for r in rows] == [str(out / "000-row_n=512.trace"), ""]
    # the rejected point wrote nothing; the table is the sweep file
    assert sorted(p.name for p in out.iterdir()) == ["000-row_n=512.trace", "sweep.json"]
    with profiler.open(rows[0]["trace"]) as trace:
        assert trace.summary()["total_time_ns"] == pytest.approx(float(rows[0]["simulated_us"]) * 1e3, abs=1)


def test_trace_dir_must_be_new_or_empty(tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr("tracer.sim.runner.run_kernel", lambda *a, **k: ran.append(a))
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    assert main(["sweep", "softmax", "--trace-dir", str(busy)]) == 2
    assert "not an empty directory" in capsys.readouterr().err
    assert (busy / "keep.txt").read_text() == "mine" and not ran


def test_trace_names_are_safe_file_names():
    point = SweepPoint("trn2", {"name": "a/b c*"}, {"dma_queues": "4"})
    assert point.trace_name(7) == "007-arch=trn2-name=a_b_c_-dma_queues=4.trace"
    assert point.trace_name(7, ["name"]) == "007-name=a_b_c_.trace"
    assert point.label(["dma_queues", "arch"]) == "dma_queues=4 arch=trn2"


def test_sweep_figure_bars_follow_the_table_and_colour_by_busiest():
    from profiler.figures.palette import CategoryPalette
    from profiler.figures.sweep import point_labels, sweep_figure

    points = sweep_points("matmul_rowload", {**SMALL, "N": ["1024"], "block_m": ["1", "4"], "row_n": ["512", "2048"]})
    table = fastest_first_table(sweep_table(list(run_sweep("matmul_rowload", points))))
    fig = sweep_figure(table)
    labels = point_labels(table)
    assert labels[0].startswith("block_m=") and "row_n=" in labels[0]
    ran = [r for r in table.to_pylist() if r[SIMULATED_US] is not None]
    drawn = {y: x for trace in fig.data for y, x in zip(trace.y, trace.x, strict=True)}
    assert drawn == {label: r[SIMULATED_US] for label, r in zip(labels, table.to_pylist(), strict=True)
                     if r[SIMULATED_US] is not None}
    assert list(fig.layout.yaxis.categoryarray) == labels[:len(ran)]   # fastest first, as sorted
    palette = CategoryPalette.for_engines()
    for trace in fig.data:
        busiest = trace.name.removeprefix("busiest: ")
        assert trace.marker.color == palette.colour(busiest)
        assert all(r[BUSIEST] == busiest for label, r in zip(labels, table.to_pylist(), strict=True)
                   if label in trace.y)
    assert "2 rejected by the kernel" in fig.layout.title.text


def test_parallel_sweep_gives_the_same_rows_as_one_at_a_time():
    import multiprocessing

    points = sweep_points("matmul_rowload", {**SMALL, "N": ["1024"], "block_m": ["1", "2", "4"],
                                             "row_n": ["512", "2048"]})
    one = list(run_sweep("matmul_rowload", points))
    two = list(run_sweep("matmul_rowload", points, jobs=2))
    assert sorted(r.index for r in two) == list(range(len(points)))
    key = lambda r: (r.index, r.point, r.error, r.result and (r.result.simulated_ns, r.result.instructions))  # noqa: E731
    assert sorted(map(key, two)) == list(map(key, one))
    assert sweep_table(two).equals(sweep_table(one).set_column(
        sweep_table(one).column_names.index("wall_s"), "wall_s", sweep_table(two).column("wall_s")))
    assert not multiprocessing.active_children()


def test_a_parallel_sweep_stopped_early_leaves_no_worker():
    import multiprocessing

    points = sweep_points("softmax", {"rows": [str(128 * i) for i in range(1, 9)]})
    rows = run_sweep("softmax", points, jobs=2)
    next(rows)
    rows.close()   # what Ctrl-C or an error in the caller does to the generator
    assert not multiprocessing.active_children()


def test_jobs_must_be_at_least_one():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="jobs"):
            list(run_sweep("softmax", sweep_points("softmax"), jobs=bad))


def test_a_parallel_sweep_of_a_kernel_that_cannot_be_sent_says_so(tmp_path):
    def local_kernel(nc, *, cols: int = 128):  # a closure: workers cannot import it
        x = nc.input("x", (128, cols), "fp32")
        t = nc.sbuf_tile((128, cols), "fp32")
        nc.dma_copy(t, x)

    points = sweep_points(local_kernel, {"cols": [128, 256]})
    with pytest.raises(ConfigError, match="cannot be sent.*path/to/file.py:function"):
        list(run_sweep(local_kernel, points, jobs=2))
    assert [r.result is not None for r in run_sweep(local_kernel, points)] == [True, True]   # jobs=1 runs it
    target = _user_kernel(tmp_path)
    rows = sorted(run_sweep(target, sweep_points(target, {"cols": ["128", "256"]}), jobs=2), key=lambda r: r.index)
    assert [r.result.dma_bytes for r in rows] == [128 * 128 * 4, 128 * 256 * 4]


def test_cli_parallel_sweep_is_quiet_and_ordered(capfd):
    assert main(["sweep", "softmax", "-p", "rows=128,256,384,512", "-j", "2", "--format", "csv"]) == 0
    cap = capfd.readouterr()   # the workers' stderr too
    assert cap.err.strip() == ""
    assert [r["rows"] for r in csv.DictReader(io.StringIO(cap.out))] == ["128", "256", "384", "512"]


def test_workers_take_sigterm_as_a_plain_stop_and_leave_ctrl_c_to_the_parent():
    # the CLI turns SIGTERM into an exception for its own clean-up; a worker the parent stops with SIGTERM while it
    # waits for work must not inherit that (it printed a traceback from the pool's queue, depending on timing)
    import signal

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGTERM, lambda *_: None)
        sw._init_worker(sw._Job("softmax", [], False, 0, None))
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])
        sw._WORKER.clear()


def test_bounds_name_each_points_bottleneck_as_the_bounds_analysis_does(tmp_path, monkeypatch, capsys):
    import tempfile

    import profiler
    from profiler.analyses import performance_bounds

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # where the traces the bounds need go, and leave
    assert main(["sweep", "matmul_rowload", "-p", "block_m=1,4", "--bounds", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert "trace" not in rows[0]   # recorded into a temporary folder, removed
    assert list(tmp_path.iterdir()) == []
    for row in rows:
        alone = tmp_path / f"alone-{row['block_m']}.trace"
        run_kernel("matmul_rowload", {"block_m": row["block_m"]}, trace_path=alone)
        with profiler.open(alone) as trace:
            b = performance_bounds(trace)
        assert row["bottleneck"] == b["bottleneck"]
        assert float(row["memory_bound_us"]) == pytest.approx(b["memory_bound_ns"] / 1e3)
        assert float(row["compute_bound_us"]) == pytest.approx(b["compute_bound_ns"] / 1e3)
        assert float(row["pipeline_bound_us"]) == pytest.approx(b["perfect_pipeline_ns"] / 1e3)
    assert {r["bottleneck"] for r in rows} == {"DMA", "Tensor"}   # small blocks starve the Tensor engine


def test_bounds_with_a_trace_dir_go_into_the_sweep_file_and_colour_the_chart(tmp_path, capsys):
    from profiler.figures.sweep import sweep_figure
    from profiler.sweep_table import read_sweep_file

    out = tmp_path / "dir"
    assert main(["sweep", "matmul_rowload", "-p", "block_m=1,4", "--bounds", "--trace-dir", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "bottleneck" in text.splitlines()[1]
    assert text.rstrip().endswith(f"`trnprof serve {out}` shows the sweep and each point")
    sweep = read_sweep_file(out)
    assert sweep.table.column("bottleneck").to_pylist() == ["DMA", "Tensor"]
    assert sorted(t.name for t in sweep_figure(sweep.table).data) == ["bottleneck: DMA", "bottleneck: Tensor"]
    from dashboard.registry import TraceRegistry
    from dashboard.sweep_view import point_rows, served_sweeps, sweep_page
    from profiler.trace_folders import traces_in_folder

    registry = TraceRegistry(traces_in_folder(out))
    [served] = served_sweeps(registry)
    rows = point_rows(served, "t0")
    assert [r["busiest"] for r in rows] == ["DMA", "Tensor"]
    assert rows[0]["memory_bound"] == "73.73 µs" and rows[0]["compute_bound"] == "38.48 µs"
    page = str(sweep_page(registry, "t0"))
    assert "bottleneck" in page and "memory bound" in page and "73.73 µs" in page


def test_the_sweep_library_keeps_rows_bounds_and_cleans_its_temporary_traces():
    from profiler.sweep import Sweep

    with Sweep("matmul_rowload", {"block_m": [1, 4]}, bounds=True) as sweep:
        tmp = sweep.trace_dir
        assert tmp is not None and not sweep.keeps_traces
        table = sweep.run_all()
        assert table.column("block_m").to_pylist() == ["1", "4"] and "trace" not in table.column_names
        assert table.column("bottleneck").to_pylist() == ["DMA", "Tensor"]
        assert sweep.save() is None   # nothing to save: the traces are temporary
        assert [t.name for t in sweep.figure().data] == ["bottleneck: Tensor", "bottleneck: DMA"]  # fastest first
        assert tmp.exists()
    assert not tmp.parent.exists()   # removed on close


def test_the_sweep_library_keeps_the_rows_done_when_iteration_stops():
    from profiler.sweep import Sweep

    with Sweep("softmax", {"rows": [128, 256, 384]}) as sweep:
        for row in sweep.run():
            if row.index == 1:
                break
        assert [r.point.params["rows"] for r in sweep.rows] == [128, 256]
        assert sweep.table().num_rows == 2 and not sweep.failed


def test_a_python_error_in_a_users_kernel_is_that_points_row(tmp_path):
    kernel = tmp_path / "buggy.py"
    kernel.write_text(
        "def k(nc, *, cols: int = 128, boom: int = 0):\n"
        "    x = nc.input('x', (128, cols), 'fp32')\n"
        "    t = nc.sbuf_tile((128, cols), 'fp32')\n"
        "    nc.dma_copy(t, x)\n"
        "    if boom:\n"
        "        raise ValueError('user bug')\n")
    target = f"{kernel}:k"
    rows = list(run_sweep(target, sweep_points(target, {"boom": ["0", "1"]})))
    assert rows[0].result is not None and rows[0].error is None
    assert rows[1].result is None and "buggy.py:6" in rows[1].error and "ValueError: user bug" in rows[1].error


def test_a_stopped_sweep_keeps_only_the_traces_its_file_lists(tmp_path):
    """Points under way when it stopped left trace folders (complete or not) that the sweep file did not list."""
    from profiler.sweep import Sweep

    out = tmp_path / "sweep"
    sweep = Sweep("softmax", {"rows": [128, 256, 384]}, trace_dir=out)
    under_way = out / sweep.points[1].trace_name(1, sweep.names)

    def started(i, _point):
        if i == 1:   # point 1 "under way": its folder exists, then Ctrl-C
            under_way.mkdir(parents=True)
            (under_way / "Instruction.arrows").write_bytes(b"")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        for _ in sweep.run(1, on_start=started):
            pass
    assert len(sweep.rows) == 1 and not under_way.exists()
    assert (out / sweep.points[0].trace_name(0, sweep.names)).is_dir()


def test_a_trace_writer_whose_folder_went_away_closes_without_a_traceback(tmp_path):
    import shutil

    from tracer import TraceWriter
    from tracer.sim.emit_child import _close_quietly

    path = tmp_path / "gone.trace"
    writer = TraceWriter(path, background_flush=False)
    writer.append_rows("Instruction", [{"id": 0, "start_ts": 0, "end_ts": 1, "duration_ns": 1, "engine": "Vector",
                                        "opcode": "X", "operands": "", "pc": 0}])
    shutil.rmtree(path)
    assert _close_quietly(writer, True) is False


def test_ctrl_c_while_a_point_is_ingested_for_its_bounds_still_prints_the_points_done(monkeypatch, capsys):
    """DuckDB turns Ctrl-C into its own exception: the sweep stopped with 'interrupted' alone, no table."""
    import profiler.sweep as psweep

    real = psweep._bounds_of
    calls = []

    def bounds_then_interrupt(path):
        calls.append(path)
        if len(calls) == 2:
            raise RuntimeError("Query interrupted")
        return real(path)

    monkeypatch.setattr(psweep, "_bounds_of", bounds_then_interrupt)
    code = main(["sweep", "softmax", "-p", "rows=128,256,384", "--bounds", "-q"])
    captured = capsys.readouterr()
    assert code == 130
    assert "interrupted after 1 of 3 points" in captured.err
    assert "rows" in captured.out and "128" in captured.out


@pytest.mark.parametrize(("params", "overrides", "said"), [
    ({"rows": [128, "128"]}, None, r"sweep parameter 'rows': 128 and '128' are the same value"),
    (None, {"dma_bandwidth_gbps": ["100", "100.0"]}, r"sweep constant 'dma_bandwidth_gbps': '100' and '100.0'"),
])
def test_two_spellings_of_one_value_are_refused(params, overrides, said):
    """The text was compared: `100,100.0` ran the same point twice."""
    with pytest.raises(ConfigError, match=said):
        sweep_points("softmax", params, overrides)


def test_a_worker_that_dies_ends_the_sweep_with_one_error_not_a_hang(tmp_path, capfd):
    """multiprocessing's Pool replaced a dead worker forever (or hung in its terminate, deaf to SIGTERM)."""
    import multiprocessing
    import time

    path = tmp_path / "crash.py"
    path.write_text("import os\n"
                    "def crash(nc, *, n: int = 1):\n"
                    "    if n == 2:\n"
                    "        os._exit(3)\n"
                    "    x = nc.input('x', (128, 64), 'bf16')\n"
                    "    t = nc.sbuf_tile((128, 64), 'bf16')\n"
                    "    nc.dma_copy(t, x)\n")
    target = f"{path}:crash"
    t0 = time.monotonic()
    # (point 2's worker died; point 1 may or may not have finished by then)
    with pytest.raises(KernelError, match=r"a sweep worker process died while running (one of points .*)?"
                                          r"point 2 \(n=2\)|died while running one of points .*2 \(n=2\)"):
        list(run_sweep(target, sweep_points(target, {"n": ["1", "2", "3"]}), jobs=2))
    assert time.monotonic() - t0 < 60 and not multiprocessing.active_children()
    assert main(["sweep", target, "-p", "n=1,2,3", "-j", "2", "-q"]) != 0
    assert "worker process died while running" in capfd.readouterr().err
