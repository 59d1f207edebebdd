"""Which timeline rows and counter lanes to draw: the row filter (Perfetto's track filter, with exclusions).

A filter is a comma-separated list of terms.  A term is text (found case-insensitively anywhere in a row's name)
or a ``/regular expression/`` (searched, case-insensitive; RE2 syntax, as in the timeline's search, so no pattern
takes more than linear time); a term starting with ``-`` excludes the rows it matches.  A row is drawn when it
matches at least one including term (or there is none) and no excluding term:

* ``Tensor, Vector`` -- the Tensor and Vector rows of every core;
* ``NC1`` or ``NeuronCore 1`` -- every row of core 1 (its DMA, engines, spans);
* ``-DMA`` -- everything but the DMA rows;
* ``/^thread 1[0-9]/, -›`` -- threads 10-19, their outermost level only.

A term is matched against the row's label (``Tensor``, ``thread 12 (python) ›2``), its group (``NeuronCore 0``,
``host``) and both joined as the timeline writes them (``NeuronCore 0 · Tensor``, ``NC0 · Tensor``).  Counter
lanes (SBUF usage, throttle, ...) are matched by their names and cores the same way; the busy %, DMA throughput
and HFU lanes follow the engine and DMA rows drawn.

Pure functions, used by the dashboard's timeline (``?rows=``) and by ``Trace.timeline(rows=...)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import duckdb

from profiler import db_schema as dbs
from profiler.errors import QueryError
from profiler.figures.raster import TimelineRow
from tracer import schema as ts

#: Longest filter accepted (a URL value, a text box).
MAX_FILTER_CHARS = 200
#: Joins a row's group and label in the text a term is matched against (as :func:`raster.row_labels` writes it).
GROUP_JOIN = " · "


class RowFilterError(QueryError):
    """A row filter that cannot be used: a malformed regular expression, or too long."""


@dataclass(frozen=True)
class Term:
    """One term of a filter: ``text`` to find (case-insensitive), or a regular expression when ``regex``."""

    value: str
    regex: bool = False


@dataclass(frozen=True)
class RowFilter:
    """A parsed row filter: the including and the excluding terms."""

    text: str
    include: tuple[Term, ...] = ()
    exclude: tuple[Term, ...] = ()

    @classmethod
    def parse(cls, text: Any) -> RowFilter:
        """The filter ``text`` writes (None or blank: one that keeps every row); RowFilterError when it is not
        text, is longer than :data:`MAX_FILTER_CHARS` or has a malformed ``/regular expression/``."""
        if text is None:
            return cls("")
        if not isinstance(text, str):
            raise RowFilterError(f"row filter must be text, not {type(text).__name__}")
        if len(text) > MAX_FILTER_CHARS:
            raise RowFilterError(f"row filter is {len(text)} characters long; at most {MAX_FILTER_CHARS}")
        include: list[Term] = []
        exclude: list[Term] = []
        for term in split_terms(text):
            negate = term.startswith("-")
            body = term[1:].strip() if negate else term
            if not body:
                continue
            (exclude if negate else include).append(_term(body))
        return cls(text.strip(), tuple(include), tuple(exclude))

    @property
    def active(self) -> bool:
        """Whether the filter leaves out anything at all."""
        return bool(self.include or self.exclude)

    def keep(self, texts: Sequence[Sequence[str]]) -> list[bool]:
        """For each item known by its ``texts`` (a row's label, group, ...), whether the filter keeps it."""
        if not self.active:
            return [True] * len(texts)
        flat = [t for item in texts for t in item]
        bounds = list(itertools.accumulate((len(item) for item in texts), initial=0))

        def any_hit(terms: tuple[Term, ...]) -> list[bool]:
            hits = [False] * len(flat)
            for term in terms:
                hits = [h or m for h, m in zip(hits, _matches(term, flat), strict=True)]
            return [any(hits[bounds[i]:bounds[i + 1]]) for i in range(len(texts))]

        included = any_hit(self.include) if self.include else [True] * len(texts)
        excluded = any_hit(self.exclude) if self.exclude else [False] * len(texts)
        return [i and not e for i, e in zip(included, excluded, strict=True)]


def _term(body: str) -> Term:
    if len(body) > 2 and body[0] == body[-1] == "/":
        term = Term(body[1:-1], regex=True)
        try:  # RE2 (DuckDB's, as the timeline's search): no pattern can take more than linear time
            _matches(term, [""])
        except duckdb.Error as exc:
            detail = str(exc).splitlines()[0].removeprefix("Invalid Input Error: ")
            raise RowFilterError(f"row filter: bad regular expression {body!r}: {detail}") from None
        return term
    return Term(body)


def _matches(term: Term, texts: list[str]) -> list[bool]:
    if not term.regex:
        needle = term.value.casefold()
        return [needle in t.casefold() for t in texts]
    if not texts:
        return []
    con = duckdb.connect(":memory:")
    try:
        return list(con.execute("SELECT list_transform($t, lambda x: regexp_matches(x, $p, 'i'))",
                                {"t": texts, "p": term.value}).fetchone()[0])
    finally:
        con.close()


def split_terms(text: str) -> list[str]:
    """The terms of a filter, stripped: split at commas, except inside a ``/regular expression/`` (a comma there
    belongs to it, as in ``/x{1,3}/``).  A slash opening a term that no later slash closes is plain text."""
    terms: list[str] = []
    start = 0          # where the current term starts
    regex_at = -1      # where the open regular expression's slash is, -1 when none is open
    i = 0
    while i < len(text):
        ch = text[i]
        if regex_at >= 0:
            if ch == "\\":
                i += 2  # an escaped character, "\/" included
                continue
            if ch == "/":
                regex_at = -1
        elif ch == "/" and text[start:i].strip().lstrip("-").strip() == "":
            regex_at = i
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
        i += 1
    if regex_at >= 0:  # never closed: the rest is plain text, split at its commas
        terms.extend(text[start:].split(","))
    else:
        terms.append(text[start:])
    return [t.strip() for t in terms if t.strip()]


def _texts(name: str, group: str) -> tuple[str, ...]:
    """A name, its group, and both joined (with the long and the short core name)."""
    short = group.replace("NeuronCore ", "NC")
    return (name, group, f"{group}{GROUP_JOIN}{name}", f"{short}{GROUP_JOIN}{name}")


def row_texts(row: TimelineRow) -> tuple[str, ...]:
    """What a row's terms are matched against: its label, group, and both joined (long and short core names)."""
    return _texts(row.label, row.group)


def counter_texts(counter: dict[str, Any]) -> tuple[str, ...]:
    """What a Counter track's terms are matched against: its name, its core's group, both joined."""
    core = counter.get(dbs.CORE)
    group = str(counter.get(dbs.GROUP_NAME) or (f"NeuronCore {core}" if core is not None else "host"))
    return _texts(str(counter.get(ts.NAME) or ""), group)


def filter_rows(rows: Sequence[TimelineRow], row_filter: RowFilter) -> list[TimelineRow]:
    """The rows ``row_filter`` keeps, in their order (marked ``among_groups`` when ``rows`` span several groups:
    their labels keep naming their cores)."""
    kept = [r for r, keep in zip(rows, row_filter.keep([row_texts(r) for r in rows]), strict=True) if keep]
    if len({r.group for r in rows}) > 1:
        kept = [replace(r, among_groups=True) for r in kept]
    return kept


def filter_counters(counters: Sequence[dict[str, Any]], row_filter: RowFilter) -> list[dict[str, Any]]:
    """The Counter tracks (``lane_data.counter_tracks`` rows) ``row_filter`` keeps, in their order."""
    return [c for c, kept in zip(counters, row_filter.keep([counter_texts(c) for c in counters]), strict=True)
            if kept]


def no_match_message(row_filter: RowFilter, rows: Sequence[TimelineRow]) -> str:
    """One line for a filter that keeps no row: what was asked and some of the rows there are."""
    names = list(dict.fromkeys(r.label for r in rows))
    shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
    return f"no timeline row matches the row filter {row_filter.text!r}; the rows are: {shown}"


__all__ = ["MAX_FILTER_CHARS", "RowFilter", "RowFilterError", "Term", "counter_texts", "filter_counters", "filter_rows",
           "no_match_message", "row_texts", "split_terms"]
