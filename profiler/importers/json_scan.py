"""A vectorised JSON structure scanner: finds the objects of a JSON array and their members without a per-event
Python loop.

Parsing tens of millions of small JSON objects one by one in Python costs microseconds each.  This module instead
looks at a whole chunk of bytes at once with numpy: it finds every string delimiter and bracket outside strings
(one table lookup and one ``nonzero`` over the bytes), their nesting depth (a cumulative sum), the objects at a
given depth, and for each object the byte ranges of its top-level keys and values.  Values are then turned into
Arrow arrays in bulk (strings by slicing the chunk buffer, numbers by a decimal cast), so the cost per event is a
few vectorised operations instead of a few microseconds of interpreter time.

The scanner trusts the chunk to be valid JSON (the stream layer validates it with msgspec, which is fast and
reports the byte of the first fault); it only relies on JSON's own rules: strings cannot contain raw quotes or
control characters, backslashes only occur inside strings, and brackets balance.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

QUOTE = ord('"')
BACKSLASH = ord("\\")
LBRACE, RBRACE = ord("{"), ord("}")
LBRACKET, RBRACKET = ord("["), ord("]")
COLON, COMMA = ord(":"), ord(",")
NEWLINE = ord("\n")

#: bytes.translate table: 1 for the bytes the structure scan looks at, 0 for every other byte.
_SIGNIFICANT = bytes(1 if c in b'"{}[]' else 0 for c in range(256))
_DELTA = np.zeros(256, np.int8)
_DELTA[[LBRACE, LBRACKET]] = 1
_DELTA[[RBRACE, RBRACKET]] = -1
WHITESPACE = np.zeros(256, np.bool_)
WHITESPACE[list(b" \t\r\n")] = True

#: Value kinds (the first byte of the value).
KIND_STRING, KIND_OBJECT, KIND_ARRAY, KIND_SCALAR = 0, 1, 2, 3

#: Maximum chunk size: offsets into a chunk are int32 in the Arrow arrays built from it.
MAX_CHUNK_BYTES = 2**31 - 1


@dataclass(frozen=True)
class Structure:
    """Where the string delimiters and brackets of one chunk are.

    Attributes:
        pos: byte positions of every unescaped quote and every bracket outside strings, ascending.
        char: the byte at each position.
        depth: nesting depth just after each position (brackets change it, quotes do not).
        open_string: position of the opening quote of a string the chunk ends inside, or -1.
    """

    pos: np.ndarray
    char: np.ndarray
    depth: np.ndarray
    open_string: int


def _escaped_quotes(b: np.ndarray, quotes: np.ndarray) -> np.ndarray:
    """For quote positions preceded by a backslash: True where an odd run of backslashes escapes the quote."""
    run = np.zeros(len(quotes), np.int64)
    probe = quotes - 1
    active = np.ones(len(quotes), np.bool_)
    while active.any():
        ok = active & (probe >= 0)
        hit = np.zeros(len(quotes), np.bool_)
        hit[ok] = b[probe[ok]] == BACKSLASH
        run += hit
        probe -= 1
        active = hit
    return (run & 1).astype(np.bool_)


def scan_structure(buf: bytes, depth0: int = 0) -> Structure:
    """Scan ``buf`` (which must start outside any string) at nesting depth ``depth0``."""
    if len(buf) > MAX_CHUNK_BYTES:
        raise ValueError("JSON chunk larger than 2 GiB")
    b = np.frombuffer(buf, np.uint8)
    pos = np.flatnonzero(np.frombuffer(buf.translate(_SIGNIFICANT), np.bool_))
    char = b[pos]
    isq = char == QUOTE
    if buf.find(b"\\") >= 0:
        qidx = np.flatnonzero(isq)
        qpos = pos[qidx]
        cand = (qpos > 0) & (b[np.maximum(qpos - 1, 0)] == BACKSLASH)
        if cand.any():
            esc = _escaped_quotes(b, qpos[cand])
            drop = qidx[cand][esc]
            if len(drop):
                keep = np.ones(len(pos), np.bool_)
                keep[drop] = False
                pos, char, isq = pos[keep], char[keep], isq[keep]
    parity = np.cumsum(isq, dtype=np.int32)
    # A bracket is structural when an even number of quotes precede it; quotes are always kept.
    keep = isq | ((parity & 1) == 0)
    if not keep.all():
        pos, char = pos[keep], char[keep]
    depth = np.cumsum(np.take(_DELTA, char), dtype=np.int32)
    depth += depth0
    open_string = -1
    if len(parity) and parity[-1] & 1:
        open_string = int(pos[char == QUOTE][-1])
    return Structure(pos=pos, char=char, depth=depth, open_string=open_string)


def skip_whitespace(b: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Positions moved forward past JSON whitespace (positions at or beyond the end stay there)."""
    at = at.copy()
    n = len(b)
    todo = np.flatnonzero(at < n)
    while len(todo):
        ws = WHITESPACE[b[at[todo]]]
        todo = todo[ws]
        at[todo] += 1
        todo = todo[at[todo] < n]
    return at


