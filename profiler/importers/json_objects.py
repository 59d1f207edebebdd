"""The objects of a JSON array and their top-level members, found in bulk (:class:`ObjectBlock`), with the values
of one key across all objects turned into Arrow arrays (:class:`Member` byte ranges -> strings, numbers).

Works on the structure :func:`profiler.importers.json_scan.scan_structure` finds (string delimiters and brackets
outside strings, with their nesting depth), so the cost per event is a few vectorised operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from profiler.importers.json_scan import (
    BACKSLASH,
    COLON,
    KIND_ARRAY,
    KIND_OBJECT,
    KIND_SCALAR,
    KIND_STRING,
    LBRACE,
    LBRACKET,
    NEWLINE,
    QUOTE,
    WHITESPACE,
    Structure,
    decode_json_string,
    ranges_to_binary,
    scan_structure,
    skip_whitespace,
    strip_trailing,
    unescape_strings,
)

#: The fingerprint bytes of an empty key: the closing quote after the opening one, and the opening one.
_QUOTES = (QUOTE << 8) | QUOTE


@dataclass
class Member:
    """One key's values across the objects of a block (rows without the key are null)."""

    #: Byte ranges of each row's value: string content for strings, raw JSON text otherwise.
    start: np.ndarray
    end: np.ndarray
    #: True where the object has the key.
    present: np.ndarray
    #: KIND_* of each present value (undefined where absent).
    kind: np.ndarray
    #: True where a string value holds a backslash escape.
    escaped: np.ndarray
    #: True where a value holds a line break (known when the kernel found the member; None otherwise).
    newline: np.ndarray | None = None


