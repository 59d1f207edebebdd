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
