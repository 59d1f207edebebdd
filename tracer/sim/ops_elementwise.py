"""The Vector and GpSimd operations of the kernel API: element-wise, reduce, scan, statistics, top-8, fill and
select instructions.

Each is one instruction on one engine (see the table in :mod:`tracer.sim.ops`); the checks and the template keys
follow :mod:`tracer.sim.ops`, whose helpers they use, and the costs ``docs/cost-model.md`` ("Vector, Scalar, GpSimd").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tracer.errors import KernelError
from tracer.sim import numerics as nm
from tracer.sim.memory import PSUM, SBUF
from tracer.sim.ops import _column, _engine, _flag, _number, _onchip, _same_shape
from tracer.sim.records import E_GPSIMD, E_SCALAR, E_VECTOR

#: The most elements per partition one bn_stats reads (NKI's nl.tile_size.bn_stats_fmax).
BN_STATS_FMAX = 512
#: The elements per partition max8 and find_index8 read (NKI: 8 to 16,384).
TOP8_MIN, TOP8_MAX = 8, 16384

if TYPE_CHECKING:
    from tracer.sim.context import KernelContext


class ElementwiseOpsMixin:
    """The Vector / GpSimd operations of :class:`~tracer.sim.context.KernelContext`."""

    def _perf_mode(self: KernelContext, views: list[Any], operands: tuple[Any, ...] = ()) -> int:
        """Trn2 DVE performance mode: 4x on 16-bit SBUF data, 2x when PSUM is involved (the data's or a [P, 1]
        operand's), else 1x."""
        cm = self.cm
        if cm.dve_perf_mode_max <= 1 or any(v.dtype.itemsize != 2 for v in views):
            return 1
        psum = any(v.mem == PSUM for v in views) or any(v is not None and v.mem == PSUM for v in operands)
        return min(cm.dve_perf_mode_max, 2 if psum else 4)

    def tensor_tensor(self: KernelContext, dst: Any, a: Any, b: Any, op: str = "add", *,
                      engine: str = "Vector") -> None:
        """``dst = a <op> b`` element-wise (op: add, subtract, multiply, divide, max, min, or a comparison)."""
        where = self.caller_location()
        eng = _engine(engine, ("Vector", "GpSimd"), where)
        fn = nm.lookup(nm.BINARY, op, "tensor_tensor op", where)
        d, va, vb, _shape = self._two_inputs(where, "tensor_tensor", dst, ("a", a), ("b", b))
        self._elementwise("TENSOR_TENSOR", eng, where, d, [va, vb], 2, (op,), f"op={op}")
        if self.numerics:
            self._store(d, nm.compute(fn, self._value(va), self._value(vb)))

    def tensor_scalar(self: KernelContext, dst: Any, src: Any, op: str, operand: Any, *,
                      reverse: bool = False, op1: str | None = None, operand1: Any = None, reverse1: bool = False,
                      engine: str = "Vector") -> None:
        """``dst = (src <op> operand) <op1> operand1`` with numbers or ``[P, 1]`` per-partition operands.

        NKI's ``tensor_scalar``: ``op1``/``operand1`` (both or neither) fuse a second operator at no extra cost;
        ``reverse=True`` computes ``operand <op> src``, ``reverse1=True`` ``operand1 <op1> (...)``.
        """
        where = self.caller_location()
        eng = _engine(engine, ("Vector", "GpSimd"), where)
        fn = nm.lookup(nm.BINARY, op, "tensor_scalar op", where)
        _flag(reverse, "reverse", where)
        _flag(reverse1, "reverse1", where)
        if (op1 is None) != (operand1 is None):
            given, missing = ("op1", "operand1") if operand1 is None else ("operand1", "op1")
            raise KernelError(f"{where}: tensor_scalar got {given} without {missing}; a second operator needs both "
                              "(NKI's op1 and operand1)")
        if reverse1 and op1 is None:
            raise KernelError(f"{where}: tensor_scalar got reverse1=True without a second operator (op1, operand1)")
        fn1 = nm.lookup(nm.BINARY, op1, "tensor_scalar op1", where) if op1 is not None else None
        d = _onchip(dst, where, "dst")
        s = _onchip(src, where, "src")
        p = _same_shape(where, dst=d, src=s)[0]
        self._require_written(s, where, "src")
        ok, ov = self._operand(operand, where, "operand", p)
        ok1, ov1 = self._operand(operand1, where, "operand1", p) if fn1 is not None else (None, None)
        reads = [s] + [v for v in (ov, ov1) if v is not None]
        perf = self._perf_mode([d, s], (ov, ov1)) if eng == E_VECTOR else 1
        text = f"op={op}{' reversed' if reverse else ''}"
        if fn1 is not None:
            text += f" op1={op1}{' reversed' if reverse1 else ''}"
        self._elementwise("TENSOR_SCALAR", eng, where, d, reads, 1, (op, ok, bool(reverse), op1, ok1, bool(reverse1)),
                          text, perf=perf)
        if self.numerics:
            x = self._value(ov) if ov is not None else ok
            out = nm.compute(fn, x, self._value(s)) if reverse else nm.compute(fn, self._value(s), x)
            if fn1 is not None:
                x1 = self._value(ov1) if ov1 is not None else ok1
                out = nm.compute(fn1, x1, out) if reverse1 else nm.compute(fn1, out, x1)
            self._store(d, out)

    def tensor_scalar_reduce(self: KernelContext, dst: Any, src: Any, op: str, operand: Any, *,
                             reduce_dst: Any, reduce_op: str = "add", reverse: bool = False) -> None:
        """``dst = src <op> operand`` (as ``tensor_scalar`` with one operator) and ``reduce_dst[P, 1]`` = its
        ``reduce_op`` along the free axis, in one Vector instruction (NKI's ``tensor_scalar_reduce``)."""
        where = self.caller_location()
        fn = nm.lookup(nm.BINARY, op, "tensor_scalar_reduce op", where)
        rfn = nm.lookup(nm.REDUCE, reduce_op, "tensor_scalar_reduce reduce_op", where)
        _flag(reverse, "reverse", where)
        d = _onchip(dst, where, "dst")
        s = _onchip(src, where, "src")
        p = _same_shape(where, dst=d, src=s)[0]
        r = _column(reduce_dst, where, "reduce_dst", p)
        self._require_written(s, where, "src")
        ok, ov = self._operand(operand, where, "operand", p)
        reads = [s] + ([ov] if ov is not None else [])
        self._elementwise("TENSOR_SCALAR_REDUCE", E_VECTOR, where, d, reads, 1, (op, ok, bool(reverse), reduce_op),
                          f"op={op}{' reversed' if reverse else ''} reduce={reduce_op}", extra_writes=(r,))
        if self.numerics:
            x = self._value(ov) if ov is not None else ok
            out = nm.compute(fn, x, self._value(s)) if reverse else nm.compute(fn, self._value(s), x)
            self._store(d, out)
            # (the reduction of the result as written: rounded to dst's type first)
            self._store(r, nm.compute(lambda v: rfn(v, axis=1, keepdims=True), self._value(d)))

    def scalar_tensor_tensor(self: KernelContext, dst: Any, data: Any, op0: str, operand0: Any,  # noqa: PLR0917
                             op1: str, operand1: Any, *, reverse0: bool = False, reverse1: bool = False) -> None:
        """``dst = (data <op0> operand0) <op1> operand1`` on the Vector engine (NKI's ``scalar_tensor_tensor``):
        ``operand0`` a number or a ``[P, 1]`` tile, ``operand1`` a tile of ``data``'s shape; ``reverse0`` /
        ``reverse1`` put the operand on the left of its operator."""
        where = self.caller_location()
        fn0, fn1 = _two_ops(where, "scalar_tensor_tensor", op0, op1, reverse0, reverse1)
        d, v, o1, (p, n) = self._two_inputs(where, "scalar_tensor_tensor", dst, ("data", data), ("operand1", operand1))
        ok, ov = self._operand(operand0, where, "operand0", p)
        reads = [v, o1] + ([ov] if ov is not None else [])
        # NKI's estimate: N cycles for bf16 data and operand1 with subtract then multiply and an even N, else 2N
        fast = (v.dtype.name == o1.dtype.name == "bf16" and op0 == "subtract" and op1 == "multiply"
                and n % 2 == 0)
        self._elementwise("SCALAR_TENSOR_TENSOR", E_VECTOR, where, d, reads, 1 if fast else 2,
                          (op0, ok, bool(reverse0), op1, bool(reverse1)), _ops_text(op0, reverse0, op1, reverse1))
        if self.numerics:
            x = self._value(ov) if ov is not None else ok
            t = nm.compute(fn0, x, self._value(v)) if reverse0 else nm.compute(fn0, self._value(v), x)
            y = self._value(o1)
            self._store(d, nm.compute(fn1, y, t) if reverse1 else nm.compute(fn1, t, y))

    def select_reduce(self: KernelContext, dst: Any, predicate: Any, on_true: Any, on_false: Any, *,
                      reduce_res: Any = None, reduce_op: str = "max", reverse_pred: bool = False) -> None:
        """``dst = on_true`` where ``predicate`` is nonzero, else ``on_false`` (a number or a ``[P, 1]`` tile), and
        ``reduce_res[P, 1]`` = the result's row max, on the Vector engine (NKI's ``select_reduce``; ``reverse_pred``
        inverts the predicate).  NKI's predicate is an integer tile; trnprof's types are floating, so any nonzero
        value is true (a comparison's 1.0 / 0.0)."""
        where = self.caller_location()
        _flag(reverse_pred, "reverse_pred", where)
        if reduce_op != "max":
            raise KernelError(f"{where}: select_reduce reduces with max only (NKI's reduce_op), not {reduce_op!r}")
        d, pv, tv, (p, _n) = self._two_inputs(where, "select_reduce", dst, ("predicate", predicate),
                                             ("on_true", on_true))
        fk, fv = self._operand(on_false, where, "on_false", p)
        extra = () if reduce_res is None else (_column(reduce_res, where, "reduce_res", p),)
        reads = [pv, tv] + ([fv] if fv is not None else [])
        self._elementwise("SELECT_REDUCE", E_VECTOR, where, d, reads, 2, (fk, bool(reverse_pred), bool(extra)),
                          f"select{' reversed' if reverse_pred else ''}{' reduce=max' if extra else ''}",
                          extra_writes=extra)
        if self.numerics:
            keep = np.asarray(self._value(pv)) != 0
            if reverse_pred:
                keep = ~keep
            other = self._value(fv) if fv is not None else np.float32(fk)
            self._store(d, np.where(keep, self._value(tv), other))
            if extra:
                self._store(extra[0], np.max(self._value(d), axis=1, keepdims=True))

    def tensor_tensor_scan(self: KernelContext, dst: Any, data0: Any, data1: Any, initial: Any,  # noqa: PLR0917
                           op0: str, op1: str, *, reverse0: bool = False, reverse1: bool = False) -> None:
        """A scan along the free axis on the Vector engine (NKI's ``tensor_tensor_scan``):
        ``dst[:, i] = (data0[:, i] <op0> dst[:, i-1]) <op1> data1[:, i]``, with ``initial`` (a number or a
        ``[P, 1]`` tile) before column 0; ``reverse0`` / ``reverse1`` swap each operator's operands."""
        where = self.caller_location()
        fn0, fn1 = _two_ops(where, "tensor_tensor_scan", op0, op1, reverse0, reverse1)
        d, a, b, (p, n) = self._two_inputs(where, "tensor_tensor_scan", dst, ("data0", data0), ("data1", data1))
        ik, iv = self._operand(initial, where, "initial", p)
        reads = [a, b] + ([iv] if iv is not None else [])
        self._elementwise("TENSOR_TENSOR_SCAN", E_VECTOR, where, d, reads, 2,
                          (ik, op0, bool(reverse0), op1, bool(reverse1)), _ops_text(op0, reverse0, op1, reverse1))
        if self.numerics:
            x0, x1 = self._value(a), self._value(b)
            prev = np.broadcast_to(np.asarray(self._value(iv) if iv is not None else ik, np.float32), (p, 1))[:, 0]
            out = np.empty((p, n), np.float32)
            for i in range(n):   # in float32, column by column, as the engine computes
                t = nm.compute(fn0, prev, x0[:, i]) if reverse0 else nm.compute(fn0, x0[:, i], prev)
                prev = out[:, i] = nm.compute(fn1, x1[:, i], t) if reverse1 else nm.compute(fn1, t, x1[:, i])
            self._store(d, out)

    def tensor_reduce(self: KernelContext, dst: Any, src: Any, op: str = "add", *, negate: bool = False) -> None:
        """``dst[P, 1] = reduce_op(src[P, F])`` along the free axis on the Vector engine (optionally negated)."""
        where = self.caller_location()
        _flag(negate, "negate", where)
        fn = nm.lookup(nm.REDUCE, op, "tensor_reduce op", where)
        d = _onchip(dst, where, "dst")
        s = _onchip(src, where, "src")
        if d.shape != (s.shape[0], 1):
            raise KernelError(f"{where}: shape mismatch: reducing {s.shape[0]}x{s.shape[1]} needs a "
                              f"[{s.shape[0]}, 1] dst, got {d.shape[0]}x{d.shape[1]}")
        self._require_written(s, where, "src")
        self._elementwise("TENSOR_REDUCE", E_VECTOR, where, d, [s], 1, (op, negate), f"op={op}")
        if self.numerics:
            out = fn(self._value(s), axis=1, keepdims=True)
            self._store(d, -out if negate else out)

    def tensor_copy(self: KernelContext, dst: Any, src: Any, *, engine: str = "Vector") -> None:
        """``dst = src`` (with type conversion) on the Vector, Scalar or GpSimd engine; PSUM -> SBUF too."""
        where = self.caller_location()
        eng = _engine(engine, ("Vector", "Scalar", "GpSimd"), where)
        d = _onchip(dst, where, "dst")
        s = _onchip(src, where, "src")
        _same_shape(where, dst=d, src=s)
        self._require_written(s, where, "src")
        perf = self._perf_mode([d, s]) if eng == E_VECTOR else 1
        opcode = "ACTIVATE" if eng == E_SCALAR else "TENSOR_COPY"
        self._elementwise(opcode, eng, where, d, [s], 1, (), "copy", perf=perf,
                          act_fn="COPY" if eng == E_SCALAR else None)
        if self.numerics:
            self._store(d, self._value(s))

    def memset(self: KernelContext, dst: Any, value: float, *, engine: str = "GpSimd") -> None:
        """Fill ``dst`` with ``value``."""
        where = self.caller_location()
        eng = _engine(engine, ("GpSimd", "Vector"), where)
        d = _onchip(dst, where, "dst")
        value = _number(value, "memset value", where)
        self._elementwise("MEMSET", eng, where, d, [], 1, (value,), f"value={value}")
        if self.numerics:
            self._store(d, np.full(d.shape, value, np.float32))

    def iota(self: KernelContext, dst: Any, *, base: float = 0, partition_step: float = 0,
             free_step: float = 1) -> None:
        """``dst[p, f] = base + p * partition_step + f * free_step`` on GpSimd."""
        where = self.caller_location()
        d = _onchip(dst, where, "dst")
        key = (_number(base, "iota base", where), _number(partition_step, "iota partition_step", where),
               _number(free_step, "iota free_step", where))
        self._elementwise("IOTA", E_GPSIMD, where, d, [], 1, key, f"base={base} step={partition_step},{free_step}")
        if self.numerics:
            p, f = d.shape
            self._store(d, base + np.arange(p)[:, None] * partition_step + np.arange(f)[None, :] * free_step)

    def partition_reduce(self: KernelContext, dst: Any, src: Any, op: str = "add") -> None:
        """``dst[1, F] = reduce_op over partitions of src[P, F]`` on GpSimd (tensor_partition_reduce)."""
        where = self.caller_location()
        fn = nm.lookup(nm.REDUCE, op, "partition_reduce op", where)
        d = _onchip(dst, where, "dst", (SBUF,))
        s = _onchip(src, where, "src", (SBUF,))
        if d.shape != (1, s.shape[1]):
            raise KernelError(f"{where}: shape mismatch: reducing {s.shape[0]}x{s.shape[1]} over partitions needs "
                              f"a [1, {s.shape[1]}] dst, got {d.shape[0]}x{d.shape[1]}")
        self._require_written(s, where, "src")
        self._elementwise("PARTITION_REDUCE", E_GPSIMD, where, d, [s], 1, (op,), f"op={op}")
        if self.numerics:
            self._store(d, fn(self._value(s), axis=0, keepdims=True))

    def affine_select(self: KernelContext, dst: Any, src: Any, on_false_value: float, *,
                      cmp: str, offset: int = 0, channel_multiplier: int = 0, step: int = 0) -> None:
        """``dst[p, f] = src[p, f]`` where ``cmp(offset + p * channel_multiplier + f * step, 0)``, else
        ``on_false_value``, on GpSimd (NKI's ``affine_select``; its ``pattern`` is ``[[step, F]]``).

        ``cmp`` has no default (NKI's ``cmp_op`` defaults to ``equal``, its older API to none: name it).  The
        predicate is computed in the engine, so it costs no input: a causal mask of attention scores, where query
        ``q0 + p`` may see key ``k0 + f`` when ``(q0 - k0) + p - f >= 0``, is
        ``affine_select(s, s, -3e38, cmp="greater_equal", offset=q0 - k0, channel_multiplier=1, step=-1)``.
        """
        where = self.caller_location()
        cmp_fn = nm.lookup(nm.COMPARE, cmp, "affine_select cmp", where)
        coeffs = tuple(_integer(x, what, where) for x, what in ((offset, "offset"),
                                                                (channel_multiplier, "channel_multiplier"),
                                                                (step, "step")))
        fill = _number(on_false_value, "on_false_value", where)
        d = _onchip(dst, where, "dst", (SBUF,))
        s = _onchip(src, where, "src", (SBUF,))
        _same_shape(where, dst=d, src=s)
        self._require_written(s, where, "src")
        off, cm_, st = coeffs
        self._elementwise("AFFINE_SELECT", E_GPSIMD, where, d, [s], 1, (*coeffs, cmp, fill),
                          f"cmp={cmp} offset={off} channel_multiplier={cm_} step={st} false={fill:g}")
        if self.numerics:
            p, f = d.shape
            pred = cmp_fn(off + np.arange(p)[:, None] * cm_ + np.arange(f)[None, :] * st, 0)
            self._store(d, np.where(pred, self._value(s), np.float32(fill)))

    def bn_stats(self: KernelContext, dst: Any, src: Any) -> None:
        """``dst[P, 6]``: count, mean and variance * count of each partition's even elements of ``src``, then of its
        odd ones, on the Vector engine (NKI's ``bn_stats``; at most 512 elements per partition).  ``bn_aggr``
        combines one or more of them into a mean and a variance."""
        where = self.caller_location()
        d = _onchip(dst, where, "bn_stats dst")
        s = _onchip(src, where, "bn_stats src")
        p, n = s.shape
        if n > BN_STATS_FMAX:
            raise KernelError(f"{where}: bn_stats reads at most {BN_STATS_FMAX} elements per partition "
                              f"(nl.tile_size.bn_stats_fmax), not {n}: call it on each {BN_STATS_FMAX}-column slice "
                              "into its own 6 columns of one tile and aggregate them with one bn_aggr")
        if d.shape != (p, 6):
            raise KernelError(f"{where}: shape mismatch: bn_stats of {p}x{n} writes a [{p}, 6] dst, got "
                              f"{d.shape[0]}x{d.shape[1]}")
        self._require_written(s, where, "bn_stats src")
        self._elementwise("BN_STATS", E_VECTOR, where, d, [s], 1, (), "stats=6")
        if self.numerics:
            x = np.asarray(self._value(s), np.float32)
            out = np.zeros((p, 6), np.float32)
            for k, half in enumerate((x[:, 0::2], x[:, 1::2])):
                c = half.shape[1]
                if c:
                    mean = half.mean(axis=1, dtype=np.float32)
                    out[:, 3 * k] = c
                    out[:, 3 * k + 1] = mean
                    out[:, 3 * k + 2] = np.square(half - mean[:, None]).sum(axis=1, dtype=np.float32)
            self._store(d, out)

    def bn_aggr(self: KernelContext, dst: Any, src: Any) -> None:
        """``dst[P, 2]`` = the mean and the (population) variance of each partition, aggregated from ``src``'s
        (count, mean, variance * count) triples written by ``bn_stats``, on the Vector engine (NKI's ``bn_aggr``)."""
        where = self.caller_location()
        d = _onchip(dst, where, "bn_aggr dst")
        s = _onchip(src, where, "bn_aggr src")
        p, n = s.shape
        if n % 3:
            raise KernelError(f"{where}: bn_aggr reads (count, mean, variance * count) triples: src has {n} elements "
                              "per partition, not a multiple of 3")
        if d.shape != (p, 2):
            raise KernelError(f"{where}: shape mismatch: bn_aggr of {p}x{n} writes a [{p}, 2] dst (mean, variance), "
                              f"got {d.shape[0]}x{d.shape[1]}")
        self._require_written(s, where, "bn_aggr src")
        self._elementwise("BN_AGGR", E_VECTOR, where, d, [s], 1, (), f"triples={n // 3}")
        if self.numerics:
            t = np.asarray(self._value(s), np.float32).reshape(p, n // 3, 3)
            count, mean, m2 = t[:, :, 0], t[:, :, 1], t[:, :, 2]
            with np.errstate(all="ignore"):  # no elements at all: NaN, as the mean of nothing
                total = count.sum(axis=1, dtype=np.float32)
                mu = (count * mean).sum(axis=1, dtype=np.float32) / total
                var = (m2.sum(axis=1, dtype=np.float32)
                       + (count * np.square(mean - mu[:, None])).sum(axis=1, dtype=np.float32)) / total
            self._store(d, np.stack([mu, var], axis=1))

    def max8(self: KernelContext, dst: Any, src: Any) -> None:
        """``dst[P, 8]`` = the 8 largest values of each partition of ``src``, largest first, on the Vector engine
        (NKI's ``max8``; ``src`` holds 8 to 16,384 elements per partition)."""
        where = self.caller_location()
        d = _onchip(dst, where, "max8 dst")
        s, p, n = self._top8_source(where, "max8", src, "src")
        _top8_out(where, "max8", d, p, n)
        self._elementwise("MAX8", E_VECTOR, where, d, [s], 1, (), "top=8")
        if self.numerics:
            self._store(d, -np.sort(-np.asarray(self._value(s), np.float32), axis=1)[:, :8])

    def find_index8(self: KernelContext, dst: Any, data: Any, vals: Any) -> None:
        """``dst[P, 8]`` = the position along the free axis of each of ``vals[P, 8]`` in ``data`` (-1 where there is
        none), on the Vector engine (NKI's ``nc_find_index8``, after ``max8``): a value's first position; a value
        ``vals`` holds k times gets its first k positions, in ascending order across its columns (NKI's pairing).

        ``dst`` must be fp32: NKI writes uint32, and trnprof's tiles hold floating types only (fp32 holds every
        position up to 16,384 exactly)."""
        where = self.caller_location()
        d = _onchip(dst, where, "find_index8 dst")
        s, v, p, n = self._top8_inputs(where, "find_index8", data, vals)
        _top8_out(where, "find_index8", d, p, n, positions=True)
        self._elementwise("FIND_INDEX8", E_VECTOR, where, d, [s, v], 1, (), "find=8")
        if self.numerics:
            pos = _positions(np.asarray(self._value(s), np.float32), np.asarray(self._value(v), np.float32), False)
            self._store(d, pos.astype(np.float32))

    def match_replace8(self: KernelContext, dst: Any, data: Any, vals: Any, imm: float, *,
                       dst_idx: Any = None) -> None:
        """``dst`` = ``data`` with one occurrence of each of ``vals[P, 8]`` replaced by ``imm``, and (``dst_idx``, an
        fp32 ``[P, 8]`` tile) their positions, -1 for a value not found, on the Vector engine (NKI's
        ``nc_match_replace8``: ``max8`` then this, again and again, finds the top k for k > 8).  A value ``vals``
        holds k times replaces its first k occurrences; NKI pairs them with its columns the other way round from
        ``find_index8``: the first position goes to the last of those columns."""
        where = self.caller_location()
        fill = _number(imm, "imm", where)
        d = _onchip(dst, where, "match_replace8 dst")
        s, v, p, n = self._top8_inputs(where, "match_replace8", data, vals)
        if d.shape != s.shape:
            raise KernelError(f"{where}: shape mismatch: match_replace8 writes dst {d.shape[0]}x{d.shape[1]} in "
                              f"data's shape {s.shape[0]}x{s.shape[1]}")
        extra: tuple[Any, ...] = ()
        if dst_idx is not None:
            r = _onchip(dst_idx, where, "match_replace8 dst_idx")
            _top8_out(where, "match_replace8", r, p, n, positions=True, role="dst_idx")
            extra = (r,)
        self._elementwise("MATCH_REPLACE8", E_VECTOR, where, d, [s, v], 1, (fill,), f"replace=8 imm={fill:g}",
                          extra_writes=extra)
        if self.numerics:
            x = np.array(self._value(s), np.float32)
            pos = _positions(x, np.asarray(self._value(v), np.float32), True)
            rows, cols = np.nonzero(pos >= 0)
            x[rows, pos[rows, cols]] = fill
            self._store(d, x)
            if extra:
                self._store(extra[0], pos.astype(np.float32))

    def _top8_source(self: KernelContext, where: str, what: str, x: Any, role: str) -> tuple[Any, int, int]:
        """``x`` as the written on-chip view max8 / find_index8 / match_replace8 search, of 8 to 16,384 elements per
        partition; and its shape."""
        s = _onchip(x, where, f"{what} {role}")
        p, n = s.shape
        if not TOP8_MIN <= n <= TOP8_MAX:
            raise KernelError(f"{where}: {what} reads {TOP8_MIN} to {TOP8_MAX:,} elements per partition, not {n:,}")
        self._require_written(s, where, f"{what} {role}")
        return s, p, n

    def _top8_inputs(self: KernelContext, where: str, what: str, data: Any, vals: Any) -> tuple[Any, Any, int, int]:
        """``data`` (as :meth:`_top8_source`) and the ``[P, 8]`` ``vals`` of find_index8 / match_replace8, both
        written; and data's shape."""
        s, p, n = self._top8_source(where, what, data, "data")
        v = _onchip(vals, where, f"{what} vals")
        if v.shape != (p, 8):
            raise KernelError(f"{where}: {what} vals must be [{p}, 8] (what max8 writes), got "
                              f"{v.shape[0]}x{v.shape[1]}")
        self._require_written(v, where, f"{what} vals")
        return s, v, p, n

    def _two_inputs(self: KernelContext, where: str, what: str, dst: Any, a: tuple[str, Any],
                    b: tuple[str, Any]) -> tuple[Any, Any, Any, tuple[int, int]]:
        """``dst`` and the two inputs ``(name, value)`` as on-chip views of one shape, at most one input in PSUM
        (as NKI's two-input instructions), both inputs written; and that shape."""
        (na, xa), (nb, xb) = a, b
        d = _onchip(dst, where, "dst")
        va = _onchip(xa, where, na)
        vb = _onchip(xb, where, nb)
        shape = _same_shape(where, dst=d, **{na: va, nb: vb})
        if va.mem == PSUM and vb.mem == PSUM:
            raise KernelError(f"{where}: {what} reads {na} and {nb} both from PSUM; at most one input may be in PSUM "
                              f"(NKI's {what}): copy one to SBUF first (tensor_copy)")
        self._require_written(va, where, na)
        self._require_written(vb, where, nb)
        return d, va, vb, shape


def _top8_out(where: str, what: str, d: Any, p: int, n: int, *, positions: bool = False,
              role: str = "dst") -> None:
    """Refuse a ``d`` that is not the ``[p, 8]`` result of max8 / find_index8 / match_replace8 (an fp32 tile for
    ``positions``: NKI writes uint32)."""
    if d.shape != (p, 8):
        raise KernelError(f"{where}: shape mismatch: {what} of {p}x{n} writes a [{p}, 8] {role}, got "
                          f"{d.shape[0]}x{d.shape[1]}")
    if positions and d.dtype.name != "fp32":
        raise KernelError(f"{where}: {what} writes positions: {role} must be an fp32 tile, not "
                          f"{d.dtype.name} (NKI writes uint32; trnprof has floating types only)")


def _positions(x: np.ndarray, vals: np.ndarray, descending: bool) -> np.ndarray:
    """Per partition, the position in ``x`` of each of the 8 ``vals`` (-1: none left): a value held k times takes its
    first k positions, ascending across its columns (find_index8) or descending (match_replace8, ``descending``)."""
    out = np.full(vals.shape, -1, np.int64)
    for p in range(x.shape[0]):
        row = x[p]
        for v in np.unique(vals[p]):
            cols = np.flatnonzero(vals[p] == v)
            found = np.flatnonzero(row == v)[:len(cols)]
            if descending:
                cols = cols[::-1]
            out[p, cols[:len(found)]] = found
    return out


def _two_ops(where: str, what: str, op0: str, op1: str, reverse0: Any, reverse1: Any) -> tuple[Any, Any]:  # noqa: PLR0917
    """The functions of an instruction's two operators, once both are known and both reverse flags are booleans."""
    fn0 = nm.lookup(nm.BINARY, op0, f"{what} op0", where)
    fn1 = nm.lookup(nm.BINARY, op1, f"{what} op1", where)
    _flag(reverse0, "reverse0", where)
    _flag(reverse1, "reverse1", where)
    return fn0, fn1


def _ops_text(op0: str, reverse0: bool, op1: str, reverse1: bool) -> str:
    """The operands text of a two-operator instruction: ``op0=subtract reversed op1=multiply``."""
    return f"op0={op0}{' reversed' if reverse0 else ''} op1={op1}{' reversed' if reverse1 else ''}"


def _integer(value: Any, what: str, where: str) -> int:
    """``value`` as an int32 (an affine predicate's coefficients are NKI's int32); KernelError on the kernel's
    line for anything else (a bool, a fraction, a string, a number beyond int32)."""
    if hasattr(value, "_need"):  # a symbolic loop index: its own error says which loop kind gives the value
        return int(value)
    shown = " ".join(str(value).split())[:40]
    whole = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    integral = isinstance(value, (float, np.floating)) and bool(np.isfinite(value)) and float(value).is_integer()
    if not (whole or integral):
        raise KernelError(f"{where}: affine_select {what} must be an integer, not {type(value).__name__} {shown!r}")
    n = int(value)
    if not -2 ** 31 <= n < 2 ** 31:
        raise KernelError(f"{where}: affine_select {what} {shown} does not fit int32 (NKI's affine expressions are "
                          "int32)")
    return n