def strip_trailing(b: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``end`` moved back past whitespace and at most one comma, but never before ``start``."""
    # Fast path for the usual ``value, "next"`` / ``value,"next"`` / ``value}``: one space, one comma.
    end = end - WHITESPACE[b[end - 1]]
    end -= b[end - 1] == COMMA
    done = ~WHITESPACE[b[end - 1]] & (b[end - 1] != COMMA)
    if done.all():
        return end
    comma_left = np.ones(len(end), np.bool_)
    todo = np.flatnonzero(end > start)
    while len(todo):
        last = b[end[todo] - 1]
        is_comma = (last == COMMA) & comma_left[todo]
        strip = WHITESPACE[last] | is_comma
        comma_left[todo[is_comma]] = False
        todo = todo[strip]
        end[todo] -= 1
        todo = todo[end[todo] > start[todo]]
    return end


def ranges_to_binary(buf: bytes, start: np.ndarray, end: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A binary array of ``buf[start[i]:end[i]]`` built in bulk.

    The ranges must be ascending and disjoint: the array is first built over *all* cut points (values and the gaps
    between them alternate), then every other element is taken.  ``valid`` marks null rows (their range must be
    empty).
    """
    n = len(start)
    if n == 0:
        return pa.array([], pa.binary())
    cuts = np.empty(2 * n, np.int32)
    cuts[0::2] = start
    cuts[1::2] = end
    both = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(cuts), pa.py_buffer(buf)])
    out = both.take(_even_indices(n))
    if valid is not None and not valid.all():
        out = pc.if_else(pa.array(valid), out, pa.scalar(None, pa.binary()))
    return out


_EVEN: list[pa.Array] = [pa.array(np.zeros(0, np.int64))]


def _even_indices(n: int) -> pa.Array:
    """``[0, 2, 4, ...]`` (n values) as an Arrow array, sliced from a cached one."""
    if len(_EVEN[0]) < n:
        _EVEN[0] = pa.array(np.arange(0, 2 * max(n, 1 << 17), 2, dtype=np.int64))
    return _EVEN[0].slice(0, n)


def unescape_strings(raw: pa.Array, has_escape: np.ndarray) -> pa.Array:
    """Decode JSON escapes (``\\n``, ``\\"``, ``\\u00e9``) in the rows flagged by ``has_escape``; UTF-8 checked.

    Invalid UTF-8 is replaced (U+FFFD) rather than failing the whole chunk.
    """
    if has_escape.any():
        idx = np.flatnonzero(has_escape)
        texts = raw.take(pa.array(idx)).to_pylist()
        decoded = [decode_json_string(t) for t in texts]
        mask = np.zeros(len(raw), np.bool_)
        mask[idx] = True
        raw = pc.replace_with_mask(raw, pa.array(mask), pa.array([d.encode() for d in decoded], pa.binary()))
    try:
        return raw.cast(pa.string())
    except pa.ArrowInvalid:
        values = [None if v is None else v.decode("utf-8", "replace") for v in raw.to_pylist()]
        return pa.array(values, pa.string())


def decode_json_string(body: bytes | None) -> str | None:
    """The text of a JSON string body (without its quotes), escapes decoded; undecodable bytes replaced."""
    if body is None:
        return None
    try:
        return msgspec.json.decode(b'"' + body + b'"', type=str)
    except msgspec.DecodeError:
        return body.decode("utf-8", "replace")
