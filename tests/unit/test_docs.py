"""The documentation stays true to the code."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_trace_format_reference_is_generated_from_the_schema():
    result = subprocess.run([sys.executable, "docs/gen_trace_format.py", "--check"], cwd=ROOT)
    assert result.returncode == 0, "docs/trace-format.md is stale: run `python docs/gen_trace_format.py`"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "tests/run.sh" in readme
    assert "tests/run.sh" in ci
