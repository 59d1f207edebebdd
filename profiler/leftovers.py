"""Files and directories that trnprof processes killed outright (SIGKILL, the OOM killer) left behind.

A process that ends normally, or by Ctrl-C or SIGTERM, removes its temporary files itself; one killed outright
cannot.  Each kind of temporary name carries the pid of the process that made it, so a later process can tell
the leftovers of dead processes from the work of running ones and remove them: an ingest's temporary database
(``.<db>.<pid>.<hex>.tmp``, with its ``.wal`` and ``.spill``), a ``record --force`` run's directory beside the
trace it replaces (``.<trace>.recording-<pid>``), a followed recording's generations (:mod:`profiler.live`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path


def process_running(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's counts: it cannot be signalled, but it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_left_by_dead(directory: Path, pid_of: Callable[[str], int | None]) -> list[str]:
    """Remove the entries of ``directory`` whose name ``pid_of`` gives a pid of a process no longer running
    (never this process's); returns the names removed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        pid = pid_of(name)
        if pid is None or pid == os.getpid() or process_running(pid):
            continue
        target = directory / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                target.unlink()
        removed.append(name)
    return removed


def ingest_temporary_pid(db: Path) -> Callable[[str], int | None]:
    """For :func:`remove_left_by_dead`: the pid in the name of an ingest's temporary files for database ``db``
    (``.<db>.<pid>.<hex>.tmp`` and its ``.wal`` / ``.spill``)."""
    pattern = re.compile(rf"^\.{re.escape(db.name)}\.(\d+)\.[0-9a-f]+\.tmp(?:\.wal|\.spill)?$")

    def pid_of(name: str) -> int | None:
        m = pattern.match(name)
        return int(m.group(1)) if m else None

    return pid_of


def recording_aside_pid(trace: Path) -> Callable[[str], int | None]:
    """For :func:`remove_left_by_dead`: the pid in the name of a ``record --force`` run's directory beside
    ``trace`` (``.<trace>.recording-<pid>``)."""
    prefix = f".{trace.name}.recording-"

    def pid_of(name: str) -> int | None:
        rest = name[len(prefix):] if name.startswith(prefix) else ""
        return int(rest) if rest.isdigit() else None

    return pid_of
