"""A recording keeps its kernel's source files (``SourceFile``), and ``trnprof source`` shows them annotated."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.source_lines import source_listing
from profiler.cli import main
from tracer import TraceReader
from tracer import schema as ts
from tracer.sim import run_kernel

HELPER = '''"""A helper module of the kernel."""


def scale_rows(nc, dst, src):
    nc.activation(dst, src, "exp")
'''
KERNEL = '''from srcview_helpers import scale_rows


def k(nc, n=256):
    x = nc.input("x", (128, n), "fp32")
    y = nc.output("y", (128, n), "fp32")
    for i in nc.affine_range(4):
        t = nc.sbuf_tile((128, n), "fp32", name="t")
        nc.dma_copy(t, x)
        u = nc.sbuf_tile((128, n), "fp32", name="u")
        scale_rows(nc, u, t)
        nc.dma_copy(y, u)
'''


@pytest.fixture
def kernel_file(tmp_path, monkeypatch):
    (tmp_path / "srcview_helpers.py").write_text(HELPER)
    (tmp_path / "srcview_kernel.py").write_text(KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "srcview_kernel.py"


def _sources(path) -> dict[str, str]:
    table = TraceReader(path).read_table(ts.SOURCE_FILE.name).to_pylist()
    return {r[ts.SOURCE_FILE_NAME]: r[ts.SOURCE_TEXT] for r in table}


@pytest.mark.parametrize("emit", ["process", "thread"])
def test_a_recording_keeps_the_kernel_file_and_the_helpers_its_instructions_came_from(kernel_file, tmp_path, emit):
    out = tmp_path / f"{emit}.trace"
    run_kernel(f"{kernel_file}:k", trace_path=out, emit=emit)
    assert _sources(out) == {"srcview_kernel.py": KERNEL, "srcview_helpers.py": HELPER}
    sizes = {r[ts.SOURCE_FILE_NAME]: r[ts.SOURCE_SIZE_BYTES]
             for r in TraceReader(out).read_table(ts.SOURCE_FILE.name).to_pylist()}
    assert sizes == {"srcview_kernel.py": len(KERNEL), "srcview_helpers.py": len(HELPER)}


def test_the_trace_keeps_the_text_as_recorded_and_the_listing_uses_it(kernel_file, tmp_path, capsys):
    out = tmp_path / "k.trace"
    run_kernel(f"{kernel_file}:k", trace_path=out)
    kernel_file.write_text("# edited after the recording\n" + KERNEL)  # line numbers shift on disk, not in the trace
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(out)
    with trace:
        listing = {r[rs.LINE]: r for r in source_listing(trace, "srcview_kernel.py").to_pylist()}
        helper = {r[rs.LINE]: r for r in source_listing(trace, "srcview_helpers.py").to_pylist()}
        events = trace.sql(f"SELECT {ts.NKI_SOURCE_LOCATION} AS loc, count(*) AS n FROM Instruction "
                           "GROUP BY loc").fetchall()
    counts = dict(events)
    assert listing[9][rs.TEXT].strip() == "nc.dma_copy(t, x)"
    assert listing[9][rs.INSTRUCTIONS] == counts["srcview_kernel.py:9"] == 4
    assert listing[9][rs.DMA_TRANSFERS] == 4 and listing[9][rs.DMA_BYTES] == 4 * 128 * 256 * 4
    assert helper[5][rs.TEXT].strip() == 'nc.activation(dst, src, "exp")'
    assert helper[5][rs.INSTRUCTIONS] == counts["srcview_helpers.py:5"] == 4
    assert helper[5][rs.ENGINES] == "Scalar"
    assert len(listing) == len(KERNEL.splitlines())

    assert main(["source", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("srcview_kernel.py: ")   # 8 DMA triggers against the helper's 4 ACTIVATEs
    assert "other files: srcview_helpers.py" in text
    row = next(ln for ln in text.splitlines() if ln.rstrip().endswith("nc.dma_copy(t, x)"))
    assert row.split()[:2] == ["9", "4"] and "4 x 128 KiB" in row

    assert main(["source", str(out), "srcview_helpers.py", "--hot", "1"]) == 0
    text = capsys.readouterr().out
    assert "the 1 lines with the most instruction time" in text
    assert text.rstrip().endswith('nc.activation(dst, src, "exp")')

    assert main(["source", str(out), "--critical", "--hot", "2"]) == 0
    text = capsys.readouterr().out
    assert "critical: the time this line holds on the critical path" in text
    header = next(ln for ln in text.splitlines() if ln.lstrip().startswith("line "))
    assert header.split()[:6] == ["line", "instr", "time", "share", "wait", "critical"]
    assert "the 2 lines with the most critical-path time, hottest first" in text
    assert main(["source", str(out), "--critical", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sum(r[rs.CRITICAL_NS] for r in rows) > 0 and all(r[rs.CRITICAL_NS] is not None for r in rows)

    assert main(["source", str(out), "--files", "--json"]) == 0
    files = {r[rs.FILE]: r for r in json.loads(capsys.readouterr().out)}
    assert files["srcview_kernel.py"][rs.HAS_TEXT] and files["srcview_helpers.py"][rs.INSTRUCTIONS] == 4


def test_source_errors_are_one_line(tmp_path, capsys):
    out = tmp_path / "s.trace"
    run_kernel("softmax", {"rows": 256, "cols": 256}, trace_path=out)
    assert main(["source", str(out), "nope.py"]) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no source file 'nope.py' in the trace (files: softmax.py" in err
    assert main(["source", str(out), "--hot", "0"]) != 0
    assert "--hot" in capsys.readouterr().err
    assert main(["source", str(tmp_path / "missing.trace")]) != 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_host_trace_has_no_source_to_show(tmp_path, capsys):
    host = tmp_path / "alexnet.json.gz"  # a real PyTorch profiler trace: host slices, no kernel source
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "pytorch" / "alexnet_flows.json.gz", host)
    assert main(["source", str(host)]) != 0
    err = capsys.readouterr().err.strip().splitlines()  # (the import's warning about overlapping slices, then)
    assert err[-1].startswith("trnprof: error: ") and "no instruction has a source location" in err[-1]
    assert not any("Traceback" in ln for ln in err)


def test_source_dir_supplies_the_text_an_imported_profile_lacks(tmp_path, capsys):
    import numpy as np

    from tracer import TraceWriter

    path = tmp_path / "hw.trace"
    n = 3
    with TraceWriter(path, metadata={"arch": "trn2", "is_simulation": False}) as w:
        w.append(ts.INSTRUCTION.name, {
            ts.ID: np.arange(n, dtype=np.int64), ts.START_TS: np.array([0, 10, 20]), ts.END_TS: np.array([5, 15, 25]),
            ts.DURATION_NS: np.full(n, 5), ts.ENGINE: ["Vector"] * n, ts.OPCODE: ["ADD"] * n, ts.OPERANDS: [""] * n,
            ts.PC: np.arange(n, dtype=np.int64), ts.PCORE_IDX: np.zeros(n, np.int64),
            ts.NKI_SOURCE_LOCATION: ["/home/u/kern/k.py:2"] * n})
    src = tmp_path / "checkout" / "kern"
    src.mkdir(parents=True)
    (src / "k.py").write_text("def k(nc):\n    nc.tensor_tensor(a, b, c, 'add')\n")
    assert main(["source", str(path)]) == 0
    out = capsys.readouterr().out
    assert "holds no text of this file" in out and "tensor_tensor" not in out
    assert main(["source", str(path), "--source-dir", str(tmp_path / "checkout")]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.rstrip().endswith("nc.tensor_tensor(a, b, c, 'add')"))
    assert row.split()[:2] == ["2", "3"] and "holds no text" not in out
    assert main(["source", str(path), "--source-dir", str(src)]) == 0   # the base name alone is found too
    assert "tensor_tensor" in capsys.readouterr().out
    assert main(["source", str(path), "--source-dir", str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no /home/u/kern/k.py there" in err
    assert main(["source", str(path), "--source-dir", str(src / "k.py")]) != 0
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("sample", ["matmul_naive-trn2", "attention-trn2"])
def test_critical_path_time_per_line_matches_a_brute_force(sample):
    """Each line's ``critical_ns`` against the critical path's steps mapped by hand: an instruction step to its own
    line, a DMA segment to the line of the instruction with a Flow edge into its transfer's packets."""
    from profiler.analyses import critical_path
    from tracer.samples import SAMPLES

    path = next(s for s in SAMPLES if s.name == sample).path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(path)
    with trace:
        listing = source_listing(trace, critical=True).to_pylist()
        steps = critical_path(trace).to_pylist()
        loc = dict(trace.sql("SELECT id, nki_source_location FROM Instruction").fetchall())
        agg = dict(trace.sql("SELECT id, packet_aggregation_id FROM DmaPacket").fetchall())
        trigger = {}
        for out_id, in_id in trace.sql("SELECT out_id, in_id FROM Flow WHERE out_table = 'Instruction' "
                                       "AND in_table = 'DmaPacket'").fetchall():
            trigger.setdefault(agg[in_id], out_id)
    want: dict[str, int] = {}
    for s in steps:
        owner = s["id"] if s["table_name"] == "Instruction" else trigger.get(agg.get(s["id"]))
        where = loc.get(owner) if owner is not None else None
        if where:
            want[where] = want.get(where, 0) + s["dur_ns"]
    got = {f"{sample.split('-')[0]}.py:{r[rs.LINE]}": r[rs.CRITICAL_NS] for r in listing if r[rs.CRITICAL_NS]}
    assert got == {k: v for k, v in want.items() if k.startswith(sample.split("-")[0] + ".py:")}
    assert sum(got.values()) > 0.9 * sum(s["dur_ns"] for s in steps)   # nearly all of the path is in the kernel
    assert all(r[rs.CRITICAL_NS] is not None for r in listing)


