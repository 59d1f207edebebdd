"""Column builders of the trace emitter (:mod:`tracer.sim.emitter`): int64 views of raw buffers, dictionary
columns from codes, and the interning of template attributes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa


def i64(buf: Any) -> np.ndarray:
    """A raw int64 buffer (``array.array`` or bytes) as a numpy array without copying."""
    return np.frombuffer(buf, dtype=np.int64) if len(buf) else np.zeros(0, np.int64)


def names_column(codes: np.ndarray, names: list[str]) -> pa.DictionaryArray:
    """A dictionary column of the names ``codes`` refer to (-1: null), with only the names used, in code order."""
    used = np.unique(codes[codes >= 0])
    remap = np.full(len(names) + 1, -1, np.int64)
    remap[used] = np.arange(len(used))
    return dict_column(remap[codes], [names[c] for c in used.tolist()])


def first_seen_column(codes: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    """A dictionary column of ``values[codes]`` whose dictionary lists the values used, in order of first use."""
    _uniq, first = np.unique(codes, return_index=True)
    used = codes[np.sort(first)]
    remap = np.zeros(len(values), np.int64)
    remap[used] = np.arange(len(used))
    return dict_column(remap[codes], [values[c] for c in used.tolist()])


def dict_column(codes: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    if not len(codes) or codes.min() >= 0:
        idx = pa.array(codes.astype(np.int32, copy=False))
    else:
        mask = codes < 0
        idx = pa.array(np.where(mask, 0, codes).astype(np.int32), mask=mask)
    return pa.DictionaryArray.from_arrays(idx, pa.array(values, pa.string()))


class Interned:
    """Distinct string values of one template attribute, and each template's code (-1 = null)."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self.codes: dict[str, int] = {}
        self.by_template: list[int] = []

    def copy(self, template: int) -> None:
        """Give the next template the value of template ``template``."""
        self.by_template.append(self.by_template[template])

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
