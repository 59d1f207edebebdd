"""A DMA-only kernel: stream a tensor HBM -> SBUF -> HBM (measures the DMA model alone)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracer.kernels import kernel
from tracer.kernels._common import multiple


def reference(inputs: dict[str, np.ndarray], **_: Any) -> dict[str, np.ndarray]:
    """The copy."""
    return {"y": inputs["x"]}


@kernel(reference=reference)
def dma_stream(nc: Any, *, rows: int = 1024, cols: int = 4096, tile_cols: int = 2048, dtype: str = "bf16") -> None:
    """Copy x[rows, cols] to y through SBUF in 128 x tile_cols tiles: DMA queues only, no compute.

    tile_cols * itemsize is the contiguous bytes per partition row of each transfer, the quantity the DMA
    efficiency depends on (>= 4 KiB per partition saturates).
    """
    rt = multiple(rows, 128, "rows", "dma_stream")
    ct = multiple(cols, tile_cols, "cols", "dma_stream", "tile_cols")
    x = nc.input("x", (rows, cols), dtype)
    y = nc.output("y", (rows, cols), dtype)
    for r in nc.affine_range(rt):
        for c in nc.affine_range(ct):
            t = nc.sbuf_tile((128, tile_cols), dtype, name="tile")
            nc.dma_copy(t, x[r * 128:(r + 1) * 128, c * tile_cols:(c + 1) * tile_cols])
            nc.dma_copy(y[r * 128:(r + 1) * 128, c * tile_cols:(c + 1) * tile_cols], t)
