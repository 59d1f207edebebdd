"""Golden tests (perfetto diff-test style): tiny simulator traces + an analysis -> the expected CSV/JSON output.

A failure means an analysis answer changed.  If the change is intended, regenerate and review the diff:
``.venv/bin/python -m tests.golden.regenerate`` (``--traces`` re-records the traces after a simulator change).
"""

from __future__ import annotations

import difflib

import pytest

from tests.golden.cases import CASES, GoldenCase
from tests.golden.regenerate import produce


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("golden")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden(case: GoldenCase, scratch):
    assert case.expected_path.exists(), f"missing {case.expected_path}: run python -m tests.golden.regenerate"
    expected = case.expected_path.read_text()
    actual = produce(case, scratch)
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), "expected",
                                            "actual", n=1))
        pytest.fail(f"{case.name} drifted from {case.expected_path.name} (if intended: python -m "
                    f"tests.golden.regenerate, then review the diff):\n{diff[:3000]}")


def test_every_expected_file_belongs_to_a_case():
    from tests.golden.cases import EXPECTED_DIR

    known = {c.expected_path.name for c in CASES}
    assert {p.name for p in EXPECTED_DIR.iterdir()} == known
