"""Charts and headline figures of a trace summary, for the dashboard's summary page and ``Trace.summary_figures``.

The input is :class:`SummaryInputs`: the dict exactly as ``Trace.summary()`` returns it (keys documented in
``docs/database.md``: ``total_time_ns``, ``engines.<name>.{active_time_ns, utilization_pct, instruction_count}``,
``hfu_pct``, ``mfu_pct``, ``dma.{active_time_ns, transfer_bytes, throughput_gbps}``) plus the breakdown tables of
:mod:`profiler.analyses` (``time_by(trace, "opcode")``, ``time_by(trace, "operator")``, ``queue_table(trace)``).
:func:`summary_inputs` gathers them from a trace — the one place the summary is read for drawing — and the
builders below are pure: inputs in, figures or plain values out.  A builder returns None when its data are absent
(no Tensor FLOPs, no operators, no DMA).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.figures.palette import CategoryPalette
from profiler.figures.timefmt import NS_PER_S
from profiler.sort_keys import natural_key

if TYPE_CHECKING:
    from profiler.trace import Trace

#: Rows kept per breakdown chart (the title says how many were left out).
TOP_ROWS = 15
#: Rows of the DMA queue chart: two cores' or two engines' 16 queues.
QUEUE_ROWS = 32
_CHART_HEIGHT = 320
#: Height of a bar beyond :data:`TOP_ROWS` bars (the chart grows to keep its labels readable).
_ROW_PX = 18

#: Chart titles, in the order :func:`summary_figures` returns them.
ENGINE_TITLE = "Engine utilization"
OPCODES_TITLE = "Top opcodes by busy time"
OPERATORS_TITLE = "Top operators by busy time"
QUEUES_TITLE = "DMA bytes per queue"
FLOPS_TITLE = "FLOPs by operator"


@dataclass(frozen=True)
class SummaryInputs:
    """What the summary charts draw: ``Trace.summary()`` and the analyses' breakdown tables (None when absent)."""

    summary: Mapping[str, Any]
    opcodes: pa.Table | None = None
    operators: pa.Table | None = None
    queues: pa.Table | None = None
    #: The trace's names ranked for colours (:func:`profiler.figures.palette.names_by_time`): the opcode chart
    #: colours each opcode as the timeline does.
    names: tuple[str, ...] = ()


def summary_inputs(trace: Trace, start_ns: int | None = None, end_ns: int | None = None) -> SummaryInputs:
    """The summary of ``[start_ns, end_ns)`` (default: the whole trace) with its per-opcode, per-operator and
    per-queue tables (``profiler.analyses``)."""
    from profiler.analyses import queue_table, time_by
    from profiler.figures.palette import names_by_time
    from profiler.overview import has_device_events

    summary = trace.summary(start_ns, end_ns)
    if not has_device_events(trace):  # a host trace (PyTorch, JAX): no instructions or DMA to break down
        return SummaryInputs(summary, None, None, None, tuple(names_by_time(trace)))
    return SummaryInputs(summary, time_by(trace, "opcode", start_ns, end_ns),
                         time_by(trace, "operator", start_ns, end_ns), queue_table(trace, start_ns, end_ns),
                         tuple(names_by_time(trace)))


def headline_numbers(summary: Mapping[str, Any] | None) -> list[tuple[str, float, str]]:
    """``(label, value, unit)`` of the headline figures of a ``Trace.summary()`` dict that are known.

    Units: ``ns`` (a duration), ``%``, ``B``, ``B/s``, ``""`` (a count).
    """
    s = summary or {}
    engines: Mapping[str, Any] = s.get("engines") or {}
    dma: Mapping[str, Any] = s.get("dma") or {}
    total = s.get("total_time_ns")
    counts = [e.get("instruction_count") for e in engines.values() if e.get("instruction_count") is not None]
    gbps = dma.get("throughput_gbps")
    candidates = [
        ("total time", total, "ns"),
        ("instructions", sum(counts) if counts else None, ""),
        ("HFU", s.get("hfu_pct"), "%"),
        ("MFU", s.get("mfu_pct"), "%"),
        ("DMA bytes", dma.get("transfer_bytes"), "B"),
        ("DMA throughput while active", None if gbps is None else float(gbps) * 1e9, "B/s"),
        # a share of the time the cores' queues could have been moving data (several cores: summed over them)
        ("DMA active", dma.get("utilization_pct"), "%"),
    ]
    if not engines and not dma.get("transfer_bytes") and not dma.get("active_time_ns"):
        # a host trace (PyTorch, JAX): no DMA to speak of, rather than "0 B" and "0.0 %"
        candidates = [c for c in candidates if not c[0].startswith("DMA ")]
    return [(label, value, unit) for label, value, unit in candidates
            if isinstance(value, int | float) and not isinstance(value, bool)]


def _bar(title: str, names: list[str], values: list[float], unit: str, colours: list[str] | None = None) -> go.Figure:
    # SI prefixes for amounts (1.5 kB, 3 µs); a percentage as a plain number (0.75%, not "750.3m%")
    number = "%{x:.2f}" if unit == "%" else "%{x:.4s}"
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", marker={"color": colours},
                           hovertemplate=f"%{{y}}: {number}{unit}<extra></extra>"))
    fig.update_layout(title={"text": title, "font": {"size": 14}},
                      height=_CHART_HEIGHT + max(0, len(names) - TOP_ROWS) * _ROW_PX,
                      margin={"l": 160, "r": 20, "t": 40, "b": 40}, yaxis={"autorange": "reversed"},
                      xaxis={"ticksuffix": unit, "tickformat": "~s"})
    return fig


