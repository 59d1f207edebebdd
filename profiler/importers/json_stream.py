"""Streaming a large JSON file as blocks of array elements: plain or gzip input, bounded memory, faults located.

:class:`JsonArrayStream` reads the elements of one JSON array — the top-level array (``[{...}, ...]``) or the array
under one top-level key (``{"traceEvents": [...]}``) — in blocks of complete objects (:class:`ObjectBlock`), so a
multi-GB file is never in memory whole.  Reading and decompression run on a background thread (zlib releases the
GIL), the structure scan on the calling thread.

Faults follow the rule "keep everything valid before the fault": a truncated file, a missing closing bracket,
invalid JSON or a corrupt gzip stream end the stream at the last complete object before the fault and leave one
:class:`~tracer.errors.TruncatedTraceWarning` naming the file, the byte offset and the element index.  Input that
is not the expected JSON at all raises :class:`~tracer.errors.TraceFormatError`.
"""

from __future__ import annotations

import gzip
import os
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import msgspec
import numpy as np

from profiler.importers import json_kernel
from profiler.importers.json_blocks import GZIP_MAGIC, BlockReader
from profiler.importers.json_objects import Member, ObjectBlock
from profiler.importers.json_scan import (
    COLON,
    LBRACE,
    LBRACKET,
    QUOTE,
    RBRACE,
    RBRACKET,
    scan_structure,
    skip_whitespace,
    strip_trailing,
)
from tracer.errors import TraceFormatError, TruncatedTraceWarning

#: Bytes per block: a few MiB keeps numpy's temporaries in cache (measured fastest between 1 and 4 MiB).
DEFAULT_BLOCK_BYTES = 2 << 20
#: Inputs (decompressed) from this size on are parsed with the compiled kernel by default.
KERNEL_MIN_BYTES = 32 << 20
#: Assumed decompression ratio of gzip inputs when deciding that (Chrome traces compress 8-15x).
GZIP_RATIO = 8
#: Largest top-level value (other than the streamed array) kept for the caller, e.g. a ``summary`` list.
MAX_KEPT_VALUE_BYTES = 64 << 20
#: Bytes after the event list read to find the root's end and anything after it (the rest of a root object is a
#: few keys; beyond this it is not looked at).
TAIL_BYTES = 1 << 20
#: Deepest nesting of arrays and objects accepted anywhere in the file.  Deeper input is refused: decoding it
#: (msgspec, recursively) would exhaust Python's stack (~1,000 levels), and no trace nests that deep.
MAX_DEPTH = 512
_WS = b" \t\r\n"
_VALIDATOR = msgspec.json.Decoder(msgspec.Raw)
T = TypeVar("T")
U = TypeVar("U")


