"""Plug an OpenAI client into agentmem (needs ``pip install openai`` and OPENAI_API_KEY).

    python examples/openai_client.py

The adapter turns ``client.chat.completions.create`` into agentmem's
``llm(messages, tools=None) -> dict``; ``AsyncOpenAI()`` gives an async one.
Importing this file does nothing; without the SDK or the key it says so
and exits.
"""

from __future__ import annotations

import os
import sys
import tempfile

from agentmem import LLMSummarizer, Memory
from agentmem.adapters import openai_llm


def main() -> None:
    try:
        from openai import OpenAI
    except ImportError:
        print("openai is not installed (pip install openai); skipping")
        return
    if not os.environ.get("OPENAI_API_KEY"):
        print("OPENAI_API_KEY is not set; skipping")
        return
    llm = openai_llm(OpenAI(), "gpt-4o", temperature=0)
    mem = Memory(root=tempfile.mkdtemp(), llm=llm, summarizer=LLMSummarizer(llm))
    with mem.session(model="gpt-4o") as s:
        s.start_task("In one sentence: what is a context window?")
        reply = llm(s.context())
        s.record_usage(usage=reply["usage"])  # prompt (cached parts included), completion, cost
        s.append(reply)
        print(reply["content"])
        s.finish_task()


if __name__ == "__main__":
    sys.exit(main())
