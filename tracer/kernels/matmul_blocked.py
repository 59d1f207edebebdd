"""V1 of the tiled-matmul progression: a block of A stays in SBUF and each B tile is reused across it."""

from __future__ import annotations

from typing import Any

from tracer.kernels import kernel
from tracer.kernels._common import multiple, require
from tracer.kernels.matmul_naive import TILE_K, TILE_M, reference
from tracer.sim.dtypes import dtype as element_type


@kernel(reference=reference)
def matmul_blocked(nc: Any, *, M: int = 1024, N: int = 1024, K: int = 1024, block_m: int = 4, tile_n: int = 512,
                   dtype: str = "bf16") -> None:
    """Matmul V1 (blocking): keep block_m A tiles x all k in SBUF, load each B tile once per block.

    Per m-block: load its A tiles (128x128 each), then for each n and k load one B tile and run block_m
    matmuls on it into block_m PSUM accumulators.  B reloads fall from M/128 to M/(128*block_m): Tensor-bound.
    """
    mt = multiple(M, TILE_M, "M", "matmul_blocked")
    kt = multiple(K, TILE_K, "K", "matmul_blocked")
    nt = multiple(N, tile_n, "N", "matmul_blocked", "tile_n")
    require(1 <= block_m <= 8 and mt % block_m == 0, "matmul_blocked",
            f"block_m={block_m} must be 1..8 and divide M/128={mt} (one PSUM bank per accumulator)")
    # accumulators of consecutive output tiles are double-buffered when two sets fit in the 8 PSUM banks
    double_buffer = 2 * block_m <= 8
    itemsize = element_type(dtype).itemsize
    double_buffer_a = 2 * block_m * kt * TILE_M * itemsize + 8 * tile_n * itemsize <= nc.cm.sbuf_partition_bytes
    a_t = nc.input("a_t", (K, M), dtype)
    b = nc.input("b", (K, N), dtype)
    c = nc.output("c", (M, N), dtype)

    def load_a(k: int, m: int) -> Any:
        t = nc.sbuf_tile((TILE_K, TILE_M), dtype, name="a_block")
        nc.dma_copy(t, a_t[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
        return t

    for mb in nc.affine_range(mt // block_m):
        # the new block is built before the old one is dropped, so both are alive while it loads
        a_block = [[load_a(k, mb * block_m + i) for k in nc.static_range(kt)] for i in range(block_m)]
        for n in nc.affine_range(nt):
            accs = [nc.psum_tile((TILE_M, tile_n), "fp32", name=f"acc{i}") for i in range(block_m)]
            for k in nc.static_range(kt):  # a_block[i][k]: a Python list index needs a concrete k
                b_tile = nc.sbuf_tile((TILE_K, tile_n), dtype, name="b_tile")
                nc.dma_copy(b_tile, b[k * TILE_K:(k + 1) * TILE_K, n * tile_n:(n + 1) * tile_n])
                for i in range(block_m):
                    nc.matmul(accs[i], a_block[i][k], b_tile)
            for i in range(block_m):
                m = mb * block_m + i
                c_tile = nc.sbuf_tile((TILE_M, tile_n), dtype, name="c_tile")
                nc.tensor_copy(c_tile, accs[i], engine="Vector" if i % 2 == 0 else "Scalar")
                nc.dma_copy(c[m * TILE_M:(m + 1) * TILE_M, n * tile_n:(n + 1) * tile_n], c_tile, engine="GpSimd")
            if not double_buffer:
                del accs
        if not double_buffer_a:
            del a_block  # SBUF too small to load the next block while this one is in use
