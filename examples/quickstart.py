"""agentmem quickstart: a broken agent history in, provider-valid payloads out.

Runs offline, no API key. An agent loop crashed mid-tool-call, a tool
result arrived for a call that no longer exists, a provider handed out
tool-call ids other providers reject, and a tool printed bytes that are not
valid UTF-8. Sending that list as-is gets a 400 from any provider;
``MessageHistory.to_api()`` repairs it deterministically for OpenAI and for
Anthropic.

    python examples/quickstart.py
"""

from __future__ import annotations

import json

import agentmem


def show(title: str, payload: object) -> None:
    print(f"\n=== {title} ===")
    print(json.dumps(payload, indent=2, ensure_ascii=False))


def main() -> None:
    history = agentmem.MessageHistory()
    history.replace_system_prompt("You are a careful coding agent.")
    history.append({"role": "user", "content": "List the repo, then read setup.py.", "task_id": 1})

    # The model asked for two tools; ids came from a provider that uses dots and colons.
    history.append(
        {
            "role": "assistant",
            "content": "Looking around first.   ",
            "reasoning_content": "Start with ls, then read the file.",
            "tool_calls": [
                {"id": "functions.ls:0", "function": {"name": "ls", "arguments": '{"path": "."}'}},
                {"id": "functions.read:1", "function": {"name": "read_file", "arguments": ""}},
            ],
            "task_id": 1,
        }
    )
    # Only the first tool answered before the process died; its output had invalid UTF-8.
    history.append(
        {
            "role": "tool",
            "tool_call_id": "functions.ls:0",
            "content": b"setup.py\nREADME \xff\xfe\n",
        }
    )
    # A stale result from a call that was rolled back long ago.
    history.append({"role": "tool", "tool_call_id": "call_gone", "content": "stale"})
    # The user comes back and types again.
    history.append({"role": "user", "content": "Are you still there?", "task_id": 1})

    print(f"stored messages: {len(history)}; estimated tokens: {history.estimate_tokens()}")

    show("OpenAI Chat Completions payload", history.to_api())
    system, messages = history.to_api(provider="anthropic")
    show("Anthropic Messages payload", {"system": system, "messages": messages})

    # Bad input is refused with the message index and the field, and nothing is stored.
    try:
        history.append({"role": "tool", "content": "which call was this?"})
    except agentmem.InvalidMessageError as err:
        print(f"\nrefused: {err}")
    print(f"stored messages still: {len(history)}")


if __name__ == "__main__":
    main()
