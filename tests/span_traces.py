"""Small trace helpers shared by the call trees' tests: writing a Span table from plain rows, and opening a trace
with the importers' warnings silenced."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import profiler
from tracer import schema as ts
from tracer.writer import TraceWriter

#: The row (track group, track name) a span is on unless it says otherwise.
THREAD = ("proc", "thread 1")


def write_spans(path: Path, spans: Sequence[dict[str, Any]]) -> Path:
    """A trace of one Span table: each span a dict with ``id``, ``parent`` (or None), ``name``, ``start``, ``end``
    and optionally ``row`` (group, name), ``category`` and ``correlation`` (written into ``args``); depths follow
    the parents, which must come first."""
    keys = (ts.ID, ts.PARENT_ID, ts.NAME, ts.START_TS, ts.END_TS, ts.DURATION_NS, ts.TRACK_GROUP, ts.TRACK_NAME,
            ts.CATEGORY, ts.ARGS, ts.DEPTH)
    cols: dict[str, list[Any]] = {k: [] for k in keys}
    depth: dict[int, int] = {}
    for sp in spans:
        parent = sp.get("parent")
        depth[sp["id"]] = 0 if parent is None else depth[parent] + 1
        row = sp.get("row", THREAD)
        corr = sp.get("correlation")
        values = (sp["id"], parent, sp["name"], sp["start"], sp["end"], sp["end"] - sp["start"], row[0], row[1],
                  sp.get("category"), None if corr is None else json.dumps({"correlation": corr}), depth[sp["id"]])
        for k, v in zip(keys, values, strict=True):
            cols[k].append(v)
    with TraceWriter(path) as w:
        w.append(ts.SPAN.name, cols)
    return path


@contextlib.contextmanager
def opened_quietly(path: Path) -> Iterator[profiler.Trace]:
    """``profiler.open(path)`` with the importers' warnings (overlapping slices...) silenced, closed on exit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(path)
    try:
        yield trace
    finally:
        trace.close()
