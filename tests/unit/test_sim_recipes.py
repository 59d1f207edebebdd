"""Template recipes of the loop fast path: a prepared substitution gives exactly what ``substitute`` gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.sim.fastpath.trie import has_refs, substitute, substitution
from tracer.sim.records import HKey, VKey

N_ROLES = 4


class _Block:
    def __init__(self, addr: int) -> None:
        self.addr = addr


def _kinds(x):
    return (type(x), tuple(_kinds(y) for y in x)) if isinstance(x, tuple) else type(x)


_ints = st.integers(0, 1 << 20)
_names = st.sampled_from(["a", "b", "w1_0", "x"])
_vkeys = st.builds(VKey, st.sampled_from(["SBUF", "PSUM"]), st.one_of(_ints, st.tuples(st.just("@B"),
                   st.integers(0, N_ROLES - 1))), st.sampled_from(["bf16", "fp32"]), _ints, _ints, _ints, _ints)
_hkeys = st.builds(HKey, st.sampled_from(["src", "dst"]), _ints, _ints, _ints, _ints)  # no role: the tensor is in aux
_leaves = st.one_of(_ints, _names, st.none(), st.booleans(), _vkeys, _hkeys,
                    st.tuples(st.just("@N"), st.tuples(st.sampled_from(["L", "O"]), st.integers(0, N_ROLES - 1))))
_recipes = st.recursive(_leaves, lambda inner: st.lists(inner, max_size=6).map(tuple), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(recipe=_recipes, addrs=st.lists(_ints, min_size=N_ROLES, max_size=N_ROLES),
       tiles=st.lists(_names, min_size=2 * N_ROLES, max_size=2 * N_ROLES))
def test_prepared_substitution_equals_substitute(recipe, addrs, tiles):
    blocks = [_Block(a) for a in addrs]
    names = {(kind, i): tiles[k * N_ROLES + i] for k, kind in enumerate("LO") for i in range(N_ROLES)}
    want = substitute(recipe, blocks, names)
    got = substitution(recipe)(blocks, names)
    assert got == want
    assert _kinds(got) == _kinds(want)  # VKey/HKey are namedtuples: == alone would not tell them from tuples
    if not has_refs(recipe):
        assert got is recipe  # nothing rebuilt
