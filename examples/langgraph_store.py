"""A compiled LangGraph graph whose store is agentmem (offline: no model, no network).

    pip install 'agentmem[langgraph]'
    python examples/langgraph_store.py [MEMORY_ROOT]

Each run of the graph remembers what the user said in the store (``get_store()``
inside a node) and answers from it with a ranked search (``runtime.store``). The
graph is compiled twice, on two separate ``Memory`` objects over the same root, as
two runs of a program would be: the second sees everything the first stored.
Pass ``AGENTMEM_BACKEND=postgresql://...`` to keep the store in PostgreSQL instead.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from agentmem import Memory
from agentmem.integrations.langgraph import AgentMemStore


class State(TypedDict):
    user: str
    said: str
    answer: str


def remember(state: State) -> dict[str, Any]:
    """Count the visit and store what was said, under the user's namespace."""
    store = get_store()
    namespace = ("memories", state["user"])
    visits = store.get(namespace, "visits")
    count = (visits.value["n"] if visits else 0) + 1
    store.put(namespace, "visits", {"n": count})
    store.put(namespace, f"said-{count}", {"text": state["said"], "visit": count})
    return {}


def answer(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    """Answer with the stored sentence that best matches a question about drinks."""
    assert runtime.store is not None
    hits = runtime.store.search(
        ("memories", state["user"]), query="which drink", filter={"visit": {"$gte": 1}}
    )
    return {"answer": hits[0].value["text"] if hits else "nothing yet"}


def build(memory: Memory) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    return builder.compile(store=AgentMemStore(memory=memory))


def main(root: Path) -> None:
    with Memory(root=root, working_dir=root.parent) as memory:  # the first run
        graph = build(memory)
        out = graph.invoke({"user": "ann", "said": "Ann drinks green tea.", "answer": ""})
        print("first run answers:", out["answer"])
    with Memory(root=root, working_dir=root.parent) as memory:  # a later run
        graph = build(memory)
        out = graph.invoke({"user": "ann", "said": "She lives in Lyon.", "answer": ""})
        print("second run answers:", out["answer"])
        visits = AgentMemStore(memory=memory).get(("memories", "ann"), "visits")
        assert visits is not None
        print(f"remembered across runs: {visits.value['n']} visits")
        print("namespaces:", AgentMemStore(memory=memory).list_namespaces())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]).resolve())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / ".agentmem")
