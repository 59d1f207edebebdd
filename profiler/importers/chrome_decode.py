"""One block of Chrome trace events -> the columns the trace builder keeps: a pure function of the block.

:func:`decode_block` does all the per-block work that needs nothing from the rest of the file: phase classes, exact
nanosecond times, durations, instant scopes, the slices' names, categories and argument JSON (serialised for the
spill file, LZ4-compressed), begin/end, async, flow, counter and metadata fields, and the problem counts.  It runs on
the stream's background thread, next to the JSON kernel, so that the builder
(:class:`profiler.importers.chrome_build.ChromeTraceBuilder`) only has to number slices, map threads to tracks and
append.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler.importers import json_kernel
from profiler.importers.decimal_text import count_finite_numbers, decimal_text_to_ns
from profiler.importers.json_objects import ObjectBlock
from profiler.importers.spill import serialize
from tracer import schema

KEYS = ("ph", "name", "cat", "ts", "dur", "pid", "tid", "id", "id2", "bp", "s", "args")
#: The keys as the compiled kernel extracts them: times as exact nanoseconds, pid/tid as integers when they are.
KEY_SPEC = json_kernel.KeySpec(KEYS, tuple(3 if k in ("ts", "dur") else 0 if k in ("pid", "tid", "id") else -1
                                           for k in KEYS))
#: Times must stay within +-2**62 ns (the database's limit); events beyond it are skipped as invalid.
TIME_LIMIT = 2**62

# Phase classes.
UNKNOWN, COMPLETE, BEGIN, END, INSTANT, COUNTER, META, FLOW, ASYNC_BEGIN, ASYNC_END, ASYNC_INSTANT, IGNORED = range(12)
_CLASS = np.zeros(256, np.int8)
for _ph, _cls in {"X": COMPLETE, "B": BEGIN, "E": END, "i": INSTANT, "I": INSTANT, "C": COUNTER, "M": META,
                  "s": FLOW, "t": FLOW, "f": FLOW, "b": ASYNC_BEGIN, "S": ASYNC_BEGIN, "e": ASYNC_END,
                  "F": ASYNC_END, "n": ASYNC_INSTANT}.items():
    _CLASS[ord(_ph)] = _cls
#: Phases that make a slice.
SPAN_CLASSES = np.array([COMPLETE, BEGIN, INSTANT, ASYNC_BEGIN, ASYNC_INSTANT])
ASYNC_CLASSES = (ASYNC_BEGIN, ASYNC_END, ASYNC_INSTANT)
PENDING = -1   # end or track not known until the end of the input

#: What the spill file holds per slice (in slice order; the builder knows each batch's first slice id).  Names and
#: categories are dictionary-encoded here, as the Span table holds them: the end of the input then regroups and
#: emits them without touching their texts.
SPILL_SCHEMA = pa.schema([
    pa.field(schema.NAME, schema.SPAN.column(schema.NAME).type),
    pa.field(schema.CATEGORY, schema.SPAN.column(schema.CATEGORY).type),
    pa.field(schema.ARGS, pa.string()),
])
_JSON = msgspec.json.Decoder()


@dataclass
class Threads:
    """Who emitted each event: integer pid/tid where both are integers, their texts for the other rows."""

    pid: np.ndarray | None = None       # int64 per row (valid where ``integer``)
    tid: np.ndarray | None = None
    integer: np.ndarray | None = None   # bool per row; None: no row has integer ids known
    text_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pid_text: pa.Array | None = None    # strings for ``text_rows``
    tid_text: pa.Array | None = None


@dataclass
class DecodedBlock:
    """A block's events reduced to what the builder keeps (see the module doc).  Row indices are block rows."""

    n: int
    cls: np.ndarray
    ts: np.ndarray
    threads: Threads
    problems: Counter[str]
    unknown_phases: Counter[str]
    t_min: int | None = None
    t_max: int | None = None
    x_end_max: int | None = None
    # slices
    span_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    scope: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))   # instants' scope byte per slice
    spill: pa.Buffer | None = None      # SPILL_SCHEMA rows of the slices, as an IPC stream (spill.serialize)
    # begin/end
    be_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    be_is_begin: np.ndarray = field(default_factory=lambda: np.zeros(0, np.bool_))
    end_args: list[tuple[int, str]] = field(default_factory=list)   # (index among the block's B/E, args JSON)
    # async: (row, id, cat, name, kind)
    async_events: list[tuple[int, str, str, str, str]] = field(default_factory=list)
    # flows: identity = (category, id); ids are integers where ``flow_integer``, else texts (``flow_id_text``)
    flow_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    flow_categories: list[str] = field(default_factory=list)            # distinct categories of the block
    flow_category: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # index into them
    flow_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    flow_integer: np.ndarray = field(default_factory=lambda: np.zeros(0, np.bool_))
    flow_id_text: list[str] = field(default_factory=list)                # for the rows that are not integer
    flow_phase: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    flow_binds_enclosing: np.ndarray = field(default_factory=lambda: np.zeros(0, np.bool_))
    # counter samples: (row, series, key, value); metadata events: (row, name, args)
    counters: list[tuple[int, str, str, float]] = field(default_factory=list)
    metadata: list[tuple[int, str | None, dict[str, object]]] = field(default_factory=list)


