"""Sort keys shared by the analyses and the figures (one definition of how names with numbers are ordered)."""

from __future__ import annotations

import re
from typing import Any


def natural_key(text: str) -> tuple[tuple[int, Any], ...]:
    """A sort key that orders the numbers inside ``text`` by value: ``q2`` before ``q10``."""
    return tuple((0, int(part)) if part.isdecimal() else (1, part) for part in re.split(r"(\d+)", text) if part)
