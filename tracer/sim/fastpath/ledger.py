"""The loop fast path's ledger: whether recording and matching segments pays for itself, and pauses when it does not.

Replaying a segment is cheap, but learning it is not: a recording runs the general path and builds a trie path and a
variant (several times the general path's cost per instruction), and a fallback issues the matched part of a segment
again.  A kernel whose segments never repeat -- a triangular nest whose inner loop is a plain ``range`` or an
``nc.affine_range`` of varying length, so each segment holds a different number of inner iterations -- only ever
pays: the fast path made such nests up to 6.5x slower than running without it.

The ledger counts, per *window* of the run, the instructions recorded and re-issued (the waste) against the
instructions matched segments replayed. When the waste exceeds what the matches repaid by more than :data:`SLACK`
plus :data:`SHARE` of the window's instructions, the fast path *pauses*: the segment starts it knows then are
benched -- their segments run through the general path, no matching, no recording -- until the run has issued as
many instructions again as it had when it paused, and a new window starts. So a kernel that keeps losing spends ever
less of its run learning (the pauses double). A pause still learns what may pay, within :data:`SLACK` of waste for
the whole pause: segments starting where none did before (another loop: a regular phase after a losing one) as
usual, and each benched start once every 1/:data:`PROBES` of the pause (the same loop turning regular); once the
pause's replays repay its waste, it ends. (A pause that benched everything for its whole length covered a review's
regular phase: 30-45% slower than without the ledger; it now replays 94% of what it did then. Learning new starts
without that bound made an ``nc.affine_range`` triangular nest, whose every expansion is new code, 1.5x -> 2.2x
slower.) The shipped kernels never pause: their waste beyond their matches stays below 11% of the instructions after
their first 5,000, and below :data:`SLACK` before (BENCHMARKS.md, round 31). A kernel whose learning takes longer
than that allows does pause, and can miss some replays. The trace is the same either way: only which segments are
replayed changes.
"""

from __future__ import annotations

from typing import Any

#: Instructions of waste beyond the matches a window may run up whatever its length (a kernel's first recordings).
SLACK = 4096
#: The share of a window's instructions that may be waste beyond the matches.  Counting a wasted instruction as
#: more than one replayed one (recording costs several times what replaying saves) paused the learning phase of
#: triangular nests that then replayed 90% of their run: causal attention at seq 8192 went from 0.74x the time
#: without the fast path to 1.0x with a weight of 2 (BENCHMARKS.md, round 31).
SHARE = 0.2
#: Times a pause tries its benched segment starts again (spread evenly over it).
PROBES = 16


class Ledger:
    """Waste and matches of the current window, and where a pause ends (see the module docstring)."""

    __slots__ = ("benched", "keys", "matched_at_start", "pauses", "probe_at", "probe_gap", "resume_at", "start",
                 "total_waste", "waste")

    def __init__(self) -> None:
        #: ``count()`` at the window's start, and the instructions matched before it.
        self.start = 0
        self.matched_at_start = 0
        #: Instructions recorded or re-issued in this window.
        self.waste = 0
        #: While ``count()`` is below this, the fast path is paused.
        self.resume_at = 0
        self.pauses = 0
        #: The segment starts asked about so far, and those a pause benches (the ones known when it began).
        self.keys: set[Any] = set()
        self.benched: set[Any] = set()
        #: While paused, a benched start may be tried again once ``count()`` reaches ``probe_at``.
        self.probe_at = self.probe_gap = 0
        #: Instructions recorded or re-issued in the whole run.
        self.total_waste = 0

    def spend(self, instructions: int) -> None:
        """``instructions`` were recorded or issued again."""
        self.waste += instructions
        self.total_waste += instructions

    def allows(self, count: int, matched: int, key: Any) -> bool:
        """May the segment starting at ``key`` after ``count`` instructions (``matched`` of them replayed) be matched
        or recorded?  Not when this window's waste has gone over its allowance, which pauses: every start known
        then is benched until the run has doubled.  During a pause a start first met is learnt as usual (another
        loop: a regular phase after a losing one), and a benched one is tried again every 1/:data:`PROBES` of the
        pause (the same loop turning regular), both within :data:`SLACK` of waste for the whole pause; once the
        pause's replays repay its waste, the pause ends."""
        if count < self.resume_at:
            repaid = matched - self.matched_at_start
            if repaid > self.waste:  # what was learnt during the pause pays: the kernel turned regular
                self.resume_at = count
            elif key in self.benched:
                if count < self.probe_at or self.waste - repaid > SLACK:
                    return False
                self.probe_at = count + self.probe_gap
                return True
            else:
                self.keys.add(key)
                if self.waste - repaid <= SLACK:
                    return True
                self.benched = set(self.keys)
                return False
        if self.benched:  # the pause is over: a new window
            self.benched = set()
            self._window(count, matched)
        self.keys.add(key)
        if self.waste - (matched - self.matched_at_start) <= SLACK + SHARE * (count - self.start):
            return True
        self.pauses += 1
        self.benched = set(self.keys)
        self.resume_at = 2 * count
        self.probe_gap = max(1, count // PROBES)
        self.probe_at = count + self.probe_gap
        self._window(count, matched)
        return False

    def _window(self, count: int, matched: int) -> None:
        self.start = count
        self.matched_at_start = matched
        self.waste = 0
