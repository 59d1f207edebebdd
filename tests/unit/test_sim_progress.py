"""Progress reports of a recording: instructions, simulated time and the predicted length of the run."""

from __future__ import annotations

import pytest

from tracer.sim import core as core_module
from tracer.sim import run_kernel

SOFTMAX = {"rows": 1 << 20, "cols": 128}  # 8,192 iterations of one row-tile loop, ~49 K instructions


def test_an_early_prediction_of_the_runs_length(monkeypatch):
    """After the first iteration of the outermost loop, the third argument of the callback predicts the run's
    instruction count; with iterations alike it is right to within the epilogue (the final barrier)."""
    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 1024)  # reports every ~1 K instructions
    calls = []
    result = run_kernel("softmax", SOFTMAX, progress=lambda n, ns, expected: calls.append((n, ns, expected)))
    total = result.instructions
    assert calls[-1][0] == total
    early = [(n, e) for n, _, e in calls if n <= total // 4]
    assert early and all(e is not None for _, e in early[1:])  # from the first report after one iteration on
    for _n, expected in early[1:]:
        assert total - 2 <= expected <= total
    assert [ns for _, ns, _ in calls] == sorted(ns for _, ns, _ in calls)


def test_two_argument_callbacks_and_runs_without_the_fast_path(monkeypatch):
    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 1024)
    two = []
    result = run_kernel("softmax", SOFTMAX, progress=lambda n, ns: two.append(n))
    assert len(two) > 3 and two[-1] == result.instructions
    three = []
    run_kernel("softmax", SOFTMAX, fast_path=False, progress=lambda n, ns, expected: three.append(expected))
    assert three and set(three) == {None}  # only the fast path predicts


def test_the_record_progress_bar_takes_the_prediction_as_its_total():
    pytest.importorskip("tqdm")
    from profiler.cli.record import _Progress

    bar = _Progress()
    try:
        bar.update(10, 5)
        assert bar.bar.total is None and bar.bar.n == 10
        bar.update(100, 50, 1000)
        assert bar.bar.total == 1000 and bar.bar.n == 100  # percentage and time left from here
        bar.update(1500, 60, 1000)  # the prediction was low: the total is unknown again
        assert bar.bar.total is None and bar.bar.n == 1500
    finally:
        bar.close()


def test_callbacks_get_the_prediction_only_when_they_take_it(monkeypatch):
    """Callables of every kind: ``*args`` and three-parameter ones get the prediction; bound methods and callable
    objects with two parameters get two arguments; a callable whose signature cannot be read gets two."""
    import functools

    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 1024)
    got: dict[str, list[int]] = {}

    class Two:
        def __call__(self, n, ns):
            got.setdefault("callable object", []).append(2)

        def method(self, n, ns):
            got.setdefault("bound method", []).append(2)

    def three(tag, n, ns, expected):
        got.setdefault(tag, []).append(3)

    callbacks = {"*args": lambda *a: got.setdefault("*args", []).append(len(a)),
                 "callable object": Two(), "bound method": Two().method,
                 "partial": functools.partial(three, "partial")}
    for cb in callbacks.values():
        run_kernel("softmax", {"rows": 1 << 14, "cols": 128}, progress=cb)
    assert {k: set(v) for k, v in got.items()} == {"*args": {3}, "callable object": {2}, "bound method": {2},
                                                   "partial": {3}}
    assert core_module._positional_capacity(object()) == 2  # no readable signature: the two documented arguments


def test_the_record_progress_bar_shows_the_trace_size_and_the_size_expected(tmp_path):
    pytest.importorskip("tqdm")
    from profiler.cli.record import _Progress

    (tmp_path / "Instruction.arrows").write_bytes(b"x" * 2_000_000)
    bar = _Progress(tmp_path)
    try:
        bar.update(100, 50, 400)
        postfix = bar.bar.postfix
        assert "trace 2.0 MB" in postfix and "~8 MB at the end" in postfix  # 2 MB for a quarter of the run
        bar.update(200, 55, 400)  # no new batch on disk yet: the estimate does not fall
        assert "~8 MB at the end" in bar.bar.postfix
        bar.update(300, 60)  # no prediction: the size so far only
        assert "trace 2.0 MB" in bar.bar.postfix and "at the end" not in bar.bar.postfix
    finally:
        bar.close()
    gone = _Progress(tmp_path / "missing")
    try:
        gone.update(10, 5, 100)  # a directory not there yet: no size, no error
        assert "trace" not in gone.bar.postfix
    finally:
        gone.close()


