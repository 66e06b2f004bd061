"""Plug an OpenAI client into agentmem (needs ``pip install openai`` and OPENAI_API_KEY).

    python examples/openai_client.py

The adapter turns ``client.chat.completions.create`` into agentmem's
``llm(messages, tools=None) -> dict``; ``AsyncOpenAI()`` gives an async one.
Importing this file does nothing; without the key or the SDK it says so in
one line and exits 0 (``python examples/quickstart.py`` is the offline demo).
The memory lives in a temporary directory, removed when the script ends.
"""

from __future__ import annotations

import os
import tempfile

MODEL = "gpt-4o"
OFFLINE = "this example calls the real API; python examples/quickstart.py runs offline"


def main() -> None:
    if not os.environ.get("OPENAI_API_KEY"):
        print(f"OPENAI_API_KEY is not set, skipping: {OFFLINE}")
        return
    try:
        from openai import OpenAI
    except ImportError:
        print(f"openai is not installed (pip install openai), skipping: {OFFLINE}")
        return
    from agentmem import LLMSummarizer, Memory
    from agentmem.adapters import openai_llm

    llm = openai_llm(OpenAI(), MODEL, temperature=0)
    with (
        tempfile.TemporaryDirectory() as root,
        Memory(root=root, llm=llm, summarizer=LLMSummarizer(llm)) as mem,
        mem.session(model=MODEL) as s,
    ):
        s.start_task("In one sentence: what is a context window?")
        reply = llm(s.context())
        s.record_usage(usage=reply["usage"])  # prompt (cached parts), completion, cost
        s.append(reply)
        print(reply["content"])
        s.finish_task()


if __name__ == "__main__":
    main()