def test_diff_by_source_shows_each_lines_text(tmp_path, capsys):
    for arch in ("trn1", "trn2"):   # the same kernel on both architectures: lines align by identity
        run_kernel("softmax", {"rows": 512, "cols": 512}, arch=arch, trace_path=tmp_path / f"{arch}.trace")
    assert main(["diff", str(tmp_path / "trn1.trace"), str(tmp_path / "trn2.trace"), "--by", "source",
                 "--limit", "2"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("time per source"):].splitlines()
    assert table[1].split()[-1] == "text"
    assert table[3].startswith("softmax.py:35") and table[3].endswith('nc.tensor_reduce(neg_max, xt, "max", '
                                                                       "negate=True)")
    assert table[-1] == "(2 of 7 rows; --limit 0 shows all)"
    assert main(["diff", str(tmp_path / "trn1.trace"), str(tmp_path / "trn2.trace"), "--by", "source",
                 "--json"]) == 0
    assert "text" not in json.loads(capsys.readouterr().out)["by"]["source"][0]   # the JSON keeps diff's schema


def test_with_the_critical_path_the_hottest_lines_are_those_on_it():
    from profiler.analyses.source_lines import hottest
    from tracer.samples import SAMPLES

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(next(s for s in SAMPLES if s.name == "matmul_naive-trn2").path)
    with trace:
        by_time = hottest(source_listing(trace), 2).column(rs.LINE).to_pylist()
        by_path = hottest(source_listing(trace, critical=True), 2).to_pylist()
    assert by_time == [44, 46]                           # the matmul and its copy-out: most instruction time
    assert [r[rs.LINE] for r in by_path] == [43, 41]     # the loads of B and of A hold the critical path
    assert by_path[0][rs.CRITICAL_NS] > by_path[1][rs.CRITICAL_NS] > 0
