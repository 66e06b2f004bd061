"""IdentityCache: values found again only for the very object they were stored for."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentmem.context._identity import IdentityCache


def test_equal_objects_do_not_share_an_entry() -> None:
    cache: IdentityCache[dict[str, int], str] = IdentityCache()
    a, b = {"x": 1}, {"x": 1}
    cache.put(a, "a")
    assert cache.get(a) == "a" and cache.get(b) is None
    assert cache.get_or_make(b, lambda _: "b") == "b" and cache.get(a) == "a"


def test_a_freed_key_cannot_be_impersonated_by_a_new_object_with_its_id() -> None:
    """The cache keeps its keys alive, so no later object can reuse a stored id."""
    cache: IdentityCache[object, int] = IdentityCache()
    ids = set()
    for i in range(200):
        obj = object()
        ids.add(id(obj))
        cache.put(obj, i)
        del obj  # freed now (refcounting): without the cache its id would be reused
    assert len(cache) == 200 and len(ids) == 200  # every key alive, every id distinct
    assert all(cache.get(object()) is None for _ in range(200))


def test_the_bound_drops_the_least_recently_used() -> None:
    cache: IdentityCache[object, int] = IdentityCache(2)
    a, b, c = object(), object(), object()
    cache.put(a, 1)
    cache.put(b, 2)
    assert cache.get_or_make(a, lambda _: 0) == 1  # a is now the most recent
    cache.put(c, 3)
    assert (cache.get(a), cache.get(b), cache.get(c)) == (1, None, 3)
    with pytest.raises(ValueError, match="max_entries"):
        IdentityCache(0)


@given(st.lists(st.integers(0, 9), max_size=40), st.sets(st.integers(0, 9)))
def test_matches_a_list_of_pairs_compared_by_is(puts: list[int], alive: set[int]) -> None:
    """Against an obviously correct model: a list of (object, value) pairs searched with ``is``."""
    objects = [[i] for i in range(10)]  # equal-looking lists would compare equal; ids differ
    cache: IdentityCache[list[int], int] = IdentityCache()
    model: list[tuple[list[int], int]] = []
    for n, i in enumerate(puts):
        cache.put(objects[i], n)
        model = [(k, v) for k, v in model if k is not objects[i]] + [(objects[i], n)]
    cache.keep_only(objects[i] for i in alive)
    model = [(k, v) for k, v in model if any(k is objects[i] for i in alive)]
    for obj in objects:
        expected = next((v for k, v in model if k is obj), None)
        assert cache.get(obj) == expected
        assert cache.get(list(obj)) is None  # an equal copy is another object
    assert len(cache) == len(model)
    cache.clear()
    assert len(cache) == 0
