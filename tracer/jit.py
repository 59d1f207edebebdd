"""Compiling kernels with numba, lazily, with a pure-Python fallback: the one place trnprof turns the plain Python
functions of a kernel module into compiled ones (the simulator's scheduling loop, the JSON importer's scanner).

A kernel module lists its functions in ``COMPILED``; they stay ordinary Python (slow, but correct) until
:func:`compile_functions` replaces them, in place, with numba-compiled versions cached on disk (``cache=True``: the
first compile on a machine takes seconds, later processes load the machine code in ~0.2 s).  Importing numba costs
~0.3 s, so callers compile only when a run has enough work to repay it.  Any failure (numba missing or broken, a
smoke test that does not give the known answer) leaves the Python functions in place and says so in one warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any


def compile_functions(modules: Iterable[ModuleType], *, smoke_test: Callable[[], None], what: str, fallback: str,
                      nogil: bool = False, prepare: Callable[[Any], None] | None = None) -> bool:
    """Replace every function named in each module's ``COMPILED`` by its numba-compiled version.

    Args:
        modules: kernel modules (each with a ``COMPILED`` tuple of function names).
        smoke_test: run once compiled; raises when the kernel does not give a known answer.
        what: what is being compiled, for the warning ("the compiled JSON kernel").
        fallback: what is used instead, for the warning ("using the slower vectorised scanner").
        nogil: release the GIL while a compiled function runs (only useful when other threads have work).
        prepare: called with the numba module before compiling (e.g. to install numba-only helpers).

    Returns:
        True when compiled and checked; False (with a RuntimeWarning) otherwise.
    """
    try:
        import numba  # lazy: ~0.3 s

        if prepare is not None:
            prepare(numba)
        for module in modules:
            for name in module.COMPILED:
                fn = getattr(module, name)
                # No reference counting (_nrt=False): the kernels allocate nothing, and counting the references of
                # every array handed to a helper would cost more than the helper.
                setattr(module, name, numba.njit(nogil=nogil, cache=True, boundscheck=False, _nrt=False)(
                    getattr(fn, "py_func", fn)))
        smoke_test()
    except Exception as exc:  # any failure: the Python functions do the work
        warnings.warn(f"trnprof: {what} is unavailable ({type(exc).__name__}: {exc}); {fallback}", RuntimeWarning,
                      stacklevel=4)
        return False
    return True