def test_the_record_progress_bar_shows_on_a_terminal_reporting_no_size(monkeypatch):
    """Some emulated terminals report 0 x 0: tqdm would then hide the bar (no row for it), so it gets a fixed
    size; a terminal with a size keeps tqdm's dynamic width."""
    pytest.importorskip("tqdm")
    import os

    from profiler.cli import record

    for size, fixed in ((os.terminal_size((0, 0)), True), (os.terminal_size((132, 40)), False)):
        monkeypatch.setattr(record.os, "get_terminal_size", lambda *_a, s=size: s)
        bar = record._Progress()
        try:
            if fixed:
                assert (bar.bar.ncols, bar.bar.nrows) == (100, 24)
            else:  # tqdm follows the terminal
                assert bar.bar.dynamic_ncols and bar.bar.ncols > 100
        finally:
            bar.close()


def test_chunks_get_small_and_flagged_near_the_predicted_end(monkeypatch, tmp_path):
    """Once the predicted end is near (within END_WINDOW_S at the current speed), chunks are handed over every
    END_HANDOFF_INTERVAL_S and flagged ``ending`` (the writer then writes every row while it waits), so little is
    left to do once the simulation is over; before the prediction, and without the fast path, nothing changes."""
    from tracer.sim.emitter import Emitter

    seen = []
    real = Emitter.emit
    monkeypatch.setattr(Emitter, "emit", lambda self, chunk: (seen.append(chunk.ending), real(self, chunk))[1])
    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 1024)
    monkeypatch.setattr(core_module, "END_WINDOW_S", 1e9)  # "near the end" as soon as there is a prediction
    run_kernel("softmax", SOFTMAX, trace_path=tmp_path / "a.trace", emit="inline")
    assert seen.count(True) > 10 and seen[-2] is True  # the last chunk holds only the final barrier, past the
    # predicted count: a prediction already passed says nothing about the end
    ends = [i for i, e in enumerate(seen) if e]
    assert ends == list(range(ends[0], ends[-1] + 1))  # once near the end, it stays so
    seen.clear()
    monkeypatch.setattr(core_module, "END_WINDOW_S", float("-inf"))  # never near the end
    run_kernel("softmax", SOFTMAX, trace_path=tmp_path / "c.trace", emit="inline")
    assert seen and not any(seen)
    seen.clear()
    run_kernel("softmax", SOFTMAX, trace_path=tmp_path / "b.trace", emit="inline", fast_path=False)
    assert seen and not any(seen)


@pytest.mark.parametrize(("recent_s", "near"), [(0.001, True), (0.5, False)])
def test_the_end_is_predicted_at_the_current_speed_not_the_average(monkeypatch, recent_s, near):
    """A run whose start was slow (the first 900 instructions took 10 s) and whose last chunk of 100 instructions
    took ``recent_s``: 1,000 instructions before the predicted end are 0.01 s away at the chunk's speed (near the
    end) but 10 s at the run's average; at the chunk's 5 ms per instruction they are 5 s away (not near)."""
    from tracer.sim.arch import cost_model

    now = 1000.0
    monkeypatch.setattr(core_module.time, "monotonic", lambda: now)
    core = core_module.Core(cost_model("trn2"), sink=lambda chunk: None)
    core.n, core._chunk_first, core.expected_n = 1000, 900, 2000
    core._started, core._last_handoff = now - 10.0, now - recent_s
    core.handoff()
    expect = core_module.END_HANDOFF_INTERVAL_S if near else core_module.HANDOFF_INTERVAL_S
    assert core._handoff_interval == expect


