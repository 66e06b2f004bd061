"""An OpenAI Agents SDK agent whose session lives in agentmem (offline: a scripted model).

Run it from any directory: ``python examples/openai_agents_session.py``. It needs the
``openai-agents`` extra (``pip install 'agentmem[openai-agents]'``) and no API key: the
model is the SDK's own ``ScriptedModel``, which replays canned answers.

With a real model, drop ``model=`` (or pass your model name) and keep the rest: the
only line that changes from the SDK's documentation is the session.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

import agentmem
from agentmem.integrations.openai_agents import AgentMemSession


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"It is sunny in {city}."


async def main(root: Path) -> None:
    mem = agentmem.Memory(root=root)
    mem.ltm.add_discovery("The user lives in Lisbon", confidence=0.9)
    model = ScriptedModel(
        [
            [function_call("get_weather", {"city": "Lisbon"}, call_id="call-1")],
            [assistant_message("Sunny in Lisbon today.")],
            [assistant_message("You asked about the weather in Lisbon.")],
        ]
    )
    config = RunConfig(tracing_disabled=True)  # no trace upload: this example is offline

    # One line differs from the SDK's docs: AgentMemSession instead of SQLiteSession.
    with AgentMemSession("user-42@example.com", memory=mem) as session:
        agent = Agent(
            name="Assistant",
            model=model,
            tools=[get_weather],
            # Long-term memory and topic files reach the agent through its instructions.
            instructions=session.instructions("You are a helpful assistant."),
        )
        first = await Runner.run(agent, "What's the weather?", session=session, run_config=config)
        print("turn 1:", first.final_output)
        second = await Runner.run(agent, "What did I ask?", session=session, run_config=config)
        print("turn 2:", second.final_output)
        print(f"turn 2 saw {len(model.calls[-1].input)} items")  # the whole first turn + 1
        print(
            "instructions mention Lisbon:", "Lisbon" in (model.calls[0].system_instructions or "")
        )

    # Every item is searchable from any later session.
    hit = mem.recall("weather Lisbon")[0]
    print(f"recall: session {hit.session_id[:15]}..., message {hit.index}: {hit.preview!r}")

    # Another process (or this one, later) resumes the conversation exactly.
    with AgentMemSession("user-42@example.com", memory=mem) as session:
        items = await session.get_items()
        last: dict[str, Any] = dict(items[-1])  # exactly the item the runner stored
        print(f"resumed: {len(items)} items, last: {last['content'][0]['text']!r}")
    mem.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp) / ".agentmem"))
