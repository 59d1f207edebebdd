"""The kernel source files a recording keeps in its trace (the ``SourceFile`` table of :mod:`tracer.schema`).

A trace's ``nki_source_location`` values (``file.py:LINE``) point into the kernel's source.  The recording keeps
the text of those files as they were when it ran, so that a viewer can show the lines with their instructions
without reading any file of its own (the dashboard reads nothing outside its traces), and a later edit of the
kernel does not change what an old trace's line numbers mean.

The kernel's own file is read when the recording starts (a killed recording keeps it); the other files its
instructions came from (helper modules the kernel calls) when it ends.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable
from typing import Any

#: A file larger than this is not kept (it is not hand-written kernel code; its lines still have their counts).
MAX_FILE_BYTES = 1 << 20
#: At most this many files per trace.
MAX_FILES = 64

#: The simulator's own source files: errors name the first kernel line outside them.
SIM_DIR = os.path.dirname(os.path.abspath(__file__))


def kernel_frame(frame: Any) -> Any:
    """The first frame from ``frame`` outwards that runs kernel code: not the simulator's own files, nor the code
    it generates (``<string>`` names); the outermost frame when every one is the simulator's."""
    while frame.f_back is not None and frame.f_code.co_filename.startswith((SIM_DIR, "<")):
        frame = frame.f_back
    return frame


# The table's and columns' names, as :data:`tracer.schema.SOURCE_FILE` declares them (spelled out here: the
# simulating process does not load pyarrow, which the schema module needs; a unit test checks they agree).
TABLE = "SourceFile"
FILE = "file"
_TEXT = "text"
_SIZE = "size_bytes"


def source_rows(paths: Iterable[str], skip: Iterable[str] = ()) -> list[dict[str, Any]]:
    """``SourceFile`` rows of the readable files among ``paths`` (one per file name: ``nki_source_location``
    names files by their base name, so a second file of the same name is left out), none for a name in ``skip``
    (already written), a pseudo-file (``<string>``), a file that cannot be read or one over
    :data:`MAX_FILE_BYTES`."""
    seen = set(skip)
    rows: list[dict[str, Any]] = []
    for path in paths:
        name = os.path.basename(path)
        if name in seen or not name or name.startswith("<") or len(seen) >= MAX_FILES:
            continue
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError:
            continue
        if len(data) > MAX_FILE_BYTES:
            continue
        seen.add(name)
        rows.append({FILE: name, _TEXT: data.decode("utf-8", "replace"), _SIZE: len(data)})
    return rows


def kernel_file(fn: Callable[..., Any]) -> str | None:
    """The source file of the kernel function ``fn``, or None (a built-in, a function made by ``exec``)."""
    try:
        return inspect.getsourcefile(inspect.unwrap(fn))
    except (TypeError, ValueError):
        return None


def location_files(code_objects: Iterable[Any]) -> list[str]:
    """The files of ``code_objects`` (the code a kernel's API calls came from), each once, in a stable order."""
    return sorted({c.co_filename for c in code_objects})
