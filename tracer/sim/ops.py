"""The operations a kernel can issue, each lowered to instructions on one engine with its cost.

NKI API -> instruction (engine, timeline track):

=====================  ==============================================================  =========================
``dma_copy``           DMA_TRIGGER (Sync, or the engine given) + packets on 16 DMA queues  HBM<->SBUF, SBUF<->SBUF
``dma_transpose``      the same, its rate scaled by the transpose efficiency              dma_transpose
``matmul``             LDWEIGHTS (Tensor) + MATMUL (TensorMatrix), accumulating in PSUM   nc_matmul
``transpose``          LDWEIGHTS + TRANSPOSE (TensorMatrix, type TRANSPOSE) into PSUM     nc_transpose
``activation``         ACTIVATE (Scalar): func(in * scale + bias), optional sum-reduce     activation(_reduce)
``tensor_tensor``      TENSOR_TENSOR (Vector or GpSimd)                                    tensor_tensor
``tensor_scalar``      TENSOR_SCALAR (Vector or GpSimd)                                    tensor_scalar
``tensor_reduce``      TENSOR_REDUCE (Vector) along the free axis                          tensor_reduce
``tensor_copy``        TENSOR_COPY (Vector, Scalar or GpSimd)                              tensor_copy
``memset`` / ``iota``  MEMSET / IOTA (GpSimd or Vector)                                    memset, iota
``partition_reduce``   PARTITION_REDUCE (GpSimd) across partitions                        tensor_partition_reduce
``affine_select``      AFFINE_SELECT (GpSimd): src where an affine predicate holds        affine_select
``bn_stats``           BN_STATS (Vector): count, mean, variance * count per partition       bn_stats
``bn_aggr``            BN_AGGR (Vector): mean and variance from bn_stats triples           bn_aggr
``tensor_scalar_reduce`` TENSOR_SCALAR_REDUCE (Vector): tensor_scalar and a row reduce     tensor_scalar_reduce
``scalar_tensor_tensor`` SCALAR_TENSOR_TENSOR (Vector): (data op0 scalar) op1 tile      scalar_tensor_tensor
``tensor_tensor_scan``   TENSOR_TENSOR_SCAN (Vector): a scan along the free axis        tensor_tensor_scan
``max8`` / ``find_index8`` MAX8 / FIND_INDEX8 (Vector): top 8 values, their positions  max8, nc_find_index8
``match_replace8``     MATCH_REPLACE8 (Vector): replace 8 found values                  nc_match_replace8
``select_reduce``      SELECT_REDUCE (Vector): on_true where predicate, else on_false   select_reduce
=====================  ==============================================================  =========================

The Vector / GpSimd operations are in :mod:`tracer.sim.ops_elementwise`.  Costs follow
``docs/cost-model.md``; every constant comes from :class:`~tracer.sim.arch.CostModel`.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from tracer.errors import KernelError
from tracer.sim import numerics as nm
from tracer.sim.memory import HBM, PSUM, SBUF, HbmTensor, HbmView, Tile, TileView, unwritten_box
from tracer.sim.records import E_GPSIMD, E_SCALAR, E_SYNC, E_VECTOR, S_VECTOR, HKey, VKey, dma_aux

if TYPE_CHECKING:
    from tracer.sim.context import KernelContext

_ENGINES = {"Vector": E_VECTOR, "Scalar": E_SCALAR, "GpSimd": E_GPSIMD, "Sync": E_SYNC}
View = Tile | TileView | HbmView
#: The largest finite float32: numbers an instruction takes (fills, scalars) are float32 on the engines.
FLOAT32_MAX = float(np.finfo(np.float32).max)


#: Instructions an operation issues, where not one: the PE array's LoadStationary (LDWEIGHTS), then the multiply.
INSTRUCTIONS_ISSUED = {"matmul": 2, "transpose": 2}


def _flag(value: Any, what: str, where: str) -> None:
    """KernelError on the kernel's line unless ``value`` is True or False (``accumulate="False"`` accumulated)."""
    if value is not True and value is not False and not isinstance(value, np.bool_):
        raise KernelError(f"{where}: {what} must be True or False, not {type(value).__name__} {str(value)[:40]!r}")


