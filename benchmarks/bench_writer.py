"""Benchmark the TraceWriter alone: Instruction rows per second and bytes per row on disk.

Columns are built up front, in two content models: ``kernel`` (a loop body repeated, as a compiled kernel runs)
and ``random`` (random durations, gaps and operands; pessimistic).  Only ``append`` + ``close`` is timed.

    python benchmarks/bench_writer.py --rows 5000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from tracer import TraceWriter, schema

ENGINE_OPS = {
    "Tensor": ["MATMUL", "LDWEIGHTS", "TRANSPOSE"],
    "Vector": ["TENSOR_TENSOR", "TENSOR_COPY", "TENSOR_REDUCE", "TENSOR_SCALAR"],
    "Scalar": ["ACTIVATE", "DMA_TRIGGER"],
    "GpSimd": ["IOTA", "MEMSET", "PARTITION_REDUCE"],
    "Sync": ["DMA_TRIGGER", "EVENT_SEMAPHORE"],
}


def kernel_columns(n: int, seed: int = 0) -> dict[str, object]:
    """Instruction columns of a loop-structured kernel: one loop body repeated, as compiled NKI kernels run.

    The body (24 instructions over the five engines) has fixed opcodes, durations and source lines; what changes
    per iteration is what changes in a real trace: timestamps, semaphore counts, SBUF/PSUM addresses, and a
    data-dependent wait on some iterations.
    """
    rng = np.random.default_rng(seed)
    engines = list(ENGINE_OPS)
    body_engine = np.array([4, 4, 1, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 1, 2, 4, 3, 0, 0, 0, 0, 1, 4], np.int32)
    body_op = [ENGINE_OPS[engines[e]][j % len(ENGINE_OPS[engines[e]])] for j, e in enumerate(body_engine)]
    body_dur = np.array([64, 64, 213, 46, 183, 46, 183, 107, 91, 46, 183, 46, 183, 427, 107, 91, 64, 64, 46, 183,
                         46, 183, 213, 64], np.int64)
    b = len(body_engine)
    iters = -(-n // b)
    it = np.repeat(np.arange(iters, dtype=np.int64), b)[:n]
    slot = np.tile(np.arange(b), iters)[:n]
    wait = np.where(rng.random(iters) < 0.1, 1300, 0)[it] * (slot == 0)
    dur = body_dur[slot]
    start = np.cumsum(np.roll(dur, 1) // 3 + wait)
    start[0] = 0
    engine_idx = body_engine[slot]
    pc = it * np.bincount(body_engine, minlength=5)[engine_idx] + slot
    op_dict = sorted(set(body_op))
    op_codes = np.array([op_dict.index(o) for o in body_op], np.int32)[slot]
    ops_text = [f"S[{s % 8}]>={i} sb[{(i * 512) % 196608}:+512] ps[{i % 8}]"
                for s, i in zip(slot.tolist(), it.tolist(), strict=True)]
    lines = [f"kernels/matmul.py:{40 + i}" for i in range(b)]
    is_mm = op_codes == op_dict.index("MATMUL")
    flops = np.where(is_mm, 2 * 128 * 128 * 512, 0).astype(np.int64)
    return {
        "id": np.arange(n, dtype=np.int64),
        "start_ts": start,
        "end_ts": start + dur,
        "duration_ns": dur,
        "engine": pa.DictionaryArray.from_arrays(pa.array(engine_idx), pa.array(engines)),
        "opcode": pa.DictionaryArray.from_arrays(pa.array(op_codes), pa.array(op_dict)),
        "operands": pa.array(ops_text),
        "pc": pc,
        "pcore_idx": np.zeros(n, np.int64),
        "evt_wait_time_ns": wait,
        "nki_source_location": pa.DictionaryArray.from_arrays(pa.array(slot.astype(np.int32)), pa.array(lines)),
        "hlo_name": pa.DictionaryArray.from_arrays(pa.array((it // 2000 % 3).astype(np.int32)),
                                                   pa.array(["mlp.up_proj", "mlp.act", "mlp.down_proj"])),
        "sbuf_read_bytes": np.where(is_mm, 128 * 512 * 2, 65536).astype(np.int64),
        "psum_write_bytes": np.where(is_mm, 128 * 512 * 4, 0).astype(np.int64),
        "raw_flops": flops,
        "adjusted_flops": flops,
    }


def random_columns(n: int, seed: int = 0) -> dict[str, object]:
    """Instruction columns with random durations, gaps and operands: a pessimistic, hard-to-compress trace."""
    rng = np.random.default_rng(seed)
    engines = list(ENGINE_OPS)
    engine_idx = rng.choice(len(engines), size=n, p=[0.4, 0.25, 0.15, 0.05, 0.15]).astype(np.int32)
    dur = rng.choice([27, 53, 64, 107, 213, 427], size=n).astype(np.int64)
    gap = rng.choice([0, 0, 0, 5, 40, 800], size=n).astype(np.int64)
    start = np.empty(n, np.int64)
    pc = np.empty(n, np.int64)
    for e in range(len(engines)):  # sequential, non-overlapping instruction stream per engine
        m = engine_idx == e
        k = int(m.sum())
        d, g = dur[m], gap[m]
        s = np.cumsum(d + g) - d
        start[m] = s
        pc[m] = np.arange(k)
    order = np.argsort(start, kind="stable")
    engine_idx, dur, start, pc = engine_idx[order], dur[order], start[order], pc[order]
    op_dict, op_codes = [], np.empty(n, np.int32)
    for e, name in enumerate(engines):
        base = len(op_dict)
        op_dict += [op for op in ENGINE_OPS[name] if op not in op_dict[base:]]
        m = engine_idx == e
        op_codes[m] = base + rng.integers(0, len(ENGINE_OPS[name]), int(m.sum()))
    sem = rng.integers(0, 16, n)
    ops_text = [f"S[{s}]>={p // 4} sb[{(p * 512) % 196608}:+512] ps[{p % 8}]" for s, p in zip(sem.tolist(), pc.tolist(),
                                                                                             strict=True)]
    lines = [f"kernels/matmul.py:{40 + i}" for i in range(12)]
    hlos = ["mlp.up_proj", "mlp.act", "mlp.down_proj", "attn.qk", "attn.softmax", "attn.pv"]
    is_mm = op_codes == op_dict.index("MATMUL")
    flops = np.where(is_mm, 2 * 128 * 128 * 512, 0).astype(np.int64)
    return {
        "id": np.arange(n, dtype=np.int64),
        "start_ts": start,
        "end_ts": start + dur,
        "duration_ns": dur,
        "engine": pa.DictionaryArray.from_arrays(pa.array(engine_idx), pa.array(engines)),
        "opcode": pa.DictionaryArray.from_arrays(pa.array(op_codes), pa.array(op_dict)),
        "operands": pa.array(ops_text),
        "pc": pc,
        "pcore_idx": np.zeros(n, np.int64),
        "evt_wait_time_ns": np.where(gap > 100, gap, 0),
        "nki_source_location": pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, 12, n, dtype=np.int32)),
                                                              pa.array(lines)),
        "hlo_name": pa.DictionaryArray.from_arrays(pa.array((np.arange(n) // 50_000 % 6).astype(np.int32)),
                                                   pa.array(hlos)),
        "sbuf_read_bytes": np.where(is_mm, 128 * 512 * 2, 65536).astype(np.int64),
        "psum_write_bytes": np.where(is_mm, 128 * 512 * 4, 0).astype(np.int64),
        "raw_flops": flops,
        "adjusted_flops": flops,
    }


CONTENT = {"kernel": kernel_columns, "random": random_columns}


def run(rows: int, repeat: int, compression: str | None, chunk: int, content: str) -> dict[str, object]:
    cols = CONTENT[content](rows)
    results = []
    for _ in range(repeat):
        out = Path(tempfile.mkdtemp(prefix="trnprof-bench-")) / "t"
        t0 = time.perf_counter()
        with TraceWriter(out, compression=compression, background_flush=False) as w:
            for lo in range(0, rows, chunk):
                w.append("Instruction", {k: v[lo:lo + chunk] for k, v in cols.items()})
        elapsed = time.perf_counter() - t0
        size = (out / schema.INSTRUCTION.file_name).stat().st_size
        results.append({"seconds": elapsed, "rows_per_s": rows / elapsed, "bytes_per_row": size / rows})
        shutil.rmtree(out.parent)
    best = max(results, key=lambda r: r["rows_per_s"])
    med = sorted(r["rows_per_s"] for r in results)[len(results) // 2]
    return {"content": content, "rows": rows, "compression": compression, "chunk_rows": chunk, "median_rows_per_s": med,
            "best_rows_per_s": best["rows_per_s"], "bytes_per_row": best["bytes_per_row"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=65_536, help="rows per append call")
    ap.add_argument("--compression", nargs="*", default=["zstd", "lz4"])
    ap.add_argument("--content", nargs="*", default=list(CONTENT), choices=list(CONTENT))
    args = ap.parse_args()
    for content in args.content:
        for comp in args.compression:
            print(json.dumps(run(args.rows, args.repeat, None if comp == "none" else comp, args.chunk, content)))


if __name__ == "__main__":
    main()
