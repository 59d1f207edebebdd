"""The shipped kernels, the ``@kernel`` decorator, and loading user kernels from ``path/to/file.py:function``.

A kernel is a function ``fn(nc, **params)`` whose parameters all have defaults; the defaults' types (int, float,
bool, str) are how ``-p KEY=VALUE`` strings are converted.  ``@kernel(reference=ref)`` attaches a numpy reference
``ref(inputs, **params) -> {output name: array}`` used by ``--check``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import numbers
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracer.errors import ConfigError

#: Shipped kernels: name -> module under tracer.kernels (each defines a function of the same name).
BUILTIN_KERNELS: tuple[str, ...] = (
    "matmul_naive",
    "matmul_blocked",
    "matmul_rowload",
    "linear",
    "softmax",
    "rmsnorm",
    "layernorm",
    "attention",
    "mlp",
    "dma_stream",
)


@dataclass(frozen=True)
class Param:
    """One kernel parameter."""

    name: str
    default: Any
    type: type

    def convert(self, value: Any, kernel: str) -> Any:
        """``value`` (often a string from ``-p``) as this parameter's type; ConfigError otherwise."""
        if isinstance(value, self.type) and not (self.type is int and isinstance(value, bool)):
            return value
        text = str(value).strip()
        try:
            if self.type is bool:
                low = text.lower()
                if low in ("1", "true", "yes", "on"):
                    return True
                if low in ("0", "false", "no", "off"):
                    return False
                raise ValueError(text)
            if self.type is int:
                return int(text, 0)
            if self.type is float:
                return float(text)
        except ValueError:
            raise ConfigError(f"kernel {kernel}: parameter {self.name}={text!r} is not a valid "
                              f"{self.type.__name__}") from None
        return text


