"""The counter level-of-detail index (profiler.db.lod_counter) against a brute-force oracle of the step function:
every stored level built from samples fed in random chunks, and on-the-fly bucketing of any range."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler import db_schema as dbs
from profiler.db import lod
from profiler.db.lod_counter import counter_bucketize, counter_levels


def oracle(ts, vs, bs, be):
    """(count, min, max, mean, last) of bucket [bs, be) by the documented definitions; None values where none."""
    first, last_t = ts[0], ts[-1]
    inside = [v for t, v in zip(ts, vs, strict=True) if bs <= t < be]
    carried = [v for t, v in zip(ts, vs, strict=True) if t < bs]
    candidates = inside + carried[-1:]
    at_end = [v for t, v in zip(ts, vs, strict=True) if t < be]
    lo, hi = max(bs, first), min(be, last_t)
    integral = Fraction(0)
    for i, (t, v) in enumerate(zip(ts, vs, strict=True)):
        nxt = ts[i + 1] if i + 1 < len(ts) else last_t
        a, b = max(t, lo), min(nxt, hi)
        if b > a:
            integral += v * (b - a)
    last = at_end[-1] if at_end else None
    mean = integral / (hi - lo) if hi > lo else last
    return (len(inside), min(candidates) if candidates else None, max(candidates) if candidates else None, mean,
            last)


@st.composite
def samples(draw, max_n=40):
    n = draw(st.integers(1, max_n))
    base = draw(st.sampled_from([0, -5000, 10**12]))
    ts = sorted(base + draw(st.integers(0, 600)) for _ in range(n))
    vs = [draw(st.integers(-50, 1000)) for _ in range(n)]
    return ts, vs


def _check(table, ts, vs, k):
    for row in table.to_pylist():
        bs = row[dbs.BUCKET] << k
        count, vmin, vmax, mean, last = oracle(ts, vs, bs, bs + (1 << k))
        assert row[dbs.COUNT] == count, (k, row)
        if vmin is None:
            assert math.isinf(row[dbs.MIN_VALUE]) and math.isnan(row[dbs.LAST_VALUE]), (k, row)
            continue
        assert (row[dbs.MIN_VALUE], row[dbs.MAX_VALUE], row[dbs.LAST_VALUE]) == (vmin, vmax, last), (k, row)
        scale = max(1, *(abs(v) for v in vs))
        assert abs(row[dbs.MEAN_VALUE] - float(mean)) <= 1e-9 * scale, (k, row, float(mean))


@settings(max_examples=120, deadline=None)
@given(samples(), st.integers(1, 9))
def test_every_stored_counter_level_matches_the_oracle(data, chunk):
    ts, vs = data
    levels = counter_levels(np.array(ts), np.array(vs, np.float64), 3, chunk=chunk)
    k_min = lod.finest_level(ts[0], ts[-1] + 1, len(ts))
    assert [t.column(dbs.LEVEL)[0].as_py() for t in levels] == list(range(k_min, lod.MAX_LEVEL + 1))
    assert levels[0].num_rows <= max(1, len(ts) // lod.EVENTS_PER_FINEST_BUCKET)
    for table in levels[:8] + levels[-2:]:
        k = table.column(dbs.LEVEL)[0].as_py()
        buckets = table.column(dbs.BUCKET).to_numpy()
        assert np.all(np.diff(buckets) == 1), "levels are dense"
        assert buckets[0] == ts[0] >> k and buckets[-1] == ts[-1] >> k
        assert table.column(dbs.COUNT).to_numpy().sum() == len(ts)
        assert set(table.column(dbs.TRACK_ID).to_pylist()) == {3}
        _check(table, ts, vs, k)


@settings(max_examples=80, deadline=None)
@given(samples(), st.integers(0, 8), st.integers(-700, 700), st.integers(1, 30))
def test_counter_bucketize_any_range_matches_the_oracle(data, k, offset, nb):
    ts, vs = data
    b0 = (ts[0] + offset) >> k
    table = counter_bucketize(np.array(ts), np.array(vs, np.float64), k, b0, b0 + nb, first_ts=ts[0],
                              last_ts=ts[-1])
    assert table.column(dbs.BUCKET).to_pylist() == list(range(b0, b0 + nb))
    last_bucket = ts[-1] >> k
    inside = table.filter(np.array(table.column(dbs.BUCKET).to_pylist()) <= last_bucket)
    _check(inside, ts, vs, k)


def test_equal_timestamps_keep_arrival_order_and_the_last_value_holds():
    ts = np.array([0, 10, 10, 20])
    vs = np.array([1.0, 5.0, 3.0, 7.0])
    table = counter_bucketize(ts, vs, 5, 0, 1, first_ts=0, last_ts=20)      # one bucket [0, 32)
    row = table.to_pylist()[0]
    assert (row[dbs.COUNT], row[dbs.MIN_VALUE], row[dbs.MAX_VALUE], row[dbs.LAST_VALUE]) == (4, 1.0, 7.0, 7.0)
    assert row[dbs.MEAN_VALUE] == (1.0 * 10 + 3.0 * 10) / 20        # 5.0 held for no time
