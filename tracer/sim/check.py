"""``--check``: a kernel's simulated outputs against its numpy reference, with tolerances from the types' precision.

The reference computes in float64 from the same (already rounded) inputs; its result is rounded to each output's
type.  A correct kernel then differs from it only by the roundings the kernel did on the way: its intermediate
tiles and its output, each of at most half a unit in the last place (ulp) of its type.  The tolerance is therefore
set by the *coarsest* type the kernel computed in -- the output's or any tile's -- through its unit roundoff
``u`` (2^-8 for bf16: 8 significant bits), and an output passes when

* every element is within ``tol * |reference| + tol * max|reference|`` (``tol`` = 2u: one ulp relative, plus one
  ulp of the largest value absolute, for elements whose terms cancelled), and
* the whole output is within ``tol`` in norm: ``||got - want||_2 <= tol * ||want||_2`` (a systematic error of a
  percent, which no single bf16 element shows beyond its ulp, fails here).

Where the reference is all zeros, or negligible beside the inputs (under :data:`NEGLIGIBLE` of them: a float64
residual of 1e-16), "the largest value" is the inputs' scale -- the smallest of their largest magnitudes -- and
only the element test applies: a residual that should cancel is held to the scale of what it was computed from.

fp32 is held to 2^-16 instead of its 2^-23: long fp32 accumulations differ from a float64 reference by several
ulps.  The shipped kernels, correct, stay under half of these (mlp with 4 layers of d_ff 4096 in bf16: 41% of the
elementwise bound, 53% of the norm bound; docs/kernels.md).  ``@kernel(reference=..., tolerance=x)`` replaces
``tol`` for one kernel.  Equal NaNs and equal infinities match.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tracer.errors import KernelError, TrnprofError
from tracer.sim.dtypes import DType

#: ``--check``'s tolerance ``tol`` per type (see the module's docstring): twice the unit roundoff, fp32 2^-16.
CHECK_TOLERANCE = {"fp32": 2.0 ** -16, "fp16": 2.0 ** -10, "bf16": 2.0 ** -7,
                   "fp8_e4m3": 2.0 ** -3, "fp8_e5m2": 2.0 ** -2}


#: A reference whose largest magnitude is under this fraction of the inputs' scale is float64 rounding noise (a
#: residual that should cancel: 1e-16), not values: it is held as all zeros.  Far below any checked type's
#: precision, so small true values (softmax probabilities) keep their own scale.
NEGLIGIBLE = 1e-12


@dataclasses.dataclass
class CheckResult:
    """Comparison of one output tensor with the numpy reference."""

    name: str
    max_abs_error: float
    #: The largest error over the reference's largest magnitude (not an element's own relative error).
    max_rel_error: float
    ok: bool
    #: What else differs: NaN/inf values in one and not the other, parts never written, the elements out of bounds.
    note: str = ""
    #: ``||got - want||_2 / ||want||_2`` (0 when the reference is all zeros and the output too).
    norm_error: float = 0.0
    #: The tolerance applied and the type it came from (the coarsest type the kernel computed in).
    tolerance: float = 0.0
    precision: str = ""
    #: What ``max_rel_error`` is relative to.
    relative_to: str = "the largest reference value"

    def describe(self) -> str:
        """One line: what differs, or how close it is."""
        close = (f"max abs error {self.max_abs_error:.4g} ({self.max_rel_error:.3g} of {self.relative_to}), "
                 f"norm error {self.norm_error:.3g}; tolerance {self.tolerance:.3g} ({self.precision})")
        return f"{self.note}; {close}" if self.note else close


def coarsest(dtypes: list[DType]) -> DType:
    """The type with the largest tolerance among ``dtypes`` (the least precise)."""
    return max(dtypes, key=lambda d: CHECK_TOLERANCE[d.name])


def _where(mask: np.ndarray) -> str:
    r, c = (int(v) for v in np.argwhere(mask)[0])
    return f"[{r}, {c}]"


def compare(name: str, got: np.ndarray, want: np.ndarray, *, tol: float, precision: str,
            unwritten: str = "", zero_scale: float = 1.0) -> CheckResult:
    """One output against its reference (both float32, rounded to the output's type) at tolerance ``tol``;
    ``zero_scale``: the magnitude the absolute bound is relative to where the reference is all zeros (the
    inputs' largest, else 1: a residual that should cancel is held to the scale of what it was computed from)."""
    with np.errstate(all="ignore"):
        return _compare(name, got.astype(np.float64), want.astype(np.float64), tol, precision, unwritten, zero_scale)


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _special_note(got64: np.ndarray, want64: np.ndarray) -> str:
    """What differs among the NaN and infinite values (one side's NaN or infinities where the other has none,
    infinities of opposite signs), or ""."""
    nan_got, nan_want = np.isnan(got64), np.isnan(want64)
    inf_got, inf_want = np.isinf(got64), np.isinf(want64)
    for whose, a, b in (("the output", nan_got, nan_want), ("the reference", nan_want, nan_got)):
        extra = a & ~b
        if extra.any():
            n = int(extra.sum())
            return f"{whose} has {n:,} NaN value{_s(n)} where the other has none (first at {_where(extra)})"
    for whose, a, b in (("the output", inf_got, inf_want), ("the reference", inf_want, inf_got)):
        extra = a & ~b & ~nan_got & ~nan_want
        if extra.any():
            n = int(extra.sum())
            return (f"{whose} has {n:,} infinite value{_s(n)} where the other has finite ones (first at "
                    f"{_where(extra)})")
    flipped = inf_got & inf_want & (got64 != want64)
    if flipped.any():
        r, c = (int(v) for v in np.argwhere(flipped)[0])
        n = int(flipped.sum())
        return (f"the output has {n:,} infinit{'ies' if n != 1 else 'y'} of the opposite sign to the reference's "
                f"(first at [{r}, {c}]: {float(got64[r, c]):g} where the reference has {float(want64[r, c]):g})")
    return ""


def _compare(name: str, got64: np.ndarray, want64: np.ndarray, tol: float, precision: str,  # noqa: PLR0917
             unwritten: str, zero_scale: float) -> CheckResult:
    finite = np.isfinite(got64) & np.isfinite(want64)
    mag = np.abs(want64[np.isfinite(want64)])
    largest = float(mag.max()) if mag.size else 0.0
    zero_scale = float(zero_scale) if zero_scale > 0 else 1.0
    # a reference of zeros -- or of values negligible beside the inputs (a float64 residual of 1e-16) -- is held to
    # the inputs' scale; otherwise to its own largest value
    negligible = largest < NEGLIGIBLE * zero_scale
    scale = zero_scale if negligible else largest
    err = np.where(finite, np.abs(got64 - want64), 0.0)
    max_abs = float(err.max()) if err.size else 0.0
    norm_want = float(np.linalg.norm(np.where(finite, want64, 0.0)))
    norm_error = float(np.linalg.norm(err)) / norm_want if norm_want > 0 and not negligible else 0.0
    # (a negligible reference: the element test only)
    note = unwritten or _special_note(got64, want64)
    bound = tol * np.abs(want64) + tol * scale
    outside = finite & (err > bound)
    if outside.any() and not note:
        worst = np.unravel_index(int(np.argmax(np.where(outside, err - bound, -np.inf))), err.shape)
        r, c = (int(v) for v in worst)
        note = (f"{int(outside.sum()):,} of {err.size:,} elements outside the tolerance, the worst at [{r}, {c}]: "
                f"{float(got64[r, c]):.6g} where the reference has {float(want64[r, c]):.6g}")
    if not note and not negligible and norm_error > tol:
        note = (f"the output is off by {norm_error:.3g} of the reference in norm (over the tolerance {tol:.3g}): a "
                "systematic error, each element within its own bound")
    of = ("the inputs' scale (the reference is zeros or negligible beside them; no norm test)" if negligible
          else "the largest reference value")
    return CheckResult(name, max_abs, max_abs / scale, not note, note, norm_error, tol, precision, of)


def check_outputs(spec: Any, ctx: Any, params: Mapping[str, Any]) -> list[CheckResult]:
    """Compare each output tensor with ``spec.reference(inputs, **params)``."""
    if spec.reference is None:
        raise KernelError(f"kernel {spec.name} has no numpy reference, so --check cannot run; declare one with "
                          "@tracer.kernels.kernel(reference=...)")
    if not any(t.kind == "output" for t in ctx.tensors.values()):
        raise KernelError(f"kernel {spec.name} declares no output tensor, so --check has nothing to compare; "
                          "declare results with nc.output(...)")
    # the inputs as they were given to the kernel (a kernel may write over one: the reference must not see that)
    inputs = {n: a.copy() for n, a in ctx.initial_inputs.items()}
    try:  # a reference that cannot take the call: named at its own line, with the parameters it is given
        inspect.signature(spec.reference).bind(inputs, **params)
    except TypeError as exc:
        code = getattr(spec.reference, "__code__", None)
        where = f"{Path(code.co_filename).name}:{code.co_firstlineno}" if code is not None else "?"
        shown = ", ".join(params) or "none"
        raise KernelError(f"{where}: the numpy reference of kernel {spec.name} cannot be called as "
                          f"reference(inputs, **params) with the kernel's parameters ({shown}): {exc}; take them "
                          "all, or **params") from None
    except ValueError:  # no signature to check (a builtin): the call itself says what is wrong
        pass
    try:
        with np.errstate(all="ignore"):
            expected = spec.reference(inputs, **params)
    except TrnprofError:
        raise
    except Exception as exc:  # the user's reference, not trnprof, failed
        from tracer.sim.runner import _user_line  # (runner imports this module)

        raise KernelError(f"{_user_line(exc, spec.reference)}: the numpy reference of kernel {spec.name} raised "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(expected, Mapping):
        raise KernelError(f"the numpy reference of kernel {spec.name} returned {type(expected).__name__}; it must "
                          "return a dict of output name -> array")
    tiles = list(getattr(ctx, "tile_dtypes", ()))
    # where a reference is zeros (or negligible), the absolute bound is relative to the inputs' scale: the smallest
    # of their largest magnitudes (an unused mask of -30000 must not excuse a 0.25 error)
    sizes = [m for m in (float(np.abs(a[np.isfinite(a)]).max()) for a in inputs.values() if np.isfinite(a).any())
             if m > 0]
    zero_scale = min(sizes, default=1.0)
    checks = []
    for name, t in ctx.tensors.items():
        if t.kind != "output":
            continue
        if name not in expected:
            raise KernelError(f"reference of kernel {spec.name} returns no value for output {name!r}")
        try:
            with np.errstate(all="ignore"):   # (a float64 value past float32's range becomes inf, as it would)
                want = t.dtype.round(np.asarray(expected[name], np.float32))
        except (TypeError, ValueError) as exc:
            raise KernelError(f"the numpy reference of kernel {spec.name} gives output {name!r} a value that is not "
                              f"a numeric array ({type(expected[name]).__name__}: {exc})") from None
        got = t.data
        if want.shape != got.shape:
            raise KernelError(f"reference of kernel {spec.name} gives {name} shape {want.shape}, kernel {got.shape}")
        precision = coarsest([t.dtype, *tiles])
        tol = spec.tolerance if getattr(spec, "tolerance", None) is not None else CHECK_TOLERANCE[precision.name]
        box = t.unwritten_part(0, t.shape[0], 0, t.shape[1])
        unwritten = ""
        if box is not None:  # zeros where the kernel wrote nothing could match a reference by chance
            never = t.shape[0] * t.shape[1] if t.written is None else int((~t.written).sum())
            unwritten = (f"the kernel never wrote {never:,} of its {t.shape[0] * t.shape[1]:,} elements, within "
                         f"[{box[0]}:{box[1]}, {box[2]}:{box[3]}]")
        shown = precision.name if precision is t.dtype else f"{precision.name}, the coarsest type the kernel used"
        own = getattr(spec, "tolerance", None) is not None
        checks.append(compare(name, got, want, tol=tol, precision="the kernel's own" if own else shown,
                              unwritten=unwritten, zero_scale=zero_scale))
    return checks


def failure_message(kernel: str, checks: list[CheckResult]) -> str | None:
    """The one-line ``--check`` failure naming every output that differs, or None when all passed."""
    bad = [c for c in checks if not c.ok]
    if not bad:
        return None
    parts = "; ".join(f"output {c.name} differs from the numpy reference ({c.describe()})" for c in bad)
    return f"--check failed for kernel {kernel}: {parts}"

