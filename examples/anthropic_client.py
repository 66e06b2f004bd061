"""Plug an Anthropic client into agentmem (needs ``pip install anthropic`` and ANTHROPIC_API_KEY).

    python examples/anthropic_client.py

The adapter turns ``client.messages.create`` into agentmem's
``llm(messages, tools=None) -> dict`` (OpenAI-format messages in and out;
the system prompt and tools are converted for Anthropic). ``AsyncAnthropic()``
gives an async one. Importing this file does nothing; without the key or the
SDK it says so in one line and exits 0 (``python examples/quickstart.py`` is
the offline demo). The memory lives in a temporary directory, removed when the
script ends.
"""

from __future__ import annotations

import os
import tempfile

MODEL = "claude-sonnet-4-5"
OFFLINE = "this example calls the real API; python examples/quickstart.py runs offline"


def main() -> None:
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print(f"ANTHROPIC_API_KEY is not set, skipping: {OFFLINE}")
        return
    try:
        from anthropic import Anthropic
    except ImportError:
        print(f"anthropic is not installed (pip install anthropic), skipping: {OFFLINE}")
        return
    from agentmem import LLMSummarizer, Memory
    from agentmem.adapters import anthropic_llm

    llm = anthropic_llm(Anthropic(), MODEL, max_tokens=1024)
    with (
        tempfile.TemporaryDirectory() as root,
        Memory(root=root, llm=llm, summarizer=LLMSummarizer(llm)) as mem,
        mem.session(model=MODEL, context_window=200_000) as s,
    ):
        s.start_task("In one sentence: what is a context window?")
        reply = llm(s.context())  # OpenAI-format payload; the adapter converts it
        s.record_usage(usage=reply["usage"])  # prompt (cached parts), completion, cost
        s.append(reply)
        print(reply["content"])
        s.finish_task()


if __name__ == "__main__":
    main()
