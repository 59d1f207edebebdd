"""Kernel modules compiled ahead of time: the machine code of a compiled kernel (see :mod:`tracer.jit`) kept as a
Python extension module in trnprof's cache, so later processes load it in a millisecond without importing numba.

Loading a kernel through numba's own cache costs every process ~0.45 CPU-s (importing numba ~0.27 s, starting LLVM
and loading the cached code ~0.17 s), which is why :mod:`tracer.sim.fastpath.schedule_jit` waits until a run looks
long enough to repay it.  An ahead-of-time build (numba's ``pycc``, exporting each function of the module's
``AOT_SIGNATURES`` with its exact argument types) removes that cost, so the compiled loop can be used from a run's
first segment.

How a build happens: the first time a process wants a kernel module and finds no build of it, :func:`start_build`
starts a detached, low-priority interpreter (:func:`main`) that compiles it into a temporary file in the cache and
renames it into place (the current process goes on with numba's JIT or the Python loop; the build takes ~4 CPU-s
once per machine and kernel source).  A lock file keeps to one build at a time; a failed build (no C compiler, a
numba without ``pycc``, which numba has marked for deprecation) leaves a ``.failed`` file with its error, so it is
not retried until the source changes, and runs use numba's JIT as before.

The build's name carries a hash of everything it depends on (the module's source, the constants it reads, the
signatures, numpy's version, the interpreter), so editing the kernel source makes a new build and an old one is
never loaded; a finished build deletes all but the :data:`KEEP_BUILDS` newest builds of its module. A build that
cannot be loaded, or whose functions fail the caller's check, is moved aside (``.bad``) with a warning, and not
built again from that source (delete the file to retry). ``TRNPROF_AOT=0`` turns all of this off;
``TRNPROF_CACHE_DIR`` moves the cache (default ``$XDG_CACHE_HOME/trnprof``, else ``~/.cache/trnprof``; builds go to
its ``aot`` directory).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType

from tracer.user_cache import user_cache_dir

#: ``TRNPROF_AOT=0``: never load nor build ahead-of-time kernels.
ENV_SWITCH = "TRNPROF_AOT"
#: A lock older than this is a build that died: another may start.
STALE_LOCK_S = 600.0
#: Bumped when the way builds are made changes (a new name for every build).
BUILD_FORMAT = 1
#: Builds of one module kept in the cache (the newest; other checkouts or versions may still use older ones).
KEEP_BUILDS = 4

_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); from tracer import aot; "
          "sys.exit(aot.main(sys.argv[2:]))")


def enabled() -> bool:
    """False when ``TRNPROF_AOT=0``."""
    return os.environ.get(ENV_SWITCH) != "0"


def cache_dir() -> Path:
    """The directory ahead-of-time builds live in (``aot`` in :func:`tracer.user_cache.user_cache_dir`)."""
    return user_cache_dir() / "aot"


_names: dict[str, str] = {}


def build_name(module: ModuleType) -> str:
    """The extension module name of ``module``'s build: its dotted name and a hash of what the build depends on."""
    name = _names.get(module.__name__)
    if name is None:
        name = _names[module.__name__] = _hash_name(module)
    return name


def _hash_name(module: ModuleType) -> str:
    import numpy as np

    h = hashlib.sha256()
    h.update(Path(module.__file__).read_bytes())  # type: ignore[arg-type]
    constants = sorted((k, repr(v)) for k, v in vars(module).items()
                       if not k.startswith("__") and isinstance(v, (bool, int, float, str, tuple)))
    signatures = sorted(module.AOT_SIGNATURES.items())
    h.update(repr((constants, signatures, np.__version__, sys.implementation.cache_tag, sys.platform,
                   importlib.machinery.EXTENSION_SUFFIXES[0], BUILD_FORMAT)).encode())
    return f"{module.__name__.replace('.', '_')}_{h.hexdigest()[:16]}"


def build_path(module: ModuleType) -> Path:
    """Where ``module``'s build is (or will be)."""
    return cache_dir() / (build_name(module) + importlib.machinery.EXTENSION_SUFFIXES[0])


def side_file(target: Path, ext: str) -> Path:
    """The file beside the build ``target`` with extension ``ext`` (``.lock``, ``.failed``, ``.log``)."""
    return target.with_name(target.name[: -len(importlib.machinery.EXTENSION_SUFFIXES[0])] + ext)


def load(module: ModuleType) -> ModuleType | None:
    """``module``'s build from the cache, or None (none built, switched off, or unloadable: moved aside with a
    warning)."""
    if not enabled():
        return None
    path = build_path(module)
    if not path.exists():
        return None
    try:
        spec = importlib.util.spec_from_file_location(build_name(module), path)
        if spec is None or spec.loader is None:
            raise ImportError("not an extension module")
        built = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(built)
        missing = [name for name in module.AOT_SIGNATURES if not callable(getattr(built, name, None))]
        if missing:
            raise ImportError(f"it lacks {', '.join(missing)}")
    except Exception as exc:  # a damaged or foreign file: never load it again
        discard(path, f"{type(exc).__name__}: {exc}")
        return None
    return built


