"""Bad arguments to the library's functions are one-line trnprof errors naming the argument (an audit found each of
these raising a raw TypeError, ValueError or OverflowError from inside, or answering wrongly without a word)."""

from __future__ import annotations

import pytest

import profiler
from profiler import analyses as A
from profiler.analyses import memory_map as MM
from profiler.analyses.call_tree import call_tree
from profiler.analyses.call_tree_views import limit_depth
from profiler.errors import QueryError
from tracer import TraceWriter
from tracer.errors import ConfigError
from tracer.sim import run_kernel


@pytest.fixture(scope="module")
def trace(mlp_sample):
    with profiler.open(mlp_sample) as t:
        yield t


@pytest.mark.parametrize(("call", "message"), [
    (lambda t: A.idle_gaps(t, min_ns="10"), "min_ns must be a whole number, 0 or more"),
    (lambda t: A.idle_gaps(t, min_ns=float("nan")), "min_ns must be"),            # was: silently no gap
    (lambda t: A.idle_gaps(t, limit=1.5), r"limit must be a whole number, 0 or more \(or None\)"),
    (lambda t: A.idle_gaps(t, engines=5), "engines must be a name or a list of names"),
    (lambda t: A.performance_bounds(t, necessary_bytes=-5), "necessary_bytes must be a number, 0 or more"),
    (lambda t: A.performance_bounds(t, necessary_bytes="1e6"), "necessary_bytes must be"),
    (lambda t: A.diff(t, t, by=5), "by must be a name or a list of names"),
    (lambda t: MM.memory_summary(t, mems=None), "mems must be a memory or a list of them"),
    (lambda t: t.series(["hfu"], 0, 1000, 10), r"unknown series kind \"\['hfu'\]\""),
    (lambda t: t.sql("SELECT 1", 10, 5), "params must be a list or dict"),
    (lambda t: t.sql_arrow("SELECT 1", sink="x"), "sink must be a function"),
    (lambda t: A.chain_to(t, "Instruction", 40, start_ns="5"), "start_ns must be an integer number of"),
    (lambda t: call_tree(t, max_spans="10"), "max_spans must be a whole number"),
    (lambda t: call_tree(t, max_spans=-5), "max_spans must be a whole number"),   # was DuckDB's LIMIT error
    (lambda t: limit_depth(call_tree(t), "3"), "max_depth must be a whole number"),
])
def test_bad_analysis_and_query_arguments(trace, call, message):
    with pytest.raises(QueryError, match=message) as info:
        call(trace)
    assert "\n" not in str(info.value)


def test_one_name_is_a_list_of_one_not_of_its_letters(trace):
    # "no engine 'V'", "cannot group by 'o'", "mem must be ... not 'S'", an INTERVAL left as a struct
    assert set(A.idle_gaps(trace, engines="Vector").column("engine").to_pylist()) == {"Vector"}
    assert list(A.diff(trace, trace, by="opcode")["by"]) == ["opcode"]
    assert MM.memory_summary(trace, mems="SBUF").column("mem").to_pylist() == ["SBUF"]
    assert trace.sql_arrow("SELECT INTERVAL 1 HOUR AS i", text_types="INTERVAL").to_pylist() == [{"i": "01:00:00"}]
    assert A.idle_gaps(trace, limit=2).num_rows == 2


def test_open_checks_its_progress_callback_before_any_ingest(mlp_sample):
    with pytest.raises(QueryError, match="progress must be a function"):
        profiler.open(mlp_sample, progress=5)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"overrides": "dma_bandwidth_gbps=100"}, "overrides must be a mapping of cost-model constant"),
    ({"arch": ["trn2"]}, "unknown architecture"),
    ({"progress": 5}, "progress must be a function"),   # was: a TypeError at the first hand-over
    ({"params": 0}, "parameters must be a mapping"),    # was: the kernel's default (large) size, silently
])
def test_run_kernel_checks_its_arguments_before_running(kwargs, message):
    args = {"params": {"rows": 128, "cols": 128}, **kwargs}
    with pytest.raises(ConfigError, match=message):
        run_kernel("softmax", **args)


@pytest.mark.parametrize("bad", ["1", None, float("nan"), float("inf"), -5, 0, True])
def test_a_writer_flush_interval_is_a_number_of_seconds(tmp_path, bad):
    # "1" and inf killed the background flush thread (and a later append raised a raw TypeError)
    with pytest.raises(ConfigError, match="flush_interval_s must be a number of seconds above 0"):
        TraceWriter(tmp_path / "w.trace", flush_interval_s=bad)
    assert not (tmp_path / "w.trace").exists()