def engine_utilization_figure(summary: Mapping[str, Any] | None) -> go.Figure | None:
    """Busy % of each engine over the summarised range (``engines.<name>.utilization_pct``)."""
    engines: Mapping[str, Any] = (summary or {}).get("engines") or {}
    names = [name for name, e in engines.items() if e.get("utilization_pct") is not None]
    if not names:
        return None
    palette = CategoryPalette.for_engines()
    fig = _bar(ENGINE_TITLE, names, [float(engines[n]["utilization_pct"]) for n in names], "%",
               [palette.colour(n) for n in names])
    fig.update_xaxes(range=[0, 100], tickformat="")
    return fig


def _label(row: Mapping[str, Any], keys: tuple[str, ...], sep: str) -> str:
    return sep.join(str(row[k]) if row.get(k) is not None else "-" for k in keys)


def breakdown_figure(table: pa.Table | None, title: str, name_keys: tuple[str, ...], value_key: str, unit: str,
                     *, sep: str = " ", scale: float = 1.0, top: int = TOP_ROWS,
                     colour_by: tuple[str, CategoryPalette] | None = None) -> go.Figure | None:
    """Horizontal bars of ``table``'s ``value_key`` times ``scale``, largest first (``top`` rows), labelled by
    ``name_keys`` joined with ``sep``; coloured by the label, or with ``colour_by = (key, palette)`` by that
    column's value in that palette (the timeline's colours; ``key`` is one of ``name_keys``).

    None when the table is missing, empty, or has no positive value.
    """
    if table is None or table.num_rows == 0:
        return None
    rows = [r for r in table.select([*name_keys, value_key]).to_pylist() if (r[value_key] or 0) > 0]
    if not rows:
        return None
    # largest first; ties in natural order (qSyncIO2 before qSyncIO10)
    if len(rows) > top:  # say what is left out
        title = f"{title} (the {top} largest of {len(rows)})"
    rows = sorted(rows, key=lambda r: (-r[value_key], natural_key(_label(r, name_keys, sep))))[:top]
    names = [_label(r, name_keys, sep) for r in rows]
    if colour_by is not None:  # (the key is one of name_keys)
        key, palette = colour_by
        colours = [palette.colour(r[key]) for r in rows]
    else:
        palette = CategoryPalette()
        colours = [palette.colour(n) for n in names]
    return _bar(title, names, [r[value_key] * scale for r in rows], unit, colours)


def opcodes_figure(opcodes: pa.Table | None, names: tuple[str, ...] = ()) -> go.Figure | None:
    """Busy time per (engine, opcode) (``time_by(trace, "opcode")``), in seconds (the axis reads ns, µs, ms), each
    opcode in its timeline colour (``names``: :attr:`SummaryInputs.names`)."""
    return breakdown_figure(opcodes, OPCODES_TITLE, (rs.ENGINE, rs.OPCODE), rs.BUSY_NS, "s", scale=1 / NS_PER_S,
                            colour_by=(rs.OPCODE, CategoryPalette(names)))


def operators_figure(operators: pa.Table | None) -> go.Figure | None:
    """Busy time per (layer, operator), in seconds; None when the trace names no operator."""
    if operators is None or not any(v is not None for v in operators.column(rs.OPERATOR).to_pylist()):
        return None
    return breakdown_figure(operators, OPERATORS_TITLE, (rs.LAYER, rs.OPERATOR), rs.BUSY_NS, "s", sep=" / ",
                            scale=1 / NS_PER_S)


def flops_figure(operators: pa.Table | None) -> go.Figure | None:
    """BF16-equivalent FLOPs (``adjusted_flops``) per (layer, operator); None without operators or FLOPs."""
    if operators is None or not any(v is not None for v in operators.column(rs.OPERATOR).to_pylist()):
        return None
    return breakdown_figure(operators, FLOPS_TITLE, (rs.LAYER, rs.OPERATOR), rs.ADJUSTED_FLOPS, "FLOP",
                            sep=" / ")


def queues_figure(queues: pa.Table | None) -> go.Figure | None:
    """Bytes moved per DMA queue (``queue_table(trace)``): each of a core's 16 queues (``NC<core> <queue>`` with
    several cores), or the 32 largest."""
    return breakdown_figure(queues, QUEUES_TITLE, (rs.QUEUE,), rs.BYTES, "B", top=QUEUE_ROWS)


def summary_figures(inputs: SummaryInputs) -> list[go.Figure]:
    """Every chart the inputs support, in this order: engine utilization, top opcodes, top operators, DMA bytes
    per queue, FLOPs by operator."""
    figs = [engine_utilization_figure(inputs.summary), opcodes_figure(inputs.opcodes, inputs.names),
            operators_figure(inputs.operators), queues_figure(inputs.queues), flops_figure(inputs.operators)]
    return [f for f in figs if f is not None]
