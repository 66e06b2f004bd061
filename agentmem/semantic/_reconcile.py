"""The two LLM steps of semantic capture, as sans-IO flows (see :mod:`agentmem.llm`).

1. :func:`extract_facts` asks the model for the durable facts in the user's
   words and expects ``{"facts": ["...", ...]}``.
2. :func:`reconcile` shows the model those facts next to the similar
   memories already stored, each under a short alias (``"0"``, ``"1"``...,
   never the real id, so a model cannot damage a memory it was not shown by
   copying an id from elsewhere), and expects one operation per decision::

       {"memory": [{"event": "ADD", "text": "..."},
                   {"event": "UPDATE", "id": "0", "text": "..."},
                   {"event": "DELETE", "id": "1"},
                   {"event": "NOOP", "id": "2"}]}

   (``"NONE"`` is read as ``"NOOP"``, the spelling mem0's prompt uses.)

A reply that is not that JSON is never read as "nothing to remember": both
flows raise :class:`~agentmem.errors.LLMError` naming what was wrong and
quoting the start of the reply, and the caller stores nothing. Whether an
alias names a shown memory is the caller's check (it reports an unknown
one as rejected instead of applying it); the shape is checked here.

Both flows work with a sync or an async LLM: the client drives them with
:func:`~agentmem.llm.run_flow` (``add``) or :func:`~agentmem.llm.arun_flow`
(``aadd``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from agentmem._shape import message_text
from agentmem.errors import LLMError
from agentmem.llm import Flow, LLMRequest

__all__ = ["EVENTS", "Action", "extract_facts", "parse_json_object", "reconcile"]

EVENTS: Final = ("ADD", "UPDATE", "DELETE", "NOOP")
"""The operations a reconciliation may ask for."""

QUOTE_CHARS: Final = 200
"""How much of an unusable reply an error quotes."""

FACTS_PROMPT: Final = """\
You read what a user said to an assistant and pick out the durable facts worth \
remembering about the user for later conversations: preferences, personal details, \
plans, habits, decisions, constraints, and anything the user asks to be remembered.

Rules:
- One fact per item, a short self-contained sentence, in the language the user wrote in.
- Leave out greetings, questions, small talk, and anything only true for this moment.
- Never copy a secret (password, API key, token) into a fact.
- Reply with only a JSON object, no prose: {"facts": ["...", "..."]}. \
Reply {"facts": []} when nothing is worth remembering."""

RECONCILE_PROMPT: Final = """\
You keep a user's memory up to date. You are given the memories already stored \
(each with an id) and newly learned facts. Decide what to do with each new fact:
- ADD: the fact is new; give its text.
- UPDATE: an existing memory is about the same thing and the fact changes or adds \
detail; give that memory's id and the merged text.
- DELETE: the fact contradicts an existing memory that should be forgotten; give its id.
- NOOP: the fact is already covered by an existing memory; give that memory's id.

Use only the ids listed under existing_memories. Reply with only a JSON object, no prose:
{"memory": [{"event": "ADD", "text": "..."}, {"event": "UPDATE", "id": "0", "text": "..."}, \
{"event": "DELETE", "id": "1"}, {"event": "NOOP", "id": "2"}]}"""

_FENCE: Final = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class Action(NamedTuple):
    """One operation a reconciliation asked for (``alias`` as the model wrote it)."""

    event: str
    alias: str | None
    text: str | None


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat[:QUOTE_CHARS] + ("..." if len(flat) > QUOTE_CHARS else ""))


def parse_json_object(reply: dict[str, Any], what: str) -> dict[str, Any]:
    """The JSON object in a reply's content (a surrounding code fence is allowed).

    Raises:
        LLMError: the content is empty, not JSON, or not a JSON object.
    """
    text = message_text(reply).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        raise LLMError(f"the {what} reply is empty; expected a JSON object")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LLMError(f"the {what} reply is not JSON ({exc}): {_quote(text)}") from exc
    if not isinstance(data, dict):
        raise LLMError(
            f"the {what} reply is JSON {type(data).__name__}, expected an object: {_quote(text)}"
        )
    return data


def extract_facts(texts: Sequence[str]) -> Flow[list[str]]:
    """Ask for the facts in the user's words; returns them stripped, in order.

    Raises:
        LLMError: the reply is not ``{"facts": [<strings>]}``.
    """
    said = "\n\n".join(texts)
    reply = yield LLMRequest(
        [
            {"role": "system", "content": FACTS_PROMPT},
            {"role": "user", "content": f"What the user said:\n\n{said}"},
        ],
        purpose="semantic.extract_facts",
    )
    data = parse_json_object(reply, "fact extraction")
    facts = data.get("facts")
    if not isinstance(facts, list):
        raise LLMError(
            f'the fact extraction reply has no "facts" list (keys: {sorted(data)}); '
            'expected {"facts": [...]}'
        )
    out: list[str] = []
    for index, fact in enumerate(facts):
        if not isinstance(fact, str):
            raise LLMError(
                f"the fact extraction reply's facts[{index}] is {type(fact).__name__}, "
                "expected a string"
            )
        if fact.strip():
            out.append(fact.strip())
    return out


def _alias(value: object, index: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise LLMError(
            f"the reconciliation reply's memory[{index}].id is {type(value).__name__}, "
            "expected a string"
        )
    return str(value)


def _action(item: object, index: int) -> Action:
    where = f"the reconciliation reply's memory[{index}]"
    if not isinstance(item, dict):
        raise LLMError(f"{where} is {type(item).__name__}, expected an object")
    event = item.get("event")
    if event == "NONE":
        event = "NOOP"
    if event not in EVENTS:
        raise LLMError(f"{where}.event is {event!r}, expected one of {', '.join(EVENTS)}")
    alias = _alias(item.get("id"), index)
    text = item.get("text", item.get("memory"))
    if text is not None and not isinstance(text, str):
        raise LLMError(f"{where}.text is {type(text).__name__}, expected a string")
    if event in ("ADD", "UPDATE") and not (text and text.strip()):
        raise LLMError(f"{where} is {event} without a text")
    if event in ("UPDATE", "DELETE") and alias is None:
        raise LLMError(f"{where} is {event} without an id")
    return Action(str(event), alias, text.strip() if text else None)


def reconcile(facts: Sequence[str], existing: Sequence[tuple[str, str]]) -> Flow[list[Action]]:
    """Ask how ``facts`` change the ``existing`` ``(alias, text)`` memories.

    Raises:
        LLMError: the reply is not ``{"memory": [<operations>]}`` (see the module docstring).
    """
    payload = {
        "existing_memories": [{"id": alias, "text": text} for alias, text in existing],
        "new_facts": list(facts),
    }
    reply = yield LLMRequest(
        [
            {"role": "system", "content": RECONCILE_PROMPT},
            {"role": "user", "content": json.dumps(payload, ensure_ascii=False, indent=1)},
        ],
        purpose="semantic.reconcile",
    )
    data = parse_json_object(reply, "reconciliation")
    items = data.get("memory")
    if not isinstance(items, list):
        raise LLMError(
            f'the reconciliation reply has no "memory" list (keys: {sorted(data)}); '
            'expected {"memory": [...]}'
        )
    return [_action(item, index) for index, item in enumerate(items)]
