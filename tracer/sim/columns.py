"""Column builders of the trace emitter (:mod:`tracer.sim.emitter`): int64 views of raw buffers, dictionary
columns from codes, the Arrow string arrays of their dictionaries (converted once), and the interning of template
attributes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa


def dict_column(codes: np.ndarray, values: Sequence[str] | pa.Array) -> pa.DictionaryArray:
    """A dictionary column of ``values[codes]`` (-1: null); ``values`` as strings or an Arrow string array."""
    if not len(codes) or codes.min() >= 0:
        idx = pa.array(codes.astype(np.int32, copy=False))
    else:
        mask = codes < 0
        idx = pa.array(np.where(mask, 0, codes).astype(np.int32), mask=mask)
    if not isinstance(values, pa.Array):
        values = pa.array(values, pa.string())
    return pa.DictionaryArray.from_arrays(idx, values)


class StringArrays:
    """Arrow string arrays of the emitter's value collections, each converted once.

    A tuple is looked up by its values (the fixed names, a chunk's stream names); a list or a dict (its keys) by
    identity and length: the emitter's lists and dicts of values only ever grow, so one of the same length holds the
    same values.  The array then goes into every chunk's dictionary columns as the same object, and the trace
    writer maps a dictionary it has seen before without looking at its values again.
    """

    def __init__(self) -> None:
        self._by_value: dict[tuple[str, ...], pa.Array] = {}
        self._by_id: dict[int, tuple[Any, int, pa.Array]] = {}

    def __call__(self, values: tuple[str, ...] | list[str] | dict[str, Any]) -> pa.Array:
        """The values as an Arrow string array (the same object while they are unchanged)."""
        if type(values) is tuple:
            arr = self._by_value.get(values)
            if arr is None:
                arr = self._by_value[values] = pa.array(values, pa.string())
            return arr
        hit = self._by_id.get(id(values))
        if hit is not None and hit[0] is values and hit[1] == len(values):
            return hit[2]
        arr = pa.array(list(values), pa.string())
        self._by_id[id(values)] = (values, len(values), arr)  # the reference keeps the id from being reused
        return arr


def names_column(codes: np.ndarray, names: list[str], strings: StringArrays) -> pa.DictionaryArray:
    """A dictionary column of the names ``codes`` refer to (-1: null), with only the names used, in code order
    (the dictionary from ``strings``)."""
    used = np.unique(codes[codes >= 0])
    remap = np.full(len(names) + 1, -1, np.int64)
    remap[used] = np.arange(len(used))
    return dict_column(remap[codes], strings(tuple([names[c] for c in used.tolist()])))


def first_seen_column(codes: np.ndarray, values: list[str], strings: StringArrays) -> pa.DictionaryArray:
    """A dictionary column of ``values[codes]`` whose dictionary lists the values used, in order of first use
    (the dictionary from ``strings``)."""
    _uniq, first = np.unique(codes, return_index=True)
    used = codes[np.sort(first)]
    remap = np.zeros(len(values), np.int64)
    remap[used] = np.arange(len(used))
    return dict_column(remap[codes], strings(tuple([values[c] for c in used.tolist()])))


class Interned:
    """Distinct string values of one template attribute, and each template's code (-1 = null)."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self.codes: dict[str, int] = {}
        self.by_template: list[int] = []

    def add(self, value: str | None) -> None:
        """Intern the next template's value (None: null)."""
        if value is None:
            self.by_template.append(-1)
            return
        code = self.codes.get(value)
        if code is None:
            code = self.codes[value] = len(self.values)
            self.values.append(value)
        self.by_template.append(code)
