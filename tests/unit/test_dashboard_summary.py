"""The summary page on a real trace: every chart and card is drawn, with values checked against the raw trace."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from dash import dcc, html

import profiler
from dashboard.pages import PageContext
from dashboard.pages import summary as summary_page
from dashboard.registry import TraceRegistry
from profiler.figures import summary as sfig
from profiler.figures.timefmt import format_duration
from tests.browser.trace_factory import write_kernel_trace
from tests.dash_components import walk
from tracer import TraceReader
from tracer import schema as ts


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = write_kernel_trace(tmp_path_factory.mktemp("summary") / "k.trace", iterations=120, cores=2)
    trace = profiler.open(path)
    yield path, trace, TraceRegistry([path], opener=lambda _p: trace)
    trace.close()


def _union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    order = np.argsort(starts, kind="stable")
    total, cur_s, cur_e = 0, None, None
    for s, e in zip(starts[order].tolist(), ends[order].tolist(), strict=True):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


def test_summary_page_draws_every_chart_with_the_raw_traces_values(served):
    path, trace, registry = served
    page = summary_page.layout(PageContext(registry, "t0", {}))
    assert {p.id for p in walk(page) if getattr(p, "id", None)} >= {"summary-cards", "summary-charts",
                                                                   "summary-analyses", "summary-source",
                                                                   "summary-memory"}
    # while a part is computed it says what, and that only the first visit pays for it
    waiting = [str(c.custom_spinner.children) for c in walk(page) if isinstance(c, dcc.Loading)]
    assert len(waiting) == 6 and all("first visit reads the whole trace" in w for w in waiting)
    assert any("breakdowns" in w for w in waiting)
    parts = [*walk(html.Div(summary_page.summary_cards(trace.summary()))),
             *walk(html.Div(summary_page.summary_charts(sfig.summary_inputs(trace))))]
    graphs = {g.id: g.figure for g in parts if isinstance(g, dcc.Graph) and str(g.id).startswith("summary-chart")}
    figs = {f.layout.title.text.split(" (the ")[0]: f.data[0] for f in graphs.values()}  # (less a cut's note)
    assert list(figs) == [sfig.ENGINE_TITLE, sfig.OPCODES_TITLE, sfig.OPERATORS_TITLE, sfig.QUEUES_TITLE,
                          sfig.FLOPS_TITLE]

    reader = TraceReader(path)
    inst = reader.read_table(ts.INSTRUCTION.name).to_pydict()
    dma = reader.read_table(ts.DMA_PACKET.name).to_pydict()
    spans = reader.read_table(ts.SPAN.name).to_pydict()
    start = min(min(t[ts.START_TS]) for t in (inst, dma, spans))     # the summary covers every timed event
    end = max(max(t[ts.END_TS]) for t in (inst, dma, spans))
    # Engine busy %: the union of each engine's intervals per core, over (total x cores).
    per_engine = defaultdict(int)
    for engine in set(inst[ts.ENGINE]):
        for core in (0, 1):
            sel = [i for i, (e, c) in enumerate(zip(inst[ts.ENGINE], inst[ts.PCORE_IDX], strict=True))
                   if e == engine and c == core]
            per_engine[engine] += _union_ns(np.array(inst[ts.START_TS])[sel], np.array(inst[ts.END_TS])[sel])
    util = dict(zip(figs[sfig.ENGINE_TITLE].y, figs[sfig.ENGINE_TITLE].x, strict=True))
    assert util == {e: pytest.approx(100 * busy / (2 * (end - start)), abs=1e-3) for e, busy in per_engine.items()}
    # Top opcode: MATMUL, its busy time the union of its intervals (both cores), drawn in seconds.
    opcodes = figs[sfig.OPCODES_TITLE]
    mm = [i for i, op in enumerate(inst[ts.OPCODE]) if op == "MATMUL"]
    mm_busy = _union_ns(np.array(inst[ts.START_TS])[mm], np.array(inst[ts.END_TS])[mm])
    assert opcodes.y[0] == "Tensor MATMUL" and opcodes.x[0] == pytest.approx(mm_busy / 1e9)
    assert list(opcodes.x) == sorted(opcodes.x, reverse=True)
    # Bytes per queue: the raw packets' transfer bytes, each core's queues apart (the trace has two cores)
    nbytes = defaultdict(int)
    for c, q, b in zip(dma[ts.PCORE_IDX], dma[ts.QUEUE_NAME], dma[ts.TRANSFER_BYTES], strict=True):
        nbytes[f"NC{c} {q}"] += b
    assert dict(zip(figs[sfig.QUEUES_TITLE].y, figs[sfig.QUEUES_TITLE].x, strict=True)) == nbytes
    # FLOPs by operator: each "layer / operator" sums its MATMULs' adjusted FLOPs.
    flops = defaultdict(int)
    for layer, op, f in zip(inst[ts.LAYER], inst[ts.HLO_NAME], inst[ts.ADJUSTED_FLOPS], strict=True):
        flops[f"{layer} / {op}"] += f
    shown = dict(zip(figs[sfig.FLOPS_TITLE].y, figs[sfig.FLOPS_TITLE].x, strict=True))
    assert shown == {k: v for k, v in flops.items() if v}
    assert set(figs[sfig.OPERATORS_TITLE].y) == set(shown)

    cards = {c.children[1].children: c.children[0].children for c in parts
             if getattr(c, "className", None) == "card"}
    assert cards["total time"] == format_duration(end - start)
    assert cards["instructions"] == f"{len(inst[ts.ID]):,}"
    assert cards["DMA bytes"].endswith("B") and "HFU" in cards


def test_each_part_is_computed_once_per_trace():
    from dashboard.computed import ComputedCache

    cache = ComputedCache()
    calls = []
    for _ in range(3):
        assert cache.get("t0", "charts", lambda: calls.append(1) or "drawn") == "drawn"
    assert cache.get("t1", "charts", lambda: "other") == "other" and len(calls) == 1
    with pytest.raises(ZeroDivisionError):
        cache.get("t2", "cards", lambda: 1 / 0)
    assert cache.get("t2", "cards", lambda: "retried") == "retried"      # a failure is not remembered
