"""``Trace.source``: a kernel source file with each line's instructions, as a notebook view.

:class:`SourceListing` holds :func:`profiler.analyses.source_lines.source_listing`'s table and shows it as HTML in
a notebook (the dashboard's source page as a static table: heat bar, counts, times, waits, DMA transfers, the
line's text).  Every string is HTML-escaped: the source text comes from the trace.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.source_lines import hottest, resolve_file, source_listing
from profiler.figures.timefmt import format_duration

if TYPE_CHECKING:
    from profiler.trace import Trace

_STYLE = ("<style>.trnprof-src table{border-collapse:collapse;font-size:12px}"
          ".trnprof-src td,.trnprof-src th{padding:0 8px;text-align:right;white-space:nowrap}"
          ".trnprof-src td.code{text-align:left;font-family:monospace;white-space:pre}"
          ".trnprof-src tr.busy{background:#fff8f2}"
          ".trnprof-src .heat{display:inline-block;width:60px;height:8px;background:#eee}"
          ".trnprof-src .fill{display:block;height:8px;background:#e6550d}</style>")


@dataclass(frozen=True)
class SourceListing:
    """One source file of a trace, line by line: ``table`` (:data:`profiler.analyses.schema.SOURCE_LINES`), shown
    as HTML in a notebook; ``file`` its name; ``hot`` the number of hottest lines shown (None: every line)."""

    file: str
    table: pa.Table
    hot: int | None = None

    def shown(self) -> pa.Table:
        """The rows the view shows: every line, or the ``hot`` hottest."""
        return self.table if self.hot is None else hottest(self.table, self.hot)

    def __repr__(self) -> str:
        n = sum(self.table.column(rs.INSTRUCTIONS).to_pylist())
        return f"<SourceListing {self.file}: {self.table.num_rows} lines, {n:,} instructions>"

    def _repr_html_(self) -> str:
        rows = self.shown().to_pylist()
        top = max((r[rs.INSTRUCTION_NS] for r in rows), default=0) or 1
        critical = any(r[rs.CRITICAL_NS] is not None for r in rows)
        names = ("line", "", "instr", "time", "share", "wait", *(("critical",) if critical else ()), "DMA", "engines")
        head = "".join(f"<th>{h}</th>" for h in names)
        body = []
        for r in rows:
            text = html.escape(r[rs.TEXT] or "")
            if not r[rs.INSTRUCTIONS]:
                blank = "<td></td>" * (len(names) - 1)
                body.append(f"<tr><td>{r[rs.LINE]}</td>{blank}<td class='code'>{text}</td></tr>")
                continue
            dma = f"{r[rs.DMA_TRANSFERS]:,} ({format_duration(r[rs.DMA_NS])})" if r[rs.DMA_TRANSFERS] else ""
            body.append(
                f"<tr class='busy'><td>{r[rs.LINE]}</td>"
                f"<td><span class='heat'><span class='fill' style='width:{100 * r[rs.INSTRUCTION_NS] / top:.0f}%'>"
                f"</span></span></td><td>{r[rs.INSTRUCTIONS]:,}</td><td>{format_duration(r[rs.INSTRUCTION_NS])}</td>"
                f"<td>{(r[rs.INSTRUCTION_SHARE] or 0):.1%}</td>"
                f"<td>{format_duration(r[rs.WAIT_NS]) if r[rs.WAIT_NS] else ''}</td>"
                + (f"<td>{format_duration(r[rs.CRITICAL_NS]) if r[rs.CRITICAL_NS] else ''}</td>" if critical else "")
                + f"<td>{dma}</td>"
                f"<td>{html.escape(r[rs.ENGINES] or '')}</td><td class='code'>{text}</td></tr>")
        by = " (critical-path time)" if critical else ""
        title = html.escape(self.file) + ("" if self.hot is None else f" — the {len(rows)} hottest lines{by}")
        return (f"{_STYLE}<div class='trnprof-src'><b>{title}</b><table><tr>{head}<th style='text-align:left'>"
                f"source</th></tr>{''.join(body)}</table></div>")


def source_view(trace: Trace, file: str | None = None, start_ns: int | None = None, end_ns: int | None = None,
                *, hot: int | None = None, core: int | None = None, critical: bool = False) -> SourceListing:
    """:class:`SourceListing` of ``file`` (default: the file with the most instructions) over the window
    (``critical``: with each line's time on the critical path)."""
    if hot is not None and (isinstance(hot, bool) or not isinstance(hot, int | np.integer) or hot < 1):
        from profiler.errors import QueryError

        raise QueryError(f"hot must be a number of lines (1 or more), not {str(hot)[:40]!r}")
    name = resolve_file(trace, file)
    return SourceListing(name, source_listing(trace, name, start_ns, end_ns, core, critical=bool(critical)), hot)


__all__ = ["SourceListing", "source_view"]
