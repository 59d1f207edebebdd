"""V2 of the tiled-matmul progression: blocking plus whole-row loads (fewer, larger, more efficient DMAs)."""

from __future__ import annotations

from typing import Any

from tracer.kernels import kernel
from tracer.kernels._common import multiple, require
from tracer.kernels.matmul_naive import TILE_K, TILE_M, reference
from tracer.sim.dtypes import dtype as element_type


@kernel(reference=reference)
def matmul_rowload(nc: Any, *, M: int = 1024, N: int = 1024, K: int = 1024, block_m: int = 4, row_n: int = 1024,
                   tile_n: int = 512, dtype: str = "bf16", perf_mode: str = "none") -> None:
    """Matmul V2 (row loads): as V1, but A is loaded as 128 x (128*block_m) rows and B as 128 x row_n panels.

    Same bytes as V1 in fewer, larger transfers: 1-2 KiB per partition instead of 256 B-1 KiB, so each DMA
    runs near peak efficiency and the Tensor engine stops starving.  A B panel (all k for row_n columns) is
    loaded once and used for row_n/tile_n output column tiles; the next panel loads while this one is used.
    With an FP8 ``dtype`` (fp8_e4m3, fp8_e5m2) C is written in bf16, and ``perf_mode=double_row`` (trn2) runs
    the matmuls at twice the rate.
    """
    mt = multiple(M, TILE_M, "M", "matmul_rowload")
    kt = multiple(K, TILE_K, "K", "matmul_rowload")
    multiple(row_n, tile_n, "row_n", "matmul_rowload", "tile_n")
    npanel = multiple(N, row_n, "N", "matmul_rowload", "row_n")
    require(1 <= block_m <= 8 and mt % block_m == 0, "matmul_rowload",
            f"block_m={block_m} must be 1..8 and divide M/128={mt} (one PSUM bank per accumulator)")
    # accumulators of consecutive output tiles are double-buffered when two sets fit in the 8 PSUM banks
    double_buffer = 2 * block_m <= 8
    dt = element_type(dtype)
    out_dtype = "bf16" if dt.is_fp8 else dtype   # FP8 products accumulate in fp32 PSUM; keep more than 3 bits
    a_t = nc.input("a_t", (K, M), dtype)
    b = nc.input("b", (K, N), dtype)
    c = nc.output("c", (M, N), out_dtype)
    bw = TILE_M * block_m
    itemsize = dt.itemsize
    out_itemsize = element_type(out_dtype).itemsize
    a_bytes = kt * bw * itemsize
    panel_bytes = kt * row_n * itemsize
    double_buffer_a = 2 * a_bytes + 2 * panel_bytes + 8 * tile_n * out_itemsize <= nc.cm.sbuf_partition_bytes
    need = a_bytes + 2 * panel_bytes + 8 * tile_n * out_itemsize
    require(need <= nc.cm.sbuf_partition_bytes, "matmul_rowload",
            f"K={K} with row_n={row_n} needs {need:,} B per partition of SBUF (an A block and two B panels of "
            f"{panel_bytes:,} B) but {nc.cm.arch} has {nc.cm.sbuf_partition_bytes:,}; lower row_n or K")

    def load(src: Any, k: int, col: int, width: int, name: str) -> Any:
        t = nc.sbuf_tile((TILE_K, width), dtype, name=name)
        nc.dma_copy(t, src[k * TILE_K:(k + 1) * TILE_K, col:col + width])
        return t

    for mb in nc.affine_range(mt // block_m):
        # the new block is built before the old one is dropped, so both are alive while it loads
        a_rows = [load(a_t, k, mb * bw, bw, "a_rows") for k in nc.static_range(kt)]
        for p in nc.affine_range(npanel):
            panel = [load(b, k, p * row_n, row_n, "b_panel") for k in nc.static_range(kt)]
            for j in nc.affine_range(row_n // tile_n):
                n0 = p * row_n + j * tile_n
                accs = [nc.psum_tile((TILE_M, tile_n), "fp32", name=f"acc{i}") for i in range(block_m)]
                for k in nc.static_range(kt):  # a_rows[k], panel[k]: list indices need a concrete k
                    for i in range(block_m):
                        nc.matmul(accs[i], a_rows[k][:, i * TILE_M:(i + 1) * TILE_M],
                                  panel[k][:, j * tile_n:(j + 1) * tile_n], perf_mode=perf_mode)
                for i in range(block_m):
                    m = mb * block_m + i
                    c_tile = nc.sbuf_tile((TILE_M, tile_n), out_dtype, name="c_tile")
                    nc.tensor_copy(c_tile, accs[i], engine="Vector" if i % 2 == 0 else "Scalar")
                    nc.dma_copy(c[m * TILE_M:(m + 1) * TILE_M, n0:n0 + tile_n], c_tile, engine="GpSimd")
                if not double_buffer:
                    del accs
        if not double_buffer_a:
            del a_rows  # SBUF too small to load the next block while this one is in use