def test_an_affine_nest_predicts_the_run_before_its_first_iteration(monkeypatch):
    """An nc.affine_range nest knows the instructions it issues before it runs (its traced body, its loops' ranges):
    the very first report already carries the run's length, to within the epilogue (the final barrier), long
    before the first iteration of the outermost loop (an eighth of this run) could predict it."""
    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 256)
    calls = []
    result = run_kernel("matmul_rowload", {"M": 4096, "N": 4096, "K": 1024}, arch="trn2",
                        progress=lambda n, ns, expected: calls.append((n, expected)))
    total = result.instructions
    first_n, first_expected = calls[0]
    assert first_n < total // 16 and first_expected is not None
    assert total - 2 <= first_expected <= total


@pytest.mark.parametrize(("per_s", "text"), [
    (0.0, "0"), (12.345, "12.3"), (999.0, "999"), (999.7, "1 K"), (1072.0, "1.07 K"), (412_242.0, "412 K"),
    (999_400.0, "999 K"), (999_999.0, "1 M"), (1_150_977.0, "1.15 M"), (12_345_678_901.0, "12,346 M"),
])
def test_the_result_reports_its_rate_with_three_significant_digits(per_s, text):
    from tracer.sim.runner import _rate

    assert _rate(per_s) == text


def _totals(kernel, params, monkeypatch) -> tuple[int, list[tuple[int, int | None]]]:
    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 256)
    calls: list[tuple[int, int | None]] = []
    result = run_kernel(kernel, params, progress=lambda n, ns, expected: calls.append((n, expected)))
    return result.instructions, calls


def _nest(shape):
    """A sequential nest whose inner loop runs ``shape(i)`` iterations of four instructions."""
    def kern(nc):
        x = nc.input("x", (128, 64), "bf16")
        t = nc.sbuf_tile((128, 64), "bf16", name="t")
        acc = nc.sbuf_tile((128, 64), "fp32", name="acc")
        nc.memset(acc, 0.0)
        for i in nc.sequential_range(120):
            nc.memset(acc, 0.0, engine="Vector")
            for _j in nc.sequential_range(shape(i)):
                nc.dma_copy(t, x)
                nc.tensor_copy(acc, t)
                nc.activation(acc, acc, "exp")
        nc.dma_copy(nc.output("y", (128, 64), "fp32"), acc)
    return kern


