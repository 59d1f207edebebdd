"""The complete example of docs/kernels.md runs, checks, and produces operator spans."""

from __future__ import annotations

import re
from pathlib import Path

from profiler.cli import main
from tracer import TraceReader

DOC = Path(__file__).resolve().parents[2] / "docs" / "kernels.md"


def test_kernels_doc_example_records_and_checks(tmp_path, capsys):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    src = tmp_path / "scale_rows.py"
    src.write_text(code)
    out = tmp_path / "scale.trace"
    assert main(["record", f"{src}:scale_rows", "-p", "rows=384", "--check", "-o", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "check y: OK" in text
    spans = TraceReader(out).read_table("Span").to_pydict()
    assert set(spans["name"]) == {"load", "normalise", "store"} and len(spans["name"]) == 9
    ins = TraceReader(out).read_table("Instruction").to_pydict()
    assert "scale_rows.py:" in ins["nki_source_location"][0]
    assert set(ins["hlo_name"][:-1]) == {"load", "normalise", "store"}
