"""JSON importers at their limits: nesting too deep to decode is one error naming the file (never a
RecursionError), and events ending beyond the database's ±2^62 ns are skipped and counted, as documented."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

from profiler.cli import main
from profiler.importers.chrome_json import ChromeJsonSource
from profiler.importers.common import TraceImportWarning
from profiler.importers.json_stream import MAX_DEPTH
from profiler.importers.neuron_json import NeuronJsonSource
from tracer.errors import TraceFormatError

DEEP = 100_000


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _x(args: str = "{}", ts: str = "1", dur: str = "2") -> str:
    return f'{{"ph":"X","name":"a","pid":1,"tid":1,"ts":{ts},"dur":{dur},"args":{args}}}'


CASES = {
    "events.json": '{"traceEvents":' + _nested(DEEP) + "}",
    "args.json": '{"traceEvents":[' + _x(_nested(DEEP)) + "]}",
    "args_object.json": '{"traceEvents":[' + _x('{"a":' + _nested(DEEP) + "}") + "]}",
    "later.json": '{"traceEvents":[' + ",".join([_x()] * 500 + [_x(_nested(DEEP))]) + "]}",
    "neuron.json": '{"instruction":[{"opcode":"x","label":"Tensor","timestamp":1,"duration":3,"deep":'
                   + _nested(DEEP) + "}]}",
    "neuron_summary.json": '{"summary":' + _nested(DEEP) + ',"instruction":[{"opcode":"x","label":"Tensor",'
                           '"timestamp":1,"duration":3}]}',
    "neuron_summary_after.json": '{"instruction":[{"opcode":"x","label":"Tensor","timestamp":1,"duration":3}],'
                                 '"summary":' + _nested(DEEP) + "}",
}


def _read(path: Path, **kwargs) -> dict[str, pa.Table]:
    cls = NeuronJsonSource if path.name.startswith("neuron") else ChromeJsonSource
    out: dict[str, list[pa.RecordBatch]] = {}
    for name, batch in cls(path, **kwargs).read():
        out.setdefault(name, []).append(batch)
    return {k: pa.Table.from_batches(v) for k, v in out.items()}


@pytest.mark.parametrize("kernel", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_nesting_too_deep_is_one_error_naming_the_file(tmp_path, name, kernel, monkeypatch):
    monkeypatch.setenv("TRNPROF_JSON_KERNEL", "1" if kernel else "0")
    path = tmp_path / name
    path.write_text(CASES[name])
    with pytest.raises(TraceFormatError, match=rf"{name}: JSON nested deeper than {MAX_DEPTH} levels at byte"):
        _read(path, block_bytes=4096)


def test_nesting_too_deep_on_the_command_line_exits_2_in_one_line(tmp_path, capsys):
    path = tmp_path / "deep.json.gz"
    path.write_bytes(gzip.compress(CASES["events.json"].encode()))
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("trnprof: error: ") and "deep.json.gz" in err, err
    assert "RecursionError" not in err and "internal error" not in err


def test_nesting_up_to_the_limit_is_read(tmp_path):
    inner = MAX_DEPTH - 4  # the event sits at depth 2, its args object at 3
    path = tmp_path / "ok.json"
    path.write_text('{"traceEvents":[' + _x('{"a":' + _nested(inner) + "}") + "]}")
    span = _read(path)["Span"].to_pylist()[0]
    assert span["args"].count("[") == inner


@pytest.mark.parametrize("kernel", [False, True])
def test_events_ending_beyond_2_62_ns_are_skipped_and_counted(tmp_path, monkeypatch, kernel):
    """docs/importers.md: times beyond ±2^62 ns make the event invalid (skipped, counted) — its end too."""
    monkeypatch.setenv("TRNPROF_JSON_KERNEL", "1" if kernel else "0")
    limit_us = 2**62 // 1000
    events = [_x(ts="10", dur="5"), _x(ts=str(limit_us - 10), dur="5"), _x(ts=str(limit_us - 10), dur="20"),
              _x(ts="100", dur=str(limit_us))]
    path = tmp_path / "far.json"
    path.write_text('{"traceEvents":[' + ",".join(events) + "]}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tables = _read(path)
    messages = [str(w.message) for w in caught if isinstance(w.message, TraceImportWarning)]
    assert len(messages) == 1 and "2 X events ending beyond 2**62 ns (skipped)" in messages[0], messages
    spans = tables["Span"].sort_by("start_ts").to_pylist()
    assert [(s["start_ts"], s["end_ts"]) for s in spans] == [(10_000, 15_000),
                                                             ((limit_us - 10) * 1000, (limit_us - 5) * 1000)]
    assert tables["Metadata"].column("last_hw_timestamp").to_pylist() == [(limit_us - 5) * 1000]
