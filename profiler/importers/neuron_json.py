"""The legacy ``neuron-profile view --output-format json`` file: ``summary`` and ``instruction`` lists.

Each element of ``instruction`` becomes an ``Instruction`` row:

=======================  ==========================================================================
JSON field               Instruction column
=======================  ==========================================================================
``timestamp`` (ns)       ``start_ts``
``duration`` (ns)        ``duration_ns``; ``end_ts = start_ts + duration``
``label``                ``timeline_track`` as written, and ``engine`` through
                         :data:`profiler.importers.common.ENGINE_ALIASES` (``TensorMatrix`` -> ``Tensor``)
``opcode``               ``opcode``
``operands``             ``operands`` (empty string when absent)
``hlo_name``             ``hlo_name``
``nki_source_location``  ``nki_source_location``
(position)               ``id`` (input order) and ``pc`` (order of start within the engine)
any other field          kept as an extra string column (its raw JSON text for non-strings)
=======================  ==========================================================================

The one-element ``summary`` list becomes a ``Summary`` table (one column per field), as Neuron Explorer's
``Summary.parquet``.  Labels that name no engine keep the label as the engine name (see ``docs/importers.md``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler.importers.common import TraceImportWarning, metadata_batch, normalise_engines, table_batch
from profiler.importers.decimal_text import count_finite_numbers, decimal_text_to_ns
from profiler.importers.json_stream import DEFAULT_BLOCK_BYTES, JsonArrayStream, read_head, top_level_keys
from profiler.importers.spill import Spill
from profiler.sources import ProgressCallback
from tracer import schema

FORMAT_NAME = "neuron-profile-json"
SUMMARY_TABLE = "Summary"
_KNOWN = ("timestamp", "duration", "label", "opcode", "operands", "hlo_name", "nki_source_location")
_EMIT_ROWS = 1 << 16


class NeuronJsonSource:
    """A legacy neuron-profile JSON file (plain or gzip) as a :class:`~profiler.sources.TraceSource`."""

    format_name = FORMAT_NAME

    def __init__(self, path: str | os.PathLike[str], *, block_bytes: int = DEFAULT_BLOCK_BYTES,
                 spill_dir: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path)
        self.block_bytes = block_bytes
        self.spill_dir = spill_dir

    def input_files(self) -> list[Path]:
        return [self.path]

    def input_size(self) -> int:
        return self.path.stat().st_size

    def read(self, progress: ProgressCallback | None = None) -> Iterator[tuple[str, pa.RecordBatch]]:
        stream = JsonArrayStream(self.path, "instruction", accept_array_root=False, keep_keys=("summary",),
                                 block_bytes=self.block_bytes, what="instruction")
        where = f"{self.path}: Instruction"
        extra_keys: list[str] = []
        starts: list[np.ndarray] = []
        engines: list[pa.Array] = []
        last_end = None
        skipped = no_dur = negative = far = 0
        with Spill(self.spill_dir) as spill:
            for block in stream.blocks(progress):
                for k in block.key_names():
                    if k not in _KNOWN and k not in extra_keys:
                        extra_keys.append(k)
                block.members(_KNOWN + tuple(extra_keys))
                ts, ok = decimal_text_to_ns(block.strings("timestamp"), scale_digits=0)
                dur, dok = decimal_text_to_ns(block.strings("duration"), scale_digits=0)
                keep = ok & (block.member("opcode").present | block.member("label").present)
                if not ok.all():  # numbers too large for int64 ns are not "without a timestamp"
                    far += count_finite_numbers(block.strings("timestamp", np.flatnonzero(~ok)))
                skipped += int((~keep).sum())
                no_dur += int((keep & ~dok).sum())
                negative += int((keep & dok & (dur < 0)).sum())
                dur = np.where(dok & (dur > 0), dur, 0)
                rows = np.flatnonzero(keep)
                label = block.strings("label", rows)
                engine = normalise_engines(label.fill_null("unknown"))
                spill.write(pa.RecordBatch.from_pydict({
                    schema.START_TS: pa.array(ts[rows]),
                    schema.DURATION_NS: pa.array(dur[rows]),
                    schema.TIMELINE_TRACK: label,
                    schema.ENGINE: engine,
                    schema.OPCODE: block.strings("opcode", rows).fill_null(""),
                    schema.OPERANDS: block.strings("operands", rows).fill_null(""),
                    schema.HLO_NAME: block.strings("hlo_name", rows),
                    schema.NKI_SOURCE_LOCATION: block.strings("nki_source_location", rows),
                    **{_extra_name(k): block.strings(k, rows) for k in extra_keys},
                }))
                starts.append(ts[rows])
                engines.append(engine)
                if len(rows):
                    hi = int((ts[rows] + dur[rows]).max())
                    last_end = hi if last_end is None else max(last_end, hi)
            yield from self._emit(spill, starts, engines, extra_keys, where)
        summary = stream.kept.get("summary")
        if summary is not None:
            batch = _summary_batch(summary)
            if batch is not None:
                yield SUMMARY_TABLE, batch
        t_all = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        meta = {"profile_name": self.path.name}
        if len(t_all):
            meta["first_hw_timestamp"] = int(t_all.min())
            meta["last_hw_timestamp"] = last_end
        yield schema.METADATA.name, metadata_batch(meta, complete=stream.fault is None,
                                                   tool="neuron-profile JSON")
        if far:
            warnings.warn(TraceImportWarning(f"{self.path}: skipped {far:,} instructions with a timestamp beyond "
                                             "±2^62 ns (is it in ns, as the format says?)"), stacklevel=2)
        if skipped - far:
            warnings.warn(TraceImportWarning(f"{self.path}: skipped {skipped - far:,} instructions without a numeric "
                                             "timestamp or without opcode and label"), stacklevel=2)
        kept = sum(len(t) for t in starts)
        if no_dur:  # made zero-length: with every duration missing, every busy time computed is 0
            every = " (all of them: every busy time and utilization will read 0)" if no_dur == kept else ""
            warnings.warn(TraceImportWarning(f"{self.path}: {no_dur:,} instruction{'s' * (no_dur != 1)} without a "
                                             f"numeric duration {'were' if no_dur != 1 else 'was'} made "
                                             f"zero-length{every}"), stacklevel=2)
        if negative:
            warnings.warn(TraceImportWarning(f"{self.path}: {negative:,} instruction{'s' * (negative != 1)} with a "
                                             f"negative duration {'were' if negative != 1 else 'was'} made "
                                             "zero-length"), stacklevel=2)

    def _emit(self, spill: Spill, starts: list[np.ndarray], engines: list[pa.Array], extra_keys: list[str],
              where: str) -> Iterator[tuple[str, pa.RecordBatch]]:
        if not starts:
            return
        # pc: order of start within each engine (stable in input order).
        start = np.concatenate(starts)
        engine = pa.chunked_array(engines).combine_chunks() if engines else pa.array([], pa.string())
        codes = np.asarray(pc.dictionary_encode(engine).indices)
        order = np.lexsort((np.arange(len(start)), start, codes))
        pcs = np.empty(len(start), np.int64)
        grp = codes[order]
        first = np.concatenate(([0], np.flatnonzero(np.diff(grp)) + 1)) if len(grp) else np.zeros(0, np.int64)
        run_start = np.repeat(first, np.diff(np.concatenate((first, [len(grp)]))))
        pcs[order] = np.arange(len(grp)) - run_start
        offset = 0
        for batch in spill.read():
            n = batch.num_rows
            cols = {name: batch.column(name) for name in batch.schema.names}
            s = np.asarray(cols.pop(schema.START_TS))
            d = np.asarray(cols.pop(schema.DURATION_NS))
            columns = {schema.ID: np.arange(offset, offset + n, dtype=np.int64), schema.START_TS: s,
                       schema.END_TS: s + d, schema.DURATION_NS: d, schema.PC: pcs[offset:offset + n],
                       **{k: v for k, v in cols.items() if k in schema.INSTRUCTION}}
            extra = {(e := _extra_name(k)): (cols[e] if e in cols else pa.nulls(n, pa.string())) for k in extra_keys}
            offset += n
            yield schema.INSTRUCTION.name, table_batch(schema.INSTRUCTION, columns, where, extra)


def _extra_name(key: str) -> str:
    """Column name of an unmodelled JSON field: its own, or ``json_<key>`` where that would clash with a schema
    column (e.g. a ``pc`` field next to the computed ``pc``)."""
    return f"json_{key}" if key in schema.INSTRUCTION else key


def _summary_batch(raw: bytes) -> pa.RecordBatch | None:
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    rows = value if isinstance(value, list) else [value]
    rows = [r for r in rows if isinstance(r, dict)]
    if not rows:
        return None
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    if not keys:  # only empty objects: no column to keep (a table of none cannot be stored)
        return None
    columns = {}
    for k in keys:
        values = [r.get(k) for r in rows]
        try:
            columns[k] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns[k] = pa.array([None if v is None else msgspec.json.encode(v).decode() for v in values])
    return pa.RecordBatch.from_pydict(columns)


def looks_like_neuron_json(head: bytes) -> bool:
    """True when the file's top-level object has the ``instruction`` or ``summary`` lists of neuron-profile."""
    keys = top_level_keys(head)
    return bool(keys) and ("instruction" in keys or ("summary" in keys and "traceEvents" not in keys))


def detect(path: Path) -> NeuronJsonSource | None:
    """A source for ``path`` when it is a legacy neuron-profile JSON file, else None."""
    if not path.is_file():
        return None
    head = read_head(path)
    if head and looks_like_neuron_json(head):
        return NeuronJsonSource(path)
    return None