@pytest.mark.parametrize(("kernel", "params"), [
    ("attention", {"seq": 8192, "causal": True}),   # one more kv block per query block
    (_nest(lambda i: i + 1), {}), (_nest(lambda i: 120 - i), {}), (_nest(lambda i: 2 * i + 5), {}),
], ids=["causal-attention", "growing", "shrinking", "growing-by-two"])
def test_a_triangular_nests_length_is_predicted_from_its_trend(kernel, params, monkeypatch):
    """The outermost loop's iterations grow (or shrink) linearly: the total follows their trend, exact (to within
    the epilogue) once the outer loop has run 4 iterations, here before a tenth of the run.  (It used to be the
    first iteration's instructions times the iterations: 5% of causal attention's length, twice a shrinking nest's.)"""
    total, calls = _totals(kernel, params, monkeypatch)
    late = [(n, e) for n, e in calls if n >= total // 10]
    assert late and all(e is not None and total - 2 <= e <= total for n, e in late), late[:3]


def test_an_irregular_nests_total_stays_a_prediction(monkeypatch):
    """Iterations that follow no line (here a sawtooth after a ramp) are extrapolated from the latest ones once the
    line fails the iterations before them: the total is never the run's end twice over in the second half."""
    total, calls = _totals(_nest(lambda i: i % 40 + 1), {}, monkeypatch)
    late = [e for n, e in calls if n >= total // 2]
    assert late and all(e is not None and 0.6 * total <= e <= 1.6 * total for e in late)


def _reports(kernel, monkeypatch) -> tuple[int, list[tuple[int, int | None, int | None]]]:
    """The run's length and its (instructions, total, low estimate) reports to a four-parameter callback."""
    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 256)
    calls: list[tuple[int, int | None, int | None]] = []

    def four(instructions, simulated_ns, expected, low):
        calls.append((instructions, expected, low))

    result = run_kernel(kernel, None, progress=four)
    return result.instructions, calls


def test_a_trend_that_stops_is_never_in_the_low_estimate(monkeypatch):
    """A sliding window grows by one block per query block and then stays constant: the line through its growth
    predicts a triangle (the total is high until the next power of two), but the low estimate, which the disk
    guard acts on, is never above the run's length; with a uniform or linear nest the two agree."""
    total, calls = _reports(_nest(lambda i: min(i + 1, 24)), monkeypatch)
    assert max(e for _, e, _low in calls if e is not None) > 1.5 * total   # (the line: high for a while)
    assert all(low is None or low <= total for _, _e, low in calls)
    assert calls[-1][1] == calls[-1][2] or calls[-1][1] is None or calls[-1][1] <= total + 2
    total, calls = _reports(_nest(lambda i: 120 - i), monkeypatch)
    late = [(e, low) for n, e, low in calls if n >= total // 10]
    assert all(e == low and total - 2 <= e <= total for e, low in late)


def test_the_disk_guard_acts_on_the_low_estimate(tmp_path, monkeypatch):
    from collections import namedtuple

    import profiler.cli.record as record_module
    from profiler.errors import CommandError

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(record_module.shutil, "disk_usage", lambda path: usage(10**12, 10**12 - 10**6, 10**6))
    (tmp_path / "part").write_bytes(b"x" * 100_000)  # 100 KB after 20,000 instructions; 1 MB free
    guard = record_module._DiskGuard(tmp_path, tmp_path)
    guard.check(20_000, 0, 10**7, 100_000)  # the trend says 50 MB, the low estimate 0.5 MB: the run goes on
    guard._at = -1.0
    with pytest.raises(CommandError, match="would grow to about"):
        guard.check(20_000, 0, 10**7, 10**7)
    guard._at = -1.0
    with pytest.raises(CommandError):
        guard.check(20_000, 0, 10**7)  # a three-argument report: the total is all there is


def _left_early(how):
    """A first loop left after 31 of its 2,000 iterations (by ``break`` or an exception the kernel catches), then a
    second loop of 100 growing iterations."""
    def kern(nc):
        x = nc.input("x", (128, 64), "bf16")
        t = nc.sbuf_tile((128, 64), "bf16", name="t")
        acc = nc.sbuf_tile((128, 64), "fp32", name="acc")
        nc.memset(acc, 0.0)
        try:
            for i in nc.sequential_range(2000):
                for _j in nc.sequential_range(4):
                    nc.dma_copy(t, x)
                    nc.tensor_copy(acc, t)
                if i == 30:
                    if how == "break":
                        break
                    raise LookupError("done early")
        except LookupError:
            pass
        for i in nc.sequential_range(100):
            for _j in nc.sequential_range(i + 1):
                nc.dma_copy(t, x)
                nc.tensor_copy(acc, t)
                nc.activation(acc, acc, "exp")
        nc.dma_copy(nc.output("y", (128, 64), "fp32"), acc)
    return kern


@pytest.mark.parametrize("how", ["break", "exception"])
def test_a_loop_left_early_gives_the_total_up(how, monkeypatch):
    """The first loop predicted 2,000 iterations; left after 31, it no longer makes the total (it stayed 3x the
    run's length to the end): the second loop's prediction takes over."""
    total, calls = _totals(_left_early(how), {}, monkeypatch)
    late = [e for n, e in calls if n >= total // 2]
    assert late and all(e is not None and total - 2 <= e <= total for e in late)


def test_an_inner_loops_run_is_not_the_runs_end(monkeypatch):
    """A nest whose iterations grow faster than a line: the line's total is passed before the next power of two;
    until then the total is unknown (passed), not the end of the inner loop running now (each inner run took the
    total over: it changed at every run, ~99% done at half the run)."""
    _total, calls = _totals(_nest(lambda i: i * i // 16 + 1), {}, monkeypatch)
    changes = [e for k, (_n, e) in enumerate(calls) if k == 0 or e != calls[k - 1][1]]
    assert len(changes) <= 2 * (120).bit_length() + 2, changes  # the outer loop's predictions, and the end's
