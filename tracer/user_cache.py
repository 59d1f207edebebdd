"""The per-user cache directory trnprof keeps derived files in (ingested databases, compiled kernels):
``$TRNPROF_CACHE_DIR``, else ``$XDG_CACHE_HOME/trnprof``, else ``~/.cache/trnprof``."""

from __future__ import annotations

import os
from pathlib import Path

#: Set: the cache directory, whatever the other variables say.
CACHE_DIR_ENV = "TRNPROF_CACHE_DIR"


def user_cache_dir() -> Path:
    """The per-user cache directory (not created here)."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trnprof"
