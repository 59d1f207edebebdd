"""The compiled JSON kernel against oracles: Python's json module and decimal for values, and the vectorised path
(``kernel=False``) for whole imports, including damaged input, faults and the blocks the kernel hands back."""

from __future__ import annotations

import decimal
import gzip
import json
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler.importers import json_kernel
from profiler.importers.chrome_decode import KEY_SPEC, exact_times
from profiler.importers.chrome_json import ChromeJsonSource
from profiler.importers.decimal_text import decimal_text_to_ns
from profiler.importers.json_stream import JsonArrayStream
from tests.unit.test_import_fuzz import mutate, mutation
from tracer.errors import TrnprofError

pytestmark = pytest.mark.skipif(not json_kernel.available(),
                                reason="the compiled kernel is unavailable (numba missing, or TRNPROF_JSON_KERNEL=0)")

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
KEYS = ("ph", "name", "ts", "dur", "pid", "args", "x")
SPEC = json_kernel.KeySpec(KEYS, (-1, -1, 3, 3, 0, -1, -1))

text = st.text(alphabet=st.sampled_from([*'ab"\\{}[],: \n\t/é€😀', "\x01", "\x7f"]), max_size=8)
number = st.one_of(st.integers(-10**20, 10**20), st.floats(allow_nan=False, allow_infinity=False),
                   st.decimals(allow_nan=False, allow_infinity=False, places=6).map(float))
scalar = st.one_of(st.none(), st.booleans(), number, text)
value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(text, inner, max_size=3)), max_leaves=6)
event = st.dictionaries(st.sampled_from([*KEYS, "other", "p\\u0068"]), value, max_size=6)


def _dump(events: list[dict], style: int) -> bytes:
    if style == 0:
        return json.dumps(events, ensure_ascii=False, separators=(",", ":")).encode()
    if style == 1:
        return json.dumps(events, ensure_ascii=False, indent=2).encode()
    return json.dumps(events).encode()


def _blocks(path: Path, kernel: bool, block: int) -> tuple[list[dict], JsonArrayStream]:
    """Every object's wanted members (raw JSON text) and exact times, read through the stream."""
    out = []
    stream = JsonArrayStream(path, "traceEvents", block_bytes=block, keys=SPEC, kernel=kernel)
    for b in stream.blocks():
        cols = {k: b.raw(k).to_pylist() for k in KEYS}
        for key in ("ts", "dur"):
            ns, ok = exact_times(b, key)
            cols[key + "_ns"] = [int(v) if good else None for v, good in zip(ns, ok, strict=True)]
        out.extend({k: cols[k][i] for k in cols} for i in range(len(b)))
    return out, stream


@_SETTINGS
@given(events=st.lists(event, max_size=12), style=st.integers(0, 2), block=st.integers(16, 400))
def test_kernel_members_and_times_match_the_vectorised_path_and_json(tmp_path, events, style, block):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"otherData": {"a": [1, "]"]}, "traceEvents": ' + _dump(events, style) + b', "x": 1}')
    fast, stream = _blocks(path, True, block)
    slow, _ = _blocks(path, False, block)
    assert stream.uses_kernel and stream.fault is None
    assert fast == slow
    assert len(fast) == len(events)
    for got, want in zip(fast, events, strict=True):
        for k in KEYS:
            assert (json.loads(got[k]) if got[k] is not None else None) == want.get(k)


plain_decimal = st.decimals(min_value=-10**18, max_value=10**18, allow_nan=False, allow_infinity=False, places=9)


@settings(max_examples=150, deadline=None)
@given(st.one_of(plain_decimal.map(str), plain_decimal.map("{:E}".format), st.integers(-2**64, 2**64).map(str),
                 st.sampled_from(["-0", "0.0005", "0.0015", "0.0025", "-0.0025", "4611686018427387.903",
                                  "4611686018427387.904", "1695835572943558.123", "1e3", "12.3456789e2"])))
