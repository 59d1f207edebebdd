"""The notebook face of a trace: figures, a live-zoom widget, the inline dashboard and a rich HTML view.

:class:`NotebookMixin` is a base class of :class:`profiler.Trace`; its methods are thin and import plotly (and
the widget libraries) only when called, so ``import profiler`` stays fast for scripts and the CLI.

- :mod:`profiler.notebook.timeline` — ``Trace.timeline`` and ``Trace.utilization_figure``, drawn by the
  dashboard's figure builders (:mod:`profiler.figures`) from ``Trace.window`` / ``Trace.utilization``.
- :mod:`profiler.notebook.widget` — ``Trace.widget``: a ``FigureWidget`` that re-queries on zoom and pan.
- :mod:`profiler.notebook.summary` — ``Trace.summary_figures``: the summary charts.
- :mod:`profiler.notebook.dashboard` — ``Trace.dashboard``: the Dash app inline (found through an entry point).
- :mod:`profiler.notebook.source` — ``Trace.source``: a kernel source file with each line's instructions.
- ``Trace.memory_figure``: SBUF/PSUM addresses over time (:mod:`profiler.figures.memory_map`).
- ``Trace.call_tree_figure``: the spans' call tree as an icicle (:mod:`profiler.figures.call_tree`).
- :mod:`profiler.notebook.html` — ``Trace._repr_html_``.

See ``docs/notebooks.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from profiler.notebook.source import SourceListing
    from profiler.trace import Trace


class NotebookMixin:
    """Figures and notebook views of a :class:`~profiler.Trace` (see :mod:`profiler.notebook`)."""

    def timeline(self: Trace, start_ns: int | None = None, end_ns: int | None = None, width_px: int = 1600,
                 color_by: str = "opcode", *, expand_dma: bool = False, span_levels: int | None = None,
                 rows: str | None = None, query: str | None = None, lanes: bool = True,
                 critical_path: bool = False, chain: tuple[str, int] | None = None,
                 select: tuple[str, int] | None = None, query_timeout_s: float | None = None) -> go.Figure:
        """The timeline of ``[start_ns, end_ns)`` (default: the whole trace) as a plotly figure.

        One row per engine and DMA queue group, drawn as per-pixel strips from ``Trace.window`` (exact events
        when few are in view, level-of-detail buckets otherwise), busy % lanes below, hover naming the events
        when they are drawn exactly — the dashboard's timeline, as a static figure.  Zooming it in the browser
        magnifies these pixels; :meth:`widget` re-queries on zoom instead.

        Args:
            start_ns: start of the view (default: the first event).
            end_ns: end of the view, exclusive (default: the last event's end).
            width_px: pixels across the view (the raster's resolution; the figure follows the cell's width).
            color_by: ``opcode``, ``engine`` or ``layer``.
            expand_dma: one row per DMA queue instead of one per core.
            span_levels: rows for at most this many levels of each span row (each nesting level of a thread
                is a row; None: all).
            rows: draw only the rows this filter keeps: comma-separated terms, each text found anywhere in a
                row's name or core (``"Tensor, Vector"``, ``"NC1"``) or a ``/regular expression/``; a term
                starting with ``-`` hides the rows it matches (``"-DMA"``).  It picks the counter lanes too
                (``profiler.figures.row_filter``; the dashboard's ``?tracks=``).
            query: SQL whose result is drawn as rows above the trace's (Perfetto's debug tracks;
                ``profiler.query_track``): each result row an interval from ``start_ts`` to ``end_ts`` (or
                ``start_ts + duration_ns``), named and coloured by ``name`` (or ``opcode``), one timeline row per
                value of a ``track`` column.  The dashboard's ``?query=``.
            lanes: per-engine busy % lanes under the rows.
            critical_path: overlay the critical path of the view (``profiler.analyses.critical_path``).
            chain: ``(table, id)`` of an instruction or DMA packet: overlay the chain of dependent work that ended
                with it instead, why it started when it did (``profiler.analyses.chain_to``).
            select: ``(table, id)`` of an event to outline with its dependency arrows, orange from what it waited
                for, blue to what waited on it (``("Instruction", 42)``; the dashboard draws a clicked event so).
            query_timeout_s: seconds ``query`` may run (default: ``Trace.sql``'s, 60).

        Raises:
            QueryError: an empty or out-of-range window, a bad width, colour mode or ``select``, a malformed row
                filter or one that keeps no row, a query that fails or has no ``start_ts`` column.
        """
        from profiler.notebook.timeline import build_timeline

        return build_timeline(self, start_ns, end_ns, width_px=width_px, color_by=color_by, expand_dma=expand_dma,
                              span_levels=span_levels, rows=rows, query=query, lanes=lanes,
                              critical_path=critical_path, chain=chain, palette=_palette(self), select=select,
                              query_timeout_s=query_timeout_s).figure

    def utilization_figure(self: Trace, start_ns: int | None = None, end_ns: int | None = None,
                           width_px: int = 800) -> go.Figure:
        """Busy % of every engine over time (from ``Trace.utilization``), one panel per NeuronCore."""
        from profiler.notebook.timeline import utilization_figure

        return utilization_figure(self, start_ns, end_ns, width_px=width_px)

    def summary_figures(self: Trace, start_ns: int | None = None, end_ns: int | None = None) -> list[go.Figure]:
        """The summary charts: engine utilization, top opcodes, top operators, DMA bytes per queue, FLOPs by
        operator (those the trace has data for), as the dashboard's summary page draws them."""
        from profiler.notebook.summary import summary_figures

        return summary_figures(self, start_ns, end_ns)

    def widget(self: Trace, start_ns: int | None = None, end_ns: int | None = None, width_px: int = 1600,
               color_by: str = "opcode", *, expand_dma: bool = False, span_levels: int | None = None,
               rows: str | None = None, query: str | None = None, lanes: bool = True) -> go.FigureWidget:
        """A live timeline: a ``plotly.graph_objects.FigureWidget`` that re-queries ``Trace.window`` on zoom/pan.

        Needs ``ipywidgets`` and ``anywidget`` (``pip install 'trnprof[notebook]'``).  Double-click shows the
        whole trace again.  Its state (view, buffer, number of queries) is ``widget.trnprof_live``.  The options
        are :meth:`timeline`'s (``rows``: the row filter, ``query``: rows of a SQL query).
        """
        from profiler.notebook.widget import make_widget

        return make_widget(self, start_ns, end_ns, width_px=width_px, color_by=color_by, expand_dma=expand_dma,
                           span_levels=span_levels, rows=rows, query=query, lanes=lanes,
                           palette=_palette(self))

    def dashboard(self: Trace, *, mode: str = "inline", height: int = 800, host: str = "127.0.0.1",
                  port: int | None = None) -> None:
        """Show the full Dash dashboard for this trace in the notebook (Dash's Jupyter mode).

        Args:
            mode: ``inline`` (under the cell), ``external`` (a link), ``tab`` or ``jupyterlab``.
            height: height of the inline frame, pixels.
            host: interface to serve on (loopback by default).
            port: port (default: the first free one from 8050).

        Raises:
            CommandError: outside a notebook, or when the dashboard is not installed.
        """
        from profiler.notebook.dashboard import show_dashboard

        show_dashboard(self, mode=mode, height=height, host=host, port=port)

    def source(self: Trace, file: str | None = None, start_ns: int | None = None, end_ns: int | None = None, *,
               hot: int | None = None, core: int | None = None, critical: bool = False) -> SourceListing:
        """A kernel source file line by line with each line's instructions, time, waits and DMA transfers
        (``profiler.analyses.source_lines.source_listing``; default: the file with the most instructions), shown
        as a table in a notebook; ``hot=N`` shows only the N lines with the most instruction time; ``critical``
        adds each line's time on the critical path.  Its ``.table`` is the Arrow table."""
        from profiler.notebook.source import source_view

        return source_view(self, file, start_ns, end_ns, hot=hot, core=core, critical=critical)

    def memory_figure(self: Trace, mem: str = "SBUF", start_ns: int | None = None, end_ns: int | None = None, *,
                      width: int = 800, height: int = 256) -> go.Figure:
        """SBUF or PSUM addresses over ``[start_ns, end_ns)`` (default: the whole trace): what the instructions
        and DMA transfers read and wrote, which bytes held live data, and the live bytes over time with their peak
        (:func:`profiler.analyses.memory_map.memory_map`, drawn as the dashboard's memory page draws it).

        Args:
            mem: ``SBUF`` or ``PSUM``.
            start_ns, end_ns: the window (default: the trace's extent).
            width, height: time columns and address rows of the raster.

        Raises:
            QueryError: a bad memory, window or size, or a trace whose operands name no on-chip addresses (the map
                needs a trnprof simulator recording).
        """
        from profiler.analyses.memory_map import memory_map
        from profiler.figures.memory_map import memory_map_figure

        mm = memory_map(self, mem, start_ns, end_ns, width=width, height=height)
        return memory_map_figure(mm, self.time_range[0])

    def call_tree_figure(self: Trace, start_ns: int | None = None, end_ns: int | None = None, *,
                         of: str = "spans", by_thread: bool = True, merge_steps: bool = False,
                         height: int = 560) -> go.Figure:
        """A call tree of ``[start_ns, end_ns)`` (default: the whole trace) as an icicle, each box as wide as its
        time; click a box to zoom to it.  The dashboard's call-tree page draws the same figure.

        Args:
            of: ``spans`` -- each stack of nested span names under one root per row (process / thread;
                :func:`profiler.analyses.call_tree.call_tree`); ``instructions`` -- a device trace's engine time by
                layer, operator, source line, engine and opcode (:mod:`profiler.analyses.instruction_tree`);
                ``kernels`` -- a PyTorch/Kineto trace's GPU time under the CPU stacks that launched it
                (:mod:`profiler.analyses.kernel_tree`).
            by_thread: spans: ``False`` merges the rows' stacks.
            merge_steps: spans and kernels: ``ProfilerStep#551`` and ``#552`` make one ``ProfilerStep#N``.

        The numbers are the tree's ``.table``; per name: ``profiler.analyses.call_tree_views.top_frames``.

        Raises:
            QueryError: a bad window or ``of``, or a trace without what ``of`` asks for.
        """
        from profiler.errors import QueryError
        from profiler.figures.call_tree import call_tree_figure

        if of == "instructions":
            from profiler.analyses.instruction_tree import instruction_tree

            return call_tree_figure(instruction_tree(self, start_ns, end_ns), height=height)
        if of == "kernels":
            from profiler.analyses.kernel_tree import kernel_tree

            return call_tree_figure(kernel_tree(self, start_ns, end_ns, merge_steps=merge_steps), height=height)
        if of != "spans":
            raise QueryError(f"of must be spans, instructions or kernels, not {str(of)[:40]!r}")
        from profiler.analyses.call_tree import call_tree

        return call_tree_figure(call_tree(self, start_ns, end_ns, by_thread=by_thread, merge_steps=merge_steps),
                                height=height)

    def _repr_html_(self: Trace) -> str:
        """Name, kernel, architecture, duration, event counts and per-engine utilization, as HTML."""
        from profiler.notebook.html import trace_html

        return trace_html(self)


def _palette(trace: Any) -> Any:
    """The trace's colour palette, ranked once per opened trace (colours stay put across figures)."""
    palette = getattr(trace, "_notebook_palette", None)
    if palette is None:
        from profiler.figures.palette import CategoryPalette
        from profiler.notebook.timeline import ranked_names

        palette = CategoryPalette(ranked_names(trace))
        trace._notebook_palette = palette
    return palette


__all__ = ["NotebookMixin"]
