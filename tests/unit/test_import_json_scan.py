"""The vectorised JSON scanner and the streaming array reader, against Python's json module as the oracle."""

from __future__ import annotations

import decimal
import gzip
import json
import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler.importers.decimal_text import decimal_text_to_ns
from profiler.importers.json_stream import JsonArrayStream, top_level_keys
from tracer.errors import TraceFormatError, TruncatedTraceWarning

KEYS = ["ph", "name", "ts", "args", "x", "id", "s"]

text = st.text(alphabet=st.sampled_from([*'ab"\\{}[],: \n\t/é€😀', "\x01"]), max_size=8)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**15, 10**15),
                   st.floats(allow_nan=False, allow_infinity=False, width=32), text)
value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(text, inner, max_size=3)), max_leaves=6)
event = st.dictionaries(st.sampled_from(KEYS), value, max_size=6)


def _dump(events: list[dict], style: int) -> bytes:
    if style == 0:
        body = json.dumps(events, ensure_ascii=False, separators=(",", ":"))
    elif style == 1:
        body = json.dumps(events, ensure_ascii=False, indent=2)
    else:
        body = json.dumps(events)
    return body.encode()


def _read(path, key=None, block_bytes=64, keys=KEYS):
    """Every object's members as (kind, text) per key, read through the stream."""
    out = []
    stream = JsonArrayStream(path, key, block_bytes=block_bytes)
    for block in stream.blocks():
        block.members(tuple(keys))
        cols = {k: block.raw(k).to_pylist() for k in keys}
        for i in range(len(block)):
            out.append({k: cols[k][i] for k in keys if cols[k][i] is not None})
    return out, stream


def _oracle(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k in KEYS and v is not None} for e in events]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(event, max_size=12), style=st.integers(0, 2), block=st.integers(16, 300),
       wrap=st.booleans())
def test_members_match_json_module(tmp_path, events, style, block, wrap):
    body = _dump(events, style)
    data = b'{"otherData": {"a": [1, "]"]}, "traceEvents": ' + body + b', "x": 1}' if wrap else body
    path = tmp_path / "t.json"
    path.write_bytes(data)
    got, stream = _read(path, "traceEvents", block)
    assert stream.fault is None
    assert len(got) == len(events)
    for g, e in zip(got, _oracle(events), strict=True):
        assert {k: json.loads(v) for k, v in g.items()} == e


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(event, min_size=1, max_size=8), cut=st.floats(0, 1), block=st.integers(16, 200))
def test_truncated_array_keeps_every_complete_object(tmp_path, events, cut, block):
    body = json.dumps(events, indent=2).encode()   # ASCII, so byte and character positions agree
    n = int(len(body) * cut)
    path = tmp_path / "t.json"
    path.write_bytes(body[:n])
    # Oracle: the objects complete before the cut are those whose text ends before it.
    complete = 0
    pos = body.index(b"[") + 1 if b"[" in body[:n] else None
    if pos is not None:
        dec = json.JSONDecoder()
        while True:
            while pos < len(body) and body[pos:pos + 1] in b" \n,":
                pos += 1
            if pos >= n or body[pos:pos + 1] == b"]":
                break
            _, end = dec.raw_decode(body.decode(), pos)
            if end > n:
                break
            complete += 1
            pos = end
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got, stream = _read(path, None, block)
        except TraceFormatError as exc:
            assert n == 0 or not body[:n].strip(), exc
            return
    assert len(got) == complete
    for g, e in zip(got, _oracle(events)[:complete], strict=True):
        assert {k: json.loads(v) for k, v in g.items()} == e
    rest = body[:n].rstrip()
    if complete < len(events) and rest and not rest.endswith((b"}", b",", b"[")):
        assert stream.fault is not None
        assert any(isinstance(w.message, TruncatedTraceWarning) for w in caught)


