"""The loop fast path's controller: segments, modes, commits, falling back, and lazy dependency records.

A kernel's ``nc.affine_range`` / ``nc.sequential_range`` loops cut its run into *segments*: a loop commits at its
start, at its end and every ``stride`` iterations, ``stride`` chosen from its first iteration so a segment holds
about :data:`TARGET` instructions (:data:`LONG_FACTOR` times that once the run is predicted to go on for
:data:`LONG_RUN` instructions or more).  Each segment runs in one of three modes:

* **general**: every event goes through the general path (as with the fast path off);
* **record**: the general path runs it and the :class:`~tracer.sim.fastpath.record.Recorder` turns it into a trie
  path and a variant (a segment start seen before is recorded);
* **match**: the kernel's calls are checked against the trie (:mod:`tracer.sim.fastpath.match`) and deferred; at
  the segment's end the variant's program schedules all of it (:mod:`tracer.sim.fastpath.schedule`).

Matched segments form a *chain*: the dependency records of the blocks and tensors they touched stay *lazy* (each
holds the segment that last touched it and its role there, the records themselves being the variant's output
structure filled with that segment's producers), so consecutive segments hand records to each other without
building them.  Before anything runs through the general path the chain is broken: every lazy record is written
back (:meth:`FastPath.break_chain`).  When a call does not match (a deviation: another branch of the kernel,
other shapes, other buffers, ...), the events matched so far in the segment are re-issued through the general
path -- their dependencies resolved afresh by the tracker -- and the rest of the segment is recorded.

The result is the trace the general path would write, row for row (``tests/unit/test_sim_fastpath.py`` checks it);
numerics (``--numerics`` / ``--check``) always use the general path.
"""

from __future__ import annotations

import weakref
from types import FrameType
from typing import Any

from tracer.sim import tracker
from tracer.sim.fastpath import match, schedule_jit, state
from tracer.sim.fastpath.api_events import GENERAL, MATCH, MAX_SEGMENT, RECORD, ApiEvents
from tracer.sim.fastpath.commit import commit, prepare
from tracer.sim.fastpath.fallback import reissue
from tracer.sim.fastpath.ledger import Ledger
from tracer.sim.fastpath.match import all_names
from tracer.sim.fastpath.record import Recorder, Unrecordable
from tracer.sim.fastpath.trie import ALLOC, COMMIT, FREE, MARK, OP, Node, Variant
from tracer.sim.records import S_VECTOR

#: Instructions a segment aims at (a loop commits every ceil(TARGET / instructions per iteration) iterations).
TARGET = 256
#: Once a loop predicts at least LONG_RUN more instructions, segments aim at LONG_FACTOR x TARGET: the per-segment
#: work (matching the commit, template look-ups, handing state to the compiled loop and back, ~90 us) is then
#: spread over more instructions, which repays recording the longer segments (BENCHMARKS.md, round 11).  Short runs
#: keep TARGET: for them the longer recordings cost more than they save.
LONG_RUN = 1_000_000
LONG_FACTOR = 3
#: A commit point reached fewer than this many instructions after the last one is a step instead: nested loops'
#: starts and ends (an inner loop ending just before its outer loop's next iteration) would otherwise cut segments
#: of a few instructions, each costing a whole commit (10-30 us against ~2 us per instruction).
MIN_SEGMENT = 16
#: Recorded variants per segment start before the fast path stops recording it.
MAX_VARIANTS_PER_ROOT = 64


class _Exact:
    """What ``total_from`` refers to for an affine nest's exact count: no loop started before it."""

    start_n = -1


_EXACT = _Exact()
_EXACT_REF = weakref.ref(_EXACT)


def _no_loop() -> None:
    return None


