"""Exact decimal text -> scaled int64 conversion, in bulk: Chrome's microsecond timestamps to nanoseconds.

``1695835572943558.123`` µs is ``1695835572943558123`` ns exactly; a float64 cannot hold it (its spacing there is
0.25 µs).  The texts are cast to Arrow decimals (C++, vectorised), rounded half to even below the target scale,
and the unscaled integers read straight out of the decimal buffer.  Only invalid or out-of-range texts take a
slower path, which marks them invalid instead of failing the batch.
"""

from __future__ import annotations

import decimal
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def decimal_text_to_ns(text: pa.Array, scale_digits: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Exact integer conversion of decimal texts (``"1234.567"``, ``"1.5e3"``) times ``10**scale_digits``.

    Used for Chrome microsecond timestamps (``scale_digits=3`` gives nanoseconds): the text is parsed as an Arrow
    decimal, never through a binary float, so ``1695835572943558.123`` µs becomes exactly 1695835572943558123 ns.
    Digits beyond the scale are rounded half to even.

    Returns:
        (values as int64, valid mask); invalid texts (not a number, out of the int64 range) are invalid rows.
    """
    n = len(text)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.bool_)
    if text.type != pa.string():
        text = text.cast(pa.string()) if pa.types.is_binary(text.type) else text
    valid_in = np.asarray(text.is_valid())
    try:
        dec = pc.cast(text, pa.decimal128(38, scale_digits))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        dec = None
    if dec is None:
        dec, valid_in = _decimal_cast_slow(text, scale_digits, valid_in)
    words = np.frombuffer(dec.buffers()[1], dtype=np.int64, count=2 * (len(dec) + dec.offset))[2 * dec.offset:]
    lo, hi = words[0::2].copy(), words[1::2]
    fits = hi == (lo >> 63)
    valid = valid_in & fits & np.asarray(dec.is_valid())
    lo[~valid] = 0
    return lo, valid


_NUMBER_RE = r"^\s*-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"


def _decimal_cast_slow(text: pa.Array, scale_digits: int, valid_in: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Decimal cast tolerating bad rows and digits beyond the scale (rounded half to even)."""
    ok = np.asarray(pc.match_substring_regex(text, _NUMBER_RE).fill_null(False)) & valid_in
    ok &= np.asarray(pc.utf8_length(text).fill_null(0)) <= 64
    cleaned = pc.if_else(pa.array(ok), pc.utf8_trim_whitespace(text), pa.scalar("0"))
    try:
        wide = pc.cast(cleaned, pa.decimal128(38, 12))
        rounded = pc.round(wide, ndigits=scale_digits, round_mode="half_to_even")
        return pc.cast(rounded, pa.decimal128(38, scale_digits)), ok
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # Rare: values beyond 26 integer digits or with large exponents.  Exact per value, out-of-range ones invalid.
    limit = decimal.Decimal(2) ** 63
    values: list[int | None] = []
    quantum = decimal.Decimal(1)
    scale = decimal.Decimal(10) ** scale_digits
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        for t, good in zip(cleaned.to_pylist(), ok.tolist(), strict=True):
            v = None
            if good:
                try:
                    d = (decimal.Decimal(t) * scale).quantize(quantum, rounding=decimal.ROUND_HALF_EVEN)
                    v = int(d) if -limit <= d < limit else None
                except (decimal.InvalidOperation, ValueError):
                    v = None
            values.append(v)
    ok = ok & np.array([v is not None for v in values], np.bool_)
    as_scaled = pa.array([decimal.Decimal(v).scaleb(-scale_digits) if v is not None else decimal.Decimal(0)
                          for v in values], pa.decimal128(38, scale_digits))
    return as_scaled, ok


def count_finite_numbers(text: pa.Array) -> int:
    """How many of ``text`` read as finite numbers: among texts :func:`decimal_text_to_ns` refused, those refused
    for their size (a unit mix-up), not for not being numbers."""
    return sum(1 for value in text.to_pylist() if value is not None and _finite(value))


def _finite(value: str) -> bool:
    try:
        return math.isfinite(float(value))
    except ValueError:
        return False
