"""The emitter's column builders: Arrow string arrays converted once per value collection, dictionary columns."""

import numpy as np

from tracer.sim.columns import StringArrays, dict_column, first_seen_column, names_column


def test_string_arrays_are_converted_once_and_again_when_the_values_change():
    strings = StringArrays()
    fixed = strings(("a", "b"))
    assert fixed.to_pylist() == ["a", "b"]
    assert strings(("a", "b")) is fixed  # a tuple: by its values, whatever the object
    assert strings(("a", "c")).to_pylist() == ["a", "c"]
    grown = ["x"]
    first = strings(grown)
    assert strings(grown) is first
    grown.append("y")  # the emitter's lists only grow: a new length is new values
    assert strings(grown).to_pylist() == ["x", "y"]
    other = ["z"]  # another list of the same length is not mistaken for the first
    assert strings(other).to_pylist() == ["z"]
    codes = {"q": 0, "r": 1}
    assert strings(codes).to_pylist() == ["q", "r"]


def test_dictionary_columns_from_codes():
    strings = StringArrays()
    col = dict_column(np.array([1, -1, 0]), strings(("a", "b")))
    assert col.to_pylist() == ["b", None, "a"]
    assert dict_column(np.array([0, 0]), ["only"]).to_pylist() == ["only", "only"]
    names = names_column(np.array([3, -1, 1, 3], np.int32), ["n0", "n1", "n2", "n3"], strings)
    assert names.to_pylist() == ["n3", None, "n1", "n3"]
    assert names.dictionary.to_pylist() == ["n1", "n3"]  # only the names used, in code order
    seen = first_seen_column(np.array([2, 0, 2]), ["u", "v", "w"], strings)
    assert seen.to_pylist() == ["w", "u", "w"] and seen.dictionary.to_pylist() == ["w", "u"]


def test_operand_text_of_rows_with_and_without_waits_and_hbm_slices():
    """A row's operands: its waits ("$<semaphore>>=<value>", space-separated), then its template's static text, a
    DMA trigger's HBM slice (from its offset) between text_pre and text_post; the static texts are kept until
    templates are added."""
    from tracer.sim.operand_text import OperandText

    texts = OperandText(StringArrays())
    pre = (["$S[2]++ dst=a", "$qSyncIO++ src="], np.array([0, 1]))
    post = (["", " dst=SBUF"], np.array([0, 1]))
    static = texts.static_texts(2, pre, post)
    assert static[0].to_pylist() == ["$S[2]++ dst=a", "$qSyncIO++ src= dst=SBUF"]
    assert texts.static_texts(2, pre, post)[0] is static[0]  # kept
    tid = np.array([0, 0, 1, 1, 1])
    aux = np.array([-1, -1, 2 * 64 + 8, -1, 0])  # row 2: offset 2*64+8 in a 64-column tensor
    hbm_num = np.array([[-1, 1, 0, 0, 0], [-1, 1, 0, 0, 0], [0, 64, 4, 16, 0], [0, 64, 4, 16, 3], [0, 64, 4, 16, 3]])
    waits = (np.array([1, 1, 2]), np.array([0, 1, 1]), np.array([7, 12, 13]), ("S[0]", "qSyncIO"))
    got = texts.column(static, tid, aux, hbm_num, ["x"], waits).to_pylist()
    assert got == ["$S[2]++ dst=a",
                   "$S[0]>=7 $qSyncIO>=12 $S[2]++ dst=a",
                   "$qSyncIO>=13 $qSyncIO++ src=x[2:6,8:24] dst=SBUF",
                   "$qSyncIO++ src= dst=SBUF",  # no offset: no slice
                   "$qSyncIO++ src=x[0:4,0:16]*3 dst=SBUF"]  # broadcast 3 times
    no_waits = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), ("S[0]",))
    assert texts.column(static, tid[:1], aux[:1], hbm_num[:1], ["x"], no_waits).to_pylist() == ["$S[2]++ dst=a"]