def test_kernel_numbers_are_exact_or_left_to_the_decimal_path(txt):
    res = json_kernel.ElementScanner(SPEC).scan(b'{"ts": %s, "pid": %s}]' % (txt.encode(), txt.encode()), 0, False)
    assert (res.count, res.status) == (1, json_kernel.ARRAY_END)
    ts_state, pid_state = int(res.number_state[0, 0]), int(res.number_state[2, 0])
    expected, ok = decimal_text_to_ns(pa.array([txt]))
    if ts_state == json_kernel.NUM_OK:
        assert ok[0] and int(res.number[0, 0]) == int(expected[0])
        exact = (decimal.Decimal(txt) * 1000).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_EVEN)
        assert int(res.number[0, 0]) == int(exact) and abs(int(exact)) < 2**62
    else:   # the exact decimal path decides: only exponents, huge values or digits beyond int64 come here
        assert ts_state == json_kernel.NUM_SLOW
        assert "e" in txt.lower() or abs(decimal.Decimal(txt)) * 1000 >= 2**62 - 1
    if pid_state == json_kernel.NUM_OK:
        assert str(int(res.number[2, 0])) == txt   # an integer pid keeps its text
    else:
        assert not txt.lstrip("-").isdigit() or txt == "-0" or abs(int(txt)) >= 2**62


def _import(path: Path, kernel: bool, block: int) -> tuple[dict[str, list[dict]] | str, list[str]]:
    """All tables as rows (or the error), and the warnings, of one import."""
    tables: dict[str, list[dict]] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for name, batch in ChromeJsonSource(path, block_bytes=block, kernel=kernel).read():
                tables.setdefault(name, []).extend(batch.to_pylist())
        except TrnprofError as exc:
            return f"{type(exc).__name__}: {exc}", []
    return tables, sorted(str(w.message) for w in caught)


with gzip.open(DATA / "alexnet_flows.json.gz") as _f:
    _EVENTS = json.load(_f)["traceEvents"]
SAMPLE = json.dumps({"traceEvents": [e for e in _EVENTS if e["ph"] in "Mi"] + [
    e for e in _EVENTS if e["ph"] in "Xsf"][:40] + [
    {"ph": "B", "name": "b", "pid": 1, "tid": "main", "ts": "5"}, {"ph": "E", "pid": 1, "tid": "main", "ts": 6e0},
    {"ph": "C", "name": "c", "pid": 1, "ts": 7, "args": {"v": 1, "w": "x"}},
    {"ph": "b", "name": "a\u00e9\\n", "id": 1, "cat": "x", "pid": 1.5, "ts": 8.0000005}]}, indent=1).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(mutation, max_size=3), block=st.sampled_from([64, 700, 1 << 20]))
def test_damaged_chrome_json_imports_the_same_with_and_without_the_kernel(tmp_path, ops, block):
    path = tmp_path / "t.json"
    path.write_bytes(mutate(SAMPLE, ops))
    assert _import(path, True, block) == _import(path, False, block)


