"""Column names the database cannot hold as they are get distinct names (hypothesis against the rules)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from profiler.db.column_names import PREFIX, added_columns, distinct_names
from tracer import schema as ts

OWN = [c.name for c in ts.INSTRUCTION.columns]
NAMES = st.lists(st.one_of(st.sampled_from([*OWN, "track_id", "TRACK_ID", "", "Opcode", "PC", "extra", "Extra",
                                             "extra_Opcode", "extra_extra"]),
                           st.text(alphabet="abcXYZ_", max_size=4)), max_size=12)


@given(NAMES)
def test_names_are_distinct_ignoring_case_and_the_schemas_columns_keep_theirs(names):
    out = distinct_names("Instruction", names)
    assert len(out) == len(names)
    assert len({n.lower() for n in out}) == len(out)  # distinct as DuckDB compares them
    assert all(out)  # none empty
    assert not any(n.lower() in added_columns("Instruction") for n in out)  # never track_id
    for i, name in enumerate(names):
        if name in OWN and name not in names[:i]:
            assert out[i] == name  # the first of the schema's own column keeps its name
        elif out[i] != name:
            assert out[i].startswith(PREFIX)
    # an extra column without any clash keeps its name
    for i, name in enumerate(names):
        clashes = (not name or name.lower() in added_columns("Instruction")
                   or any(o.lower() == name.lower() for j, o in enumerate(names) if j != i)
                   or any(o.lower() == name.lower() for o in OWN if o != name)
                   or any(o.lower() == name.lower() for o in out if o.startswith(PREFIX) and o != name))
        if not clashes:
            assert out[i] == name


def test_span_columns_the_database_fills_are_taken_and_its_own_kept():
    span_own = [c.name for c in ts.SPAN.columns]
    out = distinct_names("Span", [*span_own, "dur_ns", "DUR_NS", "track_id"])
    assert out[:len(span_own)] == span_own
    assert out[len(span_own):] == ["extra_dur_ns", "extra_DUR_NS_2", "extra_track_id"]


def test_a_table_outside_the_schema_only_needs_distinct_names():
    assert distinct_names("Summary", ["a", "A", "", "b"]) == ["a", "extra_A", "extra_unnamed", "b"]
