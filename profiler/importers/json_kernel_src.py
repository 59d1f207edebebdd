"""The source of the importers' compiled kernels: plain Python functions that numba compiles (see
:mod:`profiler.importers.json_kernel`, which compiles them on first use and owns the public API): the one-pass JSON
parser.  The passes over whole columns after parsing (pair encoding, nesting, track order, flow binding) are in
:mod:`profiler.importers.json_kernel_tracks_src`.

The functions only use what numba compiles to straight machine code: integer arithmetic on numpy scalars and
arrays, loops, tuples.  They allocate nothing (they are compiled without numba's reference counting), so every
output array is passed in.  Positions are int64 byte offsets into ``b``, the block as uint8; ``w`` is the same
memory as aligned uint64 words, for the 8-bytes-a-step string scan.
"""

# ruff: noqa: PLR1714, PLR0917, SIM108
# (numba compiles chained comparisons to straight code but not ``in {set}``; the kernels take many positional
#  arrays by design.)

from __future__ import annotations

import numpy as np

# Value kinds, as in json_scan (ABSENT: the object has no such key).
ABSENT, STRING, OBJECT, ARRAY, SCALAR = -1, 0, 1, 2, 3
# Member flags.
FLAG_ESCAPE, FLAG_NEWLINE = 1, 2
# Number states.
NUM_NONE, NUM_OK, NUM_SLOW = 0, 1, 2
# Kernel statuses.
END, ARRAY_END, ERROR, UNSURE, FULL = 0, 1, 2, 3, 4
#: Nesting deeper than this inside one member value is left to the vectorised path.
MAX_NESTING = 256
#: Fast-path numbers must stay below this magnitude (scaled); larger ones take the exact slow path.
NUMBER_LIMIT = 2**62
_LIMIT_DIV_10 = NUMBER_LIMIT // 10
#: Wanted keys are looked up by (length, first byte) for lengths below this (longer ones are never wanted keys).
KEY_TABLE_LENGTHS = 64

#: The functions numba compiles, callees before callers (json_kernel rebinds each name to its compiled version).
COMPILED = ("_skip_ws", "_special", "_next_special", "_scan_string", "_scan_number", "_scan_literal",
            "_scan_nested", "_match_key", "scan_elements")


def trailing_zeros(x: int) -> int:
    """Count of trailing zero bits (replaced by numba's intrinsic when compiled)."""
    x = int(x)
    return (x & -x).bit_length() - 1


def _skip_ws(b: np.ndarray, i: int, end: int) -> int:
    while i < end:
        c = b[i]
        if c != 32 and c != 10 and c != 13 and c != 9:
            return i
        i += 1
    return i


_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_QUOTES = np.uint64(0x2222222222222222)
_BACKSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_SPACES = np.uint64(0x2020202020202020)


def _special(x: np.uint64) -> np.uint64:
    """Bit 7 of each byte of ``x`` that is a quote, a backslash or a control character (exact up to the first)."""
    q = x ^ _QUOTES
    s = x ^ _BACKSLASHES
    return (((q - _ONES) & ~q) | ((s - _ONES) & ~s) | ((x - _SPACES) & ~x)) & _HIGHS


def _next_special(b: np.ndarray, w: np.ndarray, i: int, end: int) -> int:
    """First position >= i holding a quote, a backslash or a control character (``end`` if none), 8 bytes a step.

    The 8 bytes at ``i`` are put together from the two aligned words they straddle (``w`` is ``b`` as uint64).
    """
    while i + 16 <= end:
        j = i >> 3
        r = np.uint64((i & 7) * 8)
        if r == 0:
            x = w[j]
        else:
            x = (w[j] >> r) | (w[j + 1] << (np.uint64(64) - r))
        t = _special(x)
        if t != 0:
            return i + (np.int64(trailing_zeros(t)) >> 3)
        i += 8
    while i < end:
        c = b[i]
        if c == 34 or c == 92 or c < 32:
            return i
        i += 1
    return end


