"""The loop fast path's ledger: whether recording and matching segments pays for itself, and pauses when it does not.

Replaying a segment is cheap, but learning it is not: a recording runs the general path and builds a trie path and a
variant (several times the general path's cost per instruction), and a fallback issues the matched part of a segment
again.  A kernel whose segments never repeat -- a triangular nest whose inner loop is a plain ``range`` or an
``nc.affine_range`` of varying length, so each segment holds a different number of inner iterations -- only ever
pays: the fast path made such nests up to 6x slower than running without it.

The ledger counts, per *window* of the run, the instructions recorded and re-issued (the waste) against the
instructions matched segments replayed.  When the waste exceeds what the matches repaid by more than
:data:`SLACK` plus :data:`SHARE` of the window's instructions, the fast path *pauses*: segments run through the general
path (no matching, no recording) until the run has issued as many instructions again as it had when it paused, and
a new window starts.  So a kernel that keeps losing spends ever less of its run learning (the pauses double).  The
shipped kernels never pause: their waste beyond their matches stays below 11% of the instructions after their
first 5,000, and below :data:`SLACK` before (BENCHMARKS.md, round 31).  A kernel whose learning takes longer than
that allows does pause, and can then miss replays it would have had: a long pause, as long as the run before it,
can cover a regular phase after a losing one (a review measured such a kernel 30-45% slower than without the
ledger, and no faster than with the fast path off).  The trace is the same either way: only which segments are
replayed changes.
"""

from __future__ import annotations

#: Instructions of waste beyond the matches a window may run up whatever its length (a kernel's first recordings).
SLACK = 4096
#: The share of a window's instructions that may be waste beyond the matches.  Counting a wasted instruction as
#: more than one replayed one (recording costs several times what replaying saves) paused the learning phase of
#: triangular nests that then replayed 90% of their run: causal attention at seq 8192 went from 0.74x the time
#: without the fast path to 1.0x with a weight of 2 (BENCHMARKS.md, round 31).
SHARE = 0.2


class Ledger:
    """Waste and matches of the current window, and where a pause ends (see the module docstring)."""

    __slots__ = ("matched_at_start", "pauses", "resume_at", "start", "total_waste", "waste")

    def __init__(self) -> None:
        #: ``count()`` at the window's start, and the instructions matched before it.
        self.start = 0
        self.matched_at_start = 0
        #: Instructions recorded or re-issued in this window.
        self.waste = 0
        #: While ``count()`` is below this, the fast path is paused.
        self.resume_at = 0
        self.pauses = 0
        #: Instructions recorded or re-issued in the whole run.
        self.total_waste = 0

    def spend(self, instructions: int) -> None:
        """``instructions`` were recorded or issued again."""
        self.waste += instructions
        self.total_waste += instructions

    def allows(self, count: int, matched: int) -> bool:
        """May the segment starting after ``count`` instructions (``matched`` of them replayed) be matched or
        recorded?  False while paused, and when this window's waste has gone over its allowance (which pauses)."""
        if count < self.resume_at:
            return False
        if self.waste - (matched - self.matched_at_start) <= SLACK + SHARE * (count - self.start):
            return True
        self.pauses += 1
        self.resume_at = 2 * count
        self.start = self.resume_at
        self.matched_at_start = matched  # nothing is matched while paused
        self.waste = 0
        return False
