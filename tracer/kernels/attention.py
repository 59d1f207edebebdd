"""Flash-style attention: QK^T, online softmax and PV per 128-query block, never materialising the scores."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tracer.kernels import kernel
from tracer.kernels._common import multiple, require

NEG_INF = -3.0e38


def reference(inputs: dict[str, np.ndarray], *, causal: bool = False, **_: Any) -> dict[str, np.ndarray]:
    """softmax(Q K^T / sqrt(d)) V in float64 (Q = q_t^T, K = k_t^T); causal: query i sees keys 0..i only."""
    q = inputs["q_t"].astype(np.float64).T
    k = inputs["k_t"].astype(np.float64).T
    v = inputs["v"].astype(np.float64)
    s = q @ k.T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return {"o": (p / p.sum(axis=1, keepdims=True)) @ v}


@kernel(reference=reference)
def attention(nc: Any, *, seq: int = 1024, head_dim: int = 128, kv_block: int = 128, dtype: str = "bf16",
              probs_transpose: str = "pe", causal: bool = False) -> None:
    """Single-head flash attention O = softmax(Q K^T / sqrt(d)) V, Q and K given transposed (q_t, k_t: [d, seq]).

    Per 128-query block, for each kv block: S = Q K^T on the PE array into PSUM; the running max, max(rowmax(S) *
    scale, m), in one two-operator tensor_scalar (Vector); P = exp(S*scale - m) with its row sum fused (Scalar);
    P^T by a PE transpose into PSUM and a copy back to SBUF (``probs_transpose="pe"``) or by a DMA transpose SBUF to
    SBUF triggered from GpSimd (``"dma"``, 2-byte dtypes); P V on the PE array, and O = O * correction + P V in one
    scalar_tensor_tensor (Vector); the output is divided by the running sum at the end.

    ``causal=True`` masks keys after each query (a decoder's attention): kv blocks wholly after a query block are
    skipped, and the scores of a block crossing the diagonal are copied to SBUF (Vector) and masked there by an
    ``affine_select`` (GpSimd), as NKI's flash attention does. Its loop over query blocks is a
    ``sequential_range``, since how many kv blocks a query block visits depends on the index's value.
    """
    require(1 <= head_dim <= 128, "attention", f"head_dim={head_dim} must be 1..128 (one partition tile)")
    require(1 <= kv_block <= 128, "attention", f"kv_block={kv_block} must be 1..128 (one PE transpose)")
    require(probs_transpose in ("pe", "dma"), "attention", f"probs_transpose={probs_transpose!r} must be pe or dma")
    require(probs_transpose == "pe" or dtype in ("bf16", "fp16"), "attention",
            f"probs_transpose=dma needs a 2-byte dtype (bf16, fp16), not {dtype}")
    qblocks = multiple(seq, 128, "seq", "attention")
    kblocks = multiple(seq, kv_block, "seq", "attention")
    scale = 1.0 / math.sqrt(head_dim)
    q_t = nc.input("q_t", (head_dim, seq), dtype)
    k_t = nc.input("k_t", (head_dim, seq), dtype)
    v = nc.input("v", (seq, head_dim), dtype)
    o = nc.output("o", (seq, head_dim), dtype)
    for qi in (nc.sequential_range if causal else nc.affine_range)(qblocks):
        q_tile = nc.sbuf_tile((head_dim, 128), dtype, name="q_tile")
        nc.dma_copy(q_tile, q_t[:, qi * 128:(qi + 1) * 128])
        m = nc.sbuf_tile((128, 1), "fp32", name="row_max")
        nc.memset(m, NEG_INF)
        l_sum = nc.sbuf_tile((128, 1), "fp32", name="row_sum")
        nc.memset(l_sum, 0.0)
        o_acc = nc.sbuf_tile((128, head_dim), "fp32", name="o_acc")
        nc.memset(o_acc, 0.0, engine="Vector")
        # causal: the kv blocks holding a key at or before the block's last query (qi is concrete then)
        for kj in nc.sequential_range(-(-(qi + 1) * 128 // kv_block) if causal else kblocks):
            k_tile = nc.sbuf_tile((head_dim, kv_block), dtype, name="k_tile")
            nc.dma_copy(k_tile, k_t[:, kj * kv_block:(kj + 1) * kv_block])
            v_tile = nc.sbuf_tile((kv_block, head_dim), dtype, name="v_tile")
            nc.dma_copy(v_tile, v[kj * kv_block:(kj + 1) * kv_block, :])
            s_ps = nc.psum_tile((128, kv_block), "fp32", name="scores")
            nc.matmul(s_ps, q_tile, k_tile)
            scores = s_ps
            if causal and (kj + 1) * kv_block - 1 > qi * 128:  # a key after a query of the block: mask it
                scores = nc.sbuf_tile((128, kv_block), "fp32", name="masked_scores")
                nc.tensor_copy(scores, s_ps)
                # keep query qi*128 + p, key kj*kv_block + f where qi*128 - kj*kv_block + p - f >= 0
                nc.affine_select(scores, scores, NEG_INF, cmp="greater_equal", offset=qi * 128 - kj * kv_block,
                                 channel_multiplier=1, step=-1)
                # (on GpSimd, beside the Vector-bound steps: what the copy to SBUF above is for)
            block_max = nc.sbuf_tile((128, 1), "fp32", name="block_max")
            nc.tensor_reduce(block_max, scores, "max")
            m_new = nc.sbuf_tile((128, 1), "fp32", name="new_max")
            nc.tensor_scalar(m_new, block_max, "multiply", scale, op1="max", operand1=m)   # max(block max * scale, m)
            neg_m = nc.sbuf_tile((128, 1), "fp32", name="neg_max")
            nc.tensor_scalar(neg_m, m_new, "multiply", -1.0)
            p = nc.sbuf_tile((128, kv_block), dtype, name="probs")
            p_sum = nc.sbuf_tile((128, 1), "fp32", name="probs_sum")
            nc.activation(p, scores, "exp", scale=scale, bias=neg_m, reduce_dst=p_sum)
            corr = nc.sbuf_tile((128, 1), "fp32", name="correction")
            nc.activation(corr, m, "exp", bias=neg_m)
            nc.tensor_tensor(l_sum, l_sum, corr, "multiply")
            nc.tensor_tensor(l_sum, l_sum, p_sum, "add")
            if probs_transpose == "dma":
                p_t = nc.sbuf_tile((kv_block, 128), dtype, name="probs_t")
                nc.dma_transpose(p_t, p, engine="GpSimd")
            else:
                p_t_ps = nc.psum_tile((kv_block, 128), "fp32", name="probs_t_psum")
                nc.transpose(p_t_ps, p)
                p_t = nc.sbuf_tile((kv_block, 128), dtype, name="probs_t")
                nc.tensor_copy(p_t, p_t_ps, engine="Scalar")
            pv = nc.psum_tile((128, head_dim), "fp32", name="pv")
            nc.matmul(pv, p_t, v_tile)
            nc.scalar_tensor_tensor(o_acc, o_acc, "multiply", corr, "add", pv)   # o_acc * corr + P V
            m = m_new
        inv = nc.sbuf_tile((128, 1), "fp32", name="inv_sum")
        nc.activation(inv, l_sum, "reciprocal")
        o_tile = nc.sbuf_tile((128, head_dim), dtype, name="o_tile")
        nc.tensor_scalar(o_tile, o_acc, "multiply", inv)
        # stored from GpSimd: on Sync, in order behind the store, the next block's loads would wait for this one
        nc.dma_copy(o[qi * 128:(qi + 1) * 128, :], o_tile, engine="GpSimd")
