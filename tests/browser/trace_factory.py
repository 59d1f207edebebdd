"""A small, deterministic kernel-shaped trace for the dashboard tests (written with the real TraceWriter).

Per iteration: a DMA load on one of four queues, LDWEIGHTS + MATMUL on Tensor, ACTIVATE on Scalar, TENSOR_TENSOR on
Vector, a DMA store, with Flow edges between them; every operation belongs to a layer span and an operator span.
A Counter per core, ``sbuf_usage_bytes``, steps up by the loaded bytes when a load ends and down when the store
starts (:data:`COUNTER_NAME`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tracer import TraceWriter
from tracer import schema as ts

LAYERS = ("attn", "mlp")
SOURCE = "kernel.py:{}"
COUNTER_NAME = "sbuf_usage_bytes"
LOAD_BYTES = 65536


def write_kernel_trace(path: Path, iterations: int = 200, cores: int = 1) -> Path:
    """Write the trace directory at ``path``; returns it."""
    inst: dict[str, list] = {k: [] for k in (ts.ID, ts.START_TS, ts.END_TS, ts.DURATION_NS, ts.ENGINE, ts.OPCODE,
                                              ts.OPERANDS, ts.PC, ts.PCORE_IDX, ts.HLO_NAME, ts.LAYER,
                                              ts.NKI_SOURCE_LOCATION, ts.RAW_FLOPS, ts.ADJUSTED_FLOPS)}
    dma: dict[str, list] = {k: [] for k in (ts.ID, ts.START_TS, ts.END_TS, ts.DURATION_NS, ts.QUEUE_NAME,
                                             ts.READ_BYTES, ts.WRITE_BYTES, ts.TRANSFER_BYTES, ts.VARIABLE,
                                             ts.PCORE_IDX, ts.QUEUE_TYPE)}
    flow: dict[str, list] = {k: [] for k in (ts.IN_ID, ts.OUT_ID, ts.IN_TABLE, ts.OUT_TABLE, ts.DEPENDENCY_TYPE,
                                              ts.GAP_TIME)}
    span: dict[str, list] = {k: [] for k in (ts.ID, ts.START_TS, ts.END_TS, ts.DURATION_NS, ts.NAME, ts.CATEGORY,
                                              ts.DEPTH, ts.TRACK_GROUP, ts.TRACK_NAME, ts.PCORE_IDX)}
    counter: dict[str, list] = {k: [] for k in (ts.TIMESTAMP, ts.NAME, ts.VALUE, ts.UNIT, ts.PCORE_IDX)}

    def add_sample(core, t, value):
        for k, v in ((ts.TIMESTAMP, t), (ts.NAME, COUNTER_NAME), (ts.VALUE, float(value)), (ts.UNIT, "B"),
                     (ts.PCORE_IDX, core)):
            counter[k].append(v)
    pcs = {e: 0 for e in ts.ENGINES}
    next_id = [0, 0, 0]

    def add_inst(core, engine, opcode, start, dur, layer, op, line, flops=0):  # noqa: PLR0917
        i = next_id[0]
        next_id[0] += 1
        for k, v in ((ts.ID, i), (ts.START_TS, start), (ts.END_TS, start + dur), (ts.DURATION_NS, dur),
                     (ts.ENGINE, engine), (ts.OPCODE, opcode), (ts.OPERANDS, f"S[{i % 8}]>=1"), (ts.PC, pcs[engine]),
                     (ts.PCORE_IDX, core), (ts.HLO_NAME, op), (ts.LAYER, layer),
                     (ts.NKI_SOURCE_LOCATION, SOURCE.format(line)), (ts.RAW_FLOPS, flops),
                     (ts.ADJUSTED_FLOPS, flops)):
            inst[k].append(v)
        pcs[engine] += 1
        return i

    def add_dma(core, queue, start, dur, nbytes, var):  # noqa: PLR0917
        i = next_id[1]
        next_id[1] += 1
        for k, v in ((ts.ID, i), (ts.START_TS, start), (ts.END_TS, start + dur), (ts.DURATION_NS, dur),
                     (ts.QUEUE_NAME, queue), (ts.READ_BYTES, nbytes), (ts.WRITE_BYTES, nbytes),
                     (ts.TRANSFER_BYTES, nbytes), (ts.VARIABLE, var), (ts.PCORE_IDX, core), (ts.QUEUE_TYPE, "data")):
            dma[k].append(v)
        return i

    def add_flow(out_table, out_id, in_table, in_id, gap):
        for k, v in ((ts.IN_ID, in_id), (ts.OUT_ID, out_id), (ts.IN_TABLE, in_table), (ts.OUT_TABLE, out_table),
                     (ts.DEPENDENCY_TYPE, "flow"), (ts.GAP_TIME, gap)):
            flow[k].append(v)

    def add_span(core, name, cat, start, end, track):  # noqa: PLR0917
        i = next_id[2]
        next_id[2] += 1
        for k, v in ((ts.ID, i), (ts.START_TS, start), (ts.END_TS, end), (ts.DURATION_NS, end - start),
                     (ts.NAME, name), (ts.CATEGORY, cat), (ts.DEPTH, 0), (ts.TRACK_GROUP, f"NeuronCore {core}"),
                     (ts.TRACK_NAME, track), (ts.PCORE_IDX, core)):
            span[k].append(v)

    INST, DMA = ts.INSTRUCTION.name, ts.DMA_PACKET.name
    for core in range(cores):
        t = 1_000 + core * 50
        for it in range(iterations):
            layer = LAYERS[(it * len(LAYERS)) // iterations]
            op = f"{layer}.dot{it % 3}"
            t_it = t
            d = add_dma(core, f"qSyncIO{it % 4}", t, 400, LOAD_BYTES, f"{layer}_in")
            add_sample(core, t + 400, LOAD_BYTES)
            ldw = add_inst(core, "Tensor", "LDWEIGHTS", t + 420, 60, layer, op, 10)
            add_flow(DMA, d, INST, ldw, 20)
            mm = add_inst(core, "Tensor", "MATMUL", t + 490, 300, layer, op, 11, flops=2 * 128 * 128 * 512)
            add_flow(INST, ldw, INST, mm, 10)
            act = add_inst(core, "Scalar", "ACTIVATE", t + 800, 150, layer, op, 12)
            add_flow(INST, mm, INST, act, 10)
            tt = add_inst(core, "Vector", "TENSOR_TENSOR", t + 960, 120, layer, op, 13)
            add_flow(INST, act, INST, tt, 10)
            sync = add_inst(core, "Sync", "DMA_TRIGGER", t + 1085, 10, layer, op, 14)
            st = add_dma(core, f"qSyncIO{(it + 2) % 4}", t + 1100, 300, 32768, f"{layer}_out")
            add_sample(core, t + 1100, 0)
            add_flow(INST, tt, INST, sync, 5)
            add_flow(INST, sync, DMA, st, 5)
            if it % 10 == 0:
                add_inst(core, "GpSimd", "IOTA", t + 100, 80, layer, op, 9)
            t += 1_450
            add_span(core, op, "operator", t_it, t - 10, "operator")
        bounds = np.linspace(1_000 + core * 50, t, len(LAYERS) + 1).astype(np.int64)
        for k, layer in enumerate(LAYERS):
            add_span(core, layer, "layer", int(bounds[k]), int(bounds[k + 1]) - 5, "layer")
    with TraceWriter(path, metadata={"arch": "trn2", "is_simulation": True, "profile_name": "kernel"},
                     background_flush=False) as w:
        w.append(ts.INSTRUCTION.name, inst)
        w.append(ts.DMA_PACKET.name, dma)
        w.append(ts.FLOW.name, flow)
        w.append(ts.SPAN.name, span)
        w.append(ts.COUNTER.name, counter)
    return path
