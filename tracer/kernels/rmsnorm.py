"""RMSNorm: y = x / sqrt(mean(x^2) + eps) * gamma, rows on partitions."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracer.kernels import kernel
from tracer.kernels._common import require, row_tiles


def reference(inputs: dict[str, np.ndarray], eps: float = 1e-6, **_: Any) -> dict[str, np.ndarray]:
    """RMSNorm in float64."""
    x = inputs["x"].astype(np.float64)
    rstd = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    return {"y": x * rstd * inputs["gamma"].astype(np.float64)}


@kernel(reference=reference)
def rmsnorm(nc: Any, *, rows: int = 1024, cols: int = 2048, eps: float = 1e-6, dtype: str = "bf16") -> None:
    """RMSNorm of each row of x[rows, cols] with weights gamma[1, cols].

    gamma is loaded once with a partition-broadcast DMA.  Per 128-row tile: square with the fused row sum
    (Scalar), rsqrt(sum / cols + eps) (Scalar, scale and bias for free), x * rstd (Vector, per-partition
    scalar), * gamma (Vector), store.
    """
    require(rows > 0 and cols > 0 and eps >= 0, "rmsnorm", "rows and cols must be positive and eps >= 0")
    x = nc.input("x", (rows, cols), dtype)
    gamma = nc.input("gamma", (1, cols), dtype, init=lambda rng, shape: 1.0 + 0.1 * rng.standard_normal(shape))
    y = nc.output("y", (rows, cols), dtype)
    g = nc.sbuf_tile((128, cols), dtype, name="gamma")
    nc.dma_copy(g, gamma[0:1, :].broadcast(128))
    # full 128-row tiles in an nc.affine_range loop (r0 symbolic, p = 128), then the partial last tile if any
    for r0, p in row_tiles(nc, rows):
        xt = nc.sbuf_tile((p, cols), dtype, name="x_tile")
        nc.dma_copy(xt, x[r0:r0 + p, :])
        sq = nc.sbuf_tile((p, cols), "fp32", name="square")
        ss = nc.sbuf_tile((p, 1), "fp32", name="sum_sq")
        nc.activation(sq, xt, "square", reduce_dst=ss)
        rstd = nc.sbuf_tile((p, 1), "fp32", name="rstd")
        nc.activation(rstd, ss, "rsqrt", scale=1.0 / cols, bias=eps)
        normed = nc.sbuf_tile((p, cols), "fp32", name="normed")
        nc.tensor_scalar(normed, xt, "multiply", rstd)
        yt = nc.sbuf_tile((p, cols), dtype, name="y_tile")
        nc.tensor_tensor(yt, normed, g[0:p, :], "multiply")
        # stored from GpSimd: on Sync, in order behind the store, the next tile's load would wait for this compute
        nc.dma_copy(y[r0:r0 + p, :], yt, engine="GpSimd")