def _scan_string(b: np.ndarray, w: np.ndarray, i: int, end: int) -> tuple[int, bool, int]:
    """From just after an opening quote: (position of the closing quote, has escapes, status)."""
    esc = False
    while True:
        i = _next_special(b, w, i, end)
        if i >= end:
            return end, esc, END
        c = b[i]
        if c == 34:
            return i, esc, END
        if c < 32:
            return i, esc, ERROR
        # a backslash
        esc = True
        if i + 1 >= end:
            return end, esc, END
        e = b[i + 1]
        if e == 117:  # \uXXXX
            if i + 6 > end:
                return end, esc, END
            v = 0
            for k in range(2, 6):
                h = b[i + k]
                if 48 <= h <= 57:
                    d = h - 48
                elif 97 <= h <= 102:
                    d = h - 87
                elif 65 <= h <= 70:
                    d = h - 55
                else:
                    return i + k, esc, ERROR
                v = v * 16 + d
            if 0xD800 <= v <= 0xDFFF:
                return i, esc, UNSURE   # surrogate pairs: leave the fine rules to msgspec
            i += 6
            continue
        if e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110 or e == 114 or e == 116:
            i += 2
            continue
        return i + 1, esc, ERROR


def _scan_number(b: np.ndarray, i: int, end: int, scale: int) -> tuple[int, int, int, int]:
    """Validate a JSON number at ``b[i]``; with ``scale >= 0`` also its exact value times 10**scale.

    Returns (end, status, value, number state).  ``scale`` 0 accepts integers only on the fast path.
    """
    neg = False
    if b[i] == 45:
        neg = True
        i += 1
        if i >= end:
            return end, END, 0, NUM_SLOW
    c = b[i]
    if c < 48 or c > 57:
        return i, ERROR, 0, NUM_SLOW
    value = 0
    ok = scale >= 0
    if c == 48:
        i += 1
    else:
        while i < end and 48 <= b[i] <= 57:
            if value > _LIMIT_DIV_10:
                ok = False
            else:
                value = value * 10 + (b[i] - 48)
            i += 1
    frac_digits = 0
    round_digit = -1
    sticky = False
    if i < end and b[i] == 46:
        i += 1
        if i >= end:
            return end, END, 0, NUM_SLOW
        if b[i] < 48 or b[i] > 57:
            return i, ERROR, 0, NUM_SLOW
        while i < end and 48 <= b[i] <= 57:
            d = b[i] - 48
            if frac_digits < scale:
                if value > _LIMIT_DIV_10:
                    ok = False
                else:
                    value = value * 10 + d
            elif frac_digits == scale:
                round_digit = d
            elif d != 0:
                sticky = True
            frac_digits += 1
            i += 1
        if scale == 0:
            ok = False
    if i < end and (b[i] == 101 or b[i] == 69):
        ok = False
        i += 1
        if i < end and (b[i] == 43 or b[i] == 45):
            i += 1
        if i >= end:
            return end, END, 0, NUM_SLOW
        if b[i] < 48 or b[i] > 57:
            return i, ERROR, 0, NUM_SLOW
        while i < end and 48 <= b[i] <= 57:
            i += 1
    if i >= end:
        return end, END, 0, NUM_SLOW   # the number may go on in the next block
    if not ok:
        return i, 0, 0, NUM_SLOW
    for _ in range(frac_digits, scale):
        if value > _LIMIT_DIV_10:
            return i, 0, 0, NUM_SLOW
        value *= 10
    if round_digit > 5 or (round_digit == 5 and (sticky or (value & 1) == 1)):
        value += 1
    if value >= NUMBER_LIMIT:
        return i, 0, 0, NUM_SLOW
    if neg:
        if value == 0 and scale == 0:
            return i, 0, 0, NUM_SLOW   # "-0": keep its text
        value = -value
    return i, 0, value, NUM_OK


def _scan_literal(b: np.ndarray, i: int, end: int) -> tuple[int, int]:
    c = b[i]
    if c == 116:
        word = (116, 114, 117, 101)
    elif c == 102:
        word = (102, 97, 108, 115)   # "fals" + "e" checked below
    else:
        word = (110, 117, 108, 108)
    for k in range(4):
        if i + k >= end:
            return end, END
        if b[i + k] != word[k]:
            return i + k, ERROR
    if c == 102:
        if i + 4 >= end:
            return end, END
        if b[i + 4] != 101:
            return i + 4, ERROR
        return i + 5, 0
    return i + 4, 0


