"""Data types of the simulated NeuronCore: sizes, FLOP weights and numpy rounding.

Values are held as float32 numpy arrays whatever the declared type; writing to a tile or tensor rounds them to
the declared type (bf16 by round-to-nearest-even on the float32 bit pattern, fp16 through numpy's float16, the two
FP8 types of nc_matmul -- ``fp8_e4m3`` and ``fp8_e5m2``, OCP's E4M3FN and E5M2 -- by :func:`round_minifloat`), so
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
    #: BF16-equivalent FLOP weight of a matmul in this type (Neuron's adjusted_flops: FP32 x4); FP8's depends on the
    #: architecture (``CostModel.fp8_flops_factor``), see :attr:`is_fp8`.
    flops_factor: float
    #: Tensor-engine cost factor of the moving data (FP32 runs about 4x slower).
    is_fp32: bool
    #: (exponent bits, mantissa bits, finite maximum, has infinities) of an FP8 type; None otherwise.
    minifloat: tuple[int, int, float, bool] | None = None

    @property
    def is_fp8(self) -> bool:
        """True for the 1-byte float types (their matmuls can use the PE array's double-row mode on trn2)."""
        return self.minifloat is not None

    def round(self, values: np.ndarray) -> np.ndarray:
        """``values`` (float32) rounded to this type's precision, as float32."""
        if self.name == "bf16":
            return round_bf16(values)
        if self.name == "fp16":
            return values.astype(np.float16).astype(np.float32)
        if self.minifloat is not None:
            return round_minifloat(values, *self.minifloat)
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


def round_minifloat(values: np.ndarray, exp_bits: int, man_bits: int, max_finite: float,
                    has_inf: bool) -> np.ndarray:
    """Round float32 values to a small IEEE-like binary float (round to nearest, ties to even, with subnormals),
    returned as float32.  Beyond the largest finite value a result is infinite where the type has infinities
    (E5M2) and NaN where it has none (E4M3FN), as OCP's conversions without saturation; NaN stays NaN."""
    v = np.asarray(values, dtype=np.float32)
    bias = 2 ** (exp_bits - 1) - 1
    min_exp = 1 - bias                              # exponent of the smallest normal number (and of subnormals)
    with np.errstate(all="ignore"):
        mag = np.abs(v).astype(np.float64)
        _, e = np.frexp(mag)                        # mag = m * 2**e with 0.5 <= m < 1: exponent e - 1
        exp = np.maximum(e.astype(np.int64) - 1, min_exp)
        quantum = np.ldexp(1.0, exp - man_bits)     # spacing of representable values at that exponent
        out = np.round(mag / quantum) * quantum     # numpy rounds halves to even
        out = np.where(out > max_finite, np.inf if has_inf else np.nan, out)
        out = np.where(np.isinf(mag), np.inf if has_inf else np.nan, out)
        return np.where(np.isnan(v), v, np.copysign(out, v)).astype(np.float32)


DTYPES: dict[str, DType] = {
    "bf16": DType("bf16", 2, 1.0, False),
    "fp16": DType("fp16", 2, 1.0, False),
    "fp32": DType("fp32", 4, 4.0, True),
    # OCP FP8 (the float8_e4m3 / float8_e5m2 of nc_matmul): E4M3FN's largest finite value is 448 (no infinities),
    # E5M2's 57344
    "fp8_e4m3": DType("fp8_e4m3", 1, 1.0, False, (4, 3, 448.0, False)),
    "fp8_e5m2": DType("fp8_e5m2", 1, 1.0, False, (5, 2, 57344.0, True)),
}
ALIASES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3": "fp8_e4m3",
           "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}


def dtype(name: str | DType, where: str = "") -> DType:
    """The :class:`DType` called ``name`` (``bf16``, ``fp16``, ``fp32``, ``fp8_e4m3``, ``fp8_e5m2``); KernelError
    otherwise."""
    if isinstance(name, DType):
        return name
    key = ALIASES.get(str(name), str(name))
    try:
        return DTYPES[key]
    except KeyError:
        prefix = f"{where}: " if where else ""
        raise KernelError(f"{prefix}unknown dtype {name!r}; supported: {', '.join(DTYPES)}") from None
