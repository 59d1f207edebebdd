"""Timeline strips as palette PNG images: one pixel per strip code, the palette maps each code to its colour.

The strips of a timeline are drawn as one plotly ``image`` trace whose ``source`` is the PNG of
:func:`strip_data_uri`.  The browser decodes it natively and plotly only places the picture: no per-cell colour
mapping in JavaScript on each redraw (what a heatmap of codes costs), and the zlib-compressed indices are several
times smaller than the raw bytes.  Code ``c`` is palette index ``c``, so :func:`decode_strip_png` gives the codes
back exactly, and :func:`code_colours` (unique per code) lets the browser read a pixel's code from its colour.
"""

from __future__ import annotations

import base64
import functools
import struct
import zlib

import numpy as np

from profiler.figures import palette as pal

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DATA_URI_PREFIX = "data:image/png;base64,"
#: zlib level: 1 is ~3x faster than the default for a few % more bytes on these run-heavy rows.
_ZLIB_LEVEL = 1


def _rgb(colour: str) -> tuple[int, int, int]:
    if colour.startswith("#"):
        c = colour.lstrip("#")
        return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)
    r, g, b = (int(v) for v in colour[colour.index("(") + 1:colour.index(")")].split(","))
    return r, g, b


@functools.cache
def code_colours() -> tuple[tuple[int, int, int], ...]:
    """RGB of every strip code 0..MAX_CODE (idle white, then each slot's shades), all distinct.

    Two codes whose shades round to the same RGB are told apart by nudging the later one by one unit, so a
    pixel's colour always names its code.
    """
    colours: list[tuple[int, int, int]] = [_rgb(pal.IDLE_COLOUR)]
    for slot in range(pal.N_SLOTS):
        base = pal.slot_colour(slot)
        colours.extend(_rgb(pal.shade_colour(base, shade)) for shade in range(pal.SHADES))
    seen: set[tuple[int, int, int]] = set()
    unique = []
    for rgb in colours:
        r, g, b = rgb
        while (r, g, b) in seen:
            b = b - 1 if b > 0 else b + 1
        seen.add((r, g, b))
        unique.append((r, g, b))
    return tuple(unique)


@functools.cache
def _plte_chunk() -> bytes:
    return _chunk(b"PLTE", bytes(v for rgb in code_colours() for v in rgb))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_strip_png(codes: np.ndarray) -> bytes:
    """A palette PNG of ``codes`` (rows x pixels, values 0..MAX_CODE): row ``i`` of the image is strip row ``i``.

    Raises:
        ValueError: for a non-2-D array, an empty one, or codes beyond MAX_CODE.
    """
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"strip codes must be a non-empty 2-D array, got shape {arr.shape}")
    if arr.max() > pal.MAX_CODE or arr.min() < 0:
        raise ValueError(f"strip codes must lie in 0..{pal.MAX_CODE}")
    height, width = arr.shape
    raw = np.empty((height, width + 1), dtype=np.uint8)
    raw[:, 0] = 0  # filter type 0 (none) on every scanline
    raw[:, 1:] = arr
    header = struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)  # 8-bit palette, no interlace
    return b"".join((_SIGNATURE, _chunk(b"IHDR", header), _plte_chunk(),
                     _chunk(b"IDAT", zlib.compress(raw.tobytes(), _ZLIB_LEVEL)), _chunk(b"IEND", b"")))


def strip_data_uri(codes: np.ndarray) -> str:
    """``data:image/png;base64,...`` of :func:`encode_strip_png` (an ``image`` trace's ``source``)."""
    return DATA_URI_PREFIX + base64.b64encode(encode_strip_png(codes)).decode("ascii")


def decode_strip_png(data: bytes | str) -> np.ndarray:
    """The codes of a PNG written by :func:`encode_strip_png` (bytes or its data URI), as ``uint8`` rows x pixels.

    Reads only what the encoder writes (8-bit palette, filter 0); ValueError for anything else.
    """
    if isinstance(data, str):
        if not data.startswith(DATA_URI_PREFIX):
            raise ValueError("not a PNG data URI")
        data = base64.b64decode(data[len(DATA_URI_PREFIX):])
    if not data.startswith(_SIGNATURE):
        raise ValueError("not a PNG")
    pos, width, height, idat = len(_SIGNATURE), 0, 0, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour_type = struct.unpack(">IIBB", body[:10])
            if (depth, colour_type) != (8, 3):
                raise ValueError("not an 8-bit palette PNG")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, width + 1)
    if raw[:, 0].any():
        raise ValueError("unsupported PNG row filter")
    return raw[:, 1:].copy()
