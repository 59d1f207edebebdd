"""The analysis commands, run in-process through ``profiler.cli.main`` on the hand-made trace."""

from __future__ import annotations

import csv
import io
import json

import pytest

from profiler.analyses import schema as rs
from profiler.cli import main
from tests.golden.handmade import write_handmade

ISSUE_KEYS = {"total_time_ns", "memory_bound_ns", "memory_bound_ideal_ns", "memory_bound_no_reloads_ns",
              "compute_bound_ns", "compute_bound_ideal_ns", "compute_bound_ideal_useful_ns", "perfect_pipeline_ns",
              "bottleneck"}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    return str(write_handmade(root / "a.trace")), str(write_handmade(root / "b.trace", spill_reload_bytes=400))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bounds_json_has_the_issue_keys_and_the_gaps(traces, capsys):
    code, out, err = run(capsys, "bounds", traces[0], "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert ISSUE_KEYS | set(rs.GAPS) <= set(data)
    assert data["bottleneck"] == "Tensor" and data["memory_bound_ideal_ns"] == 62.5
    code, out, _ = run(capsys, "bounds", traces[0], "--start", "80", "--end", "230", "--json")
    assert json.loads(out)["total_time_ns"] == 150


def test_bounds_text_and_csv(traces, capsys):
    code, out, _ = run(capsys, "bounds", traces[0])
    assert code == 0
    assert "bottleneck: Tensor" in out and "memory_bound_no_reloads_ns" in out and "37.5" in out
    code, out, _ = run(capsys, "bounds", traces[0], "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r[rs.BOUND] for r in rows] == list(rs.BOUND_KEYS)
    assert float(rows[0][rs.GAP_NS]) == 255


def test_table_commands(traces, capsys):
    code, out, _ = run(capsys, "waits", traces[0])
    assert code == 0 and out.startswith("Tensor spent 13.5% of its time waiting on DMA queue qSyncIO1")
    code, out, _ = run(capsys, "critical-path", traces[0], "--steps", "--format", "csv")
    assert [r[rs.ID] for r in csv.DictReader(io.StringIO(out))] == ["0", "1", "1", "2", "3", "4", "5", "2"]
    code, out, _ = run(capsys, "critical-path", traces[0])
    assert "critical path: 8 steps" in out and "91.9% of it busy" in out
    # the chain ending at the second MATMUL: the path's first five steps (worked out by hand: 230 ns, 220 of them busy)
    code, out, _ = run(capsys, "critical-path", traces[0], "--to", "Instruction:3", "--steps", "--format", "csv")
    assert [(r[rs.TABLE], r[rs.ID]) for r in csv.DictReader(io.StringIO(out))] == [
        ("Instruction", "0"), ("Instruction", "1"), ("DmaPacket", "1"), ("Instruction", "2"), ("Instruction", "3")]
    code, out, _ = run(capsys, "critical-path", traces[0], "--to", " Instruction : 3 ")
    assert code == 0 and "chain to Instruction 3: 5 steps over [0, 230) ns" in out and "95.7% of it busy" in out
    for bad, message in ((["--to", "Instruction"], "expected TABLE:ID"), (["--to", "Flow:1"], "not to 'Flow'"),
                         (["--to", "Instruction:999"], "no row with id 999"),
                         (["--to", "Instruction:3", "--start", "5"], "leave out --start")):
        code, out, err = run(capsys, "critical-path", traces[0], *bad)
        assert code != 0 and message in err and err.count("\n") == 1, (bad, err)
    code, out, _ = run(capsys, "gaps", traces[0], "--engine", "Tensor", "--json")
    assert [(g[rs.START_NS], g[rs.CAUSE]) for g in json.loads(out)] == [(230, rs.CAUSE_END),
                                                                       (0, rs.CAUSE_DEPENDENCY)]
    code, out, _ = run(capsys, "gaps", traces[0], "--limit", "1")    # the causes of the gaps printed only
    assert code == 0 and out.count(rs.CAUSE_END) + out.count(rs.CAUSE_DEPENDENCY) <= 1
    assert "(1 of 9 rows; --limit 0 shows all)" in out
    code, out, _ = run(capsys, "operators", traces[0], "--by", "opcode", "--format", "csv", "--limit", "1")
    assert next(iter(csv.DictReader(io.StringIO(out))))[rs.OPCODE] == "MATMUL"
    code, out, _ = run(capsys, "dma", traces[0], "--section", "tensors", "--format", "csv")
    assert {r[rs.VARIABLE]: r[rs.RELOAD_FACTOR] for r in csv.DictReader(io.StringIO(out))}["a"] == "2.0"
    code, out, _ = run(capsys, "dma", traces[0])
    assert "histogram:" in out and "regions:" in out
    code, out, _ = run(capsys, "recommend", traces[0])
    assert out.startswith("1. Low model FLOPs utilisation [low_mfu: 320 ns at stake, up to 3.22x faster]")
    code, out, _ = run(capsys, "recommend", traces[1], "--json")
    assert "spill_reloads" in [r[rs.RULE] for r in json.loads(out)]


def test_diff(traces, capsys):
    code, out, _ = run(capsys, "diff", traces[0], traces[1], "--json")
    assert code == 0
    data = json.loads(out)
    assert data[rs.DIFF_TOTAL][rs.DELTA] == 0  # the spill variant differs in bytes only
    assert {m[rs.METRIC] for m in data[rs.DIFF_BOUNDS]} >= ISSUE_KEYS - {"bottleneck"}
    assert set(data[rs.DIFF_BY]) == set(rs.GROUP_KEYS)
    code, out, _ = run(capsys, "diff", traces[0], traces[1], "--by", "opcode")
    assert "total time (first event to last): 370 -> 370 ns, +0 ns (same)" in out and "time per opcode" in out
    assert "time per source" not in out


@pytest.mark.parametrize("argv, message", [
    (["bounds", "{missing}"], "no such file"),
    (["bounds", "{a}", "--start", "300", "--end", "100"], "empty window"),
    (["bounds", "{a}", "--necessary-bytes", "-1"], "--necessary-bytes"),
    (["bounds", "{a}", "--core", "7"], "no core 7"),
    (["gaps", "{a}", "--limit", "-2"], "--limit"),
    (["gaps", "{a}", "--min-ns", "-2"], "--min-ns"),
    (["dma", "{a}", "--format", "csv"], "--section"),
    (["dma", "{a}", "--small-bytes", "0"], "--small-bytes"),
    (["waits", "{junk}"], "junk"),
    (["bounds", "{a}", "--start", str(-10**30)], "beyond"),
    (["recommend", "{spans}"], "no instructions or DMA packets"),
    (["bounds", "{a}", "--necessary-bytes", str(10**23)], "--necessary-bytes must be 0.."),
    (["gaps", "{a}", "--engine", "Bogus"], "no engine 'Bogus'; engines: Tensor, Vector, Scalar, GpSimd, Sync and DMA"),
    (["gaps", "{a}", "--engine", "tensor"], "names are case-sensitive"),
    (["waits", "{a}", "--json", "--format", "csv"], "not allowed with argument --json"),
    (["summary", "{a}", "--start", "100", "--end", "100"], "summary range is empty"),
    (["summary", "{a}", "--start", str(10**12), "--end", str(2 * 10**12)], "holds no event: the trace spans"),
])
def test_bad_input_is_one_line(traces, tmp_path, capsys, argv, message):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00not a trace" * 10)
    spans = tmp_path / "host.json"  # a Chrome trace: host slices, no device events
    spans.write_text('{"traceEvents": [{"name": "a", "ph": "X", "ts": 1, "dur": 5, "pid": 1, "tid": 1}]}')
    argv = [a.format(a=traces[0], missing=tmp_path / "nope.trace", junk=junk, spans=spans) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code != 0 and out == ""
    assert err.startswith("trnprof: error:") and err.count("\n") == 1 and message in err


def test_csv_and_json_carry_every_row_unless_limit_is_given(mlp_sample, capsys):
    """The table's default cut (20 gaps, 30 steps) applied to csv and json too, unsaid: sums over them were wrong."""
    db = str(mlp_sample)
    code, out, _ = run(capsys, "gaps", db, "--json")
    every = json.loads(out)
    assert code == 0 and len(every) > 20
    code, out, _ = run(capsys, "gaps", db, "--format", "csv")
    assert len(list(csv.DictReader(io.StringIO(out)))) == len(every)
    code, out, _ = run(capsys, "gaps", db, "--json", "--limit", "5")
    assert json.loads(out) == every[:5]
    code, out, _ = run(capsys, "gaps", db)
    assert f"(20 of {len(every)} rows; --limit 0 shows all)" in out
    code, out, _ = run(capsys, "critical-path", db, "--steps", "--json")
    assert len(json.loads(out)) > 30


def test_a_multi_core_trace_without_core_is_noted(tmp_path, capsys):
    """The per-engine analyses merge cores (one core's idle time hides behind another's work): they say so."""
    import profiler
    from profiler.analyses import performance_bounds
    from tracer import TraceWriter
    from tracer import schema as ts

    path = tmp_path / "two.trace"
    with TraceWriter(path, metadata={"dma_ddr_bandwidth": 1e9}, background_flush=False) as w:
        w.append_rows(ts.INSTRUCTION.name, [
            {ts.ID: i, ts.START_TS: 100 * core, ts.END_TS: 100 * core + 50, ts.DURATION_NS: 50, ts.ENGINE: "Tensor",
             ts.OPCODE: "MATMUL", ts.OPERANDS: "", ts.PC: i, ts.PCORE_IDX: core}
            for i, core in enumerate((0, 1))])
    for command in ("bounds", "gaps", "waits", "operators", "recommend"):
        code, _out, err = run(capsys, command, str(path))
        assert code == 0 and "has 2 cores (pcore_idx 0, 1)" in err and "--core N" in err, (command, err)
        code, _out, err = run(capsys, command, str(path), "--core", "1")
        assert code == 0 and "cores" not in err, (command, err)
    with profiler.open(path) as trace:
        assert any("covers 2 cores" in n for n in performance_bounds(trace, 0, 200)[rs.NOTES])
        assert not any("cores" in n for n in performance_bounds(trace, 0, 200, core=0)[rs.NOTES])


def test_windows_cutting_transfers_keep_reload_factors_and_necessary_bytes_sound(mlp_sample):
    """Loaded bytes by packet, distinct bytes by transfer: a factor of 0.96, or 1.125 on data loaded once, and
    necessary bytes above the bytes transferred (a negative excess-traffic gap)."""
    import profiler
    from profiler.analyses import dma_efficiency, performance_bounds, recommendations

    with profiler.open(mlp_sample) as trace:
        t0, t1 = trace.time_range
        whole = {r[rs.VARIABLE]: r[rs.RELOAD_FACTOR] for r in dma_efficiency(trace)[rs.EFF_TENSORS].to_pylist()}
        assert whole and all(f is None or f >= 1 for f in whole.values())
        step = (t1 - t0) // 9
        for k in range(8):
            for width in (step // 3, step, 3 * step):
                a, b = t0 + k * step, t0 + k * step + width
                eff = dma_efficiency(trace, a, b)
                for r in eff[rs.EFF_TENSORS].to_pylist():
                    assert r[rs.RELOAD_FACTOR] is None or r[rs.RELOAD_FACTOR] >= 1 - 1e-9, (a, b, r)
                    if whole.get(r[rs.VARIABLE]) == 1.0 and r[rs.RELOAD_FACTOR] is not None:
                        assert r[rs.RELOAD_FACTOR] == 1.0, (a, b, r)   # loaded once is once in any window
                bnd = performance_bounds(trace, a, b)
                inputs = bnd[rs.INPUTS]
                assert inputs[rs.NECESSARY_BYTES] <= inputs[rs.DMA_TRANSFER_BYTES], (a, b)
                assert bnd[rs.EXCESS_TRAFFIC_GAP_NS] >= 0, (a, b)
        idle = performance_bounds(trace, t1 + 10**5, t1 + 2 * 10**5)
        assert idle[rs.BOTTLENECK] is None and idle[rs.INPUTS][rs.NECESSARY_BYTES] == 0
        assert not any("HBM regions" in n for n in idle[rs.NOTES])
        assert recommendations(trace, t1 + 10**5, t1 + 2 * 10**5).num_rows == 0


def test_recommend_json_gives_evidence_as_an_object(mlp_sample, capsys):
    code, out, _ = run(capsys, "recommend", str(mlp_sample), "--json")
    rows = json.loads(out)
    assert code == 0 and rows and all(isinstance(r["evidence"], dict) for r in rows)


def test_an_empty_critical_path_says_so(mlp_sample, capsys):
    code, out, _ = run(capsys, "critical-path", str(mlp_sample), "--start", "900000", "--end", "900100")
    assert code == 0 and out.startswith("critical path: 0 steps (no instruction or DMA transfer starts in the window)")


def test_summary_json_of_a_host_trace_carries_its_rows_and_names(tmp_path, capsys):
    """It carried the device keys alone, all empty; the text showed the rows and the names with most self time."""
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "data" / "pytorch" / "alexnet_flows.json.gz"
    path = tmp_path / src.name
    shutil.copy(src, path)
    code, out, _ = run(capsys, "summary", str(path), "--json")
    host = json.loads(out)["host"]
    assert code == 0 and host["spans"] > 0 and host["rows"] and host["top_self"]
    assert {"name", "count", "self_ns", "total_ns"} <= set(host["top_self"][0])


def test_diff_says_how_the_two_recordings_differ(tmp_path, capsys):
    """The header named neither the architectures nor the parameters, and --set constants without their values."""
    from tracer.sim import run_kernel

    a, b = tmp_path / "a.trace", tmp_path / "b.trace"
    run_kernel("mlp", {"layers": 1}, arch="trn2", trace_path=a, emit="inline")
    run_kernel("mlp", {"layers": 2}, arch="trn1", trace_path=b, emit="inline",
               overrides={"dma_bandwidth_gbps": 736, "access_conflicts": False})
    code, out, _ = run(capsys, "diff", str(a), str(b))
    assert code == 0
    assert f"A: {a} (mlp, trn2; -p layers=1)\n" in out
    line = next(x for x in out.splitlines() if x.startswith("B: "))
    assert line.startswith(f"B: {b} (mlp, trn1; -p layers=2; --set ")   # (values as typed: 736, false)
    assert "dma_bandwidth_gbps=736" in line and "access_conflicts=false" in line and "736.0" not in line
