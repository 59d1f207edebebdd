"""glibc malloc settings for the processes trnprof owns: the trace writer process and ``trnprof record``.

A recording allocates and frees large column buffers for every chunk (every ~50 ms).  By default glibc maps each
big block fresh and gives it back when freed, so every chunk costs page faults (the kernel zeroing fresh pages):
~60 K faults and ~0.5 s of system time in the writer for a 1.2 M-instruction recording, and memory traffic that
slows the simulation on the other core.  With a fixed 32 MiB mmap threshold and a 1 GiB trim threshold, freed
blocks stay in the heap and are reused (~17 K faults; the writer needs about a fifth less CPU).

The writer process also has Arrow allocate through glibc malloc (``ARROW_DEFAULT_MEMORY_POOL=system``, so the
settings above apply to its Arrow buffers too) instead of pyarrow's bundled mimalloc: with mimalloc the writer
spent ~0.19 s of system time per 1.15 M-instruction recording (0.08 s with glibc), its CPU time was ~9% higher, and
about one short recording in eight had it stall for 0.2-0.3 s of system time and fall behind the simulation (a
60-150 ms wait at the end; BENCHMARKS.md, "Tracer", round 14).

Only processes that do nothing but record get these settings: the writer process through its environment, and the
``trnprof record`` command through ``mallopt`` (:func:`tune_this_process`).  :func:`tracer.sim.run_kernel` called
from a user's own process leaves its malloc alone.  Variables the user set are kept; other C libraries ignore them.
"""

from __future__ import annotations

import ctypes
import os

#: mallopt parameter numbers (glibc's malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: The settings, as glibc reads them from the environment at a process's start.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
_PARAMS = {"MALLOC_MMAP_THRESHOLD_": _M_MMAP_THRESHOLD, "MALLOC_TRIM_THRESHOLD_": _M_TRIM_THRESHOLD}
#: Arrow's memory pool in a process started to record, read by pyarrow at its start: glibc malloc (see above); and
#: no background thread for pyarrow's bundled jemalloc (it starts one even when another pool is the default, and on a
#: loaded machine it was running when the writer closed: a thread taking CPU time from the simulation for nothing).
ARROW_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system", "JE_ARROW_MALLOC_CONF": "background_thread:false"}


def child_env() -> dict[str, str]:
    """This process's environment plus :data:`MALLOC_ENV` and :data:`ARROW_ENV` where not set (for a process
    started to record)."""
    return {**MALLOC_ENV, **ARROW_ENV, **os.environ}


def tune_this_process() -> bool:
    """Apply :data:`MALLOC_ENV` to this process with ``mallopt`` (a setting the environment already gives is left
    as it is).  Returns False where there is no glibc ``mallopt`` (macOS, musl's stub) or it refuses a value."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = True
    for name, value in MALLOC_ENV.items():
        if name not in os.environ:
            ok = mallopt(_PARAMS[name], int(value)) == 1 and ok
    return ok