@dataclass(frozen=True)
class KernelSpec:
    """A kernel: its function, parameters (with defaults), documentation and numpy reference."""

    name: str
    fn: Callable[..., Any]
    params: tuple[Param, ...]
    doc: str
    reference: Callable[..., dict[str, Any]] | None
    #: ``--check``'s tolerance for this kernel (None: from the types it computes in, ``tracer.sim.check``).
    tolerance: float | None = None

    @property
    def summary(self) -> str:
        """First line of the docstring."""
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""

    def bind(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``given``; ConfigError naming the valid parameters for an unknown one."""
        if not isinstance(given, Mapping):
            raise ConfigError(f"kernel {self.name}: parameters must be a mapping of name -> value, not "
                              f"{type(given).__name__} {given!r}")
        by_name = {p.name: p for p in self.params}
        out = {p.name: p.default for p in self.params}
        for key, value in given.items():
            param = by_name.get(key)
            if param is None:
                valid = ", ".join(by_name) or "none"
                raise ConfigError(f"kernel {self.name} has no parameter {key!r}; its parameters: {valid}")
            out[key] = param.convert(value, self.name)
        return out


def kernel(fn: Callable[..., Any] | None = None, *, name: str | None = None,
           reference: Callable[..., dict[str, Any]] | None = None, tolerance: float | None = None) -> Any:
    """Mark ``fn`` as a kernel (optionally with a numpy ``reference`` for ``--check``).

    Usable bare (``@kernel``) or with arguments (``@kernel(reference=ref)``).  ``tolerance`` replaces ``--check``'s
    tolerance for this kernel (relative per element, of the largest value absolute, and in norm; default: from the
    coarsest type the kernel computes in, ``tracer.sim.check``).
    """
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real)
                                  or not 0 <= float(tolerance) < float("inf")):
        raise ConfigError(f"@kernel(tolerance=...) takes a number >= 0, not {tolerance!r}")

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.__trnprof_kernel__ = {"name": name or f.__name__, "reference": reference,  # type: ignore[attr-defined]
                                "tolerance": None if tolerance is None else float(tolerance)}
        return f

    return mark(fn) if fn is not None else mark


def spec_of(fn: Callable[..., Any], name: str | None = None) -> KernelSpec:
    """The :class:`KernelSpec` of a kernel function."""
    info = getattr(fn, "__trnprof_kernel__", {})
    kname = name or info.get("name") or getattr(fn, "__name__", "kernel")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise ConfigError(f"kernel {kname}: not a Python function") from None
    items = list(sig.parameters.values())
    if not items:
        raise ConfigError(f"kernel {kname}: its first parameter must be the core (`def {kname}(nc, ...)`)")
    params = []
    for p in items[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is p.empty:
            raise ConfigError(f"kernel {kname}: parameter {p.name!r} needs a default value")
        kind = type(p.default) if isinstance(p.default, (bool, int, float, str)) else str
        params.append(Param(p.name, p.default, kind))
    return KernelSpec(kname, fn, tuple(params), inspect.getdoc(fn) or "", info.get("reference"),
                      info.get("tolerance"))


def builtin(name: str) -> KernelSpec:
    """The shipped kernel ``name``."""
    if name not in BUILTIN_KERNELS:
        raise ConfigError(f"unknown kernel {name!r}; shipped kernels: {', '.join(BUILTIN_KERNELS)} "
                          "(or give path/to/file.py:function)")
    module = importlib.import_module(f"tracer.kernels.{name}")
    return spec_of(getattr(module, name), name)


def all_kernels() -> list[KernelSpec]:
    """Every shipped kernel."""
    return [builtin(n) for n in BUILTIN_KERNELS]


def load_file_kernel(target: str) -> KernelSpec:
    """The kernel ``function`` defined in ``path/to/file.py`` (``target = "path/to/file.py:function"``)."""
    path_text, _, func = target.rpartition(":")
    path = Path(path_text)
    if not path_text or not func or func.endswith(".py"):
        raise ConfigError(f"{target}: expected path/to/file.py:function (the kernel function after a colon)")
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory; name the kernel's Python file: path/to/file.py:function")
    if not path.is_file():
        raise ConfigError(f"{path}: no such kernel file")
    mod_name = f"trnprof_user_kernel_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a user's file: report any import-time error (or exit) as one line
        sys.modules.pop(mod_name, None)
        line = ""
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in (str(path), spec.origin):  # origin: the absolute path
                line = f":{tb.tb_lineno}"
            tb = tb.tb_next
        if isinstance(exc, SystemExit):  # exiting would end `trnprof record` without a word, even with status 0
            raise ConfigError(f"{path}{line}: importing the kernel file called sys.exit({exc.code!r}); a kernel file "
                              "must import without exiting (guard script code with `if __name__ == \"__main__\":`)"
                              ) from None
        raise ConfigError(f"{path}{line}: importing the kernel file failed: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, func, None)
    if fn is None or not callable(fn):
        names = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and v.__module__ == mod_name)
        raise ConfigError(f"{path}: no function {func!r} (functions there: {', '.join(names) or 'none'})")
    return spec_of(fn)


def resolve_kernel(kernel_ref: str | Callable[..., Any] | KernelSpec) -> KernelSpec:
    """A kernel by name, by ``file.py:function``, or from a function."""
    if isinstance(kernel_ref, KernelSpec):
        return kernel_ref
    if callable(kernel_ref):
        return spec_of(kernel_ref)
    if not isinstance(kernel_ref, str):
        raise ConfigError(f"a kernel is a name, path/to/file.py:function or a function, not "
                          f"{type(kernel_ref).__name__} {kernel_ref!r}")
    if ":" in kernel_ref or kernel_ref.endswith(".py") or "/" in kernel_ref or os.sep in kernel_ref:
        return load_file_kernel(kernel_ref)
    return builtin(kernel_ref)


__all__ = ["BUILTIN_KERNELS", "KernelSpec", "Param", "all_kernels", "builtin", "kernel", "load_file_kernel",
           "resolve_kernel", "spec_of"]
