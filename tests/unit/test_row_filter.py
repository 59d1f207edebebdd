"""The timeline's row filter (profiler.figures.row_filter): parsing, matching against an oracle, errors."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler.errors import QueryError
from profiler.figures.raster import TimelineRow, row_labels
from profiler.figures.row_filter import (
    MAX_FILTER_CHARS,
    RowFilter,
    RowFilterError,
    Term,
    counter_texts,
    filter_counters,
    filter_rows,
    no_match_message,
    split_terms,
)


def _row(label: str, core: int | None = 0, kind: str = "engine") -> TimelineRow:
    group = f"NeuronCore {core}" if core is not None else "host"
    return TimelineRow(label, (hash((label, core)) & 0xFFFF,), kind, core, group, label)


ROWS = [_row("Tensor", 0), _row("Vector", 0), _row("DMA (16 queues)", 0, "dma_queue"),
        _row("Tensor", 1), _row("Vector", 1), _row("DMA (16 queues)", 1, "dma_queue"),
        _row("layer", None, "span"), _row("layer ›1", None, "span"), _row("thread 12 (python)", None, "span")]


def _kept(text: str) -> list[tuple[str, str]]:
    return [(r.group, r.label) for r in filter_rows(ROWS, RowFilter.parse(text))]


@pytest.mark.parametrize(("text", "terms"), [
    ("Tensor, Vector", ["Tensor", "Vector"]),
    ("  Tensor ,, ,Vector  ", ["Tensor", "Vector"]),
    ("/x{1,3}/, -DMA", ["/x{1,3}/", "-DMA"]),        # a comma inside a regular expression belongs to it
    ("-/a,b/", ["-/a,b/"]),
    (r"/a\/b,c/, d", [r"/a\/b,c/", "d"]),             # an escaped slash does not close it
    ("a/b, c", ["a/b", "c"]),                        # a slash inside a text term is text
    ("/open, x", ["/open", "x"]),                    # never closed: plain text, split at its commas
    ("", []), (" , ", []),
])
def test_terms_split_at_commas_outside_regular_expressions(text, terms):
    assert split_terms(text) == terms


def test_terms_keep_and_hide_rows():
    assert _kept("Tensor") == [("NeuronCore 0", "Tensor"), ("NeuronCore 1", "Tensor")]
    assert _kept("tensor, VECTOR") == [(g, lab) for g, lab in ((r.group, r.label) for r in ROWS)
                                       if lab in ("Tensor", "Vector")]                  # case-insensitive
    assert _kept("NC1") == [("NeuronCore 1", "Tensor"), ("NeuronCore 1", "Vector"),
                            ("NeuronCore 1", "DMA (16 queues)")]                          # a core, short name
    assert _kept("NeuronCore 1 · Vector") == [("NeuronCore 1", "Vector")]                 # as the axis writes it
    assert _kept("-DMA") == [(r.group, r.label) for r in ROWS if not r.label.startswith("DMA")]
    assert _kept("Tensor, -NC0") == [("NeuronCore 1", "Tensor")]                          # exclusion wins
    assert _kept("/^layer$/") == [("host", "layer")]                                      # a regular expression
    assert _kept("host, -›") == [("host", "layer"), ("host", "thread 12 (python)")]
    assert _kept("(python)") == [("host", "thread 12 (python)")]                          # text, not a regex
    assert _kept("") == [(r.group, r.label) for r in ROWS] == _kept(" , - ")               # no term: every row
    assert _kept("nothing like it") == []


def test_counters_are_filtered_by_name_and_core():
    counters = [{"track_id": 1, "name": "sbuf_usage_bytes", "core": 0, "group_name": None},
                {"track_id": 2, "name": "tensor_throttle_percent", "core": 1, "group_name": None},
                {"track_id": 3, "name": "queue", "core": None, "group_name": "gpu 0"}]
    assert [c["track_id"] for c in filter_counters(counters, RowFilter.parse("sbuf"))] == [1]
    assert [c["track_id"] for c in filter_counters(counters, RowFilter.parse("NC1"))] == [2]
    assert [c["track_id"] for c in filter_counters(counters, RowFilter.parse("gpu 0 · queue"))] == [3]
    assert [c["track_id"] for c in filter_counters(counters, RowFilter.parse("-tensor"))] == [1, 3]
    assert counter_texts(counters[0])[1] == "NeuronCore 0"


@pytest.mark.parametrize("bad", ["/(/", "/[a-/", "-/(?P<x/", 7, ["Tensor"], "x" * (MAX_FILTER_CHARS + 1)])
def test_bad_filters_are_one_line_query_errors(bad):
    with pytest.raises(RowFilterError) as info:
        RowFilter.parse(bad)
    assert isinstance(info.value, QueryError)
    assert "\n" not in str(info.value) and str(info.value).startswith("row filter")


def test_the_no_match_message_names_the_filter_and_some_rows():
    message = no_match_message(RowFilter.parse("zzz"), ROWS)
    assert "'zzz'" in message and "Tensor, Vector, DMA (16 queues), layer" in message and "\n" not in message
    many = [_row(f"r{i}") for i in range(20)]
    assert "(20 in all)" in no_match_message(RowFilter.parse("zzz"), many)


# -- against a brute-force oracle ------------------------------------------------------------------------------
WORDS = ["Tensor", "Vector", "DMA", "queue", "layer", "thread", "12", "NC", "op", "a", "·", "›", " "]
LABELS = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map("".join)
#: Regular expressions whose meaning is the same in RE2 (DuckDB) and Python's re.
REGEXES = st.sampled_from(["^Tensor", "queue$", "^NC[01]", "[0-9]+", "a|op", "^layer ›[0-9]$", "T.*r", "^$"])


@st.composite
def terms(draw):
    if draw(st.booleans()):
        return Term(draw(REGEXES), regex=True)
    return Term(draw(st.sampled_from([*WORDS, "tensor", "dma q", "nc1", "NeuronCore 1", "host"])).strip() or "a")


def _oracle_match(term: Term, text: str) -> bool:
    if term.regex:
        return re.search(term.value, text, re.IGNORECASE) is not None
    return term.value.casefold() in text.casefold()


def _text_of(term: Term, negate: bool) -> str:
    body = f"/{term.value}/" if term.regex else term.value
    return ("-" if negate else "") + body


@given(labels=st.lists(st.tuples(LABELS, st.sampled_from([0, 1, None])), min_size=1, max_size=12),
       include=st.lists(terms(), max_size=3), exclude=st.lists(terms(), max_size=3))
def test_filtering_matches_the_oracle(labels, include, exclude):
    rows = [_row(label, core) for label, core in labels]
    text = ", ".join([_text_of(t, False) for t in include] + [_text_of(t, True) for t in exclude])
    parsed = RowFilter.parse(text)
    assert parsed.include == tuple(include) and parsed.exclude == tuple(exclude)

    def texts(r: TimelineRow) -> list[str]:
        short = r.group.replace("NeuronCore ", "NC")
        return [r.label, r.group, f"{r.group} · {r.label}", f"{short} · {r.label}"]

    def oracle(r: TimelineRow) -> bool:
        hit = lambda ts: any(_oracle_match(t, x) for t in ts for x in texts(r))  # noqa: E731
        return (not include or hit(include)) and not hit(exclude)

    kept = filter_rows(rows, parsed)
    several = len({r.group for r in rows}) > 1
    assert [replace(r, among_groups=False) for r in kept] == [r for r in rows if oracle(r)]
    assert all(r.among_groups is several for r in kept)


def test_rows_kept_from_several_cores_keep_their_core_in_their_labels():
    kept = filter_rows(ROWS, RowFilter.parse("Tensor, -NC0"))
    assert row_labels(kept) == ["NC1 · Tensor"]
    single = [_row("Tensor", 0), _row("Vector", 0)]
    assert row_labels(filter_rows(single, RowFilter.parse("Vector"))) == ["Vector"]
