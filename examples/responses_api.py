"""Keep an OpenAI Responses API conversation in agentmem (runs offline: a scripted model).

    python examples/responses_api.py

With the real API, replace ``scripted_model`` by
``client.responses.create(model=..., input=items, tools=TOOLS, store=False,
include=["reasoning.encrypted_content"]).output``: the loop is the same.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from agentmem import Memory, from_responses_items

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Today's weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def scripted_model(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a reasoning model returns: a tool call first, then the answer."""
    if items[-1]["type"] != "function_call_output":
        return [
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA..."},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": json.dumps({"city": "Paris"}),
                "status": "completed",
            },
        ]
    weather = items[-1]["output"]
    return [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"Paris: {weather}.", "annotations": []}],
        }
    ]


def main(root: str) -> None:
    mem = Memory(root=root)
    with mem.session(name="weather", context_window=8_000) as s:
        s.append({"role": "system", "content": "You are a terse assistant."})
        s.append({"type": "message", "role": "user", "content": "Weather in Paris?"})
        while True:
            items = s.context(provider="openai-responses", tools=TOOLS)
            output = scripted_model(items)
            for message in from_responses_items(output):  # one turn, appended together
                s.append(message)
            calls = [item for item in output if item["type"] == "function_call"]
            if not calls:
                break
            for call in calls:
                answer = {"type": "function_call_output", "call_id": call["call_id"]}
                s.append(answer | {"output": "sunny, 21 C"})
        for item in s.context(provider="openai-responses"):
            print(json.dumps(item))
    hits = mem.recall("Paris sunny")  # every stored message is found by recall
    print("recall:", f"{hits[0].role}: {hits[0].preview}" if hits else "nothing")
    mem.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:  # removed when the script ends
        main(tmp)
