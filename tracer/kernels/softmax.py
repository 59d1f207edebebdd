"""Row-wise softmax: rows on partitions, one pass per 128-row tile."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracer.kernels import kernel
from tracer.kernels._common import require, row_tiles


def reference(inputs: dict[str, np.ndarray], **_: Any) -> dict[str, np.ndarray]:
    """softmax(x) along each row, float64."""
    x = inputs["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


@kernel(reference=reference)
def softmax(nc: Any, *, rows: int = 1024, cols: int = 2048, dtype: str = "bf16") -> None:
    """Softmax of each row of x[rows, cols]: max (Vector), exp with fused row sum (Scalar), scale (Vector).

    Per 128-row tile: load; negated row max (TENSOR_REDUCE); exp(x - max) with the row sum accumulated by the
    same ACTIVATE; reciprocal of the sum (ACTIVATE); multiply by it (TENSOR_SCALAR); store.
    """
    require(rows > 0 and cols > 0, "softmax", "rows and cols must be positive")
    x = nc.input("x", (rows, cols), dtype)
    y = nc.output("y", (rows, cols), dtype)
    # full 128-row tiles in an nc.affine_range loop (r0 symbolic, p = 128), then the partial last tile if any
    for r0, p in row_tiles(nc, rows):
        xt = nc.sbuf_tile((p, cols), dtype, name="x_tile")
        nc.dma_copy(xt, x[r0:r0 + p, :])
        neg_max = nc.sbuf_tile((p, 1), "fp32", name="neg_max")
        nc.tensor_reduce(neg_max, xt, "max", negate=True)
        ex = nc.sbuf_tile((p, cols), "fp32", name="exp")
        total = nc.sbuf_tile((p, 1), "fp32", name="row_sum")
        nc.activation(ex, xt, "exp", bias=neg_max, reduce_dst=total)
        inv = nc.sbuf_tile((p, 1), "fp32", name="inv_sum")
        nc.activation(inv, total, "reciprocal")
        yt = nc.sbuf_tile((p, cols), dtype, name="y_tile")
        nc.tensor_scalar(yt, ex, "multiply", inv)
        # stored from GpSimd: on Sync, in order behind the store, the next tile's load would wait for this compute
        nc.dma_copy(y[r0:r0 + p, :], yt, engine="GpSimd")
