"""The loop fast path pauses when learning segments does not pay, and never when it does.

The :class:`~tracer.sim.fastpath.ledger.Ledger` is checked on its own (its bound on the waste of a run that never
repeats, against the plain sum of what it allowed; a run whose matches repay never pauses), then inside the fast
path: a triangular nest with a plain ``range`` inner loop (whose segments never repeat) pauses, wastes a fraction
of what it wasted without the ledger, and still writes the general path's trace; a triangular nest that repeats
once learnt (``nc.sequential_range`` inner loop) never pauses.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.test_sim_fastpath import _assert_same, _fast_run, _run, _triangular
from tracer.sim.fastpath import ledger as ledger_module
from tracer.sim.fastpath.ledger import SHARE, SLACK, Ledger


def _spend_without_matches(segment: int, total: int) -> tuple[int, Ledger]:
    """A run of ``total`` instructions in segments of ``segment``, each recorded (wasted) when allowed and never
    matched: the waste the ledger let through, and the ledger."""
    ledger = Ledger()
    wasted = 0
    for count in range(0, total, segment):
        if ledger.allows(count, 0, "k"):
            ledger.spend(segment)
            wasted += segment
    return wasted, ledger


@given(segment=st.integers(32, 3000), total=st.integers(1, 2_000_000))  # (a segment of 1: 10^6 steps)
def test_a_run_that_never_repeats_wastes_a_bounded_share(segment, total):
    """Each window wastes at most its allowance plus one segment (the one that went over), and each pause's probes
    at most SLACK plus one segment; the pauses double, so a run has at most log2(total) + 1 windows."""
    wasted, ledger = _spend_without_matches(segment, total)
    assert wasted == ledger.total_waste
    windows = ledger.pauses + 1
    assert windows <= max(total, 1).bit_length() + 1
    assert wasted <= windows * (SLACK + segment) + ledger.pauses * (SLACK + segment) + SHARE * total
    if total >= 8 * (SLACK + segment) * total.bit_length() and segment <= SLACK:
        assert ledger.pauses >= 1  # a long losing run pauses, and spends well under half of it learning
        assert wasted < 0.5 * total


@given(segment=st.integers(32, 3000), total=st.integers(1, 500_000), first=st.integers(0, 8))
def test_a_run_whose_matches_repay_never_pauses(segment, total, first):
    """After ``first`` wasted segments (within the slack), every segment is matched: the ledger never refuses one."""
    first = min(first, SLACK // segment)
    ledger = Ledger()
    matched = 0
    for k, count in enumerate(range(0, total, segment)):
        assert ledger.allows(count, matched, "k"), count
        if k < first:
            ledger.spend(segment)
        else:
            matched += segment
    assert ledger.pauses == 0


def test_a_pause_lasts_as_long_as_the_run_before_it():
    ledger = Ledger()
    ledger.spend(SLACK + int(SHARE * 1000))
    assert ledger.allows(1000, 0, "k")  # the allowance: SLACK + SHARE x the window's instructions
    ledger.spend(1)
    assert not ledger.allows(1000, 0, "k")
    assert ledger.pauses == 1 and ledger.resume_at == 2000
    assert not ledger.allows(1061, 0, "k")
    assert ledger.allows(1062, 0, "k")  # a probe: every 1/PROBES of the pause
    assert not ledger.allows(1063, 0, "k")
    ledger.spend(SLACK + 1)  # the probes lost a pause's SLACK: no more of them
    assert not ledger.allows(1500, 0, "k")
    assert ledger.allows(2000, 0, "k")  # a new window: its waste starts from nothing
    ledger.spend(SLACK)
    assert ledger.allows(2001, 0, "k")
    ledger.spend(1 + int(SHARE * 10_000))
    assert not ledger.allows(12_000, 0, "k")
    assert ledger.resume_at == 24_000 and ledger.pauses == 2


def test_a_pause_ends_once_its_replays_repay_it():
    """The same loop turning regular: a probe records, a later one replays, and the pause ends there."""
    ledger = Ledger()
    ledger.spend(SLACK + 100)
    assert not ledger.allows(100, 0, "k")  # paused until 200, probes every 6
    assert ledger.allows(106, 0, "k")
    ledger.spend(50)  # (a recording)
    assert not ledger.allows(110, 0, "k")
    assert ledger.allows(112, 50, "k")  # a replay of 50, not more than the pause's waste yet
    assert not ledger.allows(113, 50, "k")
    assert ledger.allows(114, 51, "k") and ledger.resume_at == 114  # repaid: over
    assert ledger.allows(115, 51, "k")


def test_a_pause_benches_the_starts_known_when_it_began():
    ledger = Ledger()
    assert ledger.allows(0, 0, "old")
    ledger.spend(SLACK + 100)
    assert not ledger.allows(100, 0, "old")  # paused until 200
    assert not ledger.allows(105, 0, "old")
    assert ledger.allows(150, 0, "new")  # a start first met during the pause is learnt, within SLACK
    ledger.spend(SLACK)
    assert ledger.allows(160, 0, "new")
    ledger.spend(1)
    assert not ledger.allows(180, 0, "new")  # it lost too: benched until the pause ends
    assert not ledger.allows(190, 0, "newer")  # (the pause's SLACK is spent: no probes either)
    assert not ledger.allows(190, 0, "old")
    assert ledger.pauses == 1 and ledger.resume_at == 200
    assert ledger.allows(200, 0, "old") and ledger.allows(201, 0, "new")  # over: a new window for all


def _ragged(n_outer: int):
    """A shrinking triangular nest whose inner loop is a plain ``range`` (invisible to the fast path): each outer
    iteration is a segment of a different length, so no segment ever repeats."""
    def kern(nc):
        x = nc.input("x", (128, 64), "bf16")
        t = nc.sbuf_tile((128, 64), "bf16", name="t")
        acc = nc.sbuf_tile((128, 64), "fp32", name="acc")
        nc.memset(acc, 0.0)
        for i in nc.sequential_range(n_outer):
            for _j in range(n_outer - i):
                nc.dma_copy(t, x)
                nc.tensor_copy(acc, t)
                nc.tensor_scalar(acc, acc, "multiply", 0.5, op1="add", operand1=1.0)
                nc.activation(acc, acc, "exp")
        nc.dma_copy(nc.output("y", (128, 64), "fp32"), acc)
    return kern


def test_a_nest_that_never_repeats_pauses_and_writes_the_same_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_module, "SLACK", 256)  # (scaled down with the run: ~9,000 instructions)
    kern = _ragged(60)
    result, fast = _fast_run(kern, monkeypatch)
    assert fast.ledger.pauses >= 1
    assert result.fast_path_instructions == 0  # (nothing repeats: nothing to replay)
    monkeypatch.setattr(ledger_module, "SLACK", 10 ** 12)  # no pauses: what the fast path wasted before the ledger
    _unpaused, fast_unpaused = _fast_run(kern, monkeypatch)
    assert fast_unpaused.ledger.pauses == 0
    assert fast_unpaused.ledger.total_waste > result.instructions  # (recorded, then re-issued: over 1x the run)
    assert fast.ledger.total_waste < 0.4 * fast_unpaused.ledger.total_waste
    monkeypatch.setattr(ledger_module, "SLACK", 256)
    _assert_same(_run(tmp_path, kern, {}, "trn2", False), _run(tmp_path, kern, {}, "trn2", True))


def test_nests_that_repeat_once_learnt_never_pause(monkeypatch):
    """The ledger changes nothing for triangular nests that replay once learnt: no pause, the same instructions
    replayed as without it."""
    for kern, params in ((_triangular, {}), ("attention", {"seq": 8192, "causal": True})):
        result, fast = _fast_run(kern, monkeypatch, params)
        assert fast.ledger.pauses == 0, kern
        monkeypatch.setattr(ledger_module, "SLACK", 10 ** 12)
        unpaused, _fast = _fast_run(kern, monkeypatch, params)
        monkeypatch.undo()
        assert result.fast_path_instructions == unpaused.fast_path_instructions > 0, kern


def _lose_then_win(n_ragged: int, n_regular: int):
    """A triangular nest that never repeats (plain ``range`` inner loop), then a regular nest of other loops."""
    ragged = _ragged(n_ragged)

    def kern(nc):
        ragged(nc)
        x = nc.input("x2", (128, 64), "bf16")
        t = nc.sbuf_tile((128, 64), "bf16", name="t2")
        acc = nc.sbuf_tile((128, 64), "fp32", name="acc2")
        nc.memset(acc, 0.0)
        for _i in nc.sequential_range(n_regular):
            for _j in nc.sequential_range(16):
                nc.dma_copy(t, x)
                nc.tensor_copy(acc, t)
                nc.activation(acc, acc, "exp")
        nc.dma_copy(nc.output("y2", (128, 64), "fp32"), acc)
    return kern


def test_a_regular_phase_after_a_losing_one_is_replayed(tmp_path, monkeypatch):
    """The losing nest pauses the fast path for as long as it had run; the regular nest after it starts at other
    loops, so it is learnt and replayed during the pause (a pause that benched everything left it to the general
    path: 40% replayed)."""
    monkeypatch.setattr(ledger_module, "SLACK", 1024)  # (scaled down with the run; the learning fits in it)
    kern = _lose_then_win(60, 150)
    result, fast = _fast_run(kern, monkeypatch)
    regular = 150 * 16 * 3
    assert fast.ledger.pauses >= 1 and fast.ledger.resume_at > result.instructions - regular
    assert result.fast_path_instructions > 0.8 * regular
    _assert_same(_run(tmp_path, kern, {}, "trn2", False), _run(tmp_path, kern, {}, "trn2", True))
