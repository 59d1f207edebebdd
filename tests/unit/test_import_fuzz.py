"""Fuzzing the JSON and Parquet readers: damaged input is read or refused with a TrnprofError, never a crash."""

from __future__ import annotations

import gzip
import io
import json
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from profiler.importers.chrome_json import ChromeJsonSource
from profiler.importers.neuron_json import NeuronJsonSource
from profiler.importers.neuron_parquet import NeuronParquetSource
from tracer import schema
from tracer.errors import TrnprofError

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

with gzip.open(DATA / "alexnet_flows.json.gz") as _f:
    _EVENTS = json.load(_f)["traceEvents"]
# A small, varied sample: metadata, complete events, instants and flows.
SAMPLE = json.dumps({"traceEvents": [e for e in _EVENTS if e["ph"] in "Mi"] + [
    e for e in _EVENTS if e["ph"] in "Xsf"][:60] + [
    {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 5}, {"ph": "E", "pid": 1, "tid": 1, "ts": 6},
    {"ph": "C", "name": "c", "pid": 1, "ts": 7, "args": {"v": 1}},
    {"ph": "b", "name": "a", "id": 1, "cat": "x", "pid": 1, "ts": 8}]}).encode()

mutation = st.tuples(st.sampled_from(["flip", "insert", "delete", "truncate"]), st.floats(0, 1),
                     st.binary(min_size=1, max_size=4))


def mutate(data: bytes, ops: list[tuple[str, float, bytes]]) -> bytes:
    buf = bytearray(data)
    for kind, where, blob in ops:
        if not buf:
            break
        i = min(int(where * len(buf)), len(buf) - 1)
        if kind == "flip":
            buf[i] ^= blob[0] or 1
        elif kind == "insert":
            buf[i:i] = blob
        elif kind == "delete":
            del buf[i:i + len(blob)]
        else:
            del buf[i:]
    return bytes(buf)


def check_tables(source) -> None:
    """Read everything; every batch must be well-formed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            for name, batch in source.read():
                if name in schema.TABLES_BY_NAME:
                    spec = schema.table_spec(name)
                    for col in spec.required:
                        assert batch.column(col).null_count == 0, (name, col)
                    if spec.kind == "interval" and batch.num_rows:
                        assert pa.compute.all(pa.compute.less_equal(batch.column("start_ts"),
                                                                    batch.column("end_ts"))).as_py()
        except TrnprofError as exc:
            assert str(exc).startswith(str(source.path)) or str(source.path) in str(exc)


@_FUZZ
@given(ops=st.lists(mutation, min_size=1, max_size=4), block=st.sampled_from([64, 1000, 1 << 20]))
def test_fuzzed_chrome_json(tmp_path, ops, block):
    path = tmp_path / "t.json"
    path.write_bytes(mutate(SAMPLE, ops))
    check_tables(ChromeJsonSource(path, block_bytes=block))


@_FUZZ
@given(events=st.lists(st.dictionaries(
    st.sampled_from(["ph", "name", "ts", "dur", "pid", "tid", "id", "bp", "s", "args", "cat"]),
    st.one_of(st.sampled_from(["X", "B", "E", "i", "C", "M", "s", "t", "f", "b", "e", "n", "P", "g", "p"]),
              st.integers(-10**20, 10**20), st.floats(allow_nan=False), st.none(), st.booleans(), st.text(max_size=3),
              st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))),
    max_size=25))
def test_events_with_arbitrary_field_types(tmp_path, events):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    check_tables(ChromeJsonSource(path, block_bytes=256))


@_FUZZ
@given(ops=st.lists(mutation, min_size=1, max_size=3))
def test_fuzzed_legacy_neuron_json(tmp_path, ops):
    doc = {"summary": [{"total_time": 1}], "instruction": [
        {"timestamp": i * 10, "duration": 5, "label": "Vector", "opcode": "OP", "operands": "S[1]"} for i in range(30)]}
    path = tmp_path / "p.json"
    path.write_bytes(mutate(json.dumps(doc).encode(), ops))
    check_tables(NeuronJsonSource(path, block_bytes=128))


_PARQUET = io.BytesIO()
pq.write_table(pa.table({"id": list(range(50)), "start_ts": list(range(50)), "end_ts": list(range(1, 51)),
                         "duration_ns": [1] * 50, "engine": ["tensor"] * 50, "opcode": ["A"] * 50,
                         "operands": [""] * 50, "pc": list(range(50))}), _PARQUET, row_group_size=10)


@_FUZZ
@given(ops=st.lists(mutation, min_size=1, max_size=3))
# a footer whose integer column claims more than 64 bits: pyarrow raised ArrowNotImplementedError, which the
# importer let through as a traceback
@example(ops=[("flip", 0.974609375, b"\x02")])
def test_fuzzed_parquet(tmp_path, ops):
    d = tmp_path / "prof"
    d.mkdir(exist_ok=True)
    pq.write_table(pa.table({"profile_schema_version": ["7.4.0"]}), d / "Metadata.parquet")
    (d / "Instruction.parquet").write_bytes(mutate(_PARQUET.getvalue(), ops))
    check_tables(NeuronParquetSource(d))
