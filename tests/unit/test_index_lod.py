"""The level-of-detail index (profiler.db.lod, lod_build) against a brute-force oracle over the raw intervals:
every stored level built by the streaming builder fed in random chunks, and on-the-fly bucketing of any range."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler import db_schema as dbs
from profiler.db import lod, lod_build

NAMES = ("MATMUL", "ACT", "COPY", None)


def oracle_bucket(track, bs, be):
    """Brute force: (busy, count, longest_id, top_name) of bucket [bs, be) by the documented definitions.

    ``track`` is (starts, ends, ids, names) as Python lists.
    """
    s, e, ids, names = track
    pieces = sorted((max(a, bs), min(b, be)) for a, b in zip(s, e, strict=True) if min(b, be) > max(a, bs))
    busy, cur_s, cur_e = 0, None, None
    for a, b in pieces:
        if cur_e is None or a > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    if cur_e is not None:
        busy += cur_e - cur_s
    starters = [i for i in range(len(s)) if bs <= s[i] < be]
    if starters:
        best = max(starters, key=lambda i: (e[i] - s[i], -ids[i]))
        totals: dict[str, int] = {}
        for i in starters:
            if names[i] is not None:
                totals[names[i]] = totals.get(names[i], 0) + e[i] - s[i]
        top = min(totals, key=lambda n: (-totals[n], n)) if totals else None
        return busy, len(starters), ids[best], top
    if busy:
        before = sorted((i for i in range(len(s)) if s[i] < bs), key=lambda i: (s[i], ids[i]))
        cover = max(before, key=lambda i: (e[i], -before.index(i)))
        return busy, 0, ids[cover], names[cover]
    return 0, 0, None, None


@st.composite
def tracks(draw, max_n=40):
    n = draw(st.integers(0, max_n))
    base = draw(st.sampled_from([0, -1000, 10**12]))
    s = [base + draw(st.integers(0, 400)) for _ in range(n)]
    d = [draw(st.one_of(st.just(0), st.integers(0, 60), st.integers(0, 500))) for _ in range(n)]
    ids = draw(st.permutations(list(range(n)))) if n else []
    names = [draw(st.sampled_from(NAMES)) for _ in range(n)]
    return np.array(s, np.int64), np.array(s, np.int64) + np.array(d, np.int64), np.array(ids, np.int64), names


def oracle_value(track, values, bs, be):
    """Exact value sum of bucket [bs, be): each value spread uniformly over its event (zero-length: at its start)."""
    s, e = track[0], track[1]
    total = Fraction(0)
    for a, b, v in zip(s, e, values, strict=True):
        if b == a:
            total += v if bs <= a < be else 0
        else:
            total += Fraction(v * max(0, min(b, be) - max(a, bs)), b - a)
    return total


def _check(table, track, k, values=None):
    s, e, ids, names = track
    plain = (s.tolist(), e.tolist(), ids.tolist(), names)
    for row in table.to_pylist():
        bs = row[dbs.BUCKET] << k
        expect = oracle_bucket(plain, bs, bs + (1 << k))
        got = (row[dbs.BUSY_NS], row[dbs.COUNT], row[dbs.LONGEST_ID], row[dbs.TOP_NAME])
        assert got == expect, f"level {k} bucket {row[dbs.BUCKET]}: {got} != {expect}"
        if values is not None:
            exact = oracle_value(plain, values, bs, bs + (1 << k))
            scale = sum(abs(v) for v in values) + 1
            assert abs(row[dbs.VALUE_SUM] - float(exact)) <= 1e-9 * scale, (k, row[dbs.BUCKET], row, exact)


@settings(max_examples=150, deadline=None)
@given(tracks(), st.integers(1, 12), st.booleans())
def test_every_stored_level_matches_the_oracle(track, chunk, with_values):
    s, e, ids, names = track
    values = [(i * 7919) % 1000 for i in range(len(s))] if with_values else None
    ev = lod.prepare(s, e, ids, pa.array(names, pa.string()), values)
    if ev.n == 0:
        assert list(lod_build.track_levels(ev, 0, 0)) == []
        return
    k_min = lod.finest_level(*ev.span(), len(s))
    levels = list(lod_build.track_levels(ev, 7, k_min, chunk=chunk))
    assert [t.column(dbs.LEVEL)[0].as_py() for t in levels] == list(range(k_min, lod.MAX_LEVEL + 1))
    assert levels[0].num_rows <= max(1, len(s) // lod.EVENTS_PER_FINEST_BUCKET)
    for table in levels[:8] + levels[-2:]:
        k = table.column(dbs.LEVEL)[0].as_py()
        buckets = table.column(dbs.BUCKET).to_numpy()
        assert np.all(np.diff(buckets) == 1), "levels are dense"
        # Whole-track totals are exact at every level.
        assert table.column(dbs.COUNT).to_numpy().sum() == len(s)
        assert table.column(dbs.BUSY_NS).to_numpy().sum() == oracle_bucket(
            (s.tolist(), e.tolist(), ids.tolist(), names), -(1 << 62), 1 << 62)[0]
        if values is not None:
            assert table.column(dbs.VALUE_SUM).to_numpy().sum() == pytest.approx(sum(values), rel=1e-12, abs=1e-9)
        else:
            assert table.column(dbs.VALUE_SUM).null_count == table.num_rows
        _check(table, track, k, values)


@settings(max_examples=60, deadline=None)
@given(tracks(), st.integers(0, 9), st.integers(-600, 600), st.integers(1, 40))
def test_bucketize_any_range_matches_the_oracle(track, k, offset, nb):
    s, e, ids, names = track
    values = [3 * i + 1 for i in range(len(s))]
    ev = lod.prepare(s, e, ids, pa.array(names, pa.string()), values)
    base = int(s.min()) if len(s) else 0
    b0 = (base + offset) >> k
    table = lod.bucketize(ev, k, b0, b0 + nb)
    assert table.column(dbs.BUCKET).to_pylist() == list(range(b0, b0 + nb))
    _check(table, track, k, values)


def test_names_sort_lexicographically_for_ties():
    s = np.array([0, 10], np.int64)
    ev = lod.prepare(s, s + 5, np.array([1, 2]), pa.array(["zeta", "alpha"]))
    table = lod.bucketize(ev, 5, 0, 1)
    assert table.column(dbs.TOP_NAME).to_pylist() == ["alpha"]
    assert table.column(dbs.LONGEST_ID).to_pylist() == [1]


def test_resolution_is_perfettos_bit_floor():
    assert lod.resolution_level(0, 1600 * 1000, 1600) == 9      # 1000 ns/px -> 512
    assert lod.resolution_level(0, 10, 1600) == 0               # below 1 ns/px -> 1 ns
    assert lod.resolution_level(0, 1 << 62, 1) == lod.MAX_LEVEL


def test_zero_length_event_at_the_very_end_is_indexed():
    s = np.array([0, 0, 0, 0, 0, 0, 3], np.int64)
    e = np.array([0, 0, 0, 0, 0, 2, 3], np.int64)
    ev = lod.prepare(s, e, np.arange(7), pa.array(["A"] * 7))
    k_min = lod.finest_level(*ev.span(), 7)
    for table in lod_build.track_levels(ev, 0, k_min):
        assert table.column(dbs.COUNT).to_numpy().sum() == 7
