"""Child process for tests/test_integration_openai_agents.py (run with ``sys.executable``).

Every mode opens ``Memory(root=<root>, backend=<backend or "">)`` (importing the SDK
costs a second or more of CPU, so each mode does all one process has to do)::

    hold <root> <backend> <session_id>
        Print "held" once the session's AgentMemSession is open, then hold it until
        stdin closes.

    open <root> <backend> <session_id>...
        Try to open each session once, in turn; print "opened" or "locked: <message>"
        for each.

    write <root> <backend> <session_id> <start>
        Add batch after batch (:func:`batch`, from number <start>), printing each
        batch's number once its add_items returned; runs until killed.

    turn <root> <backend> <session_id> <text>
        One Runner.run turn on the session (``lookup``, then the answer "done");
        prints the JSON of the model inputs.

    first <root> <backend> <state_file>
        Session "s1": one Runner.run turn (the scripted model calls ``lookup``, then
        answers "first"). Session "s2": a turn whose tool needs approval; its RunState
        (``to_string``) goes to <state_file>. Prints the JSON of
        ``{"inputs": <the s1 model inputs>, "interruptions": <count>}``.

    second <root> <backend> <state_file>
        Session "s1": a second turn ("second"). Session "s2": load the RunState, approve,
        run it to the end. Prints the JSON of ``{"inputs": <the s1 model inputs>,
        "final": <s2's final output>, "approved_input": <s2's last model input>}``.
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


async def _turn(session: Any, text: str, reply: str) -> list[Any]:
    """One turn: the model calls ``lookup``, then answers ``reply``; the model inputs."""
    from agents import RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call

    model = ScriptedModel(
        [
            [function_call("lookup", {"question": text}, call_id=f"call-{reply}")],
            [assistant_message(reply, item_id=f"msg-{reply}")],
        ]
    )
    await Runner.run(
        _agent(model), text, session=session, run_config=RunConfig(tracing_disabled=True)
    )
    model.assert_complete()
    return [call.input for call in model.calls]


async def _main(mode: str, root: str, backend: str, *rest: str) -> None:
    from agents import RunConfig, Runner, RunState
    from agents.testing import ScriptedModel, assistant_message, function_call

    import agentmem
    from agentmem.integrations.openai_agents import AgentMemSession

    config = RunConfig(tracing_disabled=True)
    mem = agentmem.Memory(root=root, backend=backend or None)
    if mode == "open":
        for session_id in rest:
            try:
                AgentMemSession(session_id, memory=mem).close()
            except agentmem.StoreLockedError as exc:
                print(f"locked: {exc}", flush=True)
            else:
                print("opened", flush=True)
    elif mode == "hold":
        with AgentMemSession(rest[0], memory=mem):
            print("held", flush=True)
            sys.stdin.read()
    elif mode == "write":
        session = AgentMemSession(rest[0], memory=mem)
        number = int(rest[1])
        while True:
            await session.add_items(batch(number))  # type: ignore[arg-type]
            print(number, flush=True)
            number += 1
    elif mode == "turn":
        with AgentMemSession(rest[0], memory=mem) as session:
            print(json.dumps(await _turn(session, rest[1], "done")))
    elif mode == "first":
        with AgentMemSession("s1", memory=mem) as session:
            inputs = await _turn(session, "What is it?", "first")
        with AgentMemSession("s2", memory=mem) as session:
            model = ScriptedModel(
                [[function_call("delete_file", {"path": "/tmp/x"}, call_id="del")]]
            )
            result = await Runner.run(
                _agent(model), "delete /tmp/x", session=session, run_config=config
            )
        with open(rest[0], "w", encoding="utf-8") as f:
            f.write(result.to_state().to_string())
        print(json.dumps({"inputs": inputs, "interruptions": len(result.interruptions)}))
    elif mode == "second":
        with AgentMemSession("s1", memory=mem) as session:
            inputs = await _turn(session, "Again?", "second")
        with AgentMemSession("s2", memory=mem) as session:
            model = ScriptedModel([[assistant_message("deleted it", item_id="msg-done")]])
            agent = _agent(model)
            with open(rest[0], encoding="utf-8") as f:
                state = await RunState.from_string(agent, f.read())
            for interruption in state.get_interruptions():
                state.approve(interruption)
            result = await Runner.run(agent, state, session=session, run_config=config)
        print(
            json.dumps(
                {
                    "inputs": inputs,
                    "final": result.final_output,
                    "approved_input": model.calls[-1].input,
                }
            )
        )
    mem.close()


if __name__ == "__main__":
    asyncio.run(_main(*sys.argv[1:]))
