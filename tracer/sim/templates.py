"""Instruction templates built from their keys: everything static about an instruction, as a function of a tuple.

A template key is a plain tuple whose first element names its builder and whose operands are :class:`VKey`
(on-chip view: memory, block address, dtype, bounds) and :class:`HKey` (the HBM side of a DMA) tuples.  Because a
template depends on nothing but its key, the same key always yields the same template, and the loop fast path
(:mod:`tracer.sim.fastpath`) can rebuild the templates of a recorded loop body for other tile addresses by
substituting them into the key.  The kernel API (:mod:`tracer.sim.ops`) validates operations and makes the keys.
An instruction's layer and operator names are not part of its template: the core records them per instruction.

==========  =============================================================================================
key[0]      key
==========  =============================================================================================
``EW``      (EW, opcode, engine, extra, dst, reads, perf, dependent, where, n_inputs, text, act_fn,
            extra_writes) -- Vector / Scalar / GpSimd element-wise and reduce instructions (``extra_writes``: the
            :class:`VKey` of each further destination, e.g. an activation's ``reduce_dst``)
``DMA``     (DMA, engine, prefix, hbm, chip, rows, cols, src_mem, dst_mem, where, sb_var, transpose)
``LDW``     (LDW, stationary, where, transpose)
``MM``      (MM, stationary, moving, dst, accumulate, where, double_row)
``TR``      (TR, src, dst, where)
``BAR``     (BAR,) -- the final barrier
==========  =============================================================================================
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tracer.sim.dtypes import DTYPES
from tracer.sim.records import (
    E_GPSIMD,
    E_SCALAR,
    E_SYNC,
    E_TENSOR,
    E_VECTOR,
    END_BARRIER,
    KIND_COMPUTE,
    KIND_DMA,
    KIND_MATMUL,
    PORT_GPSIMD_SBUF,
    PORT_SCALAR_PSUM,
    PORT_VECTOR_PSUM,
    PORT_VECTOR_SBUF,
    S_MATRIX,
    S_SYNC,
    S_TENSOR,
    DmaPlan,
    HKey,
    Template,
    VKey,
)

if TYPE_CHECKING:
    from tracer.sim.arch import CostModel
    from tracer.sim.core import Core

SBUF, PSUM, HBM = "SBUF", "PSUM", "HBM"
STREAM_OF = {E_VECTOR: 2, E_SCALAR: 3, E_GPSIMD: 4, E_SYNC: 5}


def vtext(v: VKey) -> str:
    """Neuron-style operand text of an on-chip view: dtype, elements per partition, memory, partitions and byte
    address in each partition, e.g. ``bf16[512]@SBUF[0:128]+0x400`` (what the memory map reads,
    :mod:`profiler.analyses.memory_map`)."""
    return f"{v.dtype}[{v.f1 - v.f0}]@{v.mem}[{v.p0}:{v.p1}]+{v.addr + v.f0 * DTYPES[v.dtype].itemsize:#x}"


def _size(v: VKey) -> int:
    return (v.p1 - v.p0) * (v.f1 - v.f0) * DTYPES[v.dtype].itemsize


def cycles_ns(cm: CostModel, cycles: float, engine: int) -> int:
    """``cycles`` of ``engine``'s clock in whole nanoseconds."""
    clock = {E_TENSOR: cm.pe_clock_ghz, E_VECTOR: cm.dve_clock_ghz, E_SCALAR: cm.act_clock_ghz,
             E_GPSIMD: cm.pool_clock_ghz, E_SYNC: cm.neuroncore_clock_ghz}[engine]
    return cm.cycles_to_ns(cycles, clock)


def _ports(cm: CostModel, engine: int, views: tuple[VKey, ...]) -> int:
    """The access-conflict lists an instruction of ``engine`` touching ``views`` joins (NeuronCore-v2: Vector and
    GpSimd cannot access SBUF at the same time, nor Vector and Scalar PSUM); 0 without conflicts."""
    if not cm.access_conflicts:
        return 0
    mems = {v.mem for v in views}
    ports = 0
    if SBUF in mems:
        if engine == E_VECTOR:
            ports |= 1 << PORT_VECTOR_SBUF
        elif engine == E_GPSIMD:
            ports |= 1 << PORT_GPSIMD_SBUF
    if PSUM in mems:
        if engine == E_VECTOR:
            ports |= 1 << PORT_VECTOR_PSUM
        elif engine == E_SCALAR:
            ports |= 1 << PORT_SCALAR_PSUM
    return ports


