"""``trnprof export`` option parsing and the exporters' pure helpers (no database needed)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler.cli.export import parse_time
from profiler.errors import CommandError
from profiler.exporters.chrome import json_strings, micros
from profiler.exporters.common import TimeWindow


@pytest.mark.parametrize(("text", "ns"), [("1500", 1500), ("1.5us", 1500), ("1.5µs", 1500), ("20ms", 20_000_000),
                                          ("2s", 2_000_000_000), (" 0.000000001 s ", 1), ("-3ns", -3)])
def test_times_take_units(text, ns):
    assert parse_time(text, "--start") == ns


@pytest.mark.parametrize("text", ["", "soon", "1.5 parsecs", "1e3", "--2"])
def test_bad_times_are_one_line_errors(text):
    with pytest.raises(CommandError, match="--end .*expected a time"):
        parse_time(text, "--end")


def test_window_conditions():
    with pytest.raises(CommandError, match="empty window"):
        TimeWindow(10, 10)
    assert TimeWindow().interval_sql() == ("TRUE", [])
    cond, params = TimeWindow(5, 9).interval_sql()
    assert params == [9, 5, 5] and "<" in cond


@given(st.lists(st.integers(-2**62, 2**62), max_size=20))
def test_micros_are_exact_decimal_texts(values):
    texts = micros(np.array(values, np.int64)).to_pylist()
    for v, t in zip(values, texts, strict=True):
        whole, _, frac = t.lstrip("-").partition(".")
        assert len(frac) == 3
        got = (int(whole) * 1000 + int(frac)) * (-1 if t.startswith("-") else 1)
        assert got == v


@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=20))
def test_json_strings_round_trip_through_the_json_module(values):
    out = json_strings(pa.array(values, pa.string())).to_pylist()
    for v, o in zip(values, out, strict=True):
        assert (o is None) if v is None else json.loads(o) == v