def discard(path: Path, why: str) -> None:
    """Move an unusable build aside (``.bad``) with a warning.  It is not built again from the same source (a build
    that fails this way would fail again): deleting the ``.bad`` file lets the next run build it."""
    bad = path.with_name(path.name + ".bad")
    warnings.warn(f"trnprof: ignoring the compiled kernel {path} ({why}); moved aside to {bad.name} (delete it to "
                  "build again); numba's JIT is used instead", RuntimeWarning, stacklevel=3)
    with contextlib.suppress(OSError):
        os.replace(path, bad)


def start_build(module: ModuleType) -> bool:
    """Start building ``module`` in a detached low-priority process unless it is built, being built, or failed to
    build from this source (``.failed``, ``.bad``); True when a build was started.  Never raises (a cache it cannot
    write: no build)."""
    if not enabled():
        return False
    try:
        path = build_path(module)
        if path.exists() or side_file(path, ".failed").exists() or path.with_name(path.name + ".bad").exists():
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = side_file(path, ".lock")
        if not _take_lock(lock):
            return False
        root = str(Path(__file__).resolve().parents[1])
        with open(side_file(path, ".log"), "wb") as log:
            subprocess.Popen([sys.executable, "-c", _CHILD, root, module.__name__, str(path)],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError:
        return False
    _started.append(path)
    return True


_started: list[Path] = []


def started_builds() -> list[Path]:
    """The builds this process started (where each will be), so a command can tell its user about the background
    work (``trnprof record`` does)."""
    return list(_started)


def wait_for_build(module: ModuleType, timeout: float = 120.0) -> bool:
    """Build ``module`` unless it is built (starting a build, or waiting for one already running); True when the
    build is there within ``timeout`` seconds (benchmarks and tests use this; runs never wait)."""
    path = build_path(module)
    start_build(module)
    deadline = time.monotonic() + timeout
    while not path.exists() and side_file(path, ".lock").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return path.exists()


def _take_lock(lock: Path) -> bool:
    """Create ``lock`` (True), unless another build holds it; a lock older than :data:`STALE_LOCK_S` is taken over."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                if time.time() - lock.stat().st_mtime < STALE_LOCK_S:
                    return False
                lock.unlink()
            except FileNotFoundError:
                pass
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
    return False


def build(module_name: str, target: Path) -> None:
    """Compile the module ``module_name`` to the extension module ``target`` (in this process; what the build
    process runs).  Every function of its ``COMPILED`` is compiled with numba first, so the exported functions'
    calls to each other are compiled calls; the file appears at ``target`` only when complete."""
    module = importlib.import_module(module_name)
    name = target.name[: -len(importlib.machinery.EXTENSION_SUFFIXES[0])]
    if name != build_name(module):
        raise RuntimeError(f"{target.name} is not the build name of {module_name} ({build_name(module)})")
    import numba
    from numba.core.errors import NumbaPendingDeprecationWarning

    for fn_name in module.COMPILED:
        fn = getattr(module, fn_name)
        setattr(module, fn_name, numba.njit(boundscheck=False, _nrt=False)(getattr(fn, "py_func", fn)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)
        from numba.pycc import CC

        tmp = target.parent / f".{name}.{os.getpid()}.tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        try:
            cc = CC(name)
            cc.output_dir = str(tmp)
            cc.verbose = False
            for fn_name, signature in module.AOT_SIGNATURES.items():
                cc.export(fn_name, signature)(getattr(module, fn_name).py_func)
            cc.compile()
            os.replace(tmp / target.name, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # whatever pycc left there, files or directories


def prune(target: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest builds of ``target``'s module (every kernel edit makes a new one), with
    the files beside them; ``target`` itself is always kept."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    module_part = target.name[: -len(suffix)].rpartition("_")[0]
    builds = [p for p in target.parent.glob(f"{module_part}_*{suffix}")
              if p.name[len(module_part) + 1: -len(suffix)].isalnum()]
    builds.sort(key=lambda p: (p == target, p.stat().st_mtime), reverse=True)
    for old in builds[keep:]:
        stem = old.name[: -len(suffix)]
        for p in old.parent.glob(f"{stem}*"):
            with contextlib.suppress(OSError):
                p.unlink()


def main(argv: list[str]) -> int:
    """The build process: ``MODULE TARGET``, at the lowest priority (see :func:`build_or_fail`)."""
    with contextlib.suppress(OSError, AttributeError):  # no os.nice on Windows
        os.nice(19)
    return build_or_fail(argv[0], Path(argv[1]))


def build_or_fail(module_name: str, target: Path) -> int:
    """:func:`build`, writing ``.failed`` (the error) instead of the build when it fails and releasing the lock
    either way; the exit code."""
    try:
        build(module_name, target)
        side_file(target, ".log").unlink(missing_ok=True)  # kept only to explain a failure
        with contextlib.suppress(OSError):  # another process pruning at the same time
            prune(target, KEEP_BUILDS)
    except Exception as exc:
        side_file(target, ".failed").write_text(f"{type(exc).__name__}: {exc}\n")
        print(f"trnprof: building {target.name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        side_file(target, ".lock").unlink(missing_ok=True)
    return 0