def _scan_nested(b: np.ndarray, w: np.ndarray, i: int, end: int, stack: np.ndarray) -> tuple[int, int, bool]:
    """Validate an object or array starting at ``b[i]``: (position after it, status, saw a line break)."""
    depth = 0
    newline = False
    # State: 0 = expect a value, 1 = expect ',' or a closer, 2 = expect a key (after '{' or ','),
    # 3 = expect a key or '}' (just after '{'), 4 = expect a value or ']' (just after '[').
    state = 0
    while True:
        while i < end:
            c = b[i]
            if c == 10:
                newline = True
            elif c != 32 and c != 13 and c != 9:
                break
            i += 1
        if i >= end:
            return end, END, newline
        c = b[i]
        if state == 1:
            if c == 44:
                i += 1
                state = 2 if stack[depth - 1] == 123 else 0
                continue
            if (c == 125 and stack[depth - 1] == 123) or (c == 93 and stack[depth - 1] == 91):
                depth -= 1
                i += 1
                if depth == 0:
                    return i, 0, newline
                continue
            return i, ERROR, newline
        if state == 2 or state == 3:
            if c == 125 and state == 3:
                depth -= 1
                i += 1
                if depth == 0:
                    return i, 0, newline
                state = 1
                continue
            if c != 34:
                return i, ERROR, newline
            j, _, st = _scan_string(b, w, i + 1, end)
            if st != END or j >= end:
                return j, st, newline
            i = _skip_ws(b, j + 1, end)
            if i >= end:
                return end, END, newline
            if b[i] != 58:
                return i, ERROR, newline
            i += 1
            state = 0
            continue
        # state 0 or 4: a value
        if c == 93 and state == 4:
            depth -= 1
            i += 1
            if depth == 0:
                return i, 0, newline
            state = 1
            continue
        if c == 123 or c == 91:
            if depth >= MAX_NESTING:
                return i, UNSURE, newline
            stack[depth] = c
            depth += 1
            i += 1
            state = 3 if c == 123 else 4
            continue
        if c == 34:
            j, _, st = _scan_string(b, w, i + 1, end)
            if st != END or j >= end:
                return j, st, newline
            i = j + 1
        elif c == 45 or 48 <= c <= 57:
            j, st, _, _ = _scan_number(b, i, end, -1)
            if st != 0:
                return j, st, newline
            i = j
        elif c == 116 or c == 102 or c == 110:
            j, st = _scan_literal(b, i, end)
            if st != 0:
                return j, st, newline
            i = j
        else:
            return i, ERROR, newline
        if depth == 0:
            return i, 0, newline
        state = 1


def _match_key(b: np.ndarray, ks: int, ke: int, kbytes: np.ndarray, koff: np.ndarray, ktab: np.ndarray) -> int:
    """Index of the wanted key spelled ``b[ks:ke]``, or -1; ``ktab`` maps (length, first byte) to a candidate."""
    n = ke - ks
    if n == 0 or n >= KEY_TABLE_LENGTHS:
        return -1
    j = ktab[n * 256 + b[ks]]
    if j == -1:
        return -1
    if j >= 0:
        a = koff[j]
        for k in range(1, n):
            if b[ks + k] != kbytes[a + k]:
                return -1
        return j
    for j in range(len(koff) - 1):   # several keys share the length and first byte
        a = koff[j]
        if koff[j + 1] - a != n:
            continue
        same = True
        for k in range(n):
            if b[ks + k] != kbytes[a + k]:
                same = False
                break
        if same:
            return j
    return -1


