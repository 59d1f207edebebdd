"""LayerNorm: y = (x - mean) / sqrt(var + eps) * gamma + beta, rows on partitions, statistics by bn_stats/bn_aggr."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracer.kernels import kernel
from tracer.kernels._common import require, row_tiles
from tracer.sim.ops_elementwise import BN_STATS_FMAX


def reference(inputs: dict[str, np.ndarray], eps: float = 1e-5, **_: Any) -> dict[str, np.ndarray]:
    """LayerNorm in float64 (population variance, as bn_aggr gives and torch.nn.LayerNorm uses)."""
    x = inputs["x"].astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    return {"y": y * inputs["gamma"].astype(np.float64) + inputs["beta"].astype(np.float64)}


@kernel(reference=reference)
def layernorm(nc: Any, *, rows: int = 1024, cols: int = 2048, eps: float = 1e-5, dtype: str = "bf16") -> None:
    """LayerNorm of each row of x[rows, cols] with weights gamma[1, cols] and bias beta[1, cols].

    gamma and beta are loaded once with partition-broadcast DMAs.  Per 128-row tile: one ``bn_stats`` per
    512-column slice into its own 6 columns of a statistics tile, one ``bn_aggr`` for the row's mean and variance
    (Vector); rsqrt(var + eps) (Scalar, the bias free); (x - mean) * rstd in one two-operator ``tensor_scalar``
    (Vector); * gamma, + beta (Vector and GpSimd); store.
    """
    require(rows > 0 and cols > 0 and eps >= 0, "layernorm", "rows and cols must be positive and eps >= 0")
    x = nc.input("x", (rows, cols), dtype)
    gamma = nc.input("gamma", (1, cols), dtype, init=lambda rng, shape: 1.0 + 0.1 * rng.standard_normal(shape))
    beta = nc.input("beta", (1, cols), dtype, init=lambda rng, shape: 0.1 * rng.standard_normal(shape))
    y = nc.output("y", (rows, cols), dtype)
    g = nc.sbuf_tile((128, cols), dtype, name="gamma")
    nc.dma_copy(g, gamma[0:1, :].broadcast(128))
    b = nc.sbuf_tile((128, cols), dtype, name="beta")
    nc.dma_copy(b, beta[0:1, :].broadcast(128))
    chunks = -(-cols // BN_STATS_FMAX)
    for r0, p in row_tiles(nc, rows):
        xt = nc.sbuf_tile((p, cols), dtype, name="x_tile")
        nc.dma_copy(xt, x[r0:r0 + p, :])
        stats = nc.sbuf_tile((p, 6 * chunks), "fp32", name="stats")
        for c in range(chunks):
            nc.bn_stats(stats[:, 6 * c:6 * c + 6], xt[:, c * BN_STATS_FMAX:min(cols, (c + 1) * BN_STATS_FMAX)])
        mv = nc.sbuf_tile((p, 2), "fp32", name="mean_var")
        nc.bn_aggr(mv, stats)
        rstd = nc.sbuf_tile((p, 1), "fp32", name="rstd")
        nc.activation(rstd, mv[:, 1:2], "rsqrt", bias=eps)
        normed = nc.sbuf_tile((p, cols), "fp32", name="normed")
        nc.tensor_scalar(normed, xt, "subtract", mv[:, 0:1], op1="multiply", operand1=rstd)
        scaled = nc.sbuf_tile((p, cols), "fp32", name="scaled")
        nc.tensor_tensor(scaled, normed, g[0:p, :], "multiply")
        yt = nc.sbuf_tile((p, cols), dtype, name="y_tile")
        nc.tensor_tensor(yt, scaled, b[0:p, :], "add", engine="GpSimd")
        # stored from GpSimd: on Sync, in order behind the store, the next tile's load would wait for this compute
        nc.dma_copy(y[r0:r0 + p, :], yt, engine="GpSimd")