def decode_block(block: ObjectBlock) -> DecodedBlock:
    """Decode one block of events (thread-safe: touches nothing but the block)."""
    block.members(KEYS)
    first, length = block.first_bytes("ph")
    cls = _CLASS[first]
    cls[length != 1] = UNKNOWN
    unknown_phases: Counter[str] = Counter()
    problems: Counter[str] = Counter()
    unknown = np.flatnonzero(cls == UNKNOWN)
    if len(unknown):
        phases = block.strings("ph", unknown).to_pylist()
        unknown_phases.update("(none)" if p is None else repr(p) for p in phases)
    ts_ns, ts_ok = exact_times(block, "ts")
    ts_ok &= np.abs(ts_ns) < TIME_LIMIT
    timed = (cls != UNKNOWN) & (cls != META)
    bad_ts = timed & ~ts_ok
    if bad_ts.any():
        far = count_finite_numbers(block.strings("ts", np.flatnonzero(bad_ts)))
        if far:  # numbers, but beyond what int64 ns hold (a unit mix-up: ns written where µs go?)
            problems["events with a ts beyond ±2^62 ns (is it in µs, as the format says?)"] += far
        if int(bad_ts.sum()) - far:
            problems["events without a valid numeric ts"] += int(bad_ts.sum()) - far
        cls[bad_ts] = IGNORED
    out = DecodedBlock(n=len(block), cls=cls, ts=ts_ns, threads=_threads(block), problems=problems,
                       unknown_phases=unknown_phases)
    _spans(block, out)  # first: it skips X events ending beyond the time limit
    ok_ts = ts_ns[timed & ts_ok & (cls != IGNORED)]
    if len(ok_ts):
        out.t_min, out.t_max = int(ok_ts.min()), int(ok_ts.max())
    _begin_end(block, out)
    if np.isin(cls, ASYNC_CLASSES).any():
        _async(block, out)
    if (cls == FLOW).any():
        _flows(block, out)
    if (cls == COUNTER).any():
        _counters(block, out)
    if (cls == META).any():
        rows = np.flatnonzero(cls == META)
        out.metadata = [(r, name, decode_object(text)) for r, name, text in zip(
            rows.tolist(), block.strings("name", rows).to_pylist(), block.raw("args", rows).to_pylist(), strict=True)]
    return out


