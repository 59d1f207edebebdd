"""Imports point one way: dashboard -> profiler -> tracer.  tracer never imports duckdb, dash or plotly."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "tracer": {"profiler", "dashboard", "duckdb", "dash", "plotly"},
    "profiler": {"dashboard", "dash"},
    "dashboard": {"duckdb"},
}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
            "import_module", "__import__"
        ) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            roots.add(node.args[0].value.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_respects_layering(package):
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imported_roots(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {', '.join(sorted(bad))}")
    assert not offenders, "layering violated:\n" + "\n".join(offenders)


def test_checker_sees_dynamic_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import importlib\nimportlib.import_module('dashboard.app')\nfrom duckdb import connect\n")
    assert {"dashboard", "duckdb", "importlib"} <= _imported_roots(f)