def test_tracer_tables_and_rows_of_the_wrong_kind(tmp_path):
    from tracer import write_trace
    from tracer.errors import TraceFormatError

    with TraceWriter(tmp_path / "r.trace") as w:
        with pytest.raises(TraceFormatError, match="unknown trace table"):
            w.append(["Instruction"], {})                      # was: unhashable list
        for rows in ([1, 2], None, {"a": 1}):                  # were: TypeError, AttributeError
            with pytest.raises(TraceFormatError, match="append_rows takes a list of rows, each a dict"):
                w.append_rows("Instruction", rows)
    with pytest.raises(TraceFormatError, match="write_trace takes a dict of table name -> columns"):
        write_trace(tmp_path / "e.trace", None)
    assert not (tmp_path / "e.trace").exists()


def test_a_host_traces_summary_figures_are_what_it_has(tmp_path):
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "data" / "pytorch" / "alexnet_flows.json.gz"
    shutil.copy(src, tmp_path / "a.json.gz")
    with profiler.open(tmp_path / "a.json.gz") as t:
        assert t.summary_figures() == []  # it raised: the breakdowns need instructions


def test_numpy_integers_are_integers(trace):
    import numpy as np

    assert trace.source(hot=np.int64(3)).hot == 3


def test_a_closed_trace_says_so_for_track_info(mlp_sample):
    t = profiler.open(mlp_sample)
    t.close()
    with pytest.raises(QueryError, match="the trace is closed"):
        t.track_info(0)


def test_live_trace_and_sweep_constructors_check_their_arguments():
    from profiler.live import LiveTrace
    from profiler.sweep import Sweep

    with pytest.raises(QueryError, match="LiveTrace needs a trace directory path"):
        LiveTrace(None)
    with pytest.raises(QueryError, match="min_interval_s must be a number of seconds"):
        LiveTrace("x", min_interval_s="x")
    with pytest.raises(ConfigError, match="sweep parameters must be a mapping"):
        Sweep("softmax", "rows=128")                       # was a raw ValueError
    with pytest.raises(ConfigError, match="archs must be an architecture or a list of them"):
        Sweep("softmax", {"rows": [128]}, archs=None)
    assert [p.arch for p in Sweep("softmax", {"rows": [128]}, archs="trn2").points] == ["trn2"]  # not 't', 'r', ...


def test_the_remaining_analysis_arguments(trace, tmp_path):
    import shutil
    from pathlib import Path

    from profiler.analyses.call_tree_views import subtree
    from profiler.analyses.kernel_tree import categories_sql
    from profiler.analyses.memory_cell import cell_accesses
    from profiler.summary import tensor_flops

    t0, t1 = trace.time_range
    with pytest.raises(QueryError, match=r"window must be \(start_ns, end_ns\)"):
        cell_accesses(trace, "SBUF", 5, (0, 64))                  # was: not subscriptable
    with pytest.raises(QueryError, match="a byte range must be two integers"):
        cell_accesses(trace, "SBUF", (t0, t1), 5)                 # was: cannot unpack
    for bad in (None, "0", 1.5):
        with pytest.raises(QueryError, match="start_ns must be an integer"):
            tensor_flops(trace, bad, t1)
    with pytest.raises(QueryError, match="root must be a root frame's name"):
        subtree(call_tree(trace), None)
    # a category holding a quote was written as an SQL identifier ("it's"), not a string
    assert categories_sql(["Kernel", "it's"]) == "'kernel', 'it''s'"
    assert categories_sql("Kernel") == "'kernel'"
    src = Path(__file__).resolve().parents[1] / "data" / "pytorch" / "sampled_rank-0.json.gz"
    shutil.copy(src, tmp_path / "s.json.gz")
    with profiler.open(tmp_path / "s.json.gz") as host:
        from profiler.analyses.kernel_tree import kernel_tree

        with pytest.raises(QueryError, match="categories must be a name or a list of names"):
            kernel_tree(host, categories=None)
        assert kernel_tree(host, categories=["kernel", "it's"]).spans > 0


def test_summary_refuses_an_empty_window_as_the_other_calls_do(mlp_sample):
    """It returned a dict of Nones where timeline and utilization_figure raise."""
    import profiler

    with profiler.open(mlp_sample) as t:
        a = t.time_range[0]
        with pytest.raises(profiler.QueryError, match="empty time range"):
            t.summary(a + 5, a + 5)
        assert t.summary(a + 5, a + 6)["total_time_ns"] == 1