@pytest.mark.parametrize("body", [
    b'[{"ph": "X", "name": "\\ud83d\\ude00", "ts": 1}, {"ph": "X", "name": "b", "ts": 2}]',   # surrogate pair
    b'[{"ph": "X", "name": "a", "ts": 1, "args": ' + b'[' * 300 + b']' * 300 + b'}]',     # deeper than the stack
    b'[{"ph": "X", "name": "a", "ts": 1}, 5, "x", {"ph": "X", "name": "b", "ts": 2}]',      # non-object elements
    b'[{"ph": "X", "name": "a", "ts": 1}, {"ph": "X", "name": "\\ud800", "ts": 2}]',          # a lone surrogate
])
def test_input_the_kernel_leaves_alone_goes_to_the_vectorised_path(tmp_path, body):
    path = tmp_path / "t.json"
    path.write_bytes(body)
    stream = JsonArrayStream(path, None, keys=KEY_SPEC, kernel=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the lone surrogate is a fault, compared below
        for _ in stream.blocks():
            pass
    assert stream.general_blocks >= 1
    assert _import(path, True, 1 << 20) == _import(path, False, 1 << 20)


def test_blocks_of_tiny_objects_grow_the_kernel_buffers(tmp_path):
    n = 70_000   # more objects than the first buffers hold
    path = tmp_path / "t.json"
    path.write_bytes(b"[" + b",".join([b"{}"] * (n - 1) + [b'{"ts": 1.5}']) + b"]")
    stream = JsonArrayStream(path, None, block_bytes=1 << 20, keys=SPEC, kernel=True)
    blocks = list(stream.blocks())
    assert sum(len(b) for b in blocks) == n and stream.general_blocks == 0
    ns, ok = exact_times(blocks[-1], "ts")
    assert ok.tolist()[-1] and int(ns[-1]) == 1500 and not ok[:-1].any()


def test_integer_and_string_pids_share_a_thread(tmp_path):
    events = [{"ph": "X", "name": "a", "pid": 7, "tid": 1, "ts": 0, "dur": 1},
              {"ph": "X", "name": "b", "pid": "7", "tid": "1", "ts": 2, "dur": 1},
              {"ph": "X", "name": "c", "pid": -0, "tid": 1, "ts": 4, "dur": 1}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    tables, _ = _import(path, True, 1 << 20)
    rows = {r["name"]: r for r in tables["Span"]}   # type: ignore[index]
    assert rows["a"]["track_group"] == rows["b"]["track_group"] == "pid 7"
    assert rows["a"]["track_name"] == rows["b"]["track_name"] == "tid 1"
    assert np.int64(rows["c"]["start_ts"]) == 4000


def test_flow_identities_are_the_id_texts_whatever_their_json_type(tmp_path):
    events = [{"ph": "X", "name": f"s{i}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5} for i in range(6)]
    events += [
        {"ph": "s", "id": 5, "cat": "c", "pid": 1, "tid": 1, "ts": 1},       # 5 and "5" are one flow ...
        {"ph": "f", "id": "5", "cat": "c", "pid": 1, "tid": 1, "ts": 11, "bp": "e"},
        {"ph": "s", "id": 5.0, "cat": "c", "pid": 1, "tid": 1, "ts": 21},    # ... 5.0 is another,
        {"ph": "f", "id": "5.0", "cat": "c", "pid": 1, "tid": 1, "ts": 31, "bp": "e"},
        {"ph": "s", "id": 5, "cat": "d", "pid": 1, "tid": 1, "ts": 41},      # and another category another
        {"ph": "f", "id2": {"local": "0x5"}, "cat": "d", "pid": 1, "tid": 1, "ts": 51, "bp": "e"},
        {"ph": "s", "id2": {"local": "0x5"}, "cat": "d", "pid": 1, "tid": 1, "ts": 42},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    fast = _import(path, True, 1 << 20)
    assert fast == _import(path, False, 1 << 20)
    tables = fast[0]
    name = {r["id"]: r["name"] for r in tables["Span"]}   # type: ignore[index]
    edges = sorted((name[r["out_id"]], name[r["in_id"]]) for r in tables["Flow"])   # type: ignore[index]
    assert edges == [("s0", "s1"), ("s2", "s3"), ("s4", "s5")]


def test_flow_ids_that_only_look_like_numbers_are_texts(tmp_path):
    """Ids that ``str.isdigit`` passes but ``int`` rejects (``"--5"``, ``"²"``) or reads differently (``"٣"``) are
    flow ids of their own, not numbers: the import does not fail (it did, as an internal error) and binds them."""
    events = [{"ph": "X", "name": f"s{i}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5} for i in range(6)]
    for k, ident in enumerate(("--5", "\u00b2", "\u0663")):
        events += [{"ph": "s", "id": ident, "cat": "c", "pid": 1, "tid": 1, "ts": 20 * k + 1},
                   {"ph": "f", "id": ident, "cat": "c", "pid": 1, "tid": 1, "ts": 20 * k + 11, "bp": "e"}]
    events.append({"ph": "f", "id": "3", "cat": "c", "pid": 1, "tid": 1, "ts": 55, "bp": "e"})  # not "\u0663"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    fast = _import(path, True, 1 << 20)
    assert fast == _import(path, False, 1 << 20)
    name = {r["id"]: r["name"] for r in fast[0]["Span"]}   # type: ignore[index]
    edges = sorted((name[r["out_id"]], name[r["in_id"]]) for r in fast[0]["Flow"])   # type: ignore[index]
    assert edges == [("s0", "s1"), ("s2", "s3"), ("s4", "s5")]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-2, 2), st.sampled_from([0, 7, -2**63, 2**63 - 1])), max_size=40))
def test_pair_codes_number_distinct_pairs_in_order_of_first_appearance(pairs):
    """The compiled hashing (with its shortcut for runs of one pair) matches a dictionary built row by row."""
    json_kernel.available()
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    seen: dict[tuple[int, int], int] = {}
    want = [seen.setdefault(p, len(seen)) for p in pairs]
    first = [pairs.index(p) for p in seen]
    codes, got_first = json_kernel.pair_codes(a, b)
    assert codes.tolist() == want and got_first.tolist() == first