def _elementwise(cm: CostModel, _core: Core, key: tuple[Any, ...]) -> Template:
    (_, opcode, engine, _extra, dst, reads, perf, dependent, where, n_inputs, text, act_fn, extra_writes) = key
    work = max(v.f1 - v.f0 for v in reads) if reads else dst.f1 - dst.f0
    # the access overhead plus the elements' work; NKI's documented estimates where they differ: affine_select's own
    # fixed cost instead of the overhead, bn_aggr's 13 cycles per (count, mean, variance) triple as its work
    fixed = cm.affine_select_overhead_cycles if opcode == "AFFINE_SELECT" else cm.access_overhead_cycles
    if opcode == "BN_AGGR":
        cycles = fixed + math.ceil(work / 3 * cm.bn_aggr_cycles_per_triple)
    else:
        cycles = fixed + math.ceil(work * n_inputs / perf)
    if dependent:
        cycles += cm.dve_dependent_overhead_cycles
    cycles = max(cm.min_instruction_cycles, cycles)
    if opcode == "TENSOR_SCALAR_REDUCE":  # the reduction: one more minimum interval ("max(MIN_II, N) + MIN_II")
        cycles += cm.min_instruction_cycles
    stream = STREAM_OF[engine]
    nbytes = [0] * 6
    for v in reads:
        nbytes[2 if v.mem == SBUF else 4] += _size(v)
    nbytes[3 if dst.mem == SBUF else 5] += _size(dst)
    for v in extra_writes:
        nbytes[3 if v.mem == SBUF else 5] += _size(v)
    return Template(
        key=key, engine=engine, stream=stream, kind=KIND_COMPUTE, opcode=opcode, dur=cycles_ns(cm, cycles, engine),
        bytes=tuple(nbytes), loc=where, act_fn=act_fn, ports=_ports(cm, engine, (dst, *reads, *extra_writes)),
        perf_mode=f"{perf}x" if perf > 1 else None,
        text_pre=f"$S[{stream}]++@complete {text} dst={vtext(dst)} "
                 f"src={','.join(vtext(v) for v in reads) or '-'} "
                 f"{''.join(f'reduce_dst={vtext(v)} ' for v in extra_writes)}{dst.p1 - dst.p0}x{work}", text_post="")


def _dma(cm: CostModel, core: Core, key: tuple[Any, ...]) -> Template:
    (_, engine, prefix, hbm, chip, rows, cols, src_mem, dst_mem, where, sb_var, transpose) = key
    itemsize = DTYPES[chip[0].dtype].itemsize
    stream = STREAM_OF[engine]
    group = core.dma_group(prefix)
    if hbm is None:
        src, dst = chip
    elif hbm.side == "src":
        src, dst = None, chip[0]
    else:
        src, dst = chip[0], None
    # Neuron's DmaQueueType: software_dynamic for the DMAs GpSimd's software descriptor generation triggers, else
    # the direction (a simulated queue carries loads and stores alike: DmaQueuesInfo says "data")
    qtype = ("software_dynamic" if engine == E_GPSIMD else
             "input" if src_mem == HBM else ("output" if dst_mem == HBM else "data"))
    plan = DmaPlan(cm, rows=rows, chunk_bytes=cols * itemsize, group=group, prefix=prefix, queue_type=qtype,
                   src_mem=src_mem, dst_mem=dst_mem, variable=None if hbm is not None else sb_var, hbm=hbm,
                   rate_factor=cm.dma_transpose_factor(src_mem) if transpose else 1.0)
    total = rows * cols * itemsize
    b = [0] * 6
    b[0 if src_mem == HBM else 2] += total
    b[1 if dst_mem == HBM else 3] += total
    src_text = "" if src is None else vtext(src)
    dst_text = "" if dst is None else vtext(dst)
    head = (f"$S[{stream}]++@complete ${prefix}++@retire {'transpose ' if transpose else ''}"
            f"{rows}x{cols * itemsize}B {plan.n}pkt ")
    if hbm is None:
        pre, post = f"{head}src={src_text} dst={dst_text}", ""
    elif hbm.side == "src":
        pre, post = f"{head}src=", f" dst={dst_text}"
    else:
        pre, post = f"{head}src={src_text} dst=", ""
    return Template(key=key, engine=engine, stream=stream, kind=KIND_DMA, opcode="DMA_TRIGGER", dma=plan,
                    dur=cycles_ns(cm, cm.min_instruction_cycles, engine), bytes=tuple(b), loc=where,
                    text_pre=pre, text_post=post)


