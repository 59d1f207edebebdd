"""Trace._repr_html_: name, kernel, architecture, duration, event counts and per-engine utilization — exact
numbers, every string escaped, and a message instead of an exception when the trace cannot be read."""

from __future__ import annotations

import html
import re

import pytest

import profiler
from profiler import db_schema as dbs
from profiler.figures.timefmt import format_duration
from tests.conftest import instruction_columns
from tracer import TraceWriter
from tracer import schema as ts


@pytest.fixture(scope="module")
def trace(notebook_synth_trace):
    with profiler.open(notebook_synth_trace) as t:
        yield t


def test_shows_the_facts_and_exact_engine_utilization(trace):
    page = trace._repr_html_()
    t0, t1 = trace.time_range
    tracks = trace.tracks().to_pylist()
    assert html.escape(trace.name) in page
    assert "trn2" in page and trace.metadata["profile_name"] in page
    assert f"<td style='text-align:left'>{format_duration(t1 - t0)}</td>" in page
    instructions = sum(r[dbs.EVENT_COUNT] for r in tracks if r[dbs.TABLE] == ts.INSTRUCTION.name)
    packets = sum(r[dbs.EVENT_COUNT] for r in tracks if r[dbs.TABLE] == ts.DMA_PACKET.name)
    assert f"{instructions:,} instructions, {packets:,} DMA packets" in page
    engines = [r for r in tracks if r[dbs.KIND] == "engine"]
    assert len({r[dbs.CORE] for r in engines}) == 2
    for r in engines:
        busy = trace.busy_ns(r[dbs.TRACK_ID], t0, t1)
        label = f"NC{r[dbs.CORE]} {r[ts.NAME]}"
        row = re.search(rf"<tr><td>{label}</td><td>([^<]*)</td><td>([^<]*)%</td>", page)
        assert row, label
        assert row.group(1) == format_duration(busy)
        assert float(row.group(2)) == pytest.approx(100 * busy / (t1 - t0), abs=0.051)
    assert f"{packets:,} packets" in page


def test_every_string_is_escaped(tmp_path):
    hostile = "<img src=x onerror=alert(1)>"
    path = tmp_path / f"{hostile}.trace"
    with TraceWriter(path, metadata={"arch": "trn2\"><script>alert(2)</script>", "is_simulation": True,
                                     "profile_name": "<script>alert(3)</script>",
                                     "kernel_params": "{\"a\": \"</table><b>\"}"},
                     background_flush=False) as w:
        columns = instruction_columns(50)
        columns[ts.ENGINE] = ["<i>Tensor</i>"] * 50
        w.append(ts.INSTRUCTION.name, columns)
    with profiler.open(path) as t:
        page = t._repr_html_()
    assert "<script>" not in page and "<img" not in page and "<i>" not in page and "</table><b>" not in page
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;i&gt;Tensor&lt;/i&gt;" in page


def test_a_closed_trace_shows_a_message_not_a_traceback(notebook_synth_trace, tmp_path):
    from profiler.synth import synth_trace

    t = profiler.open(synth_trace(tmp_path / "tiny.trace", events=500, tracks=3))
    t.close()
    page = t._repr_html_()
    assert "closed" in page and "<table" not in page
