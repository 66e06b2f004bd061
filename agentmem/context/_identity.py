"""One identity cache: values keyed by *which object* they were computed from.

The context pipeline keeps several things derived from objects it does not
own (the OpenAI view of a stored message, the state a build keeps for one
working window, the checked map of a turn-notes tuple) and must find each
again only for that very object. It is the only user today, so the helper
lives in its package; a second part that needs one moves it back up to a
shared ``agentmem._identity`` rather than importing it from here.
``id(obj)`` alone is not a key: an id is reused as soon as its object is
freed, so a new object could pick up a stale value. This class holds each
key object alongside its value (keeping it alive, so its id stays its own)
and confirms every hit with ``is``. Equal but distinct objects never share
an entry; nothing here hashes or compares the keys' contents.

``max_entries`` bounds the cache: past it the least recently used entry is
dropped (a dropped value is simply recomputed by its owner; a cache never
holds the only copy of anything). :meth:`keep_only` drops every entry whose
key is not among the given live objects, for owners that know exactly which
keys can still be asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

__all__ = ["IdentityCache"]

K = TypeVar("K")
V = TypeVar("V")


class IdentityCache(Generic[K, V]):
    """A map from objects (by identity) to values; see the module docstring.

    Args:
        max_entries: Keep at most this many entries, dropping the least
            recently used; ``None`` for no bound.
    """

    __slots__ = ("_entries", "_max")

    def __init__(self, max_entries: int | None = None) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError(f"max_entries must be >= 1 or None, got {max_entries!r}")
        self._entries: dict[int, tuple[K, V]] = {}
        self._max = max_entries

    def get(self, key: K) -> V | None:
        """The value stored for this very object, or ``None``."""
        hit = self._hit(key)
        return hit[1] if hit is not None else None

    def _hit(self, key: K) -> tuple[K, V] | None:
        hit = self._entries.get(id(key))
        if hit is None or hit[0] is not key:
            return None
        if self._max is not None and next(reversed(self._entries)) != id(key):
            del self._entries[id(key)]  # the most recently used goes last
            self._entries[id(key)] = hit
        return hit

    def put(self, key: K, value: V) -> V:
        """Store ``value`` for ``key`` (replacing any earlier one) and return it."""
        entries = self._entries
        entries.pop(id(key), None)
        if self._max is not None and len(entries) >= self._max:
            del entries[next(iter(entries))]
        entries[id(key)] = (key, value)
        return value

    def get_or_make(self, key: K, make: Callable[[K], V]) -> V:
        """The stored value for ``key``, or ``make(key)`` stored and returned."""
        hit = self._hit(key)
        return hit[1] if hit is not None else self.put(key, make(key))

    def get_or_make_many(self, keys: Iterable[K], make: Callable[[K], V]) -> list[V]:
        """:meth:`get_or_make` of each key, in order (one call for a whole payload)."""
        if self._max is not None:
            return [self.get_or_make(key, make) for key in keys]
        entries = self._entries
        return [
            hit[1]
            if (hit := entries.get(id(key))) is not None and hit[0] is key
            # a miss: store and return make(key)
            else self.put(key, make(key))
            for key in keys
        ]

    def keep_only(self, alive: Iterable[object]) -> None:
        """Drop every entry whose key is not one of the objects in ``alive``."""
        live = {id(obj): obj for obj in alive}
        self._entries = {
            k: entry for k, entry in self._entries.items() if k in live and live[k] is entry[0]
        }

    def clear(self) -> None:
        """Drop every entry."""
        self._entries = {}

    def __len__(self) -> int:
        return len(self._entries)
