"""Tile views of an expanded affine loop nest are built once per loop, not once per call
(:mod:`tracer.sim.affine.hoist`), without changing the trace or when tiles are freed."""

from __future__ import annotations

import pytest

from tests.unit.test_sim_affine import _assert_same, _run
from tracer.sim import memory, run_kernel
from tracer.sim.affine.hoist import hoist_views, tile_views

SNIPPET = """\
    for i1 in LOOP(4):
        E[3] = nc.sbuf_tile((128, 256), C[0], name=C[1])
        nc.matmul(E[5], TV(R[0], 0, 128, 0, 128), TV(E[3], 0, 128, (64*i1), (64 + 64*i1)))
        nc.matmul(E[6], TV(R[0], 0, 128, 0, 128), TV(E[2], 0, 128, (64*i1), (64 + 64*i1)))
        nc.matmul(E[6], TV(R[1], 0, 128, 0, 128), TV(E[2], 0, 128, (64*i1), (64 + 64*i1)))
        for i2 in LOOP(2):
            nc.tensor_copy(E[7], TV(E[2], 0, 128, (32*i2), (32 + 32*i2)))
            nc.tensor_copy(E[7], TV(E[2], 0, 128, (0 + (8*i1)), (0 + (8 + 8*i1))))
        E[3] = None
    E[2] = None"""

EXPECTED = """\
    w1 = TV(R[0], 0, 128, 0, 128)
    w2 = TV(R[1], 0, 128, 0, 128)
    for i1 in LOOP(4):
        w3 = TV(E[2], 0, 128, (64*i1), (64 + 64*i1))
        w4 = TV(E[2], 0, 128, (0 + (8*i1)), (0 + (8 + 8*i1)))
        E[3] = nc.sbuf_tile((128, 256), C[0], name=C[1])
        nc.matmul(E[5], w1, TV(E[3], 0, 128, (64*i1), (64 + 64*i1)))
        nc.matmul(E[6], w1, w3)
        nc.matmul(E[6], w2, w3)
        for i2 in LOOP(2):
            nc.tensor_copy(E[7], TV(E[2], 0, 128, (32*i2), (32 + 32*i2)))
            nc.tensor_copy(E[7], w4)
        E[3] = None
    w1 = w2 = w3 = w4 = None
    E[2] = None"""


def test_views_move_out_of_the_loops_they_do_not_depend_on():
    """Invariant views go before the loop, views of its counter used more than once (or in an inner loop) to the
    top of its body; a slot assigned in the loop, or a bound naming an inner loop's counter, keeps its view in
    place; every hoisted view is dropped right after the loop."""
    lines = [(text, n) for n, text in enumerate(SNIPPET.splitlines(), start=10)]
    out = hoist_views(lines)
    assert "\n".join(text for text, _ in out) == EXPECTED
    # statements keep their kernel lines; the new ones have none (they take the line before them)
    assert [n for text, n in out if not text.lstrip().startswith("w")] == [n for _, n in lines]
    assert all(n == 0 for text, n in out if text.lstrip().startswith("w"))


def test_code_without_views_or_loops_is_unchanged():
    lines = [("    E[1] = nc.sbuf_tile((128, 64), C[0], name=C[1])", 3), ("    nc.memset(E[1], 0.0)", 4),
             ("    for i1 in LOOP(2):", 5),
             ("        nc.dma_copy(E[1], HV(H[0], 0, 128, (64*i1), (64 + 64*i1), 0))", 6)]
    assert hoist_views(lines) == lines


def test_tile_view_calls_are_found_with_nested_bounds():
    text = "nc.matmul(E[1], TV(E[2], 0, 128, (0 + (8*i1)), (8 + (8*i1))), HV(H[0], 0, 1, 2, 3, 0), XTV(a, b))"
    assert tile_views(text) == [("TV(E[2], 0, 128, (0 + (8*i1)), (8 + (8*i1)))", "E[2]",
                                 ["0", "128", "(0 + (8*i1))", "(8 + (8*i1))"])]


def _kernel(nc, n: int = 4):
    """A tile sliced in an inner loop (once invariantly, twice by the inner index), released right after that loop
    and followed by an allocation that takes its memory only if it was freed at that point."""
    x = nc.input("x", (128, 256), "bf16")
    y = nc.output("y", (128, 256 * n), "bf16")
    for i in nc.affine_range(n):
        a = nc.sbuf_tile((128, 256), "bf16", name="a")
        nc.dma_copy(a, x)
        for j in nc.affine_range(4):
            t = nc.sbuf_tile((128, 64), "bf16", name="t")
            nc.tensor_copy(t, a[:, 0:64])
            nc.tensor_tensor(t, t, a[:, j * 64:(j + 1) * 64], "add")
            nc.tensor_tensor(t, t, a[:, j * 64:(j + 1) * 64], "multiply")
            nc.dma_copy(y[:, i * 256 + j * 64:i * 256 + (j + 1) * 64], t)
        del a
        b = nc.sbuf_tile((128, 256), "bf16", name="b")
        nc.memset(b, 0.0)
        nc.dma_copy(y[:, i * 256:i * 256 + 64], b[:, 0:64])


@pytest.mark.parametrize("fast", [False, True])
def test_hoisted_views_write_the_concrete_trace(tmp_path, fast):
    """Same tables (tile addresses and the SBUF usage counter included) as running the body per iteration."""
    _assert_same(_run(tmp_path, _kernel, {}, "trn2", False, fast), _run(tmp_path, _kernel, {}, "trn2", True, fast))


def test_an_inner_loop_builds_its_views_once_per_iteration(monkeypatch):
    """Per outer iteration: one view for ``a[:, 0:64]`` and one per inner iteration for ``a[:, j*64:...]`` (used
    twice), plus ``b[:, 0:64]`` -- 6, where building each at its call would make 13."""
    made = []
    init = memory.TileView.__init__

    def counting(self, *args):
        made.append(1)
        init(self, *args)

    monkeypatch.setattr(memory.TileView, "__init__", counting)
    counts = []
    for n in (4, 8):
        made.clear()
        run_kernel(_kernel, {"n": n}, arch="trn2")
        counts.append(len(made))
    assert (counts[1] - counts[0]) / 4 == 6, counts


def test_a_tile_from_before_the_loop_released_inside_it_keeps_its_views_in_place():
    lines = [("    for i1 in LOOP(2):", 5), ("        nc.tensor_copy(E[1], TV(R[2], 0, 128, 0, 64))", 6),
             ("        nc.tensor_copy(E[1], TV(R[3], 0, 128, 0, 64))", 7), ("        RELEASE(R[2])", 8)]
    out = [text for text, _ in hoist_views(lines)]
    assert out[0] == "    w1 = TV(R[3], 0, 128, 0, 64)"
    assert "        nc.tensor_copy(E[1], TV(R[2], 0, 128, 0, 64))" in out