class ObjectBlock:
    """The complete objects of one chunk that are elements of one JSON array, and their top-level members.

    Args:
        buf: the chunk's bytes.
        structure: its scan, or None to scan lazily (when the members came from the compiled kernel and a key it
            did not extract is asked for).
        depth: nesting depth of the array's elements (1 for a top-level array, 2 for ``{"traceEvents": [...]}``).
        limit: index into ``structure`` past the last entry that belongs to a complete object (None: lazily).
        opens / closes: byte positions of each object's ``{`` and ``}``.
        first_index: index of the block's first object in the whole array.
        file_offset: offset of ``buf[0]`` in the (decompressed) input.
        members: members already found (by :mod:`profiler.importers.json_kernel`).
        numbers: exact numbers already parsed, per key: (values, NUM_* state).
    """

    def __init__(self, buf: bytes, structure: Structure | None, *, depth: int, limit: int | None,
                 opens: np.ndarray, closes: np.ndarray, first_index: int, file_offset: int,
                 members: dict[str, Member] | None = None,
                 numbers: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> None:
        self.buf = buf
        self.b = np.frombuffer(buf, np.uint8)
        self._structure = structure
        self.depth = depth
        self._limit = limit
        self.opens = opens
        self.closes = closes
        self.first_index = first_index
        self.file_offset = file_offset
        self._members: dict[str, Member] = dict(members or {})
        self._numbers = numbers or {}

    @property
    def structure(self) -> Structure:
        """The vectorised scan of the chunk (computed on first use for kernel-parsed blocks)."""
        if self._structure is None:
            self._structure = scan_structure(self.buf, self.depth)
        return self._structure

    @property
    def limit(self) -> int:
        if self._limit is None:
            if not len(self.closes):
                self._limit = 0
            else:
                self._limit = int(np.searchsorted(self.structure.pos, self.closes[-1])) + 1
        return self._limit

    def numbers(self, key: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(exact scaled values, NUM_* states) of ``key`` when the kernel parsed them, else None."""
        return self._numbers.get(key)

    def __len__(self) -> int:
        return len(self.opens)

    @cached_property
    def _keys(self) -> _Keys:
        st = self.structure
        lim = self.limit
        b = self.b
        n = len(b)
        level = self.depth + 1
        # Entries at the objects' own level: key and string-value quotes, the objects' '{', and the closing
        # brackets of nested values (whose insides are deeper).
        at_level = np.flatnonzero(st.depth[:lim] == level)
        lchar = st.char[at_level]
        lq = np.flatnonzero(lchar == QUOTE)
        close_l = lq[1::2]                      # level index of each string's closing quote
        kc = st.pos[at_level[close_l]]
        after = kc + 1
        c = b[np.minimum(after, n - 1)]
        ws = WHITESPACE[c]
        if ws.any():
            after[ws] = skip_whitespace(b, after[ws])
            c = b[np.minimum(after, n - 1)]
        is_key = c == COLON
        if not is_key.all():
            close_l, kc, after = close_l[is_key], kc[is_key], after[is_key]
        close_e = at_level[close_l]
        ko = st.pos[close_e - 1]
        vs = after + 1
        first = b[np.minimum(vs, n - 1)]
        ws = WHITESPACE[first]
        if ws.any():
            vs += ws
            first = b[np.minimum(vs, n - 1)]
            ws = WHITESPACE[first]
            if ws.any():
                vs[ws] = skip_whitespace(b, vs[ws])
                first = b[np.minimum(vs, n - 1)]
        # Owner object of each key: keys come in object order, so count them per object.
        open_l = np.flatnonzero(lchar == LBRACE)
        per_object = np.diff(np.searchsorted(close_l, open_l), append=len(close_l))
        row = np.repeat(np.arange(len(open_l), dtype=np.int64), per_object)
        klen = (kc - ko - 1).astype(np.uint32)
        fingerprint = (klen << 16) | (b[ko + 1].astype(np.uint32) << 8) | b[kc - 1]
        return _Keys(entry=close_e, level_index=close_l, at_level=at_level, start=ko + 1, end=kc, row=row,
                     value_start=vs, first=first, fingerprint=fingerprint)

    def key_names(self) -> list[str]:
        """Distinct top-level keys in the block's objects (costly: for sniffing and tests, not bulk reading)."""
        k = self._keys
        names = ranges_to_binary(self.buf, k.start, k.end).unique().to_pylist()
        return sorted({decode_json_string(x) or "" for x in names})

    def members(self, keys: tuple[str, ...]) -> dict[str, Member]:
        """The values of each of ``keys`` in every object of the block, found in one pass.

        Keys are matched as spelled in the file (a key written with escapes is not recognised); on a duplicate key
        the last value wins, as in JSON.
        """
        todo = tuple(key for key in keys if key not in self._members)
        if todo:
            self._members.update(self._find_members(todo))
        return {key: self._members[key] for key in keys}

    def member(self, key: str) -> Member:
        """The values of top-level key ``key`` (see :meth:`members`)."""
        return self.members((key,))[key]

    def _find_members(self, keys: tuple[str, ...]) -> dict[str, Member]:
        k = self._keys
        b = self.b
        encoded = [key.encode() for key in keys]
        # (an empty key's bytes around it are its two quotes, as :meth:`_keys` reads them for the file's keys)
        fps = np.array([(len(w) << 16) | ((w[0] << 8) | w[-1] if w else _QUOTES) for w in encoded], np.uint32)
        order = np.argsort(fps, kind="stable")
        sorted_fps = fps[order]
        slot = np.searchsorted(sorted_fps, k.fingerprint)
        slot_c = np.minimum(slot, len(fps) - 1)
        hit = sorted_fps[slot_c] == k.fingerprint
        sel = np.flatnonzero(hit)
        field = order[slot_c[sel]].astype(np.int8)
        # Keys sharing a fingerprint (same length, first and last byte): check the middle bytes.
        for j, w in enumerate(encoded):
            if len(w) > 2:
                mine = np.flatnonzero(field == j)
                ok = np.ones(len(mine), np.bool_)
                starts = k.start[sel[mine]]
                for i in range(1, len(w) - 1):
                    ok &= b[starts + i] == w[i]
                if not ok.all():
                    field[mine[~ok]] = -1
        keep = field >= 0
        sel, field = sel[keep], field[keep]
        vs, first = k.value_start[sel], k.first[sel]
        kind = np.full(len(sel), KIND_SCALAR, np.int8)
        kind[first == QUOTE] = KIND_STRING
        kind[first == LBRACE] = KIND_OBJECT
        kind[first == LBRACKET] = KIND_ARRAY
        start = vs.copy()
        end = self._value_ends(vs, kind, sel)
        strings = kind == KIND_STRING
        start[strings] += 1
        end[strings] -= 1
        escaped = np.zeros(len(sel), np.bool_)
        bs = self._backslashes
        if len(bs) and strings.any():
            escaped[strings] = np.searchsorted(bs, end[strings]) > np.searchsorted(bs, start[strings])
        # Group by field; a stable sort keeps rows ascending within each field.
        by_field = np.argsort(field, kind="stable")
        bounds = np.searchsorted(field[by_field], np.arange(len(keys) + 1))
        rows = len(self.opens)
        out = {}
        for j, key in enumerate(keys):
            idx = by_field[bounds[j]:bounds[j + 1]]
            row = k.row[sel[idx]]
            if len(row) > 1:
                last = np.ones(len(row), np.bool_)
                last[:-1] = row[1:] != row[:-1]
                if not last.all():
                    idx, row = idx[last], row[last]
            if len(row) == rows:
                m = Member(start=start[idx], end=end[idx], present=np.ones(rows, np.bool_), kind=kind[idx],
                           escaped=escaped[idx])
            else:
                m_start = self.opens.astype(np.int64)
                m_end = m_start.copy()
                m_kind = np.zeros(rows, np.int8)
                m_esc = np.zeros(rows, np.bool_)
                present = np.zeros(rows, np.bool_)
                m_start[row], m_end[row], m_kind[row], m_esc[row] = start[idx], end[idx], kind[idx], escaped[idx]
                present[row] = True
                m = Member(start=m_start, end=m_end, present=present, kind=m_kind, escaped=m_esc)
            out[key] = m
        return out

    @cached_property
    def _backslashes(self) -> np.ndarray:
        if self.buf.find(b"\\") < 0:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.b == BACKSLASH)

    def _value_ends(self, vs: np.ndarray, kind: np.ndarray, sel: np.ndarray) -> np.ndarray:
        """Exclusive end of each value starting at ``vs`` (including the closing quote or bracket)."""
        k = self._keys
        pos = self.structure.pos
        at_level = k.at_level
        li = k.level_index[sel]
        last = len(at_level) - 1
        # After a key's closing quote, the next entries at the objects' level are: a string value's two quotes,
        # or a nested value's closing bracket.  A scalar has no entry: it ends before the next entry overall.
        ve = np.where(kind == KIND_STRING, pos[at_level[np.minimum(li + 2, last)]] + 1,
                      pos[at_level[np.minimum(li + 1, last)]] + 1)
        scalars = np.flatnonzero(kind == KIND_SCALAR)
        if len(scalars):
            nxt = pos[k.entry[sel[scalars]] + 1]
            ve[scalars] = strip_trailing(self.b, vs[scalars], nxt)
        return ve

    def strings(self, key: str, rows: np.ndarray | None = None) -> pa.Array:
        """``key`` as a string column: string values decoded, other JSON values as their raw text, null if absent.

        ``rows`` selects objects (ascending indices); default all.
        """
        m = self.member(key)
        start, end, present, escaped, kind = m.start, m.end, m.present, m.escaped, m.kind
        if rows is not None and len(rows) != len(start):
            start, end, present, escaped, kind = start[rows], end[rows], present[rows], escaped[rows], kind[rows]
        nulls = present & (kind == KIND_SCALAR)
        if nulls.any():
            nulls &= self._is_literal(start, end, b"null")
            if nulls.any():
                present = present & ~nulls
                start, end = start.copy(), end.copy()
                end[nulls] = start[nulls]
        raw = ranges_to_binary(self.buf, start, end, present)
        return unescape_strings(raw, escaped)

    def raw(self, key: str, rows: np.ndarray | None = None) -> pa.Array:
        """``key``'s raw JSON text (strings keep their quotes); null where absent or ``null``."""
        m = self.member(key)
        start, end, present, kind = m.start, m.end, m.present, m.kind
        opens = self.opens
        if rows is not None and len(rows) != len(start):
            start, end, present, kind, opens = start[rows], end[rows], present[rows], kind[rows], opens[rows]
        start, end = start.copy(), end.copy()
        strings = present & (kind == KIND_STRING)
        start[strings] -= 1
        end[strings] += 1
        valid = present & ~self._is_literal(start, end, b"null")
        if not valid.all():
            start[~valid] = opens[~valid]
            end[~valid] = opens[~valid]
        raw = ranges_to_binary(self.buf, start, end, valid)
        try:
            return raw.cast(pa.string())
        except pa.ArrowInvalid:
            return pa.array([None if v is None else v.decode("utf-8", "replace") for v in raw.to_pylist()])

    def contains_byte(self, key: str, byte: int, rows: np.ndarray | None = None) -> bool:
        """True when any value of ``key`` (in ``rows``) contains ``byte`` (e.g. a line break)."""
        m = self.member(key)
        if byte == NEWLINE and m.newline is not None:
            return bool(m.newline.any() if rows is None or len(rows) == len(m.newline) else m.newline[rows].any())
        start, end, present = m.start, m.end, m.present
        if rows is not None and len(rows) != len(start):
            start, end, present = start[rows], end[rows], present[rows]
        hits = np.flatnonzero(self.b == byte)
        if not len(hits):
            return False
        inside = np.searchsorted(hits, end[present]) > np.searchsorted(hits, start[present])
        return bool(inside.any())

    def first_bytes(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(first byte of each string value of ``key`` (0 if absent, empty or not a string), value length)."""
        m = self.member(key)
        length = m.end - m.start
        ok = m.present & (m.kind == KIND_STRING) & (length > 0)
        first = np.zeros(len(m.start), np.uint8)
        first[ok] = self.b[m.start[ok]]
        return first, np.where(ok, length, 0)

    def _is_literal(self, start: np.ndarray, end: np.ndarray, literal: bytes) -> np.ndarray:
        idx = np.flatnonzero((end - start) == len(literal))
        for j, ch in enumerate(literal):
            idx = idx[self.b[start[idx] + j] == ch]
        res = np.zeros(len(start), np.bool_)
        res[idx] = True
        return res


@dataclass(frozen=True)
class _Keys:
    """Every top-level key of a block's objects."""

    entry: np.ndarray        # structure entry index of the key's closing quote
    level_index: np.ndarray  # its index among the entries at the objects' level
    at_level: np.ndarray     # structure entry indices at the objects' level
    start: np.ndarray        # key text [start, end)
    end: np.ndarray
    row: np.ndarray          # owning object
    value_start: np.ndarray  # first byte of the value
    first: np.ndarray        # that byte
    fingerprint: np.ndarray  # (length << 16) | (first byte << 8) | last byte
