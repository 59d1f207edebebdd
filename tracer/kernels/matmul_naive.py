"""V0 of the tiled-matmul progression: naive tiling, every tile loaded for every use."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracer.kernels import kernel
from tracer.kernels._common import multiple

TILE_M = 128
TILE_K = 128


def reference(inputs: dict[str, np.ndarray], **_: Any) -> dict[str, np.ndarray]:
    """C = A^T @ B in float64."""
    return {"c": inputs["a_t"].astype(np.float64).T @ inputs["b"].astype(np.float64)}


@kernel(reference=reference)
def matmul_naive(nc: Any, *, M: int = 1024, N: int = 1024, K: int = 1024, tile_n: int = 512,
                 dtype: str = "bf16") -> None:
    """Matmul V0 (naive tiling): C[M,N] = A^T[K,M] @ B[K,N]; per output tile and k, DMA both input tiles.

    For each (m, n) output tile and each k: load the 128x128 A tile and the 128 x tile_n B tile, one
    matmul accumulating in a PSUM bank; then copy PSUM to SBUF on the Vector engine and store.  B is reloaded
    once per m-tile, and the small (256 B per partition) A loads run at low DMA efficiency: DMA-bound.
    """
    mt = multiple(M, TILE_M, "M", "matmul_naive")
    kt = multiple(K, TILE_K, "K", "matmul_naive")
    nt = multiple(N, tile_n, "N", "matmul_naive", "tile_n")
    a_t = nc.input("a_t", (K, M), dtype)
    b = nc.input("b", (K, N), dtype)
    c = nc.output("c", (M, N), dtype)
    for m in nc.affine_range(mt):
        for n in nc.affine_range(nt):
            acc = nc.psum_tile((TILE_M, tile_n), "fp32", name="acc")
            for k in nc.affine_range(kt):
                a_tile = nc.sbuf_tile((TILE_K, TILE_M), dtype, name="a_tile")
                nc.dma_copy(a_tile, a_t[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                b_tile = nc.sbuf_tile((TILE_K, tile_n), dtype, name="b_tile")
                nc.dma_copy(b_tile, b[k * TILE_K:(k + 1) * TILE_K, n * tile_n:(n + 1) * tile_n])
                nc.matmul(acc, a_tile, b_tile)
            c_tile = nc.sbuf_tile((TILE_M, tile_n), dtype, name="c_tile")
            nc.tensor_copy(c_tile, acc)
            nc.dma_copy(c[m * TILE_M:(m + 1) * TILE_M, n * tile_n:(n + 1) * tile_n], c_tile, engine="GpSimd")