def is_gzip(path: Path) -> bool:
    """True when the file starts with the gzip magic number."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def kernel_pays_off(path: Path) -> bool:
    """Whether an input is large enough for the compiled kernel to repay its start-up (loading numba and the
    compiled code, ~0.3 s once per process: the vectorised path reads ~30 MB meanwhile).

    ``TRNPROF_JSON_KERNEL=1`` uses it for every input, ``=0`` for none.
    """
    switch = os.environ.get(json_kernel.ENV_SWITCH)
    if switch in ("0", "1"):
        return switch == "1"
    try:
        size = path.stat().st_size
    except OSError:
        return False
    return size * (GZIP_RATIO if is_gzip(path) else 1) >= KERNEL_MIN_BYTES


def read_head(path: Path, size: int = 1 << 16) -> bytes:
    """The first ``size`` bytes of the (decompressed) file; empty on an unreadable or corrupt file."""
    try:
        if is_gzip(path):
            with gzip.open(path, "rb") as g:
                return g.read(size)
        with open(path, "rb") as f:
            return f.read(size)
    except (OSError, EOFError, zlib.error):
        return b""


def top_level_keys(head: bytes) -> list[str] | None:
    """Keys of the top-level JSON object that begin within ``head`` (None when ``head`` is not an object)."""
    text = head.lstrip(b"\xef\xbb\xbf" + _WS)
    if not text.startswith(b"{"):
        return None
    st = scan_structure(text, 0)
    b = np.frombuffer(text, np.uint8)
    sq = st.pos[(st.char == QUOTE) & (st.depth == 1)]
    if st.open_string >= 0:
        sq = sq[sq < st.open_string]
    so, sc = sq[0::2], sq[1::2][: len(sq) // 2]
    so = so[: len(sc)]
    after = skip_whitespace(b, sc + 1)
    keys = []
    for o, c, a in zip(so.tolist(), sc.tolist(), after.tolist(), strict=True):
        if a < len(b) and b[a] == COLON:
            keys.append(text[o + 1:c].decode("utf-8", "replace"))
    return keys


class JsonArrayStream:
    """The objects of one JSON array in a file, in blocks.

    Args:
        path: the file (plain or gzip-compressed JSON).
        array_key: stream the array under this top-level key of an object; ``None`` accepts a top-level array,
            and with ``accept_array_root`` a top-level array is accepted as well as the keyed form.
        keep_keys: other top-level keys whose (small) values are kept in :attr:`kept` as raw JSON bytes.
        keep_after: look for ``keep_keys`` after the array too (reading on to the root's end); False keeps only
            those before it, and what follows the array is checked for data after the root instead.
        block_bytes: bytes read per block.
        what: what the elements are, for messages ("event", "instruction").
        keys: the members the caller will ask for, and which to parse as exact numbers: with the compiled kernel
            (:mod:`profiler.importers.json_kernel`) they are found while the block is validated, in one pass.
            Other members are still available (found by the vectorised scanner when first asked for).
        kernel: use the compiled kernel (when ``keys`` are given and it is available): None decides by the input's
            size (:func:`kernel_pays_off`: compiling or loading it costs ~0.3 s once per process).

    After iterating :meth:`blocks`, :attr:`objects` counts the objects read and :attr:`fault` describes where
    reading stopped early, if it did (also issued as a TruncatedTraceWarning).
    """

    def __init__(self, path: str | os.PathLike[str], array_key: str | None, *, accept_array_root: bool = True,
                 keep_keys: tuple[str, ...] = (), keep_after: bool = True, block_bytes: int = DEFAULT_BLOCK_BYTES,
                 what: str = "event", keys: json_kernel.KeySpec | None = None, kernel: bool | None = None) -> None:
        self.path = Path(path)
        self.array_key = array_key
        self.accept_array_root = accept_array_root or array_key is None
        self.keep_keys = keep_keys
        self.keep_after = keep_after
        self.block_bytes = block_bytes
        self.what = what
        self.kept: dict[str, bytes] = {}
        self.objects = 0
        self.fault: str | None = None
        self.found_array = False
        self.keys = keys
        if kernel is None:
            kernel = kernel_pays_off(self.path)
        use = keys is not None and kernel and json_kernel.available()
        self._scanner = json_kernel.ElementScanner(keys) if use else None
        #: Blocks the compiled kernel left to the vectorised scanner (faults, unusual input), for tests.
        self.general_blocks = 0

    @property
    def uses_kernel(self) -> bool:
        """Whether blocks are parsed by the compiled kernel."""
        return self._scanner is not None

    # -- public --------------------------------------------------------------------------------------------------
    def blocks(self, progress: object | None = None) -> Iterator[ObjectBlock]:
        """Yield blocks of complete objects; ``progress(raw_bytes)`` is called as input is consumed."""
        reader = BlockReader(self.path, self.block_bytes)
        try:
            yield from self._blocks(reader, progress)
        finally:
            reader.close()
        if reader.error is not None and self.fault is None:
            self._fault_at(None, f"the file cannot be read to the end ({_describe(reader.error)})")

    # -- the state machine ---------------------------------------------------------------------------------------
    def _blocks(self, reader: BlockReader, progress: object | None) -> Iterator[ObjectBlock]:
        carry = b""
        offset = 0          # input offset of carry[0]
        depth = 0
        state = "start"     # start -> prelude -> events -> postlude -> done
        level = 0           # depth of the array's elements
        need_comma = False  # the next element must be preceded by a comma
        eof = False
        it = iter(reader)
        while state != "done":
            data = carry
            if not eof:
                try:
                    new, consumed = next(it)
                    if progress is not None:
                        progress(consumed)  # type: ignore[operator]
                    data = carry + new if carry else new
                except StopIteration:
                    eof = True
            if state == "start":
                stripped = data.lstrip(b"\xef\xbb\xbf" + _WS)
                if not stripped:
                    if eof:
                        raise TraceFormatError(f"{self.path}: is empty; expected a JSON trace")
                    carry = b""
                    offset += len(data)
                    continue
                skip = len(data) - len(stripped)
                offset += skip
                data = stripped
                if data[:1] == b"[":
                    if not self.accept_array_root:
                        raise TraceFormatError(f"{self.path}: is a JSON array; expected an object with a "
                                               f"{self.array_key!r} list")
                    self.found_array = True
                    state, level, depth = "events", 1, 1
                    carry, offset = data[1:], offset + 1
                    continue
                if data[:1] != b"{":
                    raise TraceFormatError(f"{self.path}: not JSON (starts with {data[:16]!r})")
                state = "prelude"
            if state in ("prelude", "postlude"):
                carry, offset, depth, found = self._top_level(data, offset, depth, eof, state == "prelude")
                if found is not None:
                    state, level, depth = "events", 2, 2
                    carry, offset = data[found + 1:], offset + found + 1
                    self.found_array = True
                    continue
                if eof or (state == "postlude" and all(k in self.kept for k in self.keep_keys)):
                    if state == "prelude" and self.array_key is not None:
                        raise TraceFormatError(f"{self.path}: JSON object without a {self.array_key!r} list; "
                                               "not a trace of this format")
                    state = "done"
                continue
            if state == "tail":  # after the events: the root's end, and whether anything follows it
                if not eof and len(data) < TAIL_BYTES:
                    carry = data
                    continue
                self._check_tail(data, offset, depth)
                state = "done"
                continue
            # state == "events"
            block, carry, offset, need_comma, ended = self._events(data, offset, level, need_comma, eof)
            if block is not None and len(block):
                self.objects += len(block)
                yield block
            if self.fault is not None:
                return
            if ended is not None:
                state = ("postlude" if self.keep_after and any(k not in self.kept for k in self.keep_keys)
                         else "tail")
                depth = 1 if state == "postlude" else level - 1
                carry = carry[ended:]
                offset += ended
                if state == "postlude" and not carry and eof:
                    state = "done"
                continue
            if eof:
                rest = carry.strip(_WS + b",")
                if reader.error is not None:
                    self._fault_at(offset, _describe(reader.error))
                elif rest:
                    self._fault_at(offset + (len(carry) - len(carry.lstrip(_WS + b","))),
                                   f"the file ends inside {self.what} {self.objects:,} (truncated?)")
                elif level == 2:
                    self._fault_at(None, "the file ends before the closing ']}' (truncated?)")
                # A top-level array without its closing bracket is accepted silently, as the format allows.
                state = "done"

    def _check_tail(self, data: bytes, offset: int, depth: int) -> None:
        """Warn when ``data`` (what follows the event list, at nesting ``depth``) goes on after the root's end:
        two traces joined into one file (``cat a.json b.json``), whose second would be lost without a word.  A root
        not closed within ``data`` (over :data:`TAIL_BYTES` of other keys) is not looked at further."""
        end = 0
        if depth > 0:
            st = scan_structure(data, depth)
            closes = np.flatnonzero((st.depth == 0) & ((st.char == RBRACE) | (st.char == RBRACKET)))
            if not len(closes):
                return
            end = int(st.pos[closes[0]]) + 1
        rest = data[end:].lstrip(_WS)
        if rest:
            from profiler.importers.common import TraceImportWarning

            warnings.warn(TraceImportWarning(
                f"{self.path}: the file goes on after its trace ends at byte {offset + end:,} (with "
                f"{rest[:24]!r}...), which is ignored: two traces joined into one file? Import each on its own"),
                stacklevel=4)

    def _top_level(self, data: bytes, offset: int, depth: int, eof: bool,
                   prelude: bool) -> tuple[bytes, int, int, int | None]:
        """Look through top-level keys; returns (carry, carry offset, depth at carry, array start or None)."""
        st = scan_structure(data, depth)
        b = np.frombuffer(data, np.uint8)
        pos, char, dep = st.pos, st.char, st.depth
        self._check_depth(st, offset)
        sq = pos[(char == QUOTE) & (dep == 1)]
        if st.open_string >= 0:
            sq = sq[sq < st.open_string]
        so = sq[0::2][: len(sq) // 2]
        sc = sq[1::2][: len(so)]
        after = skip_whitespace(b, sc + 1)
        n = len(b)
        for o, c, a in zip(so.tolist(), sc.tolist(), after.tolist(), strict=True):
            vs = int(skip_whitespace(b, np.array([a + 1]))[0]) if a < n else n
            if vs >= n and not eof:
                # The key's colon or value is in the next block: carry from the key on.
                k = int(np.searchsorted(pos, o))
                return data[o:], offset + o, int(dep[k - 1]) if k else depth, None
            if a >= n or b[a] != COLON or vs >= n:
                continue
            key = data[o + 1:c].decode("utf-8", "replace")
            if prelude and key == self.array_key:
                if b[vs] != LBRACKET:
                    raise TraceFormatError(f"{self.path}: {key!r} is not a list")
                return b"", offset, depth, vs
            if key in self.keep_keys and key not in self.kept:
                ve = self._value_end(data, st, vs)
                if ve is None:
                    # Incomplete here: carry from this key on (bounded), to see the whole value next time.
                    if len(data) - o <= MAX_KEPT_VALUE_BYTES and not eof:
                        k = int(np.searchsorted(pos, o))
                        d = int(dep[k - 1]) if k else depth
                        return data[o:], offset + o, d, None
                    continue
                self.kept[key] = data[vs:ve]
        # Nothing to carry but an unterminated string.
        if st.open_string >= 0 and not eof:
            k = int(np.searchsorted(pos, st.open_string))
            d = int(dep[k - 1]) if k else depth
            return data[st.open_string:], offset + st.open_string, d, None
        end_depth = int(dep[-1]) if len(dep) else depth
        return b"", offset + len(data), end_depth, None

    @staticmethod
    def _value_end(data: bytes, st: object, vs: int) -> int | None:
        b = np.frombuffer(data, np.uint8)
        pos, char, dep = st.pos, st.char, st.depth  # type: ignore[attr-defined]
        first = b[vs]
        k = int(np.searchsorted(pos, vs))
        if first == QUOTE:
            return int(pos[k + 1]) + 1 if k + 1 < len(pos) and char[k + 1] == QUOTE else None
        if first in (LBRACE, LBRACKET):
            closers = np.flatnonzero((dep[k:] == 1) & ((char[k:] == RBRACE) | (char[k:] == RBRACKET)))
            return int(pos[k + closers[0]]) + 1 if len(closers) else None
        if k >= len(pos):
            return None
        return int(strip_trailing(b, np.array([vs]), np.array([pos[k]]))[0])

    def _events(self, data: bytes, offset: int, level: int, need_comma: bool,
                eof: bool) -> tuple[ObjectBlock | None, bytes, int, bool, int | None]:
        """One block of elements: (block, carry, carry offset, need_comma, end-of-array position in carry)."""
        if self._scanner is None:
            return self._events_general(data, offset, level, need_comma, eof)
        res = self._scanner.scan(data, 0, need_comma)
        if res.status in (json_kernel.ERROR, json_kernel.UNSURE):
            # A fault (or input the kernel leaves alone): the vectorised path words and locates it exactly.
            self.general_blocks += 1
            return self._events_general(data, offset, level, need_comma, eof)
        array_end = res.at + 1 if res.status == json_kernel.ARRAY_END else None
        if res.count == 0:
            return None, data, offset, need_comma, array_end
        block = ObjectBlock(data, None, depth=level, limit=None, opens=res.opens, closes=res.closes,
                            first_index=self.objects, file_offset=offset, members=_members(self.keys, res),
                            numbers=_numbers(self.keys, res))
        if array_end is not None:
            return block, data, offset, True, array_end
        return block, data[res.end:], offset + res.end, True, None

    def _events_general(self, data: bytes, offset: int, level: int, need_comma: bool,
                        eof: bool) -> tuple[ObjectBlock | None, bytes, int, bool, int | None]:
        """:meth:`_events` with the vectorised scanner and msgspec's validation."""
        st = scan_structure(data, level)
        pos, char, dep = st.pos, st.char, st.depth
        self._check_depth(st, offset)
        ends = np.flatnonzero((char == RBRACKET) & (dep == level - 1))
        end_k = int(ends[0]) if len(ends) else len(pos)
        lim_pos = pos[:end_k]
        opens_k = np.flatnonzero((char[:end_k] == LBRACE) & (dep[:end_k] == level + 1))
        closes_k = np.flatnonzero((char[:end_k] == RBRACE) & (dep[:end_k] == level))
        complete = len(closes_k)
        array_end = int(pos[end_k]) if len(ends) else None
        if complete == 0:
            if array_end is not None:
                bad = self._validate(data, 0, array_end, need_comma=need_comma)
                if bad is not None:
                    self._fault_at(offset + bad, f"invalid JSON in {self.what} {self.objects:,}: {self._bad_reason}")
                return None, data, offset, need_comma, array_end + 1
            if len(data) > 4 * self.block_bytes or eof:
                # A long run without one complete element: fail early on garbage instead of buffering it all.
                bad = self._validate(data, 0, len(data), need_comma=need_comma, close=False)
                # A fault in the last few bytes may just be a token cut by the block end.
                if bad is not None and "truncated" not in self._bad_reason.lower() and bad < len(data) - 64:
                    self._fault_at(offset + bad, f"invalid JSON in {self.what} {self.objects:,}: {self._bad_reason}")
            return None, data, offset, need_comma, None
        last_close = int(lim_pos[closes_k[-1]])
        cut = last_close + 1
        # Validate everything from the carry start through the last complete object (and the array's end).
        stop = array_end if array_end is not None else cut
        bad = self._validate(data, 0, stop, need_comma=need_comma)
        opens = lim_pos[opens_k[:complete]].astype(np.int64)
        closes = lim_pos[closes_k].astype(np.int64)
        limit = int(closes_k[-1]) + 1
        if bad is not None:
            keep = int(np.searchsorted(closes, bad))  # objects that end before the fault
            opens, closes = opens[:keep], closes[:keep]
            limit = int(closes_k[keep - 1]) + 1 if keep else 0
            self._fault_at(offset + bad, f"invalid JSON in {self.what} {self.objects + keep:,}: "
                           f"{self._bad_reason}", kept=self.objects + keep)
        block = ObjectBlock(data, st, depth=level, limit=limit, opens=opens, closes=closes,
                            first_index=self.objects, file_offset=offset)
        if array_end is not None:
            return block, data, offset, True, array_end + 1
        return block, data[cut:], offset + cut, True, None

    _bad_reason = ""

    def _check_depth(self, st: object, offset: int) -> None:
        """TraceFormatError naming the file and byte when the scanned text nests deeper than :data:`MAX_DEPTH`."""
        dep = st.depth  # type: ignore[attr-defined]
        if len(dep) and int(dep.max()) > MAX_DEPTH:
            byte = offset + int(st.pos[int(np.argmax(dep > MAX_DEPTH))])  # type: ignore[attr-defined]
            raise TraceFormatError(f"{self.path}: JSON nested deeper than {MAX_DEPTH} levels at byte {byte:,}; not a "
                                   "trace trnprof reads: export it without such deep values")

    def _validate(self, data: bytes, start: int, stop: int, *, need_comma: bool, close: bool = True) -> int | None:
        """Byte position (in ``data``) of the first JSON fault in ``data[start:stop]``, or None.

        The text is checked as the continuation of the array (``close`` adds the closing bracket).
        """
        prefix = b"[0" if need_comma else b"["
        body = data[start:stop]
        if not body.strip(_WS):
            return None
        try:
            _VALIDATOR.decode(prefix + body + (b"]" if close else b""))
            return None
        except RecursionError:  # unreachable after _check_depth, unless the stack is already deep
            raise TraceFormatError(f"{self.path}: JSON nested too deeply to validate (in {self.what} "
                                   f"{self.objects:,} or after); not a trace trnprof reads") from None
        except msgspec.DecodeError as exc:
            msg = str(exc)
            self._bad_reason = msg.split(" (byte ", maxsplit=1)[0].replace("JSON is malformed: ", "")
            at = msg.rsplit("(byte ", 1)
            pos = int(at[1].rstrip(")")) - len(prefix) if len(at) == 2 else 0
            return max(0, min(pos, stop - start)) + start

    def _fault_at(self, byte: int | None, what: str, kept: int | None = None) -> None:
        where = f" at byte {byte:,}" if byte is not None else ""
        kept_n = self.objects if kept is None else kept
        self.fault = f"{self.path}: {what}{where}; kept the {kept_n:,} complete {self.what}s before it"
        warnings.warn(TruncatedTraceWarning(self.fault), stacklevel=3)


def _members(spec: json_kernel.KeySpec, res: json_kernel.ElementScan) -> dict[str, Member]:
    out = {}
    for j, key in enumerate(spec.names):
        kind = res.kind[j]
        flag = res.flag[j]
        out[key] = Member(start=res.start[j], end=res.stop[j], present=kind != json_kernel.ABSENT, kind=kind,
                          escaped=(flag & json_kernel.FLAG_ESCAPE) != 0,
                          newline=(flag & json_kernel.FLAG_NEWLINE) != 0)
    return out


def _numbers(spec: json_kernel.KeySpec, res: json_kernel.ElementScan) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {key: (res.number[j], res.number_state[j]) for j, key in enumerate(spec.numeric)}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "compressed stream ends early"
    if isinstance(exc, zlib.error | gzip.BadGzipFile):
        return f"corrupt gzip data: {exc}"
    return getattr(exc, "strerror", None) or str(exc)
