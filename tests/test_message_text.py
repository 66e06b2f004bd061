"""``messages.message_text``: the one definition of "the text of a message"."""

from __future__ import annotations

from typing import Any

import pytest

from agentmem.messages import content_text, message_text


@pytest.mark.parametrize(
    ("message", "text"),
    [
        ({"role": "user", "content": "hi there"}, "hi there"),
        ({"role": "assistant", "content": None}, ""),
        ({"role": "user"}, ""),
        (
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                    {"type": "text", "text": "at this"},
                ],
            },
            "look\nat this",
        ),
        ({"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}, "no"),
        (
            {
                "role": "assistant",
                "content": "calling",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "ls", "arguments": '{"path": "."}'},
                    }
                ],
                "reasoning_content": "think",
                "task_id": 3,
            },
            "calling",
        ),
        ({"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"}, "a.py\nb.py"),
    ],
)
def test_message_text_is_the_contents_text_only(message: dict[str, Any], text: str) -> None:
    assert message_text(message) == text
    assert message_text(message) == content_text(message.get("content"))
