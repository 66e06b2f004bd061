"""Plug an Anthropic client into agentmem (needs ``pip install anthropic`` and ANTHROPIC_API_KEY).

    python examples/anthropic_client.py

The adapter turns ``client.messages.create`` into agentmem's
``llm(messages, tools=None) -> dict`` (OpenAI-format messages in and out;
the system prompt and tools are converted for Anthropic). ``AsyncAnthropic()``
gives an async one. Importing this file does nothing; without the SDK or the key it
says so and exits.
"""

from __future__ import annotations

import os
import sys
import tempfile

from agentmem import LLMSummarizer, Memory
from agentmem.adapters import anthropic_llm

MODEL = "claude-sonnet-4-5"


def main() -> None:
    try:
        from anthropic import Anthropic
    except ImportError:
        print("anthropic is not installed (pip install anthropic); skipping")
        return
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print("ANTHROPIC_API_KEY is not set; skipping")
        return
    llm = anthropic_llm(Anthropic(), MODEL, max_tokens=1024)
    mem = Memory(root=tempfile.mkdtemp(), llm=llm, summarizer=LLMSummarizer(llm))
    with mem.session(model=MODEL, context_window=200_000) as s:
        s.start_task("In one sentence: what is a context window?")
        reply = llm(s.context())  # OpenAI-format payload; the adapter converts it
        s.record_usage(usage=reply["usage"])  # prompt (cached parts included), completion, cost
        s.append(reply)
        print(reply["content"])
        s.finish_task()


if __name__ == "__main__":
    sys.exit(main())
