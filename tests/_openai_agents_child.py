"""Child process for tests/test_integration_openai_agents.py (run with ``sys.executable``).

Every mode opens ``Memory(root=<root>, backend=<backend or "">)`` and the
``AgentMemSession`` of ``<session_id>``::

    hold <root> <backend> <session_id>
        Print "held" once the session is open, then hold it until stdin closes.

    open <root> <backend> <session_id>
        Try to open the session once; print "opened" or "locked: <message>".

    write <root> <backend> <session_id> <start>
        Add batch after batch (:func:`batch`, from number <start>), printing each
        batch's number once its add_items returned; runs until killed.

    turn <root> <backend> <session_id> <text> <reply>
        One Runner.run turn: the scripted model calls ``lookup`` then answers <reply>.
        Prints the JSON of the model's inputs (one list per model call).

    approve-start <root> <backend> <session_id> <state_file>
        Runner.run a turn whose tool needs approval; write the RunState (to_string)
        to <state_file> and print the number of interruptions.

    approve-finish <root> <backend> <session_id> <state_file>
        Load the RunState, approve the interruption, Runner.run it to the end with the
        session; print the JSON of the final output and the last model input.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

TOOL_REPLY = "the answer is 42"


def batch(number: int) -> list[dict[str, Any]]:
    """Batch ``number``: 1-3 items of a few bytes to ~4 KB, with an unknown int field."""
    size = 1 + number % 3
    return [
        {
            "role": "user" if (number + k) % 2 == 0 else "assistant",
            "content": f"batch {number} item {k} " + "lorem ipsum " * ((number * 31 + k) % 300),
            "x_batch": number,
            "x_item": k,
        }
        for k in range(size)
    ]


def _agent(model: Any) -> Any:
    from agents import Agent, function_tool

    @function_tool
    def lookup(question: str) -> str:
        """Look the answer up."""
        return TOOL_REPLY

    @function_tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file (needs approval)."""
        return f"deleted {path}"

    return Agent(name="assistant", model=model, tools=[lookup, delete_file])


async def _main(mode: str, root: str, backend: str, session_id: str, *rest: str) -> None:
    import agentmem
    from agentmem.integrations.openai_agents import AgentMemSession
    from agents import RunConfig, Runner, RunState
    from agents.testing import ScriptedModel, assistant_message, function_call

    mem = agentmem.Memory(root=root, backend=backend or None)
    if mode == "open":
        try:
            AgentMemSession(session_id, memory=mem).close()
        except agentmem.StoreLockedError as exc:
            print(f"locked: {exc}", flush=True)
        else:
            print("opened", flush=True)
        return
    session = AgentMemSession(session_id, memory=mem)
    config = RunConfig(tracing_disabled=True)
    if mode == "hold":
        print("held", flush=True)
        sys.stdin.read()
    elif mode == "write":
        number = int(rest[0])
        while True:
            await session.add_items(batch(number))  # type: ignore[arg-type]
            print(number, flush=True)
            number += 1
    elif mode == "turn":
        text, reply = rest
        model = ScriptedModel(
            [
                [function_call("lookup", {"question": text}, call_id=f"call-{reply}")],
                [assistant_message(reply, item_id=f"msg-{reply}")],
            ]
        )
        await Runner.run(_agent(model), text, session=session, run_config=config)
        model.assert_complete()
        print(json.dumps([call.input for call in model.calls]), flush=True)
    elif mode == "approve-start":
        model = ScriptedModel([[function_call("delete_file", {"path": "/tmp/x"}, call_id="del")]])
        result = await Runner.run(
            _agent(model), "delete /tmp/x", session=session, run_config=config
        )
        with open(rest[0], "w", encoding="utf-8") as f:
            f.write(result.to_state().to_string())
        print(len(result.interruptions), flush=True)
    elif mode == "approve-finish":
        model = ScriptedModel([[assistant_message("deleted it", item_id="msg-done")]])
        agent = _agent(model)
        with open(rest[0], encoding="utf-8") as f:
            state = await RunState.from_string(agent, f.read())
        for interruption in state.get_interruptions():
            state.approve(interruption)
        result = await Runner.run(agent, state, session=session, run_config=config)
        print(json.dumps([result.final_output, model.calls[-1].input]), flush=True)
    session.close()
    mem.close()


if __name__ == "__main__":
    asyncio.run(_main(*sys.argv[1:]))
