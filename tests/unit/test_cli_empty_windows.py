"""Commands that write a window of a trace refuse one that holds none of it (they wrote an empty file, exit 0)."""

from __future__ import annotations

import pytest

from profiler.cli import main


@pytest.mark.parametrize("argv", [
    ["export", "{t}", "--format", "chrome", "-o", "{o}", "--start", "1s"],
    ["export", "{t}", "--format", "parquet", "-o", "{o}", "--start", "50us", "--relative"],
    ["export", "{t}", "--format", "chrome", "-o", "{o}", "--end", "-5"],
    ["timeline", "{t}", "-o", "{o}", "--start", "1000000000", "--end", "2000000000"],
    ["timeline", "{t}", "-o", "{o}", "--start", "100", "--end", "100"],
])
def test_a_window_outside_the_trace_is_refused_and_nothing_is_written(argv, mlp_sample, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([a.format(t=mlp_sample, o=out) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "holds none of the trace, whose events span [0, 38,233) ns" in err or "empty window: --end" in err, err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_window_inside_the_trace_is_written(mlp_sample, tmp_path, capsys):
    out = tmp_path / "e.json"
    assert main(["export", str(mlp_sample), "--format", "chrome", "-o", str(out), "--start", "30us", "--relative"]) == 0
    assert out.stat().st_size > 0


def test_timeline_width_is_checked_by_its_option(mlp_sample, tmp_path, capsys):
    assert main(["timeline", str(mlp_sample), "-o", str(tmp_path / "t.html"), "--width", "0"]) == 2
    assert "argument --width: expected a width in pixels from 1 to 65536" in capsys.readouterr().err
