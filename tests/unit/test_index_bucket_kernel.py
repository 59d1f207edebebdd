"""The compiled bucketing kernel (profiler.db.bucket_kernel) against the brute-force oracle and the vectorised path:
identical tables for any range, overlapping and zero-length events, events crossing bucket edges or starting
long before the range, null names, and empty inputs."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler import db_schema as dbs
from profiler.db import bucket_kernel, lod
from profiler.db.lod_rows import rows_table
from tests.unit.test_index_lod import _check, tracks

pytestmark = pytest.mark.skipif(not bucket_kernel.available(1 << 30), reason="numba unavailable")


def _vectorised(ev: lod.TrackEvents, k: int, b0: int, b1: int) -> pa.Table:
    return rows_table(lod.bucket_rows(ev, k, b0, b1), ev.names)


@settings(max_examples=60, deadline=None)
@given(tracks(max_n=60), st.integers(0, 9), st.integers(-600, 600), st.integers(1, 40))
def test_kernel_matches_the_oracle_and_the_vectorised_path(track, k, offset, nb):
    s, e, ids, names = track
    ev = lod.prepare(s, e, ids, pa.array(names, pa.string()))
    b0 = ((int(s.min()) if len(s) else 0) + offset) >> k
    got = bucket_kernel.bucketize(ev, k, b0, b0 + nb)
    assert got.equals(_vectorised(ev, k, b0, b0 + nb))
    _check(got, track, k)
    # The Python form of the kernel (what numba compiles) agrees too.
    assert bucket_kernel.bucketize(ev, k, b0, b0 + nb, compiled=False).equals(got)


def test_large_bursty_input_matches_the_vectorised_path():
    rng = np.random.default_rng(5)
    n = 20_000
    s = np.cumsum(rng.choice([0, 1, 3, 40, 5_000], n, p=[0.1, 0.4, 0.3, 0.19, 0.01])).astype(np.int64)
    d = rng.choice([0, 2, 30, 900, 70_000], n, p=[0.05, 0.4, 0.4, 0.149, 0.001]).astype(np.int64)
    names = pa.array(rng.choice(["a", "bb", "c", ""], n).tolist()).to_pylist()
    names = [None if x == "" else x for x in names]
    ev = lod.prepare(s, s + d, rng.permutation(n), pa.array(names, pa.string()))
    for k, b0, nb in ((3, 0, 4_000), (6, 100, 1_600), (0, int(s[n // 2]), 3_000), (12, -5, 50)):
        got = bucket_kernel.bucketize(ev, k, b0, b0 + nb)
        assert got.equals(_vectorised(ev, k, b0, b0 + nb)), (k, b0, nb)
        assert got.column(dbs.COUNT).to_numpy().sum() == np.count_nonzero(((s >> k) >= b0) & ((s >> k) < b0 + nb))


def test_lod_bucketize_uses_the_kernel_for_many_events_and_the_switch_turns_it_off(monkeypatch):
    calls = []
    real = bucket_kernel.bucketize
    monkeypatch.setattr(bucket_kernel, "bucketize", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    n = bucket_kernel.MIN_EVENTS
    s = np.arange(n, dtype=np.int64) * 3
    ev = lod.prepare(s, s + 5, np.arange(n), pa.array(["x"] * n))
    with_kernel = lod.bucketize(ev, 4, 0, 100)
    assert calls == [1]
    monkeypatch.setenv(bucket_kernel.ENV_SWITCH, "0")
    assert lod.bucketize(ev, 4, 0, 100).equals(with_kernel)
    assert calls == [1]
    # Values (series) take the vectorised path, which spreads them.
    valued = lod.prepare(s, s + 5, np.arange(n), pa.array(["x"] * n), values=np.ones(n))
    monkeypatch.delenv(bucket_kernel.ENV_SWITCH)
    assert dbs.VALUE_SUM in lod.bucketize(valued, 4, 0, 100).column_names
    assert calls == [1]


@pytest.mark.parametrize("compiled", [True, False])
def test_covering_event_is_the_first_to_reach_the_largest_end(compiled):
    # Buckets of 64 ns: [64, 128) has no starter; of the events before it, ids 5 and 3 both end last (at 100) and
    # id 5 reached that end first; [128, 192) is idle.
    s = np.array([0, 10, 20], np.int64)
    e = np.array([100, 100, 30], np.int64)
    ev = lod.prepare(s, e, np.array([5, 3, 9]), pa.array(["a", "b", None]))
    table = bucket_kernel.bucketize(ev, 6, 0, 3, compiled=compiled)
    assert table.column(dbs.LONGEST_ID).to_pylist() == [5, 5, None]
    assert table.column(dbs.TOP_NAME).to_pylist() == ["a", "a", None]
    assert table.column(dbs.BUSY_NS).to_pylist() == [64, 36, 0]
    assert table.equals(_vectorised(ev, 6, 0, 3))
