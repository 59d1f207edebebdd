"""Re-execute the example notebooks top to bottom and save them with their outputs (what GitHub shows).

    .venv/bin/python examples/refresh.py                 # every notebook in examples/
    .venv/bin/python examples/refresh.py 01_quickstart   # the ones whose name starts so

Each notebook runs in a temporary copy of this folder (so recorded traces do not land in the repository) with the
same kernel the tests use.  With kaleido installed (``pip install kaleido``; it drives Chrome or Chromium), plotly
figures are saved both as interactive plotly JSON (JupyterLab, VS Code) and as PNG (GitHub, nbviewer without
JavaScript); without it only as plotly JSON.  Live widget state is not saved: it needs a running kernel.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
CELL_TIMEOUT_S = 600
#: Executions tried per notebook before giving up on one that prints tracebacks on stderr.
ATTEMPTS = 3


def execute(path: Path, workdir: Path) -> nbformat.NotebookNode:
    """``path`` executed in ``workdir``, with outputs and without widget state."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", store_widget_state=False,
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()
    for cell in nb.cells:  # keep diffs small: execution metadata changes on every run
        cell.metadata.pop("execution", None)
    return nb


def stderr_tracebacks(nb: nbformat.NotebookNode) -> list[int]:
    """Indexes of cells whose stderr shows a traceback (e.g. kaleido's browser channel hiccuping while it exports
    a PNG), which must not be stored."""
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            and any(o.output_type == "stream" and o.name == "stderr" and "Traceback" in o.text for o in cell.outputs)]


def main(argv: list[str] | None = None) -> int:
    """Refresh the selected notebooks in place."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook name prefixes (default: all)")
    args = parser.parse_args(argv)
    notebooks = sorted(p for p in HERE.glob("*.ipynb") if not args.names or any(p.name.startswith(n)
                                                                                  for n in args.names))
    if not notebooks:
        print(f"no notebook in {HERE} matches {args.names}", file=sys.stderr)
        return 2
    png = importlib.util.find_spec("kaleido") is not None
    os.environ["PLOTLY_RENDERER"] = "plotly_mimetype+png" if png else "plotly_mimetype"
    repo = str(HERE.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))
    for path in notebooks:
        for attempt in range(1, ATTEMPTS + 1):
            with tempfile.TemporaryDirectory(prefix="trnprof-examples-") as tmp:
                work = Path(tmp)
                shutil.copy(path, work / path.name)
                t0 = time.perf_counter()
                nb = execute(work / path.name, work)
            noise = stderr_tracebacks(nb)
            if not noise:
                break
            print(f"{path.name}: a traceback on stderr in cell {noise[0]} (attempt {attempt} of {ATTEMPTS})",
                  file=sys.stderr)
        else:
            print(f"{path.name}: not saved; cells {noise} print tracebacks on stderr", file=sys.stderr)
            return 1
        nbformat.write(nb, path)
        print(f"{path.name}: {len(nb.cells)} cells in {time.perf_counter() - t0:.1f} s"
              f"{' (with PNG copies of the figures)' if png else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
