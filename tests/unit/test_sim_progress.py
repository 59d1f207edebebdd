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