def scan_elements(b: np.ndarray, w: np.ndarray, pos: int, end: int, need_comma: bool, kbytes: np.ndarray,
                  koff: np.ndarray, ktab: np.ndarray, scales: np.ndarray, num_slot: np.ndarray, opens: np.ndarray,
                  closes: np.ndarray, m_start: np.ndarray, m_end: np.ndarray, m_kind: np.ndarray,
                  m_flag: np.ndarray, n_value: np.ndarray, n_state: np.ndarray,
                  stack: np.ndarray) -> tuple[int, int, int, int]:
    """Parse array elements from ``b[pos:end]`` (inside the array, at the element level).

    Returns (objects parsed, position after the last complete one, status, position of the status): status END
    (the buffer ends, possibly inside an element), ARRAY_END (the ``]`` at the returned position), ERROR or UNSURE
    (at the returned position), FULL (the output arrays are full).
    """
    cap = len(opens)
    n_keys = len(koff) - 1
    n = 0
    i = pos
    last = pos
    after_comma = False
    while True:
        i = _skip_ws(b, i, end)
        if i >= end:
            return n, last, END, end
        c = b[i]
        if c == 93:
            if after_comma:
                return n, last, ERROR, i
            return n, last, ARRAY_END, i
        if need_comma:
            if c != 44:
                return n, last, ERROR, i
            need_comma = False
            after_comma = True
            i += 1
            continue
        if c != 123:
            return n, last, UNSURE, i
        if n == cap:
            return n, last, FULL, i
        opens[n] = i
        for j in range(n_keys):
            m_kind[n, j] = ABSENT
            m_start[n, j] = i
            m_end[n, j] = i
            m_flag[n, j] = 0
            s = num_slot[j]
            if s >= 0:
                n_state[n, s] = NUM_NONE
                n_value[n, s] = 0
        i = _skip_ws(b, i + 1, end)
        if i >= end:
            return n, last, END, end
        if b[i] == 125:
            closes[n] = i
            n += 1
            i += 1
            last = i
            need_comma = True
            after_comma = False
            continue
        while True:
            if b[i] != 34:
                return n, last, ERROR, i
            ks = i + 1
            ke, kesc, st = _scan_string(b, w, ks, end)
            if st != END:
                return n, last, st, ke
            if ke >= end:
                return n, last, END, end
            i = _skip_ws(b, ke + 1, end)
            if i >= end:
                return n, last, END, end
            if b[i] != 58:
                return n, last, ERROR, i
            i = _skip_ws(b, i + 1, end)
            if i >= end:
                return n, last, END, end
            slot = -1 if kesc else _match_key(b, ks, ke, kbytes, koff, ktab)
            c = b[i]
            vs = i
            flag = 0
            if c == 34:
                ve, vesc, st = _scan_string(b, w, i + 1, end)
                if st != END:
                    return n, last, st, ve
                if ve >= end:
                    return n, last, END, end
                kind = STRING
                if vesc:
                    flag = FLAG_ESCAPE
                i = ve + 1
                if slot >= 0:
                    m_start[n, slot] = vs + 1
                    m_end[n, slot] = ve
            elif c == 123 or c == 91:
                i, st, nl = _scan_nested(b, w, i, end, stack)
                if st != 0:
                    return n, last, st, i
                kind = OBJECT if c == 123 else ARRAY
                if nl:
                    flag = FLAG_NEWLINE
                if slot >= 0:
                    m_start[n, slot] = vs
                    m_end[n, slot] = i
            else:
                kind = SCALAR
                if c == 45 or 48 <= c <= 57:
                    scale = scales[slot] if slot >= 0 else -1
                    i, st, value, nst = _scan_number(b, i, end, scale)
                    if st != 0:
                        return n, last, st, i
                    if slot >= 0 and num_slot[slot] >= 0:
                        n_value[n, num_slot[slot]] = value
                        n_state[n, num_slot[slot]] = nst
                elif c == 116 or c == 102 or c == 110:
                    i, st = _scan_literal(b, i, end)
                    if st != 0:
                        return n, last, st, i
                    if slot >= 0 and num_slot[slot] >= 0:
                        n_state[n, num_slot[slot]] = NUM_NONE
                        n_value[n, num_slot[slot]] = 0
                else:
                    return n, last, ERROR, i
                if slot >= 0:
                    m_start[n, slot] = vs
                    m_end[n, slot] = i
            if slot >= 0:
                if kind == STRING and num_slot[slot] >= 0:
                    n_state[n, num_slot[slot]] = NUM_SLOW   # a number in a string: the exact slow path
                    n_value[n, num_slot[slot]] = 0
                elif kind != SCALAR and num_slot[slot] >= 0:
                    n_state[n, num_slot[slot]] = NUM_NONE
                    n_value[n, num_slot[slot]] = 0
                m_kind[n, slot] = kind
                m_flag[n, slot] = flag
            i = _skip_ws(b, i, end)
            if i >= end:
                return n, last, END, end
            c = b[i]
            if c == 44:
                i = _skip_ws(b, i + 1, end)
                if i >= end:
                    return n, last, END, end
                if b[i] == 125:
                    return n, last, ERROR, i   # trailing comma in the object
                continue
            if c == 125:
                break
            return n, last, ERROR, i
        closes[n] = i
        n += 1
        i += 1
        last = i
        need_comma = True
        after_comma = False
