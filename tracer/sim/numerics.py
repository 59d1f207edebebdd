"""Numerics of the simulated engines: the numpy functions behind activation, tensor and reduce operations."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tracer.errors import KernelError


def erfc(z: np.ndarray) -> np.ndarray:
    """The complementary error function, vectorised (numpy has none): the Chebyshev fit of Numerical Recipes'
    ``erfcc``, whose *relative* error is under 1.2e-7 everywhere -- an fp32 ulp, in the tails too."""
    z = np.asarray(z, np.float64)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    with np.errstate(under="ignore", over="ignore"):
        r = t * np.exp(-a * a + poly)
    return np.where(z >= 0, r, 2.0 - r)


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU, x * Phi(x) (NKI's ``gelu``), through erfc so the negative tail keeps its precision."""
    x = np.asarray(x, np.float64)
    return 0.5 * x * erfc(-x * 0.7071067811865476)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU's tanh approximation (NKI's ``gelu_apprx_tanh``)."""
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _safe_rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


def _safe_reciprocal(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return 1.0 / x


#: Scalar-engine activation functions: name -> f(x) (applied to ``in * scale + bias``).
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "identity": lambda x: x,
    "exp": np.exp,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": _gelu,
    "gelu_apprx_tanh": _gelu_tanh,
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "square": np.square,
    "sqrt": np.sqrt,
    "rsqrt": _safe_rsqrt,
    "reciprocal": _safe_reciprocal,
    "log": np.log,
}

#: Element-wise binary operations of tensor_tensor / tensor_scalar.
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "max": np.maximum,
    "min": np.minimum,
}

#: Comparisons (NKI's nl.equal, nl.less, ...): 1.0 where true, 0.0 where false in tensor_tensor / tensor_scalar;
#: affine_select's predicate against 0.
COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
}
BINARY.update(COMPARE)

#: Reductions of tensor_reduce / partition_reduce.
REDUCE: dict[str, Callable[..., np.ndarray]] = {
    "add": np.sum,
    "max": np.max,
    "min": np.min,
}


def lookup(table: dict[str, Callable[..., np.ndarray]], name: str, what: str, where: str) -> Callable[..., np.ndarray]:
    """``table[name]``, or a KernelError listing the choices."""
    try:
        return table[name]
    except (KeyError, TypeError):
        raise KernelError(f"{where}: unknown {what} {name!r}; choose one of {', '.join(table)}") from None


def compute(fn: Callable[..., np.ndarray], *args: np.ndarray) -> np.ndarray:
    """``fn(*args)`` in float32 with floating-point warnings silenced (inf/nan propagate as on hardware)."""
    with np.errstate(all="ignore"):
        return np.asarray(fn(*args), dtype=np.float32)
