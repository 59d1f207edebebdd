"""Module attributes imported on first use (PEP 562), so that importing a package stays cheap."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_attributes(module_name: str, sources: dict[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``module_name``: attribute ``name`` is imported from module
    ``sources[name]`` the first time it is asked for, then kept in the module like any other attribute."""

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[module_name], name, value)
        return value

    return __getattr__
