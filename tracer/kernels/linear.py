"""A linear layer in PyTorch's layout, y = x W^T: both operands arrive untransposed, so the kernel transposes them."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracer.kernels import kernel
from tracer.kernels._common import multiple, require

TILE = 128


def reference(inputs: dict[str, np.ndarray], **_: Any) -> dict[str, np.ndarray]:
    """y = x @ W^T in float64."""
    return {"y": inputs["x"].astype(np.float64) @ inputs["w"].astype(np.float64).T}


@kernel(reference=reference)
def linear(nc: Any, *, tokens: int = 1024, d_in: int = 1024, d_out: int = 1024, tile_n: int = 512,
           transpose: str = "dma", dtype: str = "bf16") -> None:
    """nn.Linear without bias: y[tokens, d_out] = x[tokens, d_in] @ w[d_out, d_in]^T, x and w row-major.

    The PE array contracts over partitions, so it needs x^T and w^T tiles (d_in on partitions).  With
    ``transpose="dma"`` they are loaded transposed by DMA from HBM (nki.isa.dma_transpose, at 90% of a copy's
    rate); with ``"pe"`` they are loaded as stored and transposed on the PE array (into PSUM, then copied to SBUF
    by the Vector and Scalar engines), which costs Tensor time the matmuls then lack.  Per tile_n-wide panel of
    w^T (loaded once), every 128-token block of x^T is loaded and multiplied into one PSUM bank.
    """
    require(transpose in ("dma", "pe"), "linear", f"transpose={transpose!r} must be dma or pe")
    require(transpose == "pe" or dtype in ("bf16", "fp16"), "linear",
            f"transpose=dma needs a 2-byte dtype (bf16, fp16), not {dtype}")
    require(tile_n <= 512, "linear", f"tile_n={tile_n} must be at most 512 (one PSUM bank)")
    mt = multiple(tokens, TILE, "tokens", "linear")
    kt = multiple(d_in, TILE, "d_in", "linear")
    nt = multiple(d_out, tile_n, "d_out", "linear", "tile_n")
    x = nc.input("x", (tokens, d_in), dtype)
    w = nc.input("w", (d_out, d_in), dtype)
    y = nc.output("y", (tokens, d_out), dtype)

    def load_t(src: Any, r0: int, rows: int, k: int, name: str) -> Any:
        """src[r0:r0+rows, k-th 128 columns]^T as a [128, rows] SBUF tile."""
        tile_t = nc.sbuf_tile((TILE, rows), dtype, name=name)
        if transpose == "dma":
            nc.dma_transpose(tile_t, src[r0:r0 + rows, k * TILE:(k + 1) * TILE])
            return tile_t
        for c in range(0, rows, TILE):   # the PE array transposes at most 128 x 128 at a time
            tile = nc.sbuf_tile((TILE, TILE), dtype, name=f"{name}_rows")
            nc.dma_copy(tile, src[r0 + c:r0 + c + TILE, k * TILE:(k + 1) * TILE])
            t_ps = nc.psum_tile((TILE, TILE), "fp32", name=f"{name}_psum")
            nc.transpose(t_ps, tile)
            nc.tensor_copy(tile_t[:, c:c + TILE], t_ps, engine="Vector" if c % (2 * TILE) == 0 else "Scalar")
        return tile_t

    for n in nc.affine_range(nt):
        w_t = [load_t(w, n * tile_n, tile_n, k, "w_t") for k in nc.static_range(kt)]
        for m in nc.affine_range(mt):
            x_t = [load_t(x, m * TILE, TILE, k, "x_t") for k in nc.static_range(kt)]
            acc = nc.psum_tile((TILE, tile_n), "fp32", name="acc")
            for k in nc.static_range(kt):
                nc.matmul(acc, x_t[k], w_t[k])
            out = nc.sbuf_tile((TILE, tile_n), dtype, name="y_tile")
            nc.tensor_copy(out, acc)
            nc.dma_copy(y[m * TILE:(m + 1) * TILE, n * tile_n:(n + 1) * tile_n], out, engine="GpSimd")
