"""Chrome Trace Event JSON (PyTorch profiler / Kineto, JAX/XLA, VizTracer, Chrome): detection and the source.

Accepts the object form (``{"traceEvents": [...], ...}``) and the array form (``[...]``, closing bracket
optional), plain or gzip-compressed, recognised by content.  Events are streamed in blocks through the vectorised
scanner (:mod:`profiler.importers.json_scan`, :mod:`profiler.importers.json_objects`) and turned into trace tables by
:class:`profiler.importers.chrome_build.ChromeTraceBuilder`:

==========================  =================================================================================
phase                       becomes
==========================  =================================================================================
``X``, ``B``/``E``          ``Span`` on the thread's track, depth from nesting
``i``/``I``                 zero-length ``Span`` (thread, process or global track by scope ``s``)
``b``/``e``/``n``           ``Span`` on a per-process async track named after the outermost event
``C``                       ``Counter`` samples, one series per numeric argument
``s``/``t``/``f``           ``Flow`` edges between the slices they bind to
``M``                       process/thread names and sort order
others                      skipped, counted in one warning
==========================  =================================================================================

Timestamps are microseconds in the file and become int64 nanoseconds exactly (parsed as decimals, not floats).
See ``docs/importers.md`` for the details and limits.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pyarrow as pa

from profiler.importers.json_stream import (
    DEFAULT_BLOCK_BYTES,
    JsonArrayStream,
    read_head,
    top_level_keys,
)
from profiler.prefetch import prefetched
from profiler.sources import ProgressCallback
from tracer import schema

FORMAT_NAME = "chrome-json"
#: Top-level keys of the object form besides ``traceEvents`` (a file with these is a Chrome trace).
CHROME_OBJECT_KEYS = frozenset({
    "traceEvents", "displayTimeUnit", "systemTraceEvents", "otherData", "stackFrames", "samples",
    "schemaVersion", "deviceProperties", "distributedInfo", "traceName", "metadata",
})
_WS = b" \t\r\n"
T = TypeVar("T")


class ChromeJsonSource:
    """A Chrome Trace Event JSON file (plain or gzip) as a :class:`~profiler.sources.TraceSource`.

    Args:
        path: the file.
        block_bytes: bytes parsed per block (memory use is a small multiple of it).
        spill_dir: directory for the temporary file holding slices until the end of the input.
        kernel: parse with the compiled kernel (:mod:`profiler.importers.json_kernel`); None (default) uses it for
            inputs large enough to repay its start-up.
    """

    format_name = FORMAT_NAME

    def __init__(self, path: str | os.PathLike[str], *, block_bytes: int = DEFAULT_BLOCK_BYTES,
                 spill_dir: str | os.PathLike[str] | None = None, kernel: bool | None = None) -> None:
        self.path = Path(path)
        self.block_bytes = block_bytes
        self.spill_dir = spill_dir
        self.kernel = kernel

    def input_files(self) -> list[Path]:
        return [self.path]

    def input_size(self) -> int:
        return self.path.stat().st_size

    def read(self, progress: ProgressCallback | None = None) -> Iterator[tuple[str, pa.RecordBatch]]:
        from profiler.importers.chrome_build import ChromeTraceBuilder
        from profiler.importers.chrome_decode import KEY_SPEC, decode_block

        stream = JsonArrayStream(self.path, "traceEvents", accept_array_root=True, block_bytes=self.block_bytes,
                                 what="event", keys=KEY_SPEC, kernel=self.kernel, keep_keys=("otherData",),
                                 keep_after=False)   # (trnprof's export writes it first)
        with ChromeTraceBuilder(self.path, spill_dir=self.spill_dir) as builder:
            # The kernel (no GIL) parses the next blocks on a background thread while this one is decoded.
            with prefetched(stream.blocks(progress), name="trnprof-json-scan") as blocks:
                for block in blocks:
                    builder.add(decode_block(block))
            yield from builder.finish(complete=stream.fault is None,
                                      other=other_metadata(stream.kept.get("otherData")))


#: Metadata fields an import computes itself, whatever ``otherData`` says.
_OWN_METADATA = frozenset({"first_hw_timestamp", "last_hw_timestamp", "tool_version", "trace_format_version",
                           "recording_complete"})


def other_metadata(raw: bytes | None) -> dict[str, Any]:
    """The Metadata fields an ``otherData`` object holds (trnprof's Chrome export writes the trace's Metadata
    there): those of the Metadata table whose value has the field's type; anything else is ignored."""
    if raw is None:
        return {}
    try:
        other = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return {}
    if not isinstance(other, dict):
        return {}
    out: dict[str, Any] = {}
    for col in schema.METADATA.columns:
        value = other.get(col.name)
        if col.name in _OWN_METADATA or value is None or isinstance(value, dict | list):
            continue
        if isinstance(value, bool) != pa.types.is_boolean(col.type):
            continue
        try:
            pa.array([value], col.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            continue
        out[col.name] = value
    return out


def looks_like_chrome_json(head: bytes) -> bool:
    """True when the first bytes of a (decompressed) file look like a Chrome trace."""
    text = head.lstrip(b"\xef\xbb\xbf" + _WS)
    if text.startswith(b"["):
        rest = text[1:].lstrip(_WS)
        return rest.startswith(b"]") or (rest.startswith(b"{") and b'"ph"' in text) or not rest
    keys = top_level_keys(text)
    if not keys:
        return False
    return "traceEvents" in keys or (
        bool(set(keys) & CHROME_OBJECT_KEYS) and not {"instruction", "summary"} & set(keys))


def detect(path: Path) -> ChromeJsonSource | None:
    """A source for ``path`` when its content is a Chrome trace (plain or gzip), else None."""
    if not path.is_file():
        return None
    head = read_head(path)
    if head and looks_like_chrome_json(head):
        return ChromeJsonSource(path)
    return None
