"""Links between the dashboard's pages: the URL values a page reads and the URLs that carry them.

* the timeline page (``/``) searches for ``?search=`` when it opens (in double quotes: a whole field, so
  ``"softmax.py:35"`` finds that line, not line 350) and selects the first match;
* the source page (``/source``) shows ``?file=`` and marks ``?line=``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

TRACE_PARAM = "trace"
SEARCH_PARAM = "search"
FILE_PARAM = "file"
LINE_PARAM = "line"
SOURCE_PATH = "/source"


def timeline_search_href(trace_id: str, location: str) -> str:
    """The timeline page of ``trace_id`` searching for exactly ``location`` (its first match selected)."""
    return "/?" + urlencode({TRACE_PARAM: trace_id, SEARCH_PARAM: f'"{location}"'})


def source_href(trace_id: str, file: str, line: int | None = None) -> str:
    """The source page of ``trace_id`` showing ``file`` (scrolled to ``line``, marked)."""
    values: dict[str, Any] = {TRACE_PARAM: trace_id, FILE_PARAM: file}
    if line is not None:
        values[LINE_PARAM] = line
    return SOURCE_PATH + "?" + urlencode(values)
