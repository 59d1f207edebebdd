"""The documentation's examples stay true: console output quoted from the bundled samples, and the environment
variables the code reads."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from profiler.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
#: A command on a bundled sample trace, the first line of a fenced block: ``$ trnprof CMD sample_traces/X.trace ...``.
_SAMPLE_COMMAND = re.compile(r"^\$ trnprof (\S+) sample_traces/(\S+\.trace)((?: \S+)*)$")


def _sample_examples() -> list[tuple[str, str, str, str, list[str]]]:
    """(doc:line, command, trace name, arguments, quoted output lines) of every fenced block of the docs that
    starts with a trnprof command on a bundled sample."""
    found = []
    for doc in DOCS:
        lines = doc.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("```") or i + 1 >= len(lines):
                continue
            m = _SAMPLE_COMMAND.match(lines[i + 1])
            if m is None:
                continue
            end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            found.append((f"{doc.name}:{i + 2}", m.group(1), m.group(2), m.group(3).strip(), lines[i + 2:end]))
    return found


EXAMPLES = _sample_examples()


def test_the_docs_quote_sample_output():
    # the pattern finds the blocks (a change of their form would silently skip every check below)
    assert len(EXAMPLES) >= 3, [e[0] for e in EXAMPLES]


@pytest.mark.parametrize("example", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_a_quoted_sample_output_is_what_the_command_prints(example, tmp_path, capsys, monkeypatch):
    where, command, trace, args, quoted = example
    shutil.copytree(ROOT / "sample_traces" / trace, tmp_path / "sample_traces" / trace)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    assert main([command, f"sample_traces/{trace}", *args.split()]) == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    assert printed == [line.rstrip() for line in quoted], (
        f"{where}: `trnprof {command} sample_traces/{trace} {args}` prints something else now: update the doc")


def test_every_environment_variable_the_code_reads_is_in_the_readme():
    names: set[str] = set()
    for package in ("tracer", "profiler", "dashboard"):
        for path in (ROOT / package).rglob("*.py"):
            names.update(re.findall(r"\bTRNPROF_[A-Z][A-Z_]*[A-Z]\b", path.read_text(encoding="utf-8")))
    assert len(names) >= 10, names  # the search finds them
    table = (ROOT / "README.md").read_text(encoding="utf-8").split("## Environment variables", 1)[1]
    missing = sorted(n for n in names if f"`{n}" not in table)
    assert not missing, f"README.md's environment-variable table lacks {missing}"
