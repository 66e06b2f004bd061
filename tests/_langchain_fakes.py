"""A scripted LangChain chat model and payload checks for the LangChain middleware tests.

``ScriptedChatModel`` is a real ``BaseChatModel`` (so ``create_agent`` binds tools
to it and calls it through its normal path): each call records the messages it
was sent, and answers with the next step of a tool-calling script. Offline.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

Step = Callable[[int, list[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """Answers call ``i`` with ``step(i, messages)``; records every call."""

    step: Step
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        self.bound_tools = list(tools)
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        reply = self.step(len(self.calls) - 1, list(messages))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def tool_loop(rounds: int, *, final: str = "done", call_prefix: str = "call") -> Step:
    """A script: per run, ``rounds`` calls of read_file / run_command, then a final answer.

    Call ``i`` of the model is round ``i % (rounds + 1)`` of its run (the model's
    own counter, not the messages it sees, which are windowed). Call ids are
    unique per model call (``<prefix>-<i>``).
    """

    def step(i: int, messages: list[BaseMessage]) -> AIMessage:
        if i % (rounds + 1) == rounds:
            return AIMessage(content=final)
        if i % 2 == 0:
            name, args = "read_file", {"path": f"src/mod_{i}.py"}
        else:
            name, args = "run_command", {"cmd": f"pytest tests/test_{i}.py"}
        return AIMessage(
            content="", tool_calls=[{"name": name, "args": args, "id": f"{call_prefix}-{i}"}]
        )

    return step


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\n" + "\n".join(
        f"def f{n}(x):\n    return x * {n}  # line {n}" for n in range(60)
    )


@tool
def run_command(cmd: str) -> str:
    """Run a shell command in the project."""
    return f"$ {cmd}\n" + "\n".join(f"tests/t.py::test_{n} PASSED [{n}%]" for n in range(80))


TOOLS = [read_file, run_command]


def payload_violations(messages: Sequence[BaseMessage]) -> list[str]:
    """Provider rules broken by a request: unanswered tool calls, orphan tool messages."""
    problems: list[str] = []
    pending: dict[str, int] = {}
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in pending:
                problems.append(f"orphan tool message {m.tool_call_id!r} at {i}")
            else:
                del pending[m.tool_call_id]
            continue
        if pending:
            problems.append(f"unanswered tool calls {sorted(pending)} before {i}")
            pending.clear()
        if (
            isinstance(m, SystemMessage)
            and i > 0
            and not isinstance(messages[i - 1], SystemMessage)
        ):
            problems.append(f"system message at {i} after a non-system message")
        if isinstance(m, AIMessage):
            pending = {str(c["id"]): i for c in m.tool_calls}
    if pending:
        problems.append(f"unanswered tool calls {sorted(pending)} at the end")
    return problems


def tool_specs_json(tools: Sequence[Any]) -> str:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return json.dumps([convert_to_openai_tool(t) for t in tools], separators=(",", ":"))