def exact_times(block: ObjectBlock, key: str, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``key``'s values (microseconds) as exact int64 nanoseconds and a valid mask, for all rows or ``rows``.

    Numbers the kernel parsed are taken as they are; the rest (numbers in strings, exponents, huge values, blocks
    read by the vectorised scanner) go through the exact decimal cast.
    """
    parsed = block.numbers(key)
    if parsed is None:
        return decimal_text_to_ns(block.strings(key, rows))
    values, state = parsed
    if rows is not None:
        values, state = values[rows], state[rows]
    ok = state == json_kernel.NUM_OK
    slow = np.flatnonzero(state == json_kernel.NUM_SLOW)
    if len(slow):
        values = values.copy()
        sel = slow if rows is None else rows[slow]
        values[slow], ok[slow] = decimal_text_to_ns(block.strings(key, sel))
    return values, ok


def _threads(block: ObjectBlock) -> Threads:
    pid, tid = block.numbers("pid"), block.numbers("tid")
    if pid is None or tid is None:
        return Threads(text_rows=np.arange(len(block)), pid_text=block.strings("pid"), tid_text=block.strings("tid"))
    integer = (pid[1] == json_kernel.NUM_OK) & (tid[1] == json_kernel.NUM_OK)
    out = Threads(pid=pid[0], tid=tid[0], integer=integer)
    if not integer.all():
        out.text_rows = np.flatnonzero(~integer)
        out.pid_text = block.strings("pid", out.text_rows)
        out.tid_text = block.strings("tid", out.text_rows)
    return out


def _complete_durations(block: ObjectBlock, out: DecodedBlock) -> np.ndarray:
    """The durations of the block's X events, in row order, after skipping (``IGNORED``, counted) those that end
    beyond the time limit; an invalid or negative ``dur`` makes the event zero-length (counted)."""
    rows = np.flatnonzero(out.cls == COMPLETE)
    if not len(rows):
        return np.zeros(0, np.int64)
    dur, dur_ok = exact_times(block, "dur", rows)
    if not dur_ok.all():
        out.problems["X events without a valid dur (made zero-length)"] += int((~dur_ok).sum())
    negative = dur < 0
    if negative.any():
        out.problems["X events with a negative dur (made zero-length)"] += int(negative.sum())
    dur = np.where(dur_ok & ~negative, dur, 0)
    beyond = dur > TIME_LIMIT - 1 - out.ts[rows]  # start + dur >= 2**62, without overflowing
    if beyond.any():
        out.problems["X events ending beyond 2**62 ns (skipped)"] += int(beyond.sum())
        out.cls[rows[beyond]] = IGNORED
        dur = dur[~beyond]
    return dur


def _spans(block: ObjectBlock, out: DecodedBlock) -> None:
    dur = _complete_durations(block, out)
    cls = out.cls
    rows = np.flatnonzero(np.isin(cls, SPAN_CLASSES))
    if not len(rows):
        return
    c = cls[rows]
    start = out.ts[rows]
    end = start.copy()
    x = np.flatnonzero(c == COMPLETE)
    if len(x):
        end[x] = start[x] + dur
        out.x_end_max = int(end[x].max())
    end[(c == BEGIN) | (c == ASYNC_BEGIN)] = PENDING
    scope = np.zeros(len(rows), np.uint8)
    inst = np.flatnonzero(c == INSTANT)
    if len(inst):
        s, _ = block.first_bytes("s")
        scope[inst] = s[rows[inst]]
    names = pc.dictionary_encode(block.strings("name", rows).fill_null(""))
    cats = pc.dictionary_encode(block.strings("cat", rows))
    args = block.raw("args", rows)
    if block.contains_byte("args", ord("\n"), rows):
        args = _compact_json(args)
    out.span_rows, out.start, out.end, out.scope = rows, start, end, scope
    out.spill = serialize(pa.RecordBatch.from_arrays([names, cats, args], schema=SPILL_SCHEMA))


def _begin_end(block: ObjectBlock, out: DecodedBlock) -> None:
    cls = out.cls
    rows = np.flatnonzero((cls == BEGIN) | (cls == END))
    if not len(rows):
        return
    is_begin = cls[rows] == BEGIN
    out.be_rows, out.be_is_begin = rows, is_begin
    ends = rows[~is_begin]
    if len(ends):
        args = block.raw("args", ends)
        end_pos = np.flatnonzero(~is_begin)
        out.end_args = [(k, text) for k, text in zip(end_pos.tolist(), args.to_pylist(), strict=True)
                        if text is not None and text.strip() not in ("{}", "")]


def _async(block: ObjectBlock, out: DecodedBlock) -> None:
    rows = np.flatnonzero(np.isin(out.cls, ASYNC_CLASSES))
    ids = block.strings("id", rows).to_pylist()
    id2 = block.raw("id2", rows).to_pylist()
    cats = block.strings("cat", rows).to_pylist()
    names = block.strings("name", rows).fill_null("").to_pylist()
    kinds = {ASYNC_BEGIN: "b", ASYNC_END: "e", ASYNC_INSTANT: "n"}
    cls = out.cls
    out.async_events = [(r, i if i is not None else _id2(i2), cat or "", name, kinds[int(cls[r])])
                        for r, i, i2, cat, name in zip(rows.tolist(), ids, id2, cats, names, strict=True)]


def _id2(text: str | None) -> str:
    """An async event's identity from its ``id2``: ``global:<id>`` for ``{"global": ...}`` (shared by every process,
    :func:`profiler.importers.chrome_tracks.pair_async`), ``local:<id>`` for ``{"local": ...}``, else the text."""
    value = decode_object(text) if text else {}
    for scope in ("global", "local"):
        if scope in value and len(value) == 1:
            return f"{scope}:{value[scope]}"
    return text or ""


def _flows(block: ObjectBlock, out: DecodedBlock) -> None:
    rows = np.flatnonzero(out.cls == FLOW)
    cat = pc.dictionary_encode(block.strings("cat", rows).fill_null(""))
    out.flow_categories = cat.dictionary.to_pylist()
    out.flow_category = np.asarray(cat.indices, np.int64)
    # The identity is the id's text (a string id "5" is the integer 5), else id2's JSON text; integers stay
    # integers (the kernel parsed them), only the others are texts.
    parsed = block.numbers("id")
    if parsed is not None:
        out.flow_id = parsed[0][rows]
        out.flow_integer = parsed[1][rows] == json_kernel.NUM_OK
    else:
        out.flow_id = np.zeros(len(rows), np.int64)
        out.flow_integer = np.zeros(len(rows), np.bool_)
    other = rows[~out.flow_integer]
    if len(other):
        ident = pc.coalesce(block.strings("id", other), block.raw("id2", other), pa.scalar(""))
        out.flow_id_text = ident.to_pylist()
    phase, _ = block.first_bytes("ph")
    bp, _ = block.first_bytes("bp")
    out.flow_rows = rows
    out.flow_phase = phase[rows]
    out.flow_binds_enclosing = (phase[rows] != ord("f")) | (bp[rows] == ord("e"))


def _counters(block: ObjectBlock, out: DecodedBlock) -> None:
    rows = np.flatnonzero(out.cls == COUNTER)
    names = block.strings("name", rows).fill_null("").to_pylist()
    ids = block.strings("id", rows).to_pylist()
    args = block.raw("args", rows).to_pylist()
    skipped = 0
    for r, name, ident, text in zip(rows.tolist(), names, ids, args, strict=True):
        values = decode_object(text)
        series = f"{name}[{ident}]" if ident is not None else name
        numeric = [(k, v) for k, v in values.items() if _is_number(v)]
        skipped += len(values) - len(numeric)
        out.counters.extend((r, series, key, float(value)) for key, value in numeric)  # type: ignore[arg-type]
    if skipped:
        out.problems["non-numeric counter values"] += skipped


def decode_object(text: str | None) -> dict[str, object]:
    """A JSON object's text as a dict ({} when empty, invalid or not an object)."""
    if not text:
        return {}
    try:
        value = _JSON.decode(text)
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compact_json(args: pa.Array) -> pa.Array:
    """Pretty-printed JSON texts without their line breaks and indentation.

    A raw line break cannot occur inside a JSON string, so removing every line break with the blanks around it
    only touches whitespace between tokens.
    """
    return pc.replace_substring_regex(args, r"[ \t\r]*\n[ \t\r]*", "")
