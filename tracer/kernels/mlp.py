"""A stack of transformer MLP blocks whose instructions carry layer and operator names."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tracer.kernels import kernel
from tracer.kernels._common import multiple, require
from tracer.sim.numerics import erfc


def _gelu(x: np.ndarray) -> np.ndarray:  # GELU, x * Phi(x), in float64 (erfc to 1.2e-7 relative, vectorised)
    return 0.5 * x * erfc(-x / math.sqrt(2.0))


def reference(inputs: dict[str, np.ndarray], layers: int = 2, **_: Any) -> dict[str, np.ndarray]:
    """x <- x + W2^T gelu(W1^T x) per layer, on transposed activations, float64."""
    x = inputs["x_t"].astype(np.float64)
    for i in range(layers):
        h = _gelu(inputs[f"w1_{i}"].astype(np.float64).T @ x)
        x = x + inputs[f"w2_{i}"].astype(np.float64).T @ h
    return {"y_t": x}


@kernel(reference=reference)
def mlp(nc: Any, *, layers: int = 2, d_model: int = 256, d_ff: int = 1024, tokens: int = 512,
        dtype: str = "bf16") -> None:
    """Transformer MLP blocks, x <- x + W2^T gelu(W1^T x), on activations kept transposed (x_t: [d_model, tokens]).

    Every instruction carries its layer (``layer0``...) and operator (``layer0.up_proj``, ``layer0.gelu``,
    ``layer0.down_proj``, ``layer0.residual``, ``layer0.load_weights``), which become Span rows.  Weights of the
    next layer load while this layer computes.
    """
    require(layers >= 1, "mlp", "layers must be at least 1")
    require(1 <= tokens <= 512, "mlp", f"tokens={tokens} must be 1..512 (one PSUM bank of moving data)")
    kd = multiple(d_model, 128, "d_model", "mlp")
    kf = multiple(d_ff, 128, "d_ff", "mlp")
    x_t = nc.input("x_t", (d_model, tokens), dtype)
    w1 = [nc.input(f"w1_{i}", (d_model, d_ff), dtype,
                   init=lambda rng, s: rng.standard_normal(s) / math.sqrt(d_model)) for i in range(layers)]
    w2 = [nc.input(f"w2_{i}", (d_ff, d_model), dtype,
                   init=lambda rng, s: rng.standard_normal(s) / math.sqrt(d_ff)) for i in range(layers)]
    y_t = nc.output("y_t", (d_model, tokens), dtype)
    xs = []  # lists of tiles indexed by loop indices (xs[d]): static_range loops (NKI would use 3-D tiles)
    with nc.operator("load_input"):
        for d in nc.static_range(kd):
            t = nc.sbuf_tile((128, tokens), dtype, name=f"x{d}")
            nc.dma_copy(t, x_t[d * 128:(d + 1) * 128, :])
            xs.append(t)
    for layer in nc.sequential_range(layers):
        with nc.layer(f"layer{layer}"):
            with nc.operator(f"layer{layer}.load_weights"):
                w1_tiles = []
                for d in nc.static_range(kd):
                    t = nc.sbuf_tile((128, d_ff), dtype, name=f"w1_{layer}_{d}")
                    nc.dma_copy(t, w1[layer][d * 128:(d + 1) * 128, :])
                    w1_tiles.append(t)
                w2_tiles = []
                for f in nc.static_range(kf):
                    t = nc.sbuf_tile((128, d_model), dtype, name=f"w2_{layer}_{f}")
                    nc.dma_copy(t, w2[layer][f * 128:(f + 1) * 128, :])
                    w2_tiles.append(t)
            hs = []
            for f in nc.static_range(kf):
                with nc.operator(f"layer{layer}.up_proj"):
                    ps = nc.psum_tile((128, tokens), "fp32", name="up_psum")
                    for d in nc.static_range(kd):
                        nc.matmul(ps, w1_tiles[d][:, f * 128:(f + 1) * 128], xs[d])
                with nc.operator(f"layer{layer}.gelu"):
                    h = nc.sbuf_tile((128, tokens), dtype, name=f"h{f}")
                    nc.activation(h, ps, "gelu")
                    hs.append(h)
            new_xs = []
            for d in nc.static_range(kd):
                with nc.operator(f"layer{layer}.down_proj"):
                    ps = nc.psum_tile((128, tokens), "fp32", name="down_psum")
                    for f in nc.static_range(kf):
                        nc.matmul(ps, w2_tiles[f][:, d * 128:(d + 1) * 128], hs[f])
                with nc.operator(f"layer{layer}.residual"):
                    nx = nc.sbuf_tile((128, tokens), dtype, name=f"x{d}")
                    nc.tensor_tensor(nx, ps, xs[d], "add")
                    new_xs.append(nx)
            xs = new_xs
    with nc.operator("store_output"):
        for d in nc.static_range(kd):
            nc.dma_copy(y_t[d * 128:(d + 1) * 128, :], xs[d])
