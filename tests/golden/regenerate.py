"""Rebuild the golden expected outputs (and, with ``--traces``, re-record the golden traces).

    .venv/bin/python -m tests.golden.regenerate            # after an intended change to an analysis
    .venv/bin/python -m tests.golden.regenerate --traces   # after a simulator or trace-format change

Review the diff of ``tests/golden/expected`` before committing it: every changed line is a changed answer.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import profiler
from profiler.trace import Trace
from tests.golden.cases import CASES, EXPECTED_DIR, TRACE_DIR, TRACES, TRACES_BY_NAME, GoldenCase


def record_traces() -> None:
    """Record every golden trace with the simulator (replacing the stored ones)."""
    from tracer.sim import run_kernel

    TRACE_DIR.mkdir(parents=True, exist_ok=True)
    for t in TRACES:
        run_kernel(t.kernel, t.params, arch=t.arch, overrides=t.overrides or None, trace_path=t.path,
                   overwrite=True)
        print(f"recorded {t.path.relative_to(TRACE_DIR.parent)}")


@contextmanager
def opened(names: tuple[str, ...], scratch: Path) -> Iterator[list[Trace]]:
    """The named golden traces, opened from copies in ``scratch`` (so no cache is written beside the originals)."""
    with ExitStack() as stack:
        traces = []
        for name in names:
            copy = scratch / f"{name}.trace"
            if not copy.exists():
                shutil.copytree(TRACES_BY_NAME[name].path, copy)
            traces.append(stack.enter_context(profiler.open(copy)))
        yield traces


def produce(case: GoldenCase, scratch: Path) -> str:
    """The output of ``case`` now."""
    with opened(case.traces, scratch) as traces:
        return case.run(*traces)


def main(argv: list[str] | None = None) -> int:
    """Regenerate; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", action="store_true", help="re-record the golden traces first")
    args = parser.parse_args(argv)
    if args.traces or any(not t.path.exists() for t in TRACES):
        record_traces()
    EXPECTED_DIR.mkdir(parents=True, exist_ok=True)
    changed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            text = produce(case, Path(tmp))
            old = case.expected_path.read_text() if case.expected_path.exists() else None
            if old != text:
                case.expected_path.write_text(text)
                changed += 1
                print(f"{'updated' if old is not None else 'created'} {case.expected_path.name}")
    print(f"{len(CASES)} golden cases, {changed} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
