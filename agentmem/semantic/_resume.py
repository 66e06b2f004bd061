"""What a session remembers of its semantic-memory extensions, so a resume is exact.

The payload of a session with extensions carries two things that are not
in its messages: each extension's resident persona (in the system prompt,
computed once when the session was created) and the ``<memory-context>``
block of each user turn (right after that turn). Recomputing either on
resume would change the payload (the memories changed since), so both are
saved in the session state as the ``extensions`` part:

```
{"format": "agentmem.session-extensions", "version": 1,
 "extensions": [{"name": "semantic:martin", "persona": "<user-persona ...>" | null}],
 "turns": [{"task_id": 3, "created_at": 1764150000.25,
            "blocks": [["semantic:martin", "<memory-context ...>"]]}]}
```

``persona`` is ``null`` when the extension had ``resident_persona=False``
(then a later open that turns it on computes one). A turn is found again by
its user message's ``task_id`` and ``created_at`` (every ``start_task`` sets
both), and only turns still in the working window are kept, so the part
stays as small as the window. Extensions are named (their ``name``), so a
resume knows which of them it has: an entry of an extension the resume was
not given is kept as stored (and written back), never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from agentmem._storage.formats import check_format
from agentmem.errors import InvalidArgumentError

__all__ = [
    "EXTENSIONS_STATE_FORMAT",
    "EXTENSIONS_STATE_VERSION",
    "StoredExtensions",
    "StoredTurn",
    "extensions_state",
    "read_extensions_state",
    "turn_key",
]

EXTENSIONS_STATE_FORMAT: Final = "agentmem.session-extensions"
EXTENSIONS_STATE_VERSION: Final = 1

TurnKey = tuple[int | str, float]
Blocks = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class StoredTurn:
    """The blocks one user turn got, by extension name."""

    key: TurnKey
    """The user message's ``(task_id, created_at)``."""
    blocks: Blocks
    """``(extension name, block)`` pairs, in the order they were placed."""


@dataclass(frozen=True)
class StoredExtensions:
    """The ``extensions`` part of a session state, read."""

    personas: dict[str, str | None]
    """Extension name -> its persona as it was placed (``None``: not resident), in order."""
    turns: tuple[StoredTurn, ...]


def turn_key(message: Mapping[str, Any]) -> TurnKey | None:
    """``(task_id, created_at)`` of a user message, or ``None`` when it lacks either."""
    task_id = message.get("task_id")
    created = message.get("created_at")
    if isinstance(task_id, bool) or not isinstance(task_id, int | str):
        return None
    if isinstance(created, bool) or not isinstance(created, int | float):
        return None
    return (task_id, float(created))


def _fail(why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"session extensions state: {why}")


def read_extensions_state(part: Any) -> StoredExtensions:
    """Read a stored ``extensions`` part.

    Raises:
        FormatVersionError: written by a newer agentmem (or a malformed version).
        InvalidArgumentError: not such a part, or damaged (the message says where).
    """
    check_format(
        part,
        kind=EXTENSIONS_STATE_FORMAT,
        version=EXTENSIONS_STATE_VERSION,
        what="session extensions state",
    )
    entries = part.get("extensions")
    if not isinstance(entries, list):
        raise _fail("'extensions' is not a list")
    personas: dict[str, str | None] = {}
    for i, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        persona = entry.get("persona") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name or name in personas:
            raise _fail(f"extensions[{i}].name is missing, empty or repeated")
        if persona is not None and not isinstance(persona, str):
            raise _fail(f"extensions[{i}].persona is not a string or null")
        personas[name] = persona
    raw_turns = part.get("turns")
    if not isinstance(raw_turns, list):
        raise _fail("'turns' is not a list")
    turns = []
    for i, raw in enumerate(raw_turns):
        key = turn_key(raw) if isinstance(raw, Mapping) else None
        blocks = raw.get("blocks") if isinstance(raw, Mapping) else None
        if key is None or not isinstance(blocks, list):
            raise _fail(f"turns[{i}] needs task_id, created_at and blocks")
        pairs = []
        for j, pair in enumerate(blocks):
            if not (
                isinstance(pair, list)
                and len(pair) == 2
                and all(isinstance(x, str) and x for x in pair)
            ):
                raise _fail(f"turns[{i}].blocks[{j}] is not a [name, block] pair")
            pairs.append((pair[0], pair[1]))
        turns.append(StoredTurn(key, tuple(pairs)))
    return StoredExtensions(personas, tuple(turns))


def extensions_state(
    personas: Mapping[str, str | None], turns: list[tuple[Mapping[str, Any], Blocks]]
) -> dict[str, Any]:
    """The ``extensions`` part for ``personas`` and ``(user message, blocks)`` turns."""
    out_turns = []
    for message, blocks in turns:
        key = turn_key(message)
        if key is None or not blocks:
            continue
        out_turns.append(
            {
                "task_id": key[0],
                "created_at": message["created_at"],
                "blocks": [[name, block] for name, block in blocks],
            }
        )
    return {
        "format": EXTENSIONS_STATE_FORMAT,
        "version": EXTENSIONS_STATE_VERSION,
        "extensions": [{"name": n, "persona": p} for n, p in personas.items()],
        "turns": out_turns,
    }