def _number(value: Any, what: str, where: str) -> float:
    """``value`` as a float32-sized float; KernelError on the kernel's line for anything but a real number (a
    string, None, a bool, a tile, an array) or a finite one float32 cannot hold (infinities and NaN pass)."""
    if type(value) is float or type(value) is int or (isinstance(value, numbers.Real) and not isinstance(value, bool)):
        try:   # (the ABC check is slow: the exact types first)
            x = float(value)
        except OverflowError:
            x = math.inf
        if abs(x) <= FLOAT32_MAX or (not math.isfinite(x) and not isinstance(value, numbers.Integral)):
            return x
        shown = f"{x:.3g}" if math.isfinite(x) else f"{str(value)[:20]}..."
        raise KernelError(f"{where}: {what} {shown} is beyond float32 (at most {FLOAT32_MAX:.4g} in magnitude); "
                          "use float('inf') for an infinity")
    shown = " ".join(str(value).split())[:40]
    raise KernelError(f"{where}: {what} must be a number, not {type(value).__name__} {shown!r}")


def _engine(name: str, allowed: tuple[str, ...], where: str) -> int:
    if name not in allowed:
        raise KernelError(f"{where}: engine {name!r} cannot run this operation; choose one of {', '.join(allowed)}")
    return _ENGINES[name]


def _view(x: Any, where: str, role: str) -> View:
    if isinstance(x, (Tile, TileView, HbmView)):
        return x
    if isinstance(x, HbmTensor):
        return x.full()
    raise KernelError(f"{where}: {role} must be a tile, a tile slice or an HBM tensor slice, not {type(x).__name__}")


def _onchip(x: Any, where: str, role: str, mems: tuple[str, ...] = (SBUF, PSUM)) -> Tile | TileView:
    v = _view(x, where, role)
    if v.mem not in mems:
        raise KernelError(f"{where}: {role} must be in {' or '.join(mems)}, not {v.mem}")
    return v  # type: ignore[return-value]


def _same_shape(where: str, **views: Any) -> tuple[int, int]:
    it = iter(views.values())
    first = next(it).shape
    for v in it:
        if v.shape != first:
            desc = ", ".join(f"{k} {x.shape[0]}x{x.shape[1]}" for k, x in views.items())
            raise KernelError(f"{where}: shape mismatch: {desc}")
    return first


def _column(x: Any, where: str, role: str, p: int) -> Tile | TileView:
    """``x`` as the ``[p, 1]`` on-chip view a row reduction writes (activation's ``reduce_dst``, ...)."""
    r = _onchip(x, where, role)
    if r.shape != (p, 1):
        raise KernelError(f"{where}: {role} must be [{p}, 1], got {r.shape[0]}x{r.shape[1]}")
    return r


def _key(v: Any) -> VKey:
    t = v.tile
    return VKey(t.mem, t.block.addr, t.dtype.name, v.p0, v.p1, v.f0, v.f1)


