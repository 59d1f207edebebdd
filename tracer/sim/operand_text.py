"""The ``operands`` column of the simulator's Instruction rows, built in bulk per chunk by the trace emitter.

A row's text is its semaphore waits (``$<semaphore>>=<value>`` each, from the Flow edges the emitter built), then its
template's static text (``text_pre + text_post``), in a DMA trigger with the HBM slice it moves
(``name[r0:r1,c0:c1]``, from the offset the core recorded) between ``text_pre`` and ``text_post``.  The static texts
are kept per template and rebuilt only when templates were added, so a chunk's rows cost two joins.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracer.sim.columns import StringArrays
from tracer.sim.records import AUX_OFFSET_MASK, AUX_TENSOR_SHIFT


class OperandText:
    """Builds the ``operands`` column of chunks, keeping each template's static text.

    Args:
        strings: the emitter's string-array cache (the stream-name prefixes go through it).
    """

    def __init__(self, strings: StringArrays) -> None:
        self.strings = strings
        #: (templates, their whole static texts, text_pre, text_post), as of the last rebuild.
        self._texts: tuple[int, pa.Array, pa.Array, pa.Array] | None = None

    def static_texts(self, n_templates: int, pre: tuple[list[str], np.ndarray],
                     post: tuple[list[str], np.ndarray]) -> tuple[pa.Array, pa.Array, pa.Array]:
        """Per template id: its static text (``text_pre + text_post``), ``text_pre`` and ``text_post``.

        ``pre`` and ``post`` are each (the distinct values, each template's code into them); rebuilt only when
        ``n_templates`` changed (templates are only ever added)."""
        n = n_templates
        if self._texts is None or self._texts[0] != n:
            pre_arr = self.strings(pre[0]).take(pa.array(pre[1][:n]))
            post_arr = self.strings(post[0]).take(pa.array(post[1][:n]))
            self._texts = (n, pc.binary_join_element_wise(pre_arr, post_arr, ""), pre_arr, post_arr)
        return self._texts[1:]

    def column(self, static: tuple[pa.Array, pa.Array, pa.Array], tid: np.ndarray, aux: np.ndarray,  # noqa: PLR0917
               hbm_num: np.ndarray, names: list[str], waits: tuple[Any, ...]) -> pa.Array:
        """The operand text of each row of a chunk.

        Args:
            static: :meth:`static_texts`.
            tid: each row's template id.
            aux: each row's dynamic operand (a DMA trigger's HBM tensor and offset in it,
                :func:`tracer.sim.records.dma_aux`; -1: none).
            hbm_num: per row, (0, tensor columns, rows, columns, broadcast) of its template (-1 first: no HBM side).
            names: the names the tensor codes in ``aux`` refer to (the core's).
            waits: (each edge's row in the chunk, in row order; its semaphore code; its value; the semaphore names).
        """
        whole, pre, post = static
        n = len(tid)
        rows = np.flatnonzero((aux >= 0) & (hbm_num[:, 0] >= 0))  # DMA triggers: their slice between pre and post
        if len(rows):
            hbm = hbm_num[rows]
            off = aux[rows] & AUX_OFFSET_MASK
            codes = aux[rows] >> AUX_TENSOR_SHIFT
            used, at = np.unique(codes, return_inverse=True)
            tensor = pa.array([names[c] for c in used.tolist()]).take(pa.array(at))
            r0, c0 = off // hbm[:, 1], off % hbm[:, 1]
            bc = hbm[:, 4] > 0
            bcast = pa.DictionaryArray.from_arrays(pa.array(bc.astype(np.int32)), pa.array(["]", "]*"])) \
                .cast(pa.string())
            bval = pc.if_else(pa.array(bc), pa.array(hbm[:, 4]).cast(pa.string()), "")
            rt = pa.array(tid[rows])
            text = pc.binary_join_element_wise(
                pre.take(rt), tensor, "[", pa.array(r0).cast(pa.string()), ":",
                pa.array(r0 + hbm[:, 2]).cast(pa.string()), ",", pa.array(c0).cast(pa.string()), ":",
                pa.array(c0 + hbm[:, 3]).cast(pa.string()), bcast, bval, post.take(rt), "")
            pick = tid.copy()
            pick[rows] = len(whole) + np.arange(len(rows))
            body = pa.concat_arrays([whole, text]).take(pa.array(pick))
        else:
            body = whole.take(pa.array(tid))
        row, sem, value, sem_names = waits
        if not len(row):
            return body
        # "$<semaphore>>=<value>" per wait, joined by spaces per row; a row without waits is null in the list, and
        # the last join then skips it
        prefix = self.strings(tuple([f"${name}" for name in sem_names]))
        texts = pc.binary_join_element_wise(prefix.take(pa.array(sem)), pa.array(value).cast(pa.string()), ">=")
        counts = np.bincount(row, minlength=n)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        listed = pa.ListArray.from_arrays(pa.array(offsets), texts, mask=pa.array(counts == 0))
        return pc.binary_join_element_wise(pc.binary_join(listed, " "), body, " ", null_handling="skip")
