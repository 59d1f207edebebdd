"""The source view: each line of a kernel source file with the instructions it issued.

Neuron Explorer's Code Viewer, as tables: the instructions starting in the window are grouped by their
``nki_source_location`` (``file.py:LINE``) and the lines are shown with the text the trace recorded
(``Trace.source_text``; the simulator keeps the kernel's files in the trace's ``SourceFile`` table).

* :func:`source_files` — the files instructions came from, with their time;
* :func:`hottest` — the lines of a listing with the most instruction time;
* :func:`line_text` — the recorded text of one ``file.py:LINE``;
* :func:`source_listing` — one row per line of a file: instructions, their summed and union time, the semaphore
  waits before them (``evt_wait_time_ns``: where engines stood waiting for this line's inputs), engines, opcodes,
  HBM bytes, the DMA transfers its instructions triggered (found as :mod:`profiler.analyses.dma_transfers` finds
  triggers: their count, bytes and summed durations), first start and last end.

A location is split at its last ``:`` followed by digits only; the file part is matched as written, or (for a
profile whose locations carry a directory) by its base name.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler.analyses import schema as rs
from profiler.analyses.dma_transfers import AGG, FIRST_START, LAST_END, NBYTES, Transfers, agg_expr, transfers
from profiler.analyses.inputs import (
    DMA_PACKET,
    DMA_TRIGGER_OPCODE,
    FLOW,
    INSTRUCTION,
    Scope,
    column,
    fetch,
    find_sorted,
    q,
    resolve_scope,
    union_sql,
)
from profiler.errors import QueryError
from profiler.trace import Trace
from tracer import schema as ts

#: A source location: ``file.py:LINE``.
_LOCATION = re.compile(r"^(.*):(\d+)$")
#: SQL of the location column (queries group by its raw strings and split them in Python: :func:`split_location`).
_LOC = q(ts.NKI_SOURCE_LOCATION)
#: Opcodes named per line.
TOP_OPCODES = 3


def split_location(location: str | None) -> tuple[str, int | None] | None:
    """``"softmax.py:32"`` -> ``("softmax.py", 32)``; a location without a line number -> ``(location, None)``;
    None or an empty string -> None."""
    if not location:
        return None
    m = _LOCATION.match(location)
    if m is None:
        return location, None
    return m.group(1), int(m.group(2))


def line_text(trace: Trace, location: str | None) -> str | None:
    """The text (stripped) of the line ``location`` (``file.py:LINE``) names, from the source the trace recorded
    (held under the file's name or its base name); None when the trace holds no text of that file or it has no such
    line, or the location names no line."""
    where = split_location(location)
    if where is None or where[1] is None:
        return None
    file, line = where
    text = trace.source_text(file) or trace.source_text(os.path.basename(file))
    lines = text.splitlines() if text else []
    return lines[line - 1].strip() if 0 < line <= len(lines) else None


def source_files(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
                 core: int | None = None) -> pa.Table:
    """The source files of the instructions starting in the window, and the files whose text the trace holds
    (:data:`profiler.analyses.schema.SOURCE_FILES`), most instructions first (a DMA trigger is a short
    instruction: instruction time would rank a kernel's loads below one ACTIVATE of a helper)."""
    scope = resolve_scope(trace, start_ns, end_ns, core)
    rows = _per_file(trace, scope.starts_sql())
    total = _total_instruction_ns(trace, scope)
    texts = trace.recorded_sources()
    # a text is its own row unless a file of the window holds it: by its own name, or by base name when no
    # instruction anywhere names the text's file itself (then "dir/k.py" in the window does not hide "k.py")
    named = set(_files_by_time(trace)) if any(name not in texts for name in rows) else set()
    claimed = {_text_name(name, texts) for name in rows if name in texts or os.path.basename(name) not in named}
    out = []
    for name in sorted(set(rows) | (set(texts) - claimed)):
        r = rows.get(name, {"n": 0, "d": 0, "lines": 0})
        held = _text_name(name, texts)
        out.append({rs.FILE: name, rs.INSTRUCTIONS: int(r["n"]), rs.INSTRUCTION_NS: int(r["d"] or 0),
                    rs.INSTRUCTION_SHARE: (int(r["d"] or 0) / total) if total else None,
                    rs.LINES: int(r["lines"]), rs.HAS_TEXT: held is not None,
                    rs.SIZE_BYTES: texts.get(held) if held is not None else None})
    out.sort(key=lambda r: (-r[rs.INSTRUCTIONS], -r[rs.INSTRUCTION_NS], r[rs.FILE]))
    return pa.Table.from_pylist(out, schema=rs.SOURCE_FILES)


def _per_file(trace: Trace, where: str) -> dict[str, dict[str, int]]:
    """Instructions and their summed time per file, of the instructions ``where`` (SQL) selects:
    ``{file: {n, d, lines}}``.  (DuckDB groups the raw location strings ~8x faster than a key computed from them:
    the file and line are split here.)"""
    table = fetch(trace, f"""
        SELECT {_LOC} AS loc, count(*) AS n, sum({q(ts.DURATION_NS)})::BIGINT AS d
        FROM {INSTRUCTION} WHERE {where} AND {_LOC} <> '' GROUP BY loc""")
    out: dict[str, dict[str, int]] = {}
    lines: dict[str, set[int]] = {}
    for r in table.to_pylist():
        where = split_location(r["loc"])
        if where is None:
            continue
        f = out.setdefault(where[0], {"n": 0, "d": 0, "lines": 0})
        f["n"] += int(r["n"])
        f["d"] += int(r["d"] or 0)
        if where[1] is not None:
            lines.setdefault(where[0], set()).add(where[1])
    for name, f in out.items():
        f["lines"] = len(lines.get(name, ()))
    return out


def _file_locations(trace: Trace, name: str) -> dict[str, int]:
    """The distinct locations of file ``name`` with a line number, and their lines."""
    table = fetch(trace, f"SELECT DISTINCT {_LOC} AS loc FROM {INSTRUCTION} WHERE {_LOC} <> ''")
    out = {}
    for loc in table.column("loc").to_pylist():
        where = split_location(loc)
        if where is not None and where[0] == name and where[1] is not None:
            out[loc] = where[1]
    return out


def _text_name(name: str, texts: dict[str, int]) -> str | None:
    """The ``SourceFile`` name holding the text of location file ``name``: itself, else its base name."""
    if name in texts:
        return name
    base = os.path.basename(name)
    return base if base in texts else None


def _total_instruction_ns(trace: Trace, scope: Scope) -> int:
    row = fetch(trace, f"SELECT coalesce(sum({q(ts.DURATION_NS)}), 0)::BIGINT AS d FROM {INSTRUCTION} "
                       f"WHERE {scope.starts_sql()}").to_pylist()[0]
    return int(row["d"])


def _files_by_time(trace: Trace) -> list[str]:
    """The files of every instruction's location, most instructions first (no window: a file is a file),
    then the files whose text the trace holds though no instruction names them."""
    per_file = _per_file(trace, "TRUE")
    files = sorted(per_file, key=lambda f: (-per_file[f]["n"], -per_file[f]["d"], f))
    texts = trace.recorded_sources()
    claimed = {_text_name(f, texts) for f in files}
    return files + sorted(set(texts) - claimed)


def resolve_file(trace: Trace, file: str | None) -> str:
    """The file of the trace ``file`` names: a file of :func:`source_files` as written, or the only one whose
    base name (or path suffix) it is; None picks the file with the most instructions.  QueryError listing
    the trace's files otherwise."""
    if file is not None and not isinstance(file, str):
        raise QueryError(f"a source file name must be a string, not {str(file)[:40]!r}")
    files = _files_by_time(trace)
    if not files:
        raise QueryError(f"{trace.path}: no instruction has a source location (nki_source_location) and the "
                         "trace holds no source file, so there is no source to show")
    if file is None or file == "":
        return files[0]
    if file in files:
        return file
    matches = [f for f in files if os.path.basename(f) == file or f.endswith("/" + file.lstrip("/"))]
    if len(matches) == 1:
        return matches[0]
    shown = ", ".join(files[:12]) + (", ..." if len(files) > 12 else "")
    if matches:
        raise QueryError(f"{trace.path}: {file!r} names {len(matches)} source files ({', '.join(matches[:6])}); "
                         "give more of its path")
    raise QueryError(f"{trace.path}: no source file {file[:200]!r} in the trace (files: {shown})")


def source_listing(trace: Trace, file: str | None = None, start_ns: int | None = None, end_ns: int | None = None,
                   core: int | None = None, *, text: str | None = None, critical: bool = False) -> pa.Table:
    """Every line of ``file`` (:func:`resolve_file`; default: the file with the most instructions) with the
    instructions starting in the window that it issued (:data:`profiler.analyses.schema.SOURCE_LINES`); ``text``:
    the file's text to show when the trace holds none (``trnprof source --source-dir``); ``critical``: also the
    time each line holds on the window's critical path (``critical_ns``: its instructions' steps and the DMA
    transfers they triggered; runs :func:`~profiler.analyses.critical_path.critical_path`).

    With the file's text in the trace, one row per line of it (lines without instructions have zeros), plus any
    line number beyond its end that instructions name; without it, one row per line that issued instructions,
    ``text`` None.
    """
    scope = resolve_scope(trace, start_ns, end_ns, core)
    name = resolve_file(trace, file)
    locations = _file_locations(trace, name)
    # grouped by the raw location (fast) when each line has one; else by a line number computed from it
    by_line = len(set(locations.values())) < len(locations)
    key = ("CASE " + _LOC + " " + " ".join(f"WHEN '{loc.replace(chr(39), chr(39) * 2)}' THEN {line}"
                                            for loc, line in locations.items()) + " END") if by_line else _LOC
    t1 = int(scope.end_ns)
    table = fetch(trace, f"""
        WITH rows AS (
            SELECT {key} AS k0, {q(ts.START_TS)} AS s, least({q(ts.END_TS)}, {t1}) AS e,
                   {q(ts.END_TS)} AS e_raw, {q(ts.DURATION_NS)} AS d,
                   coalesce({q(ts.EVT_WAIT_TIME_NS)}, 0) AS w, {q(ts.ENGINE)} AS engine,
                   {q(ts.OPCODE)} AS opcode, coalesce({q(rs.T_HBM_READ_BYTES)}, 0) AS rb,
                   coalesce({q(rs.T_HBM_WRITE_BYTES)}, 0) AS wb
            FROM {INSTRUCTION} WHERE {scope.starts_sql()} AND {_LOC} IN (SELECT unnest($locs))
        ), a AS (
            SELECT k0, count(*) AS n, sum(d)::BIGINT AS d, sum(w)::BIGINT AS w, sum(rb)::BIGINT AS rb,
                   sum(wb)::BIGINT AS wb, min(s) AS s0, max(e_raw) AS e1
            FROM rows GROUP BY k0
        ), eng AS (
            SELECT k0, string_agg(engine, ', ' ORDER BY t DESC, engine) AS engines FROM (
                SELECT k0, engine, sum(d) AS t FROM rows WHERE engine IS NOT NULL GROUP BY k0, engine) GROUP BY k0
        ), ops AS (
            SELECT k0, string_agg(opcode, ', ' ORDER BY t DESC, opcode) AS opcodes FROM (
                SELECT k0, opcode, t, row_number() OVER (PARTITION BY k0 ORDER BY t DESC, opcode) AS r FROM (
                    SELECT k0, opcode, sum(d) AS t FROM rows WHERE opcode IS NOT NULL
                    GROUP BY k0, opcode)) WHERE r <= {TOP_OPCODES} GROUP BY k0
        ), busy AS ({union_sql(["k0"], "TRUE")})
        SELECT a.*, coalesce(busy.u, 0) AS busy, eng.engines, ops.opcodes FROM a
        LEFT JOIN busy USING (k0) LEFT JOIN eng USING (k0) LEFT JOIN ops USING (k0)""",
        {"locs": sorted(locations) or [""]})
    total = _total_instruction_ns(trace, scope)
    stats = {(int(r["k0"]) if by_line else locations[r["k0"]]): r for r in table.to_pylist()}
    moved = functools.cache(lambda: transfers(trace, scope))   # (both below may need it: a pass over every packet)
    dma = _dma_per_line(trace, scope, locations, moved)
    on_path = _critical_per_line(trace, scope, locations, moved) if critical else None
    held = _text_name(name, trace.recorded_sources())
    if held is not None:
        text = trace.source_text(held)
    lines = text.splitlines() if text is not None else []
    numbers = sorted(set(range(1, len(lines) + 1)) | set(stats))
    out = []
    for n in numbers:
        r = stats.get(n)
        d = int(r["d"]) if r else 0
        out.append({
            rs.LINE: n, rs.TEXT: lines[n - 1] if 0 < n <= len(lines) else None,
            rs.INSTRUCTIONS: int(r["n"]) if r else 0, rs.INSTRUCTION_NS: d,
            rs.INSTRUCTION_SHARE: d / total if total else None, rs.BUSY_NS: int(r["busy"]) if r else 0,
            rs.WAIT_NS: int(r["w"]) if r else 0, rs.ENGINES: r["engines"] if r else None,
            rs.OPCODES: r["opcodes"] if r else None, rs.HBM_READ_BYTES: int(r["rb"]) if r else 0,
            rs.HBM_WRITE_BYTES: int(r["wb"]) if r else 0, rs.DMA_TRANSFERS: dma.get(n, (0, 0, 0))[0],
            rs.DMA_BYTES: dma.get(n, (0, 0, 0))[1], rs.DMA_NS: dma.get(n, (0, 0, 0))[2],
            rs.CRITICAL_NS: None if on_path is None else on_path.get(n, 0),
            rs.START_NS: r["s0"] if r else None,
            rs.END_NS: r["e1"] if r else None,
        })
    return pa.Table.from_pylist(out, schema=rs.SOURCE_LINES)


def hottest(listing: pa.Table, n: int) -> pa.Table:
    """The ``n`` lines of a :func:`source_listing` with the most instruction time, hottest first; with
    ``critical_ns`` computed, the ``n`` with the most critical-path time (then instruction time)."""
    busy = listing.filter(pc.greater(listing.column(rs.INSTRUCTIONS), 0))
    keys = [(rs.INSTRUCTION_NS, "descending"), (rs.LINE, "ascending")]
    if busy.num_rows and busy.column(rs.CRITICAL_NS).null_count < busy.num_rows:
        keys.insert(0, (rs.CRITICAL_NS, "descending"))
    return busy.sort_by(keys).slice(0, n)


def _dma_per_line(trace: Trace, scope: Scope, locations: dict[str, int],
                  moved: Callable[[], Transfers]) -> dict[int, tuple[int, int, int]]:
    """Per line (``locations``: a file's locations and their lines): (transfers, bytes, summed transfer time) of
    the DMA transfers triggered by its instructions starting in the window (``moved()``: the trace's transfers)."""
    locs = {"locs": sorted(locations) or [""]}
    found = fetch(trace, f"SELECT {q(ts.ID)} AS i, {_LOC} AS loc FROM {INSTRUCTION} WHERE {scope.starts_sql()} "
                         f"AND {_LOC} IN (SELECT unnest($locs)) ORDER BY 1", locs)
    if found.num_rows == 0:
        return {}
    # finding every transfer's trigger reads every packet (seconds at 10^7): only when some of these instructions
    # can be a trigger (a DMA_TRIGGER, or the start of a Flow edge to a packet)
    could = fetch(trace, f"""
        SELECT count(*) AS n FROM {INSTRUCTION} WHERE {scope.starts_sql()} AND {_LOC} IN (SELECT unnest($locs))
          AND ({q(ts.OPCODE)} = '{DMA_TRIGGER_OPCODE}' OR {q(ts.ID)} IN (
              SELECT {q(ts.OUT_ID)} FROM {FLOW} WHERE {q(ts.OUT_TABLE)} = '{ts.INSTRUCTION.name}'
                AND {q(ts.IN_TABLE)} = '{ts.DMA_PACKET.name}'))""", locs)
    tr = moved() if could.column("n")[0].as_py() else None
    if tr is None or len(tr) == 0:
        return {}
    known = np.flatnonzero(tr.trigger >= 0)
    pos, hit = find_sorted(column(found, "i"), tr.trigger[known])
    rows = known[hit]
    if len(rows) == 0:
        return {}
    line_of = np.array([locations[v] for v in found.column("loc").to_pylist()], np.int64)
    lines = line_of[pos[hit]]
    dur = tr.col(LAST_END)[rows] - tr.col(FIRST_START)[rows]
    nbytes = tr.col(NBYTES)[rows]
    out: dict[int, tuple[int, int, int]] = {}
    for line in np.unique(lines):
        m = lines == line
        out[int(line)] = (int(m.sum()), int(nbytes[m].sum()), int(dur[m].sum()))
    return out


def _critical_per_line(trace: Trace, scope: Scope, locations: dict[str, int],
                       moved: Callable[[], Transfers]) -> dict[int, int]:
    """Per line (``locations``: a file's locations and their lines): the critical path's step time in its
    instructions, and in the DMA segments of the transfers they triggered (``moved()``: the trace's transfers)."""
    from profiler.analyses.critical_path import critical_path

    path = critical_path(trace, scope.start_ns, scope.end_ns, scope.core)
    table = path.column(rs.TABLE).to_pylist()
    ids = column(path, rs.ID)
    dur = column(path, rs.DUR_NS)
    is_ins = np.array([t == ts.INSTRUCTION.name for t in table], dtype=bool)
    owner = np.where(is_ins, ids, -1)           # the instruction each step's time belongs to
    packets = ids[~is_ins]
    if len(packets):   # a DMA segment belongs to the instruction that triggered its transfer
        aggs = fetch(trace, f"SELECT {q(ts.ID)} AS i, {agg_expr()} AS a FROM {DMA_PACKET} "
                            f"WHERE {q(ts.ID)} IN (SELECT unnest($ids)) ORDER BY 1", {"ids": packets.tolist()})
        at, found = find_sorted(column(aggs, "i"), packets)
        tr = moved()
        t_at, t_found = find_sorted(tr.col(AGG), column(aggs, "a")[at])
        trig = np.where(found & t_found, tr.trigger[t_at] if len(tr.trigger) else -1, -1)
        owner[~is_ins] = trig
    found_loc = fetch(trace, f"SELECT {q(ts.ID)} AS i, {_LOC} AS loc FROM {INSTRUCTION} "
                             f"WHERE {q(ts.ID)} IN (SELECT unnest($ids)) AND {_LOC} IN (SELECT unnest($locs))",
                      {"ids": np.unique(owner[owner >= 0]).tolist() or [-1], "locs": sorted(locations) or [""]})
    line_of = {int(i): locations[loc] for i, loc in zip(column(found_loc, "i").tolist(),
                                                         found_loc.column("loc").to_pylist(), strict=True)}
    out: dict[int, int] = {}
    for o, d in zip(owner.tolist(), dur.tolist(), strict=True):
        line = line_of.get(o)
        if line is not None:
            out[line] = out.get(line, 0) + int(d)
    return out

