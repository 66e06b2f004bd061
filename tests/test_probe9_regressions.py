"""Regressions found by the outside probe of issue 9's stores (probe/probe9.py).

Each test failed on the code before its fix: bad input that was silently
dropped, hand-edited topic files skipped without a word, and rows of
``semantic.sqlite`` damaged in place that made a whole scope unreadable.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentmem.errors import InvalidArgumentError
from agentmem.semantic import LocalMemoryClient


def texts(records: Any) -> set[str]:
    return {r.memory for r in records}


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("content", [5, 2.5, {"text": "hi"}, b"bytes", ("a", "tuple")])
def test_a_user_turn_with_content_of_a_wrong_type_is_refused_not_dropped(content: Any) -> None:
    client = LocalMemoryClient(None)
    client.add("kept", user_id="u")
    messages = [{"role": "user", "content": "fine words"}, {"role": "user", "content": content}]
    with pytest.raises(InvalidArgumentError, match=r"messages\[1\]\['content'\]"):
        client.add(messages, user_id="u", infer=False)
    assert texts(client.get_all(user_id="u")) == {"kept"}  # nothing of the call was stored


def test_user_turns_with_none_or_parts_content_are_still_accepted() -> None:
    client = LocalMemoryClient(None)
    events = client.add(
        [
            {"role": "user", "content": None},
            {"role": "user", "content": [{"type": "text", "text": "parts work"}]},
            {"role": "assistant", "content": 5},  # not the user's words: ignored as before
        ],
        user_id="u",
        infer=False,
    )
    assert [e["memory"] for e in events] == ["parts work"]
