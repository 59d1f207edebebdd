"""Data types of the simulated NeuronCore: sizes, FLOP weights and numpy rounding.

Values are held as float32 numpy arrays whatever the declared type; writing to a tile or tensor rounds them to
the declared type (bf16 by round-to-nearest-even on the float32 bit pattern, fp16 through numpy's float16), so
results carry exactly the precision the hardware would keep.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracer.errors import KernelError


@dataclass(frozen=True)
class DType:
    """One element type."""

    name: str
    itemsize: int
    #: BF16-equivalent FLOP weight of a matmul in this type (Neuron's adjusted_flops: FP32 x4).
    flops_factor: float
    #: Tensor-engine cost factor of the moving data (FP32 runs about 4x slower).
    is_fp32: bool

    def round(self, values: np.ndarray) -> np.ndarray:
        """``values`` (float32) rounded to this type's precision, as float32."""
        if self.name == "bf16":
            return round_bf16(values)
        if self.name == "fp16":
            return values.astype(np.float16).astype(np.float32)
        return values.astype(np.float32, copy=False)


def round_bf16(values: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (round to nearest, ties to even), returned as float32."""
    v = np.ascontiguousarray(values, dtype=np.float32)
    bits = v.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    out = rounded.view(np.float32)
    nan = np.isnan(v)
    if nan.any():
        out = np.where(nan, v, out)
    return out


DTYPES: dict[str, DType] = {
    "bf16": DType("bf16", 2, 1.0, False),
    "fp16": DType("fp16", 2, 1.0, False),
    "fp32": DType("fp32", 4, 4.0, True),
}
ALIASES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def dtype(name: str | DType, where: str = "") -> DType:
    """The :class:`DType` called ``name`` (``bf16``, ``fp16``, ``fp32``); KernelError otherwise."""
    if isinstance(name, DType):
        return name
    key = ALIASES.get(str(name), str(name))
    try:
        return DTYPES[key]
    except KeyError:
        prefix = f"{where}: " if where else ""
        raise KernelError(f"{prefix}unknown dtype {name!r}; supported: {', '.join(DTYPES)}") from None