def _ldweights(cm: CostModel, _core: Core, key: tuple[Any, ...]) -> Template:
    (_, stat, where, transpose) = key
    k, m = stat.p1 - stat.p0, stat.f1 - stat.f0
    dt = DTYPES[stat.dtype]
    f32 = cm.mm_fp32_factor if dt.is_fp32 else 1.0
    cycles = max(cm.min_instruction_cycles, math.ceil(m * f32 / cm.ldweights_speedup))
    return Template(
        key=key, engine=E_TENSOR, stream=S_TENSOR, kind=KIND_COMPUTE, opcode="LDWEIGHTS",
        dur=cycles_ns(cm, cycles, E_TENSOR), bytes=(0, 0, k * m * dt.itemsize, 0, 0, 0), loc=where,
        tensor_type="TRANSPOSE" if transpose else "REGULAR",
        text_pre=f"$S[{S_TENSOR}]++@complete src={vtext(stat)} {k}x{m}", text_post="")


def flops_factor(cm: CostModel, dtype_name: str) -> float:
    """BF16-equivalent weight of a PE FLOP in ``dtype_name`` (Neuron's adjusted_flops): FP32 x4, FP8 the cost
    model's ``fp8_flops_factor`` (x1 on NeuronCore-v2, x0.5 on v3, whose PE array runs FP8 twice as fast)."""
    dt = DTYPES[dtype_name]
    return cm.fp8_flops_factor if dt.is_fp8 else dt.flops_factor


def _matmul(cm: CostModel, _core: Core, key: tuple[Any, ...]) -> Template:
    (_, st, mv, d, acc, where, double_row) = key
    k, m = st.p1 - st.p0, st.f1 - st.f0
    n = mv.f1 - mv.f0
    dt = DTYPES[mv.dtype]
    f32 = cm.mm_fp32_factor if dt.is_fp32 else 1.0
    # double_row (FP8 on NeuronCore-v3): two element pairs per PE and cycle; the minimum interval stays
    cycles = max(n / cm.pe_double_row_speedup if double_row else n, cm.mm_min_cycles) * f32
    raw = 2 * k * m * n
    return Template(
        key=key, engine=E_TENSOR, stream=S_MATRIX, kind=KIND_MATMUL, opcode="MATMUL", cycles=cycles,
        clock=cm.pe_clock_ghz, dur=cycles_ns(cm, cycles, E_TENSOR), flops_raw=raw,
        flops_adj=int(raw * flops_factor(cm, mv.dtype)),
        bytes=(0, 0, k * n * dt.itemsize, 0, m * n * 4 if acc else 0, m * n * 4), loc=where,
        tensor_type="REGULAR", perf_mode="double_row" if double_row else None,
        text_pre=f"$S[{S_MATRIX}]++@complete acc_flags={'accumulate' if acc else 'start'} "
                 f"{'perf_mode=double_row ' if double_row else ''}src={vtext(mv)} dst={vtext(d)} K={k} M={m} N={n}",
        text_post="")


def _transpose(cm: CostModel, _core: Core, key: tuple[Any, ...]) -> Template:
    (_, s, d, where) = key
    p, f = s.p1 - s.p0, s.f1 - s.f0
    dt = DTYPES[s.dtype]
    f32 = cm.mm_fp32_factor if dt.is_fp32 else 1.0
    cycles = max(p, cm.mm_min_cycles) * f32
    raw = 2 * p * f * p
    return Template(
        key=key, engine=E_TENSOR, stream=S_MATRIX, kind=KIND_MATMUL, opcode="TRANSPOSE", cycles=cycles,
        clock=cm.pe_clock_ghz, dur=cycles_ns(cm, cycles, E_TENSOR), flops_raw=raw,
        flops_adj=int(raw * flops_factor(cm, s.dtype)),
        bytes=(0, 0, 0, 0, 0, f * p * DTYPES[d.dtype].itemsize), loc=where, tensor_type="TRANSPOSE",
        text_pre=f"$S[{S_MATRIX}]++@complete src={vtext(s)},identity[{p}x{p}] dst={vtext(d)} {p}x{f}", text_post="")


def _barrier(cm: CostModel, _core: Core, key: tuple[Any, ...]) -> Template:
    return Template(key=key, engine=E_SYNC, stream=S_SYNC, kind=KIND_COMPUTE, opcode="EVENT_SEMAPHORE",
                    dur=cm.cycles_to_ns(cm.min_instruction_cycles, cm.neuroncore_clock_ghz), bytes=(0,) * 6, loc=None,
                    text_pre=f"$S[5]++@complete {END_BARRIER}", text_post="")


BUILDERS = {"EW": _elementwise, "DMA": _dma, "LDW": _ldweights, "MM": _matmul, "TR": _transpose, "BAR": _barrier}


def build(cm: CostModel, core: Core, key: tuple[Any, ...]) -> Template:
    """The template of ``key``."""
    return BUILDERS[key[0]](cm, core, key)


__all__ = ["HKey", "VKey", "build", "cycles_ns", "vtext"]