class FastPath(ApiEvents):
    """Loop fast path of one :class:`~tracer.sim.context.KernelContext` (see the module docstring)."""

    def __init__(self, ctx: Any) -> None:
        from tracer.sim.context import KernelContext

        self.ctx = ctx
        self.core = ctx.core
        self.interner = state.Interner()
        self.roots: dict[tuple[Any, ...], Node] = {}
        self.root_variants: dict[tuple[Any, ...], int] = {}
        self.seen: set[tuple[Any, ...]] = set()
        #: Per loop site: commit every ``stride`` iterations, 0 for a loop too small to commit at all.
        self.strides: dict[tuple[int, int], int] = {}
        #: The segment length strides are decided for (TARGET, then LONG_FACTOR x TARGET in a long run), and how
        #: many times that changed; per loop site, the epoch its stride was decided in.
        self.target = TARGET
        self._epoch = 0
        self._stride_epoch: dict[tuple[int, int], int] = {}
        #: Sites of the loops decided (in this epoch) to be steps inside segments, each with the most iterations a
        #: run of it may have and stay one: a later run calls no marker (:func:`tracer.sim.context.loop_range`); a
        #: recording made while a loop was still being decided has its steps, and a match against it falls back once
        #: and records the segment again.  A longer run (a triangular loop, whose first run was short) promotes the
        #: loop (:meth:`promote`).
        self.steps: dict[tuple[int, int], int] = {}
        #: Sites promoted from steps, each with the most iterations a run of it may have and stay silent: a longer run
        #: commits every ``ceil(TARGET / instructions per iteration)`` iterations (TARGET even in a long run: the
        #: remainders of runs of ever other lengths are as many segments to record as the stride has iterations).
        self.promoted: dict[tuple[int, int], int] = {}
        #: A weak reference to the running loop whose prediction is the progress total (:meth:`_total`).
        self.total_from: Any = _no_loop
        #: ``count()`` at the last commit point (see :data:`MIN_SEGMENT`).
        self.commit_at = 0
        #: The code objects loop sites name by id (kept alive here, so an id names one code object for the run).
        self._site_codes: dict[int, Any] = {}
        self.mode = GENERAL
        self.rec: Recorder | None = None
        self.rec_key: tuple[Any, ...] | None = None
        self.m: match.Segment | None = None
        self.chain: dict[int, Any] = {}
        self.n_variants = 0
        self.variants: list[Variant] = []
        self.error: BaseException | None = None
        self.stats = {"matched": 0, "recorded": 0, "fallbacks": 0, "instructions": 0}
        #: Whether learning segments pays (:mod:`tracer.sim.fastpath.ledger`): recorded and re-issued instructions.
        self.ledger = Ledger()
        self.partitions = ctx.cm.partitions
        #: Each recipe's roles and substitution by its text (:func:`~tracer.sim.fastpath.commit.prepare`).
        self.recipe_parts: dict[str, Any] = {}
        #: Generated matching functions by their untrimmed source (:func:`match.build`), for this run only.
        self.match_code: dict[str, Any] = {}
        self.match_methods = match.make_methods(self)
        self.record_methods = self._make_record_methods(KernelContext)
        self.core.variants = self.variants

    # -- bookkeeping -----------------------------------------------------------------------------------------------
    def site(self, frame: FrameType) -> tuple[int, int]:
        """The loop site of the ``for`` statement running in ``frame``: (id of its code object, its instruction
        offset).  Not (code, offset): hashing a code object hashes its constants and bytecode every time (~1.5 us
        for a kernel's expanded loop nest, once per loop iteration in the dicts keyed by site)."""
        code = frame.f_code
        key = id(code)
        if key not in self._site_codes:
            self._site_codes[key] = code
        return key, frame.f_lasti

    def count(self) -> int:
        """Instructions issued so far, matched ones included."""
        return self.core.n + (self.m.n if self.m is not None else 0)

    def _install(self, methods: dict[str, Any] | None) -> None:
        d = self.ctx.__dict__
        for name in (*match.OPS, *match.ALLOCS, "release_tile"):
            d.pop(name, None)
        if methods:
            d.update(methods)

    def _check_error(self) -> None:
        if self.error is not None:
            err, self.error = self.error, None
            raise RuntimeError(f"trnprof loop fast path failed: {err!r}") from err

    # -- modes -----------------------------------------------------------------------------------------------------
    def _start_match(self, root: Node) -> None:
        core = self.core
        self.m = m = match.Segment(root, self.ctx._n_tiles, core.stream_seq[S_VECTOR],
                                   list(core.open_spans) if core.open_spans else [])
        m.names[("A", 0)] = self.ctx.cur_layer
        m.names[("A", 1)] = self.ctx.cur_operator
        self.mode = MATCH
        self._install(self.match_methods)

    def _start_record(self, key: tuple[Any, ...], root: Node, rec: Recorder | None = None) -> None:
        self.rec = rec if rec is not None else Recorder(self, root, self.ctx._n_tiles)
        self.rec_key = key
        self.mode = RECORD
        self._install(self.record_methods)
        self.ctx.issue = self.rec.issue
        tracker.COMPARE_HOOK = self.rec.compared

    def _stop_record(self) -> None:
        if self.rec is not None:
            self.ledger.spend(len(self.rec.positions))
        self.rec = None
        self.rec_key = None
        self.ctx.__dict__.pop("issue", None)
        tracker.COMPARE_HOOK = None
        self._install(None)
        self.mode = GENERAL

    def _drop_recording(self) -> None:
        self._stop_record()

    # -- markers: segment boundaries and inner loop steps ----------------------------------------------------------
    def marker(self, loop: Any, i: int) -> None:
        """A loop step (``i`` >= 0) or the loop's end (``i`` = -1).

        A loop *commits* (ends a segment) at its start, its end and every ``stride`` iterations when it is a
        commit loop: one whose iterations hold at least :data:`TARGET` instructions in all; smaller loops are
        steps inside their enclosing segment.  Both are decided from the first run of each loop that issues
        instructions (its iterations' instructions so far), so later runs of the same loop are cut the same way --
        except a step's longer run, which promotes it (:meth:`promote`).
        """
        site = loop.site
        stride = self.strides.get(site)
        if i == 0:
            loop.start_n = self.count()
            if stride is not None and self._stride_epoch[site] != self._epoch:
                # decided before _lengthen: decided again in this run (a run in progress then kept its stride)
                del self.strides[site]
                self.steps.pop(site, None)
                stride = None
            commit = stride is not None and stride > 0
        elif stride is None:  # first run of this loop, after its first iteration (or at the end of a short loop)
            done = i if i > 0 else loop.n
            per = (self.count() - loop.start_n) // done if done else 0
            if per == 0:  # an empty run, or iterations that issued nothing yet: nothing to decide from
                self._step((site, i < 0, self._epoch))
                return
            if i > 0:  # predict where this loop ends (iterations so far x iterations); in a long run ahead, this
                # loop's stride, decided below, is for the longer segments too
                loop.d1 = self.count() - loop.start_n
                self._predict(loop.start_n + per * loop.n - self.count(), loop)
            target = TARGET if site in self.promoted else self.target
            long_enough = per * loop.n >= target or site in self.promoted
            stride = self.strides[site] = max(1, -(-target // per)) if long_enough else 0
            if stride == 0:  # a step while a run has no more iterations than this one's segments hold
                self.steps[site] = (target - 1) // per
            self._stride_epoch[site] = self._epoch
            commit = stride > 0 and (i < 0 or i % stride == 0)
        else:
            commit = stride > 0 and (i < 0 or i % stride == 0)
            if i > 0 and not i & (i - 1):
                self._repredict(loop, i)
            elif i < 0 and loop is self.total_from():
                self.total_from = _no_loop
        # the epoch keeps segments cut the new way after _lengthen apart from the old ones' recordings (a loop that
        # was a step can be a commit now: the same site and end flag must not meet both kinds in one trie)
        spec = (site, i < 0, self._epoch)
        if commit and self.count() - self.commit_at >= MIN_SEGMENT:
            self._boundary(spec)
        else:
            self._step(spec)

    def expect(self, instructions: int) -> None:
        """At least ``instructions`` more are coming: an ``nc.affine_range`` nest about to be expanded knows how many
        it issues before it runs.  A long run then cuts longer segments from its start (instead of recording its first
        segments twice, once cut for a short run and again after the first iteration of its outermost loop predicted
        a long one: matmul_rowload at 4x ran 1.07x faster); see :meth:`_predict`."""
        self._predict(instructions)

    def _predict(self, instructions: int, loop: Any = None) -> None:
        """At least ``instructions`` more are coming (told by :meth:`expect`, or predicted by ``loop`` after the first
        iteration of its first run in :meth:`marker`): the prediction becomes the progress total (:meth:`_total`),
        loads the compiled scheduling loop when a long run is ahead (rather than after 500 K instructions), and in a
        long run cuts longer segments."""
        self._total(loop, self.count() + instructions)
        schedule_jit.expect(instructions)
        if instructions >= LONG_RUN and self.target == TARGET:
            self._lengthen()

    def _repredict(self, loop: Any, i: int) -> None:
        """The progress total again from ``loop``'s iteration ``i`` (a power of two) of any run: iterations whose
        instructions change linearly with their index (a triangular nest: causal attention visits one more kv block
        for each query block) are extrapolated exactly, from the slope between iterations [i/4, i/2) and [i/2, i),
        which leaves out the first one (often longer: the set-up before a pipeline fills); uniform ones as before.
        When that line misses iterations [i/8, i/4) by over a tenth, the iterations are not linear and the latest
        half's average is extrapolated instead (lengths hashed from the index: 2.1x high with a quarter, 8% with a
        tenth).  A line can still hold for a while and then stop (a sawtooth, a sliding window that stops growing):
        the total is then high, without bound, until the next power of two, so the *low* estimate beside it
        (``core.expected_low``, for decisions a high prediction must not make: the disk guard of ``trnprof record``)
        is the smaller of the line's and the latest half's average times the iterations left.  Before this the
        total was the first iteration's instructions times the iterations: causal attention at seq 8192 predicted
        1,906 of 35,937 instructions, and a shrinking nest twice its length."""
        count = self.count()
        done = count - loop.start_n
        owner = self.total_from()
        if owner is not None and owner is not loop and loop.start_n > owner.start_n:  # an inner loop: its marks only
            loop.d3, loop.d2, loop.d1 = loop.d2, loop.d1, done
            return
        n = loop.n
        if i == 1:
            left = flat = done * (n - 1)
        elif i == 2:
            left = flat = (done - loop.d1) * (n - 2)
        else:
            quarter, half = i // 4, i // 2
            avg1 = (loop.d1 - loop.d2) / (half - quarter)
            avg2 = (done - loop.d1) / (i - half)
            mid1, mid2 = (quarter + half - 1) / 2, (half + i - 1) / 2
            slope = (avg2 - avg1) / (mid2 - mid1)
            if i >= 8:  # the line's instructions for [i/8, i/4) against the run's
                eighth = i // 8
                line = (quarter - eighth) * (avg1 + slope * ((eighth + quarter - 1) / 2 - mid1))
                if abs(line - (loop.d2 - loop.d3)) > 0.1 * max(loop.d2 - loop.d3, 1):
                    slope = 0.0
            left = (n - i) * (avg2 + slope * ((i + n - 1) / 2 - mid2))
            flat = (n - i) * avg2
        loop.d3, loop.d2, loop.d1 = loop.d2, loop.d1, done
        self._total(loop, count + max(0, round(left)), count + max(0, round(min(left, flat))))

    def _total(self, loop: Any, end: int, low: int | None = None) -> None:
        """``end`` is where ``loop`` (None: an affine nest's exact count, :meth:`expect`) predicts the run reaches,
        ``low`` a lower estimate (default ``end``).  The progress total follows the outermost running loop's
        prediction, up or down: ``total_from`` is a weak reference to the loop it came from, released at the loop's
        end or when the loop is dropped (left by ``break`` or an exception).  An inner loop's prediction (one
        started after the total's) only raises it, and so does every loop's while an affine nest's exact count is
        the total and the run has not passed it.  While the total's loop runs, a total passed is no total (the bar
        shows none) until that loop's next prediction: an inner loop's run is not the run's end."""
        core = self.core
        low = end if low is None else low
        owner = self.total_from()
        if owner is _EXACT and core.expected_n is not None and core.expected_n <= self.count():
            owner = None
        if loop is not None and (owner is None or owner is loop or loop.start_n <= owner.start_n):
            core.expected_n = end
            core.expected_low = low
            self.total_from = weakref.ref(loop)
        elif core.expected_n is None or end > core.expected_n:
            core.expected_n = end
            core.expected_low = max(low, core.expected_low or 0)
            if loop is None:
                self.total_from = _EXACT_REF

    def promote(self, site: tuple[int, int]) -> None:
        """A loop decided to be a step runs long enough to commit (its first run was short: the kv loop of a causal
        attention visits one block for the first query block, all of them for the last): every loop decides its
        stride again at its next run, this one as a commit loop.  Without it such a loop stayed a step for the whole
        run, its enclosing loop's segments never repeated, and nothing was replayed (causal attention ran ~4x
        slower than the full one).  Like :meth:`_lengthen`, a new epoch keeps the segments cut the new way apart
        from the old recordings.  Its runs no longer than a step's stay silent (:func:`tracer.sim.context.loop_range`):
        one long run must not make every later short one cut segments of its own."""
        self.promoted[site] = self.steps[site]
        self._epoch += 1
        self.steps.clear()

    def _lengthen(self) -> None:
        """A long run ahead: every loop decides its stride again for segments of LONG_FACTOR x TARGET instructions,
        at its next run (a running loop keeps its stride until it ends).  The trace is the same: only where
        segments are cut changes, and the first segments cut the new way are recorded."""
        self.target = TARGET * LONG_FACTOR
        self._epoch += 1
        self.steps.clear()

    def _step(self, spec: tuple[Any, ...]) -> None:
        if self.mode == MATCH:
            node = self.m.node.first
            while node is not None:
                if node.kind == MARK and node.spec == spec:
                    self.m.node = node
                    return
                node = node.sib
            self._fallback()
        if self.mode == RECORD:
            self.rec.simple(MARK, spec)

    def _boundary(self, spec: tuple[Any, ...]) -> None:
        if self.mode == MATCH:
            node = self.m.node.first
            while node is not None:
                if node.kind == COMMIT and node.spec == spec:
                    commit(self, node.variant)
                    self.mode = GENERAL
                    break
                node = node.sib
            else:
                self._fallback()
        if self.mode == RECORD:
            self._finish_record(spec)
        self.commit_at = count = self.count()
        key = (spec,)
        root = self.roots.get(key)
        if root is not None and root.first is not None and \
                self.ledger.allows(count, self.stats["instructions"], key):
            self._start_match(root)
            return
        self.break_chain()
        self._install(None)
        self.mode = GENERAL
        self.m = None
        if key in self.seen and self.root_variants.get(key, 0) < MAX_VARIANTS_PER_ROOT and \
                self.ledger.allows(count, self.stats["instructions"], key):
            if root is None:
                root = self.roots[key] = Node(MARK, spec, (), (), None)
            self._start_record(key, root)
        else:
            self.seen.add(key)

    def _finish_record(self, spec: tuple[Any, ...]) -> None:
        rec = self.rec
        key = self.rec_key
        self._stop_record()
        if rec is None or len(rec.positions) > MAX_SEGMENT:
            return
        try:
            node = rec.finish(spec, None, -1)
        except Unrecordable:
            return
        self.stats["recorded"] += 1
        var = node.variant
        if var is not None and not hasattr(var, "out_sigs"):
            prepare(self, var)
            self.root_variants[key] = self.root_variants.get(key, 0) + 1
        k0 = 0
        for n in node.path():
            if n.fn is None and n.kind in (OP, ALLOC, FREE):
                match.build(self, n, k0)
            k0 += match.new_leaves(self, n)

    # -- falling back ------------------------------------------------------------------------------------------------
    def _fallback(self) -> None:
        """Re-issue the matched part of the segment through the general path and record the rest of it."""
        m = self.m
        all_names(m)
        path = m.node.path()
        root = path[0].parent if path else m.node
        self._install(None)
        self.mode = GENERAL
        self.m = None
        self.stats["fallbacks"] += 1
        self.ledger.spend(m.n)
        self.break_chain()
        key = next((k for k, r in self.roots.items() if r is root), None)
        rec = None
        if key is not None and self.root_variants.get(key, 0) < MAX_VARIANTS_PER_ROOT and \
                self.ledger.allows(self.count(), self.stats["instructions"], key):
            rec = Recorder(self, root, m.ub, (m.names[("A", 0)], m.names[("A", 1)]))
            self._start_record(key, root, rec)
        try:
            reissue(self, m, path, rec)
        except Unrecordable:
            self._drop_recording()
            raise RuntimeError("trnprof loop fast path: re-issuing a matched segment failed") from None

    # -- lazy records ------------------------------------------------------------------------------------------------
    def break_chain(self) -> None:
        """Write every lazy record back (before the general path runs)."""
        for obj in self.chain.values():
            seg = obj.lz_seg
            if seg is None:
                continue
            r = obj.lz_role
            state.materialise(obj, seg.var.outputs[r][1], seg.vals, seg.offs[r])
            obj.lz_seg = None
        self.chain.clear()

    # -- the kernel's end --------------------------------------------------------------------------------------------
    def finish(self) -> None:
        """Before the final barrier: schedule what is pending, write records back, leave the fast path."""
        self._check_error()
        if self.mode == MATCH:
            self._fallback()
        if self.mode == RECORD:
            self._stop_record()
        self.break_chain()
        self._disable()

    def _disable(self) -> None:
        self._install(None)
        self.ctx.__dict__.pop("issue", None)
        tracker.COMPARE_HOOK = None
        self.mode = GENERAL
        self.rec = None
        self.m = None
        self.ctx.fast = None
