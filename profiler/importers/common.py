"""Helpers shared by the importers: record batches in trace-schema types, the Metadata row, engine names.

Importers yield batches whose known columns have exactly the Arrow types of :mod:`tracer.schema` (strings of
dictionary columns dictionary-encoded), every column of the table present (null where the input has nothing),
followed by any extra columns the input carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tracer import schema
from tracer._version import __version__
from tracer.errors import TraceFormatError

#: Engine spellings seen in Neuron output (schema examples, ActiveTime rows, legacy JSON row labels), lower-cased,
#: mapped to the names trnprof uses (:data:`tracer.schema.ENGINES`).
ENGINE_ALIASES: Mapping[str, str] = {
    "tensor": "Tensor", "tensore": "Tensor", "tensormatrix": "Tensor", "tensormatrixe": "Tensor", "pe": "Tensor",
    "vector": "Vector", "vectore": "Vector", "dve": "Vector",
    "scalar": "Scalar", "scalare": "Scalar", "act": "Scalar", "activation": "Scalar",
    "gpsimd": "GpSimd", "gpsimde": "GpSimd", "pool": "GpSimd", "poole": "GpSimd",
    "sync": "Sync", "synce": "Sync", "sp": "Sync",
}


class TraceImportWarning(UserWarning):
    """An imported file had events trnprof skipped or repaired (unknown phases, negative durations, ...)."""


def normalise_engine(name: str | None) -> str | None:
    """``tensor``/``TensorE``/``PE`` -> ``Tensor`` etc.; unknown names are returned unchanged."""
    if name is None:
        return None
    return ENGINE_ALIASES.get(name.strip().lower(), name)


def normalise_engines(values: pa.Array) -> pa.Array:
    """:func:`normalise_engine` over a string or dictionary array (work proportional to distinct values)."""
    enc = values if pa.types.is_dictionary(values.type) else pc.dictionary_encode(values)
    mapped = pa.array([normalise_engine(v) for v in enc.dictionary.to_pylist()], pa.string())
    return pa.DictionaryArray.from_arrays(enc.indices, mapped).dictionary_decode()


def to_schema_type(column: pa.Array | pa.ChunkedArray, col: schema.Column, where: str) -> pa.Array:
    """``column`` cast to the trace-schema type of ``col`` (dictionary columns dictionary-encoded)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    try:
        if column.type == col.type:
            return column
        if col.is_dictionary:
            if pa.types.is_dictionary(column.type):
                column = column.dictionary_decode()
            if not (pa.types.is_string(column.type) or pa.types.is_null(column.type)):
                if pa.types.is_large_string(column.type) or pa.types.is_binary(column.type):
                    column = column.cast(pa.string())
                else:
                    raise TraceFormatError(f"{where}: column {col.name!r} holds {column.type}, expected strings")
            return pc.dictionary_encode(column.cast(pa.string())).cast(col.type)
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        return column.cast(col.type) if column.type != col.type else column
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        first = str(exc).splitlines()[0]
        raise TraceFormatError(f"{where}: column {col.name!r} cannot be read as {col.type}: {first}") from None


def table_batch(spec: schema.TableSpec, columns: Mapping[str, Any], where: str,
                extra: Mapping[str, pa.Array] | None = None) -> pa.RecordBatch:
    """A batch of ``spec``: its columns in schema order and types (missing ones null), then ``extra`` columns.

    Raises:
        TraceFormatError: naming ``where`` when a required column is missing or holds nulls, or a type is wrong.
    """
    n = None
    for value in columns.values():
        n = len(value)
        break
    if n is None:
        n = len(next(iter(extra.values()))) if extra else 0
    arrays, fields = [], []
    for col in spec.columns:
        value = columns.get(col.name)
        if value is None:
            if col.required:
                raise TraceFormatError(f"{where}: required column {col.name!r} is missing")
            arr = pa.nulls(n, col.type)
        else:
            if not isinstance(value, pa.Array | pa.ChunkedArray):
                value = pa.array(value)
            arr = to_schema_type(value, col, where)
            if col.required and arr.null_count:
                raise TraceFormatError(f"{where}: required column {col.name!r} has {arr.null_count:,} empty values")
        arrays.append(arr)
        fields.append(col.field())
    for name, value in (extra or {}).items():
        if name in spec:
            continue
        arrays.append(value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value)
        fields.append(pa.field(name, arrays[-1].type))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def metadata_batch(fields: Mapping[str, Any], *, complete: bool, tool: str,
                   extra: Mapping[str, Any] | None = None) -> pa.RecordBatch:
    """The one-row Metadata table of an imported trace.

    Args:
        fields: known Metadata fields (others are ignored unless in ``extra``).
        complete: whether the whole input was read (``recording_complete``).
        tool: what wrote the input, recorded in ``tool_version`` next to trnprof's version.
        extra: further columns kept as they are (e.g. Neuron fields trnprof does not model).
    """
    row: dict[str, Any] = {c.name: fields.get(c.name) for c in schema.METADATA.columns}
    row["profile_schema_version"] = row.get("profile_schema_version") or schema.NEURON_PROFILE_SCHEMA_VERSION
    row["trace_format_version"] = schema.TRACE_FORMAT_VERSION
    row["tool_version"] = f"trnprof {__version__} import of {tool}"
    row["is_simulation"] = bool(row.get("is_simulation") or False)
    row["recording_complete"] = complete
    columns = {}
    for col in schema.METADATA.columns:
        value = row[col.name]
        columns[col.name] = pa.array([value], col.type)
    extra_arrays = {k: (v if isinstance(v, pa.Array) else pa.array([v])) for k, v in (extra or {}).items()}
    return table_batch(schema.METADATA, columns, "Metadata", extra_arrays)