class OpsMixin:
    """The operations of :class:`~tracer.sim.context.KernelContext` (see the module docstring)."""

    # -- helpers ------------------------------------------------------------------------------------------
    def _require_written(self: KernelContext, v: Any, where: str, role: str) -> None:
        if v.mem == HBM:
            h = v.tensor
            if h.full_written:  # an input, anything in a timing-only run, an output or scratch written whole
                return
            box = h.unwritten_part(v.r0, v.r1, v.c0, v.c1)
            if box is not None:
                part = "" if box == (v.r0, v.r1, v.c0, v.c1) else \
                    f" (its part [{box[0]}:{box[1]}, {box[2]}:{box[3]}] was never written)"
                raise KernelError(f"{where}: {role} reads HBM {h.kind} tensor {h.name} (declared at {h.loc}) "
                                  f"[{v.r0}:{v.r1}, {v.c0}:{v.c1}] before the kernel wrote it{part}; it holds no "
                                  "values until a dma_copy stores them")
            return
        t = v.tile
        if not t.is_written(v):
            part = ""
            if t.written is not None:  # partly written: which part was not (it read as if none of it was)
                box = unwritten_box(t.written[v.p0:v.p1, v.f0:v.f1])
                if box is not None:
                    part = (f" (its part [{v.p0 + box[0]}:{v.p0 + box[1]}, {v.f0 + box[2]}:{v.f0 + box[3]}]"
                            " was never written)")
            raise KernelError(f"{where}: {role} reads tile {t.name} (allocated at {t.loc}) "
                              f"[{v.p0}:{v.p1}, {v.f0}:{v.f1}] before it was written{part}")

    def _value(self: KernelContext, v: Any) -> np.ndarray:
        if v.mem == HBM:
            return v.read()
        return v.tile.data[v.p0:v.p1, v.f0:v.f1]

    def _store(self: KernelContext, v: Any, values: np.ndarray) -> None:
        t = v.tile
        with np.errstate(over="ignore"):   # a value beyond the tile's type saturates to an infinity, silently
            t.data[v.p0:v.p1, v.f0:v.f1] = t.dtype.round(np.asarray(values, np.float32))

    def _operand(self: KernelContext, x: Any, where: str, role: str, p: int) -> tuple[Any, Any]:
        """A scale/bias/scalar operand: a Python number or a ``[p, 1]`` on-chip view."""
        if isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool):
            return _number(x, role, where), None
        if not isinstance(x, (Tile, TileView)) or x.mem == HBM:
            shown = x.mem if isinstance(x, (Tile, TileView, HbmView)) else \
                ("an HBM tensor" if isinstance(x, HbmTensor) else type(x).__name__)
            raise KernelError(f"{where}: {role} must be a number or a [{p}, 1] slice of an SBUF or PSUM tile, not "
                              f"{'a view of HBM' if shown == HBM else shown}"
                              f"{'; dma_copy it to SBUF first' if shown in (HBM, 'an HBM tensor') else ''}")
        v = _onchip(x, where, role)
        if v.shape != (p, 1):
            raise KernelError(f"{where}: {role} must be a number or a [{p}, 1] tile slice, "
                              f"got {v.shape[0]}x{v.shape[1]}")
        self._require_written(v, where, role)
        return ("tile", _key(v)), v

    def _elementwise(self: KernelContext, opcode: str, engine: int, where: str, dst: Any, reads: list[Any],  # noqa: PLR0917
                     n_inputs: int, key: tuple[Any, ...], text: str, *, act_fn: str | None = None,
                     perf: int = 1, extra_writes: tuple[Any, ...] = ()) -> None:
        """Issue a Vector/Scalar/GpSimd instruction of cost overhead + free_size * inputs / perf cycles."""
        cm = self.cm
        if engine == E_GPSIMD and any(v.mem == PSUM for v in (dst, *reads, *extra_writes)):
            raise KernelError(f"{where}: GpSimd cannot access PSUM; use the Vector or Scalar engine")
        dependent = False
        if engine == E_VECTOR and cm.dve_dependent_overhead_cycles:
            last = self.core.stream_seq[S_VECTOR]
            rec = self.fast.rec if self.fast is not None else None
            for v in reads:
                if v.mem != HBM:
                    p0, p1, f0, f1 = v.p0, v.p1, v.f0, v.f1
                    for w in v.tile.block.writers:
                        # the last Vector instruction's result only where this one reads it (another part of the
                        # tile, written just before, is no dependency)
                        if not (w[0] < p1 and p0 < w[1] and w[2] < f1 and f0 < w[3]):
                            continue
                        if rec is not None:
                            rec.vector_check(w[4], last)
                        if w[4][0] == S_VECTOR and w[4][1] == last:
                            dependent = True
        full_key = ("EW", opcode, engine, key, _key(dst), tuple(_key(v) for v in reads), perf, dependent, where,
                    n_inputs, text, act_fn, tuple(_key(v) for v in extra_writes))
        tid = self.core.template(full_key)
        self.issue(tid, reads, [dst, *extra_writes])
        dst.tile.mark_written(dst)
        for v in extra_writes:
            v.tile.mark_written(v)

    # -- DMA ---------------------------------------------------------------------------------------------------
    def dma_copy(self: KernelContext, dst: Any, src: Any, *, engine: str = "Sync") -> None:
        """Copy ``src`` to ``dst`` (HBM <-> SBUF or SBUF -> SBUF) with a DMA triggered from ``engine``.

        The transfer is split into packets (one per partition row, rows longer than ``dma_packet_bytes`` cut
        into several) spread over the 16 DMA queues of the trigger engine's queue group.
        """
        where = self.caller_location()
        eng = _engine(engine, ("Sync", "Scalar", "GpSimd"), where)
        d = _view(dst, where, "dma_copy dst")
        s = _view(src, where, "dma_copy src")
        if PSUM in (d.mem, s.mem):
            raise KernelError(f"{where}: DMA cannot access PSUM; copy PSUM to SBUF with tensor_copy first")
        if d.mem == HBM and s.mem == HBM:
            raise KernelError(f"{where}: HBM to HBM copies are not supported; stage the data through SBUF")
        if d.mem == HBM and d.bcast:
            raise KernelError(f"{where}: a broadcast view can only be a DMA source")
        rows, cols = _same_shape(where, dst=d, src=s)
        if d.dtype is not s.dtype:
            raise KernelError(f"{where}: DMA copies bytes and cannot convert {s.dtype.name} to {d.dtype.name}; "
                              "use tensor_copy to change the type")
        self._require_written(s, where, "dma_copy src")
        self._dma(where, eng, d, s, rows, cols, False)

    def dma_transpose(self: KernelContext, dst: Any, src: Any, *, engine: str = "Sync") -> None:
        """``dst[F, P] = src[P, F]^T`` by the DMA engines (nki.isa.dma_transpose), from HBM or SBUF into SBUF.

        Costs a ``dma_copy`` of ``dst``'s shape at ``dma_transpose_hbm_efficiency`` (from HBM) or
        ``dma_transpose_sbuf_efficiency`` (from SBUF) of the DMA rate; 2-byte types only (bf16, fp16), as NKI's
        DMA transpose.  The PE array's ``transpose`` is the other way: no DMA latency, but Tensor time and a PSUM
        bank, then a copy back to SBUF.
        """
        where = self.caller_location()
        eng = _engine(engine, ("Sync", "Scalar", "GpSimd"), where)
        d = _onchip(dst, where, "dma_transpose dst", (SBUF,))
        s = _view(src, where, "dma_transpose src")
        if s.mem == PSUM:
            raise KernelError(f"{where}: DMA cannot access PSUM; copy PSUM to SBUF with tensor_copy first")
        if s.mem == HBM and s.bcast:
            raise KernelError(f"{where}: dma_transpose cannot read a broadcast view; transpose the row itself")
        p, f = s.shape
        if d.shape != (f, p):
            raise KernelError(f"{where}: dma_transpose of a {p}x{f} source needs a {f}x{p} destination, "
                              f"not {d.shape[0]}x{d.shape[1]}")
        if d.dtype is not s.dtype:
            raise KernelError(f"{where}: DMA copies bytes and cannot convert {s.dtype.name} to {d.dtype.name}; "
                              "use tensor_copy to change the type")
        if s.dtype.itemsize != 2:
            raise KernelError(f"{where}: dma_transpose moves 2-byte elements (bf16, fp16), not {s.dtype.name}; "
                              "transpose on the PE array (transpose) or convert first (tensor_copy)")
        self._require_written(s, where, "dma_transpose src")
        self._dma(where, eng, d, s, f, p, True)

    def _dma(self: KernelContext, where: str, eng: int, d: Any, s: Any, rows: int, cols: int,  # noqa: PLR0917
             transpose: bool) -> None:
        """Issue a checked DMA from view ``s`` to view ``d`` (``rows`` x ``cols``: the destination's shape)."""
        hbm_view = s if s.mem == HBM else (d if d.mem == HBM else None)
        kind = "IO" if hbm_view is not None else "SB"
        trigger = {E_SYNC: "Sync", E_SCALAR: "Scalar", E_GPSIMD: "GpSimd"}[eng]
        prefix = f"q{trigger}{kind}"
        self.core.dma_group(prefix)
        if hbm_view is not None:
            t = hbm_view.tensor
            hbm = HKey("src" if hbm_view is s else "dst", t.shape[1], hbm_view.r1 - hbm_view.r0,
                       hbm_view.c1 - hbm_view.c0, hbm_view.bcast)
            aux = dma_aux(t.code, hbm_view.r0 * t.shape[1] + hbm_view.c0)
            sb_var = None
        else:
            hbm = None
            aux = -1
            sb_var = d.tile.name
        chip = tuple(_key(v) for v in (s, d) if v.mem != HBM)
        key = ("DMA", eng, prefix, hbm, chip, rows, cols, s.mem, d.mem, where, sb_var, transpose)
        tid = self.core.template(key)
        self.issue(tid, [s], [d], aux)
        if d.mem != HBM:
            d.tile.mark_written(d)
        if self.numerics:
            values = np.array(self._value(s), np.float32)
            if transpose:
                values = values.T
            if d.mem == HBM:
                d.tensor.data[d.r0:d.r1, d.c0:d.c1] = values
                d.tensor.mark_written(d)
            else:
                self._store(d, values)

    # -- Tensor engine -------------------------------------------------------------------------------------------
    def _ldweights(self: KernelContext, stat: Any, where: str, transpose: bool) -> None:
        tid = self.core.template(("LDW", _key(stat), where, transpose))
        self.issue(tid, [stat], [])

    def _psum_dst(self: KernelContext, dst: Any, where: str, shape: tuple[int, int], role: str) -> Any:
        d = _onchip(dst, where, role, (PSUM,))
        if d.shape != shape:
            raise KernelError(f"{where}: shape mismatch: {role} is {d.shape[0]}x{d.shape[1]}, "
                              f"the result is {shape[0]}x{shape[1]}")
        bank = self.psum.unit
        lo = d.tile.block.addr + d.f0 * d.dtype.itemsize
        hi = d.tile.block.addr + d.f1 * d.dtype.itemsize - 1
        if lo // bank != hi // bank:
            raise KernelError(f"{where}: {role} spans more than one PSUM bank ({bank} B per partition); a matmul "
                              f"result must fit in one bank (at most {bank // 4} fp32 columns)")
        return d

    def matmul(self: KernelContext, dst: Any, stationary: Any, moving: Any, *, accumulate: bool = True,
               perf_mode: str = "none") -> None:
        """``dst[M, N] (+)= stationary[K, M]^T @ moving[K, N]`` on the PE array (nc_matmul).

        Lowers to LDWEIGHTS (load the stationary tile into the array) and MATMUL (stream the moving tile),
        accumulating in fp32 in PSUM.  With ``accumulate`` (default) the result is added to ``dst``; a region
        never written since allocation counts as zero, so a fresh PSUM tile starts an accumulation group.
        ``perf_mode="double_row"`` (FP8 tiles, NeuronCore-v3: ``pe_double_row``) streams the moving tile
        ``pe_double_row_speedup`` times as fast.
        """
        where = self.caller_location()
        _flag(accumulate, "accumulate", where)
        cm = self.cm
        st = _onchip(stationary, where, "stationary", (SBUF,))
        mv = _onchip(moving, where, "moving", (SBUF,))
        k, m = st.shape
        k2, n = mv.shape
        if k != k2:
            raise KernelError(f"{where}: shape mismatch: stationary has {k} partitions (contraction), moving {k2}")
        if k > cm.pe_rows or m > cm.pe_cols:
            raise KernelError(f"{where}: stationary tile is {k}x{m}; the PE array takes at most "
                              f"{cm.pe_rows}x{cm.pe_cols}")
        if n > cm.mm_max_moving:
            raise KernelError(f"{where}: moving tile has {n} columns; at most {cm.mm_max_moving} (one PSUM bank)")
        if st.dtype is not mv.dtype:
            raise KernelError(f"{where}: stationary is {st.dtype.name} but moving is {mv.dtype.name}; "
                              "convert one with tensor_copy")
        if perf_mode not in ("none", "double_row"):
            raise KernelError(f"{where}: unknown matmul perf_mode {perf_mode!r}; choose none or double_row")
        double_row = perf_mode == "double_row"
        if double_row and not cm.pe_double_row:
            raise KernelError(f"{where}: perf_mode=double_row needs NeuronCore-v3 (trn2); {cm.arch}'s PE array has "
                              "no double-row mode")
        if double_row and not st.dtype.is_fp8:
            raise KernelError(f"{where}: perf_mode=double_row multiplies FP8 tiles (fp8_e4m3, fp8_e5m2), not "
                              f"{st.dtype.name}")
        d = self._psum_dst(dst, where, (m, n), "matmul dst")
        if d.dtype.name != "fp32":   # (the running sum of an accumulation group would be rounded at every step)
            raise KernelError(f"{where}: matmul dst {d.tile.name} is a {d.dtype.name} PSUM tile; the PE array "
                              "accumulates in fp32 (nc_matmul's results are always fp32): allocate it as "
                              "nc.psum_tile(..., \"fp32\") and convert when copying it out")
        self._require_written(st, where, "stationary")
        self._require_written(mv, where, "moving")
        self._ldweights(st, where, False)
        acc = bool(accumulate) and d.tile.is_written(d)
        partial = bool(accumulate) and not acc and d.tile.written is not None and \
            bool(d.tile.written[d.p0:d.p1, d.f0:d.f1].any())
        tid = self.core.template(("MM", _key(st), _key(mv), _key(d), acc or partial, where, double_row))
        self.issue(tid, [mv, d] if (acc or partial) else [mv], [d])
        if self.numerics:
            prod = nm.compute(np.matmul, self._value(st).T, self._value(mv))
            if acc or partial:
                prod = prod + self._value(d)
            self._store(d, prod)
        d.tile.mark_written(d)

    def transpose(self: KernelContext, dst: Any, src: Any) -> None:
        """``dst[F, P] = src[P, F]^T`` on the PE array (nc_transpose: multiply by the identity), into PSUM."""
        where = self.caller_location()
        cm = self.cm
        s = _onchip(src, where, "transpose src", (SBUF,))
        p, f = s.shape
        if p > cm.pe_rows or f > cm.pe_cols:
            raise KernelError(f"{where}: transpose source is {p}x{f}; at most {cm.pe_rows}x{cm.pe_cols}")
        d = self._psum_dst(dst, where, (f, p), "transpose dst")
        self._require_written(s, where, "transpose src")
        self._ldweights(s, where, True)
        tid = self.core.template(("TR", _key(s), _key(d), where))
        self.issue(tid, [], [d])
        if self.numerics:
            self._store(d, self._value(s).T)
        d.tile.mark_written(d)

    # -- Scalar engine -----------------------------------------------------------------------------------------------
    def activation(self: KernelContext, dst: Any, src: Any, func: str = "copy", *, scale: Any = 1.0,
                   bias: Any = 0.0, reduce_dst: Any = None) -> None:
        """``dst = func(src * scale + bias)`` on the Scalar engine (ACTIVATE).

        ``scale`` and ``bias`` are numbers or ``[P, 1]`` per-partition tiles (free: same cost as ``func(src)``).
        ``reduce_dst`` (a ``[P, 1]`` view) receives the sum of each output row (activation_reduce).
        """
        where = self.caller_location()
        fn = nm.lookup(nm.ACTIVATIONS, func, "activation function", where)
        d = _onchip(dst, where, "activation dst")
        s = _onchip(src, where, "activation src")
        p = _same_shape(where, dst=d, src=s)[0]
        self._require_written(s, where, "activation src")
        sc_key, sc_view = self._operand(scale, where, "scale", p)
        bi_key, bi_view = self._operand(bias, where, "bias", p)
        reads = [s] + [v for v in (sc_view, bi_view) if v is not None]
        extra = () if reduce_dst is None else (_column(reduce_dst, where, "reduce_dst", p),)
        self._elementwise("ACTIVATE", E_SCALAR, where, d, reads, 1, (func, sc_key, bi_key, bool(extra)),
                          f"func={func.upper()}", act_fn=func.upper(), extra_writes=extra)
        if self.numerics:
            sc = self._value(sc_view) if sc_view is not None else sc_key
            bi = self._value(bi_view) if bi_view is not None else bi_key
            out = nm.compute(fn, self._value(s) * sc + bi)
            self._store(d, out)
            if extra:
                self._store(extra[0], out.sum(axis=1, keepdims=True, dtype=np.float32))
