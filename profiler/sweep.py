"""A parameter sweep from Python or the CLI: :class:`Sweep` runs a kernel at every combination of values, adds the
performance bounds of each point when asked, keeps the rows as they come, and gives the table, its chart and the
sweep file.  ``trnprof sweep`` is a thin wrapper around it.

    from profiler.sweep import Sweep

    with Sweep("matmul_rowload", {"block_m": [1, 2, 4, 8]}, bounds=True) as sweep:
        sweep.run_all(jobs=2)
        sweep.table()      # pyarrow Table, one row per point
        sweep.figure()     # plotly Figure: simulated time per point

Running (:mod:`tracer.sim.sweep`) and tabulating (:mod:`profiler.sweep_table`) live in their own modules; this
one holds a sweep's state between them: its points, the rows done, the bounds, the folder its traces go to (a
temporary one, removed by :meth:`Sweep.close`, when bounds are asked without ``trace_dir``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import plotly.graph_objects as go
import pyarrow as pa

from profiler import sweep_table as st
from tracer.sim.sweep import SweepPoint, SweepRow, run_sweep, sweep_points, varied_names


class Sweep:
    """One sweep of ``kernel`` (see the module docstring).

    Args:
        kernel: a shipped kernel's name, ``path/to/file.py:function``, or a kernel function (one a worker
            process can import, for ``jobs`` > 1).
        params: kernel parameter -> its values.
        overrides: cost-model constant -> its values.
        archs: architectures.
        check: compute each point's values and compare them with the kernel's reference (slower).
        seed: seed of the random inputs.
        trace_dir: record each point's trace into this new or empty folder, with the sweep file
            (:data:`~profiler.sweep_table.SWEEP_FILE`) written by :meth:`save`.
        bounds: compute each point's performance bounds (each point is recorded: into ``trace_dir``, else a
            temporary folder).

    Raises:
        ConfigError: a bad name or value, or too many points (before anything runs).
    """

    def __init__(self, kernel: Any, params: Mapping[str, Sequence[Any]] | None = None,
                 overrides: Mapping[str, Sequence[Any]] | None = None, archs: Sequence[str] = ("trn2",), *,
                 check: bool = False, seed: int = 0, trace_dir: str | Path | None = None,
                 bounds: bool = False) -> None:
        self.kernel = kernel
        self.points: list[SweepPoint] = sweep_points(kernel, params, overrides, archs)
        self.names = varied_names(self.points)
        self.check = check
        self.seed = seed
        self.bounds = bounds
        self.keeps_traces = trace_dir is not None
        self._tmp: Path | None = None
        if trace_dir is None and bounds:
            self._tmp = Path(tempfile.mkdtemp(prefix="trnprof-sweep-"))
        self.trace_dir: Path | None = Path(trace_dir) if trace_dir is not None else (
            self._tmp / "traces" if self._tmp is not None else None)
        self.rows: list[SweepRow] = []
        self._bounds: dict[int, dict[str, Any]] = {}

    def run(self, jobs: int = 1, on_start: Callable[[int, SweepPoint], None] | None = None) -> Iterator[SweepRow]:
        """Run the points (``jobs`` at a time), yielding each row as its point ends (its bounds computed first, when
        asked); the rows done stay in :attr:`rows` whatever stops the iteration (Ctrl-C included)."""
        try:
            for row in run_sweep(self.kernel, self.points, check=self.check, seed=self.seed,
                                 trace_dir=self.trace_dir, jobs=jobs, on_start=on_start):
                if self.bounds and row.result is not None and row.trace is not None:
                    self._bounds[row.index] = _bounds_of(row.trace)
                self.rows.append(row)
                yield row
        except BaseException:
            self._drop_unlisted_traces()  # (stopped: the points under way leave traces the table does not list)
            raise

    def _drop_unlisted_traces(self) -> None:
        """Remove the trace directories of points with no row (a stopped sweep's points under way, complete or
        not), so that the folder holds what its sweep file lists."""
        if self.trace_dir is None:
            return
        done = {row.index for row in self.rows}
        for i, point in enumerate(self.points):
            path = self.trace_dir / point.trace_name(i, self.names)
            if i not in done and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)

    def run_all(self, jobs: int = 1) -> pa.Table:
        """Run every point; the table."""
        for _ in self.run(jobs):
            pass
        return self.table()

    def table(self) -> pa.Table:
        """The rows done so far (:func:`~profiler.sweep_table.sweep_table`, in the sweep's order); the ``trace``
        column only when the traces are kept."""
        table = self._full_table()
        if not self.keeps_traces and st.TRACE in table.column_names:
            table = table.drop_columns([st.TRACE])
        return table

    def _full_table(self) -> pa.Table:
        return st.sweep_table(self.rows, self.names, self._bounds if self.bounds else None)

    def figure(self, *, fastest_first: bool = True) -> go.Figure:
        """The chart of the rows done (:func:`profiler.figures.sweep.sweep_figure`), fastest on top."""
        from profiler.figures.sweep import sweep_figure

        table = self.table()
        return sweep_figure(fastest_first_table(table) if fastest_first else table, self.names)

    @property
    def failed(self) -> bool:
        """True when points ran and none of them succeeded."""
        return bool(self.rows) and all(r.result is None for r in self.rows)

    def save(self) -> Path | None:
        """Write the sweep file into ``trace_dir`` (the points done); None when the traces are not kept or no point
        is done."""
        if not self.keeps_traces or self.trace_dir is None or not self.rows:
            return None
        return st.write_sweep_file(self.trace_dir, str(self.kernel), self._full_table(), self.names,
                                   len(self.points))

    def close(self) -> None:
        """Remove the temporary traces (bounds without ``trace_dir``)."""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Sweep:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def fastest_first_table(table: pa.Table) -> pa.Table:
    """``table``'s rows by ascending simulated time, failed points (null) last, ties in the sweep's order."""
    return table.take(pa.array(st.fastest_first_order(table), pa.int64()))


def _bounds_of(trace_path: Path) -> dict[str, Any]:
    """The bound columns of a recorded point (its trace ingested once; the cache entry stays beside it)."""
    import profiler

    with profiler.open(trace_path) as trace:
        return st.point_bounds(trace)


__all__ = ["Sweep", "fastest_first_table"]