def test_invalid_json_mid_file_keeps_events_before_and_names_the_byte(tmp_path):
    good = [{"ph": "X", "name": f"e{i}", "ts": i} for i in range(50)]
    text = json.dumps(good)
    bad_at = text.index('"e30"')
    data = (text[:bad_at] + '"e30" "oops"' + text[bad_at + 5:]).encode()
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    with pytest.warns(TruncatedTraceWarning, match=r"bad\.json: invalid JSON in event 30: .* at byte "):
        got, stream = _read(path, None, 256)
    assert [json.loads(g["name"]) for g in got] == [f"e{i}" for i in range(30)]
    assert f"at byte {bad_at + 6:,};" in stream.fault   # the byte where "oops" starts


def test_gzip_input_and_missing_closing_bracket(tmp_path):
    events = [{"ph": "X", "ts": i, "name": "n"} for i in range(100)]
    text = json.dumps(events)[:-1] + ",\n"   # no closing bracket, trailing comma: a crash-safe writer's output
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, stream = _read(path, None, 100)
    assert len(got) == 100 and stream.fault is None


def test_corrupt_gzip_keeps_what_decompressed(tmp_path):
    events = [{"ph": "X", "ts": i, "name": "n" * 50} for i in range(2000)]
    packed = gzip.compress(json.dumps(events).encode())
    path = tmp_path / "t.json.gz"
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.warns(TruncatedTraceWarning, match="compressed stream ends early"):
        got, _ = _read(path, None, 4096)
    assert 0 < len(got) < 2000
    assert [json.loads(g["ts"]) for g in got] == list(range(len(got)))


def test_a_truncated_gzip_keeps_the_events_of_the_block_it_cuts(tmp_path):
    """The cut falls inside the first (1 MiB) block read: what decompressed of it is kept (reading the gzip file a
    block at a time lost the whole block, and the input read as empty)."""
    events = [{"ph": "X", "ts": i, "name": "n" * 50} for i in range(2000)]
    packed = gzip.compress(json.dumps(events).encode())
    path = tmp_path / "t.json.gz"
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.warns(TruncatedTraceWarning, match="compressed stream ends early"):
        got, _ = _read(path, None, 1 << 20)
    assert 0 < len(got) < 2000
    assert [json.loads(g["ts"]) for g in got] == list(range(len(got)))


def test_concatenated_gzip_members_read_as_one_stream(tmp_path):
    events = [{"ph": "X", "ts": i, "name": "n"} for i in range(300)]
    text = json.dumps(events).encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, stream = _read(path, None, 256)
    assert len(got) == 300 and stream.fault is None


@pytest.mark.parametrize(("data", "match"), [
    (b"", "is empty"),
    (b"hello", "not JSON"),
    (b'{"a": 1}', "without a 'traceEvents' list"),
    (b'{"traceEvents": 5}', "'traceEvents' is not a list"),
])
def test_not_a_trace_is_a_one_line_error(tmp_path, data, match):
    path = tmp_path / "x.json"
    path.write_bytes(data)
    with pytest.raises(TraceFormatError, match=match):
        _read(path, "traceEvents")


def test_top_level_keys_of_a_head():
    assert top_level_keys(b'{"schemaVersion": 1, "deviceProperties": [{"a": "}"}], "traceEvents": [') == [
        "schemaVersion", "deviceProperties", "traceEvents"]
    assert top_level_keys(b"[1, 2]") is None


@settings(max_examples=200, deadline=None)
@given(st.decimals(min_value=-10**12, max_value=10**12, allow_nan=False, allow_infinity=False, places=6),
       st.sampled_from(["{}", "{:E}", "{:e}"]))
def test_decimal_microseconds_to_nanoseconds_exactly(value, fmt):
    txt = fmt.format(value)
    got, ok = decimal_text_to_ns(pa.array([txt]))
    expected = (decimal.Decimal(txt) * 1000).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_EVEN)
    assert ok[0]
    assert int(got[0]) == int(expected)


def test_decimal_conversion_flags_bad_values():
    got, ok = decimal_text_to_ns(pa.array(["1695835572943558.123", "abc", None, "1e30", "7"]))
    assert got[0] == 1695835572943558123
    assert ok.tolist() == [True, False, False, False, True]
    assert got[4] == 7000
    assert np.asarray(got).dtype == np.int64
