"""A hand-made trace, written with the real TraceWriter, whose every analysis result is worked out by hand.

Peaks are chosen so arithmetic stays exact: DMA 4 B/ns, Tensor engine 1 FLOP/ns (1 x 1 PE array at 0.5 GHz).

    Sync    I0 DMA_TRIGGER [0,10)  load a[0:1,0:50] (100 B)   -> P0 qSyncIO0 [20,70)
            I1 DMA_TRIGGER [10,20) load a[0:1,0:50] again       -> P1 qSyncIO1 [30,80)
    Tensor  I2 MATMUL [80,180)  50 FLOPs, waited 50 ns on P1 (Flow)
            I3 MATMUL [180,230) 20 FLOPs, TRANSPOSE
    Vector  I4 TENSOR_COPY [240,300), waited 10 ns on I3 (Flow)
    GpSimd  I5 DMA_TRIGGER [300,310) store c[0:1,0:25] (50 B), after I4 (Flow, no wait) -> P2 qGpSimdIO0 [320,370)
    DMA     P3 qInstr [0,5): a 4-byte instruction fetch (queue_type instruction), no trigger

Trigger edges are recorded as Flow rows Instruction -> DmaPacket.  The answers are in ``tests/unit/
test_analysis_handmade.py``.
"""

from __future__ import annotations

from pathlib import Path

from tracer import TraceWriter
from tracer import schema as ts

METADATA = {
    "is_simulation": True, "arch": "handmade", "profile_name": "handmade",
    "dma_ddr_bandwidth": 4e9, "tensor_engine_num_rows": 1, "tensor_engine_num_cols": 1,
    "tensor_engine_clock_freq": 0.5,
}

#: (id, engine, opcode, start, end, wait, layer, operator, source, operands, extra columns)
INSTRUCTIONS = [
    (0, "Sync", "DMA_TRIGGER", 0, 10, 0, "L0", "load", "k.py:1",
     "S[5]++@complete qSyncIO++@retire 1x100B 1pkt src=a[0:1,0:50] dst=bf16@SBUF[0:1]+0x0",
     {"hbm_read_bytes": 100}),
    (1, "Sync", "DMA_TRIGGER", 10, 20, 0, "L0", "load", "k.py:2",
     "S[5]++@complete qSyncIO++@retire 1x100B 1pkt src=a[0:1,0:50] dst=bf16@SBUF[0:1]+0x100",
     {"hbm_read_bytes": 100}),
    (2, "Tensor", "MATMUL", 80, 180, 50, "L0", "mm", "k.py:3", "$qSyncIO>=2 S[1]++@complete",
     {"raw_flops": 50, "adjusted_flops": 50, "tensor_instruction_type": "REGULAR"}),
    (3, "Tensor", "MATMUL", 180, 230, 0, "L0", "mm", "k.py:4", "S[1]++@complete",
     {"raw_flops": 20, "adjusted_flops": 20, "tensor_instruction_type": "TRANSPOSE"}),
    (4, "Vector", "TENSOR_COPY", 240, 300, 10, "L0", "store", "k.py:5", "$S[1]>=2 S[2]++@complete", {}),
    (5, "GpSimd", "DMA_TRIGGER", 300, 310, 0, "L0", "store", "k.py:6",
     "$S[2]>=1 S[4]++@complete qGpSimdIO++@retire 1x50B 1pkt src=bf16@SBUF[0:1]+0x0 dst=c[0:1,0:25]",
     {"hbm_write_bytes": 50}),
]

#: (id, queue, start, end, bytes, variable, transfer id, queue type, source, dest)
PACKETS = [
    (0, "qSyncIO0", 20, 70, 100, "a", 0, "input", "HBM", "SBUF"),
    (1, "qSyncIO1", 30, 80, 100, "a", 1, "input", "HBM", "SBUF"),
    (2, "qGpSimdIO0", 320, 370, 50, "c", 2, "output", "SBUF", "HBM"),
    (3, "qInstr", 0, 5, 4, None, None, "instruction", "HBM", "SBUF"),
]

#: (out table, out id, in table, in id, dependency type)
FLOWS = [
    ("DmaPacket", 1, "Instruction", 2, "flow"),
    ("Instruction", 3, "Instruction", 4, "flow"),
    ("Instruction", 4, "Instruction", 5, "flow"),
    ("Instruction", 0, "DmaPacket", 0, "flow"),
    ("Instruction", 1, "DmaPacket", 1, "flow"),
    ("Instruction", 5, "DmaPacket", 2, "flow"),
]

EXTRA_COLUMNS = ("hbm_read_bytes", "hbm_write_bytes", "raw_flops", "adjusted_flops", "tensor_instruction_type")


def write_handmade(path: Path, *, spill_reload_bytes: int = 0) -> Path:
    """Write the hand-made trace to ``path`` (optionally with spill reloads on I2, for the spill rule)."""
    with TraceWriter(path, metadata=METADATA, background_flush=False) as w:
        rows = []
        for (ident, engine, opcode, start, end, wait, layer, op, src, operands, extra) in INSTRUCTIONS:
            row = {ts.ID: ident, ts.START_TS: start, ts.END_TS: end, ts.DURATION_NS: end - start,
                   ts.ENGINE: engine, ts.OPCODE: opcode, ts.OPERANDS: operands, ts.PC: ident,
                   ts.PCORE_IDX: 0, ts.TIMELINE_TRACK: engine, ts.EVT_WAIT_TIME_NS: wait, ts.LAYER: layer,
                   ts.HLO_NAME: op, ts.NKI_SOURCE_LOCATION: src}
            for col in EXTRA_COLUMNS:
                row[col] = extra.get(col)
            row["spill_reload_bytes"] = spill_reload_bytes if ident == 2 and spill_reload_bytes else None
            rows.append(row)
        w.append_rows(ts.INSTRUCTION.name, rows)
        w.append_rows(ts.DMA_PACKET.name, [
            {ts.ID: i, ts.QUEUE_NAME: q, ts.START_TS: s, ts.END_TS: e, ts.DURATION_NS: e - s, ts.READ_BYTES: b,
             ts.WRITE_BYTES: b, ts.TRANSFER_BYTES: b, ts.VARIABLE: v, "packet_aggregation_id": agg,
             ts.QUEUE_TYPE: qt, "source": src, "dest": dst, ts.PCORE_IDX: 0}
            for (i, q, s, e, b, v, agg, qt, src, dst) in PACKETS])
        w.append_rows(ts.FLOW.name, [
            {ts.OUT_TABLE: ot, ts.OUT_ID: oi, ts.IN_TABLE: it, ts.IN_ID: ii, ts.DEPENDENCY_TYPE: dep}
            for (ot, oi, it, ii, dep) in FLOWS])
    return path
