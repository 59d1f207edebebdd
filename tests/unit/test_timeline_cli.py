"""``trnprof timeline``: the dashboard's timeline as one self-contained HTML file, in-process through ``main``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profiler.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "mlp-trn2.trace"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    root = tmp_path_factory.mktemp("tlcli")
    shutil.copytree(SAMPLE, root / "mlp.trace")
    return str(root / "mlp.trace")


def _figure(html: str) -> dict:
    """The figure plotly.js is given in the file (the data and layout arguments of its ``Plotly.newPlot``)."""
    decoder = json.JSONDecoder()
    at = html.index("Plotly.newPlot(")
    at = html.index(",", at) + 1                       # past the div id
    data, end = decoder.raw_decode(html, len(html[:at]) + len(html[at:]) - len(html[at:].lstrip()))
    rest = html[end:].lstrip().lstrip(",")
    layout, _ = decoder.raw_decode(rest.lstrip())
    return {"data": data, "layout": layout}


def test_the_file_holds_plotly_and_the_timeline_with_its_rows_query_and_chain(trace, tmp_path, capsys):
    out = tmp_path / "t.html"
    sql = "SELECT start_ts, end_ts, opcode AS name, engine AS track FROM Instruction WHERE evt_wait_time_ns > 100"
    code = main(["timeline", trace, "-o", str(out), "--rows=-DMA", "--query", sql, "--chain", "Instruction:40",
                 "--width", "800"])
    printed = capsys.readouterr()
    assert code == 0 and printed.err == ""
    assert printed.out.startswith(f"wrote {out} (") and "rows · mlp.trace · view" in printed.out
    html = out.read_text()
    assert "plotly.js v" in html.lower() and "<script src=" not in html   # plotly.js inside: opens offline
    figure = _figure(html)
    labels = figure["layout"]["yaxis"]["ticktext"]
    assert labels[0].startswith("SQL · ") and not any("DMA" in label for label in labels)
    names = [d.get("name") for d in figure["data"]]
    assert "chain to Instruction 40" in names
    assert not list(tmp_path.glob(".t.html.*"))                          # no temporary file left behind


def test_an_existing_file_is_kept_unless_forced(trace, tmp_path, capsys):
    out = tmp_path / "keep.html"
    out.write_text("mine")
    assert main(["timeline", trace, "-o", str(out)]) != 0
    assert "already exists; pass --force" in capsys.readouterr().err and out.read_text() == "mine"
    assert main(["timeline", trace, "-o", str(out), "--force", "--critical-path"]) == 0
    assert "critical path" in [d.get("name") for d in _figure(out.read_text())["data"]]


@pytest.mark.parametrize(("argv", "message"), [
    (["--query", "DROP TABLE Instruction"], "not allowed: DROP"),
    (["--query", "SELECT 1 AS a"], "needs a start_ts column"),
    (["--rows", "zzz"], "no timeline row matches the row filter 'zzz'"),
    (["--chain", "Flow:1"], "leads to instructions and DMA packets"),
    (["--chain", "nope"], "expected TABLE:ID"),
    (["--chain", "Instruction:1", "--critical-path"], "not allowed with argument"),
    (["--start", "50", "--end", "10"], "empty"),
    (["--width", "0"], "argument --width: expected a width in pixels from 1 to 65536"),
    (["--color-by", "rainbow"], "invalid choice"),
])
def test_bad_arguments_are_one_line_errors_and_write_nothing(trace, tmp_path, capsys, argv, message):
    out = tmp_path / "bad.html"
    assert main(["timeline", trace, "-o", str(out), *argv]) != 0
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_the_output_may_not_overwrite_the_trace(trace, capsys):
    assert main(["timeline", trace, "-o", str(Path(trace) / "Instruction.arrow"), "--force"]) != 0
    assert "would overwrite the input" in capsys.readouterr().err
