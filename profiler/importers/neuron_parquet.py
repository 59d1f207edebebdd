"""Neuron Explorer Parquet output: a directory of ``<Table>.parquet`` files (large tables split as
``<Table>_0.parquet``, ``<Table>_1.parquet``, ...).

The tables trnprof models (``Instruction``, ``DmaPacket``, ``SemaphoreUpdate``, ``Flow``, ``Metadata``,
``DmaQueuesInfo``) are read with their known columns cast to :mod:`tracer.schema` types and engine names
normalised (``tensor`` -> ``Tensor``); every other column and every other table (``Summary``, ``ActiveTime``,
``SchemaFields``, ...) is kept as it is, so queries written for Neuron Explorer keep working.  Rows stream one
Parquet row group at a time.

Versions: ``Metadata.profile_schema_version`` selects the field names; 7.x is the documented layout and 12.x is
read with the same names (its diff is not public), every non-required column being optional.  ``SchemaFields``,
when present, lists the fields the file's own schema requires; missing ones are reported.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from profiler.importers.common import TraceImportWarning, metadata_batch, normalise_engines, table_batch
from profiler.sources import ProgressCallback
from tracer import schema
from tracer.errors import TraceFormatError

FORMAT_NAME = "neuron-parquet"
PARQUET_MAGIC = b"PAR1"
#: Profile schema majors whose layout is known; others are read the same way with a warning.
KNOWN_SCHEMA_MAJORS = (7, 12)
_FILE_RE = re.compile(r"^(?P<table>[A-Za-z][A-Za-z0-9]*?)(?:_(?P<part>\d+))?\.parquet$")
#: Tables read into trnprof's schema (Neuron's, and trnprof's own ``Span``/``Counter`` as ``trnprof export``
#: writes them); everything else is passed through.
MODELLED = {t.name: t for t in (schema.INSTRUCTION, schema.DMA_PACKET, schema.SEMAPHORE_UPDATE, schema.FLOW,
                                schema.DMA_QUEUES_INFO, schema.SPAN, schema.COUNTER)}
#: Columns holding engine names, per table.
ENGINE_COLUMNS = {"Instruction": ("engine",), "ActiveTime": ("engine",), "SemaphoreUpdate": ("update_source",)}
#: Neuron field -> Metadata field where the names differ.
_METADATA_RENAMES = {"explorer_version": "tool_version"}
BATCH_ROWS = 1 << 16


def table_files(directory: Path, left_out: list[str] | None = None) -> dict[str, list[Path]]:
    """Parquet files of each table in ``directory``, splits in part order.  A table written both whole
    (``T.parquet``) and split (``T_0.parquet``, ...) is read from whichever was written last (a re-export into the
    same directory; both would count every row twice); the other is named in ``left_out``."""
    found: dict[str, list[tuple[int, Path]]] = {}
    for f in directory.iterdir():
        m = _FILE_RE.match(f.name)
        if m and f.is_file():
            part = int(m.group("part")) if m.group("part") is not None else -1
            found.setdefault(m.group("table"), []).append((part, f))
    out = {}
    for table, parts in sorted(found.items()):
        whole = [f for part, f in parts if part < 0]
        split = [(part, f) for part, f in sorted(parts) if part >= 0]
        if whole and split:
            newer_whole = whole[0].stat().st_mtime >= max(f.stat().st_mtime for _, f in split)
            kept, dropped = (whole, [f.name for _, f in split]) if newer_whole else ([f for _, f in split],
                                                                                   [whole[0].name])
            if left_out is not None:
                left_out.append(f"{table}: read {', '.join(f.name for f in kept[:3])}"
                                f"{', ...' if len(kept) > 3 else ''} (written last), left out "
                                f"{', '.join(dropped[:3])}{', ...' if len(dropped) > 3 else ''}")
            out[table] = kept
        else:
            out[table] = [f for _, f in sorted(parts)]
    return out


class NeuronParquetSource:
    """A Neuron Explorer Parquet output directory as a :class:`~profiler.sources.TraceSource`."""

    format_name = FORMAT_NAME

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._left_out: list[str] = []
        self.tables = table_files(self.path, self._left_out)

    def input_files(self) -> list[Path]:
        return [f for files in self.tables.values() for f in files]

    def input_size(self) -> int:
        return sum(f.stat().st_size for f in self.input_files())

    def read(self, progress: ProgressCallback | None = None) -> Iterator[tuple[str, pa.RecordBatch]]:
        for f in self.input_files():  # fail before yielding anything when a file is not Parquet at all
            self._open(f)
        for what in self._left_out:
            warnings.warn(TraceImportWarning(f"{self.path}: a table is both whole and split: {what}"), stacklevel=2)
        meta_row, version = self._metadata()
        required = self._schema_required()
        for table, files in self.tables.items():
            if table == schema.METADATA.name:
                if progress is not None:
                    progress(sum(f.stat().st_size for f in files))
                continue
            spec = MODELLED.get(table)
            reported = False
            for f in files:
                for batch in self._batches(f, progress):
                    if not reported:
                        self._check_required(table, f, batch.schema.names, required)
                        reported = True
                    yield table, self._convert(table, spec, batch, f)
        yield schema.METADATA.name, self._metadata_batch(meta_row, version)

    # -- reading ----------------------------------------------------------------------------------------------
    def _open(self, f: Path) -> pq.ParquetFile:
        try:
            with open(f, "rb") as fh:
                if fh.read(4) != PARQUET_MAGIC:
                    raise TraceFormatError(f"{f}: not a Parquet file (no PAR1 magic); remove it or re-export "
                                           "the profile")
            return pq.ParquetFile(f)
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TraceFormatError(f"{f}: unreadable Parquet file ({first}); the file is truncated or corrupt, "
                                   "re-export the profile") from None

    def _batches(self, f: Path, progress: ProgressCallback | None) -> Iterator[pa.RecordBatch]:
        pf = self._open(f)
        groups = pf.num_row_groups
        size = f.stat().st_size
        done = 0
        for g in range(groups):
            try:
                table = pf.read_row_group(g)
                table.validate(full=True)   # e.g. strings that are not UTF-8: corrupt data, not a value
            except (pa.ArrowException, OSError) as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                warnings.warn(TraceImportWarning(f"{f}: row group {g} of {groups} is unreadable ({first}); "
                                                 "skipped it and kept the others"), stacklevel=3)
                continue
            finally:
                if progress is not None:
                    step = size * (g + 1) // max(groups, 1) - done
                    done += step
                    progress(step)
            yield from table.to_batches(max_chunksize=BATCH_ROWS)

    def _metadata(self) -> tuple[dict[str, object], str | None]:
        files = self.tables.get(schema.METADATA.name)
        if not files:
            warnings.warn(TraceImportWarning(f"{self.path}: no Metadata.parquet; assuming profile schema "
                                             f"{schema.NEURON_PROFILE_SCHEMA_VERSION}"), stacklevel=3)
            return {}, None
        try:
            table = self._open(files[0]).read()
            table.validate(full=True)
            row = table.slice(0, 1).to_pylist()[0] if table.num_rows else None
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            raise TraceFormatError(f"{files[0]}: unreadable Metadata ({str(exc).splitlines()[0]}); re-export the "
                                   "profile") from None
        if row is None:
            return {}, None
        version = row.get("profile_schema_version")
        version = str(version) if version is not None else None
        major = _major(version)
        if major is None or major not in KNOWN_SCHEMA_MAJORS:
            warnings.warn(TraceImportWarning(
                f"{files[0]}: profile schema version {version!r} is not one trnprof knows "
                f"({', '.join(f'{m}.x' for m in KNOWN_SCHEMA_MAJORS)}); reading it with the 7.4.0 field names"),
                stacklevel=3)
        return row, version

    def _schema_required(self) -> dict[str, set[str]]:
        files = self.tables.get("SchemaFields")
        if not files:
            return {}
        try:
            t = self._open(files[0]).read(columns=["table_name", "field_name", "field_required"])
        except (pa.ArrowInvalid, KeyError):
            return {}
        out: dict[str, set[str]] = {}
        for table, fld, req in zip(*(t.column(i).to_pylist() for i in range(3)), strict=True):
            if req in (True, "true", "True", 1, "1") and table and fld:
                out.setdefault(str(table), set()).add(str(fld))
        return out

    def _check_required(self, table: str, f: Path, names: list[str], required: dict[str, set[str]]) -> None:
        missing = sorted(required.get(table, set()) - set(names))
        if missing:
            warnings.warn(TraceImportWarning(f"{f}: lacks field(s) {', '.join(missing)} that its SchemaFields "
                                             "marks required; read what is there"), stacklevel=4)

    # -- conversion -------------------------------------------------------------------------------------------
    def _convert(self, table: str, spec: schema.TableSpec | None, batch: pa.RecordBatch,
                 f: Path) -> pa.RecordBatch:
        cols = {name: batch.column(name) for name in batch.schema.names}
        for name in ENGINE_COLUMNS.get(table, ()):
            if name in cols and (pa.types.is_string(cols[name].type) or pa.types.is_dictionary(cols[name].type)
                                 or pa.types.is_large_string(cols[name].type)):
                cols[name] = normalise_engines(cols[name].cast(pa.string()) if not pa.types.is_dictionary(
                    cols[name].type) else cols[name])
        if spec is None:
            return pa.RecordBatch.from_pydict(cols)
        if spec is schema.DMA_PACKET and schema.QUEUE_NAME not in cols:
            cols[schema.QUEUE_NAME] = _queue_names(cols, batch.num_rows)
        if spec.kind == "interval" and schema.DURATION_NS not in cols and {schema.START_TS, schema.END_TS} <= set(cols):
            cols[schema.DURATION_NS] = pc.subtract(cols[schema.END_TS], cols[schema.START_TS])
        if spec.kind == "interval" and schema.START_TS in cols:
            # (times that do not convert -- beyond int64, types that do not mix -- are left as they are, for
            # table_batch to refuse naming the column)
            with contextlib.suppress(pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                cols = self._fill_times(dict(cols), f)
        known = {k: v for k, v in cols.items() if k in spec}
        extra = {k: v for k, v in cols.items() if k not in spec}
        batch = table_batch(spec, known, str(f), extra)
        if spec.kind == "interval":
            batch = self._repair_intervals(batch, f)
        return batch

    def _fill_times(self, cols: dict[str, Any], f: Path) -> dict[str, Any]:
        """Times of an interval table (``cols``, changed in place) made whole: fractional ns rounded, a missing
        duration or end (a value or the column) derived from the other two, rows without a start (or without both
        end and duration) skipped -- each with a warning, instead of refusing the profile for one row."""
        times = (schema.START_TS, schema.END_TS, schema.DURATION_NS)
        for name in times:
            col = cols.get(name)
            if col is not None and pa.types.is_floating(col.type):  # a fraction of a ns means nothing here
                cols[name] = pc.cast(pc.if_else(pc.is_finite(col), pc.round(col), None), pa.int64())
            elif col is not None and pa.types.is_integer(col.type):
                cols[name] = pc.cast(col, pa.int64())
        if not all(cols.get(n) is None or pa.types.is_integer(cols[n].type) for n in times):
            return cols   # (text or timestamps: table_batch converts them, or refuses them naming the column)
        start, end, dur = (cols.get(n) for n in times)
        if end is None and dur is not None:  # (no end_ts column: start + duration)
            cols[schema.END_TS] = end = pc.add(start, dur)
        if dur is not None and end is not None and dur.null_count:
            cols[schema.DURATION_NS] = dur = pc.coalesce(dur, pc.subtract(end, start))
        if end is not None and dur is not None and end.null_count:
            cols[schema.END_TS] = end = pc.coalesce(end, pc.add(start, dur))
        keep = pc.is_valid(start)
        for col in (end, dur):
            if col is not None:
                keep = pc.and_(keep, pc.is_valid(col))
        dropped = len(start) - (pc.sum(keep).as_py() or 0)
        if dropped:
            warnings.warn(TraceImportWarning(f"{f}: skipped {dropped:,} rows without a start_ts, or without both "
                                             "end_ts and duration_ns"), stacklevel=5)
            cols = {k: pc.filter(v, keep) for k, v in cols.items()}
        return cols

    def _repair_intervals(self, batch: pa.RecordBatch, f: Path) -> pa.RecordBatch:
        """Rows ending before they start are made zero-length (end = start), with one warning per batch."""
        start, end = batch.column(schema.START_TS), batch.column(schema.END_TS)
        bad = pc.less(end, start)
        count = pc.sum(bad).as_py() or 0
        if not count:
            return batch
        warnings.warn(TraceImportWarning(f"{f}: {count:,} rows end before they start; made them zero-length"),
                      stacklevel=4)
        fixed_end = pc.if_else(bad, start, end)
        names = batch.schema.names
        cols = list(batch.columns)
        cols[names.index(schema.END_TS)] = fixed_end
        cols[names.index(schema.DURATION_NS)] = pc.subtract(fixed_end, start)
        return pa.RecordBatch.from_arrays(cols, schema=batch.schema)

    def _metadata_batch(self, row: dict[str, object], version: str | None) -> pa.RecordBatch:
        known: dict[str, object] = {}
        extra: dict[str, object] = {}
        for field_name, value in row.items():
            key = _METADATA_RENAMES.get(field_name, field_name)
            if key in schema.METADATA and key not in ("trace_format_version", "tool_version", "recording_complete"):
                known[key] = value
            else:
                extra[field_name] = value
        known["profile_schema_version"] = version or schema.NEURON_PROFILE_SCHEMA_VERSION
        try:
            return metadata_batch(known, complete=True, tool="Neuron Explorer Parquet",
                                  extra={k: pa.array([v]) for k, v in extra.items()})
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TraceFormatError(f"{self.path}: Metadata has a field of an unexpected type: {exc}") from None


def _major(version: str | None) -> int | None:
    if not version:
        return None
    try:
        return int(version.split(".", 1)[0])
    except ValueError:
        return None


def _queue_names(cols: dict[str, pa.Array], n: int) -> pa.Array:
    """``queue_name`` for exports without it: ``<queue_type><queue_idx>`` (or ``unknown``)."""
    qtype = cols.get(schema.QUEUE_TYPE)
    qidx = cols.get(schema.QUEUE_IDX)
    base = qtype.cast(pa.string()) if qtype is not None else pa.array(["unknown"] * n, pa.string())
    base = base.fill_null("unknown")
    if qidx is None:
        return base
    return pc.binary_join_element_wise(base, qidx.cast(pa.string()).fill_null(""), "")


def is_neuron_parquet_dir(path: Path) -> bool:
    """True for a directory holding Parquet files named after Neuron Explorer tables (content-checked)."""
    if not path.is_dir():
        return False
    tables = table_files(path)
    neuron_names = {"Instruction", "DmaPacket", "Metadata", "SemaphoreUpdate", "Summary", "ActiveTime", "Flow",
                    "SchemaFields", "DmaPacketAggregated", "OpcodeSummary"}
    hits = [t for t in tables if t in neuron_names]
    if not hits:
        return False
    first = tables[hits[0]][0]
    try:
        with open(first, "rb") as fh:
            return fh.read(4) == PARQUET_MAGIC
    except OSError:
        return False


def detect(path: Path) -> NeuronParquetSource | None:
    """A source for a Neuron Explorer Parquet directory, else None."""
    return NeuronParquetSource(path) if is_neuron_parquet_dir(path) else None
