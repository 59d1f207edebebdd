"""Starting the trace writer process (:mod:`tracer.sim.emit_child`), and starting one ahead of the recording.

:func:`spawn` starts a writer: a fresh interpreter, handed the read end of a pipe for the simulation's messages, the
write end of one for its answers and the shared-memory ring the columns travel in (:mod:`tracer.sim.emit_ring`).
The writer first imports its modules (~0.17 s: numpy, pyarrow), then waits for the message naming its trace.

:func:`prestart` starts one before the recording knows its trace (``trnprof record`` calls it first thing, before
importing the simulator), so that the writer's imports overlap the command's own start-up instead of delaying the
end of a short recording; :class:`tracer.sim.emit_process.ProcessEmitter` takes it (:func:`take`) instead of
starting its own.  One that is never taken is told nothing: closing its pipes at exit ends it.

This module imports only the standard library (and the ring), so that calling it costs nothing before the heavy
imports it overlaps.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracer.sim import emit_ring, malloc_tuning

#: The child's command line program (``-m tracer.sim.emit_child`` would import the module twice).
#: It imports this very tracer package, wherever it was imported from: its directory goes first on the path (before
#: the working directory, which may hold another ``tracer``).
_CHILD_MAIN = ("import sys; sys.path.insert(0, sys.argv[1]); from tracer.sim.emit_child import main; "
               "sys.exit(main(sys.argv[2:]))")

#: Thread pools the writer process never uses: numpy's OpenBLAS otherwise starts a spinning thread per CPU when the
#: child imports numpy (~0.1 s of CPU on a 2-vCPU machine, taken from the simulation just as the run starts).
_SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def child_env() -> dict[str, str]:
    """The writer process's environment: this one, with big freed blocks kept for reuse and Arrow allocating through
    glibc malloc (:mod:`malloc_tuning`), and no BLAS or OpenMP thread pools (it does no linear algebra)."""
    return {**malloc_tuning.child_env(), **_SINGLE_THREADED}


def emit_mode(emit: str | None = None) -> str:
    """How a recording writes its trace: ``emit`` if given, else ``$TRNPROF_EMIT``, else ``process`` (checked by
    :func:`tracer.sim.run_kernel`)."""
    return emit or os.environ.get("TRNPROF_EMIT") or "process"


def process_available() -> bool:
    """True where the writer can run in a child process (POSIX: it is handed pipe file descriptors)."""
    return os.name == "posix"


@dataclass
class Spawned:
    """A started writer process and the parent's ends of its pipes and ring."""

    proc: subprocess.Popen[bytes]
    #: Write end of the pipe to the child (its messages), and read end of the pipe from it (its answers).
    to_child: int
    from_child: int
    #: The shared-memory ring (None: the columns go through the pipe).
    ring: Any
    #: ``os.environ`` when it was started (a prestarted writer is used only by a recording in the same one).
    environ: dict[str, str]

    def discard(self) -> None:
        """Close the parent's ends: a writer told nothing exits when its pipe closes (once its imports are done:
        waited for here, at most 5 s)."""
        for fd in (self.to_child, self.from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.ring is not None:
            self.ring.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def _widen_pipe(fd: int) -> None:
    """Give the pipe a 1 MiB buffer where Linux allows it (64 KiB by default): a chunk then goes out in one or
    two writes, and the child can fall a whole chunk behind without holding up the simulation."""
    with contextlib.suppress(AttributeError, ImportError, OSError, ValueError):
        import fcntl  # POSIX only

        size = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(size, 1 << 20))


def spawn() -> Spawned:
    """Start a writer process (OSError when it cannot be started)."""
    import tracer  # the package's directory, for the child's path (tracer itself imports nothing heavy)

    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    _widen_pipe(to_child_w)
    root = str(Path(tracer.__file__).resolve().parents[1])
    ring = emit_ring.create_writer(emit_ring.RING_BYTES)
    ring_args = [str(ring.fd), str(ring.size)] if ring is not None else ["-1", "0"]
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, root, str(to_child_r), str(from_child_w), *ring_args],
            pass_fds=(to_child_r, from_child_w) + ((ring.fd,) if ring is not None else ()),
            stdin=subprocess.DEVNULL, start_new_session=True, env=child_env())
    except OSError:
        for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
            os.close(fd)
        if ring is not None:
            ring.close()
        raise
    os.close(to_child_r)
    os.close(from_child_w)
    if ring is not None:
        ring.close_fd()
    return Spawned(proc, to_child_w, from_child_r, ring, dict(os.environ))


#: The writer started ahead of its recording, if any (at most one).
_prestarted: list[Spawned] = []


def prestart() -> None:
    """Start a writer now for a recording about to begin in this process (nothing if one is waiting already, if
    writers cannot run in a process here, or if it cannot be started: the recording then starts its own and
    reports why)."""
    if _prestarted or not process_available():
        return
    with contextlib.suppress(OSError):
        _prestarted.append(spawn())


def take() -> Spawned | None:
    """The prestarted writer, for the recording starting now (None: none, or it has died, or the environment
    changed since: the caller starts one)."""
    if not _prestarted:
        return None
    spawned = _prestarted.pop()
    if spawned.proc.poll() is not None or spawned.environ != dict(os.environ):
        spawned.discard()
        return None
    return spawned


def discard_prestarted() -> None:
    """End a prestarted writer no recording took (at the interpreter's exit)."""
    while _prestarted:
        _prestarted.pop().discard()


atexit.register(discard_prestarted)
