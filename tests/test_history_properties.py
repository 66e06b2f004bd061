"""Property tests: whatever happens to a MessageHistory, its payloads stay valid.

The referee is ``provider_rules`` (an oracle written independently of the
repair code from the providers' documented rules). A stateful machine
drives the history through arbitrary operation sequences and checks after
every step that both payloads are valid, that no user message is lost, no
internal field leaks, output is deterministic and repair is idempotent.
A plain list model checks that the operations themselves do what they say.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from provider_rules import anthropic_violations, openai_violations
from responses_rules import responses_violations
from strategies import TASK_IDS, conversation, message, odd_text, responses_item

from agentmem import INTERNAL_FIELDS, MessageHistory, from_anthropic, from_responses_items
from agentmem.messages import content_text


def _user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [content_text(m.get("content")) for m in messages if m["role"] == "user"]


def _user_text_pieces(messages: list[dict[str, Any]]) -> list[str]:
    pieces: list[str] = []
    for m in messages:
        if m["role"] != "user":
            continue
        content = m.get("content")
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
        pieces.extend(p for p in parts if p.strip())
    return pieces


def _anthropic_user_texts(turns: list[dict[str, Any]]) -> list[str]:
    texts = []
    for turn in turns:
        if turn["role"] != "user":
            continue
        for block in turn["content"]:
            if block["type"] == "text":
                texts.append(block["text"])
    return texts


def _is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def check_payloads(history: MessageHistory, task_chain: set[int] | None = None) -> None:
    """Every rule of DESIGN section 3 for both providers, plus determinism and idempotence."""
    stored = [
        m
        for m in history
        if task_chain is None or m.get("task_id") is None or m.get("task_id") in task_chain
    ]

    openai = history.to_api(task_chain=task_chain)
    note(f"openai payload: {openai!r}")
    assert openai_violations(openai, internal_fields=INTERNAL_FIELDS) == []
    assert history.to_api(task_chain=task_chain) == openai, "to_api is not deterministic"
    # No user message is lost: same count, same text, same order.
    assert _user_texts(openai) == _user_texts(stored)
    # Repair is idempotent: the payload, stored again, repairs to itself.
    assert MessageHistory(openai).to_api() == openai

    system, turns = history.to_api(task_chain=task_chain, provider="anthropic")
    note(f"anthropic payload: {system!r} {turns!r}")
    assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []
    assert history.to_api(task_chain=task_chain, provider="anthropic") == (system, turns)
    assert _is_subsequence(_user_text_pieces(stored), _anthropic_user_texts(turns))
    again = MessageHistory(from_anthropic(turns, system)).to_api(provider="anthropic")
    assert again == (system, turns)

    items = history.to_api(task_chain=task_chain, provider="openai-responses")
    note(f"responses payload: {items!r}")
    assert responses_violations(items, internal_fields=INTERNAL_FIELDS) == []
    assert history.to_api(task_chain=task_chain, provider="openai-responses") == items
    # No user message is lost, and the payload, stored again, repairs to itself.
    assert _user_texts(from_responses_items(items)) == _user_texts(stored)
    again_items = MessageHistory(from_responses_items(items)).to_api(provider="openai-responses")
    assert again_items == items


@given(conversation())
def test_any_conversation_gives_valid_payloads(messages: list[dict[str, Any]]) -> None:
    history = MessageHistory(messages)
    check_payloads(history)


@given(conversation(), st.sets(st.sampled_from(TASK_IDS)))
def test_task_chain_filter_gives_valid_payloads(
    messages: list[dict[str, Any]], chain: set[int]
) -> None:
    check_payloads(MessageHistory(messages), chain)


@given(st.lists(message(), max_size=30))
def test_random_message_soup_gives_valid_payloads(messages: list[dict[str, Any]]) -> None:
    """No ordering at all: orphans, dangling calls and duplicates everywhere."""
    history = MessageHistory()
    for msg in messages:
        history.append(msg)
    check_payloads(history)


@given(conversation(), st.booleans())
def test_forced_reasoning_pad(messages: list[dict[str, Any]], force: bool) -> None:
    payload = MessageHistory(messages).to_api(force_reasoning_content_pad=force)
    assistants = [m for m in payload if m["role"] == "assistant"]
    if force:
        assert all(isinstance(m.get("reasoning_content"), str) for m in assistants)
    assert openai_violations(payload, internal_fields=INTERNAL_FIELDS) == []


class HistoryMachine(RuleBasedStateMachine):
    """Arbitrary operation sequences against a list model of what must be stored."""

    def __init__(self) -> None:
        super().__init__()
        self.history = MessageHistory()
        self.model: list[dict[str, Any]] = []  # roles and user texts, kept independently

    @staticmethod
    def _summary(msg: dict[str, Any]) -> dict[str, Any]:
        return {"role": msg["role"], "calls": bool(msg.get("tool_calls"))}

    @rule(msg=message())
    def append(self, msg: dict[str, Any]) -> None:
        if (
            msg["role"] == "user"
            and self.model
            and self.model[-1]
            == {
                "role": "assistant",
                "calls": True,
            }
        ):
            self.model.pop()
        self.history.append(msg)
        self.model.append(self._summary(msg))

    @rule(msgs=st.lists(message(), max_size=4))
    def extend(self, msgs: list[dict[str, Any]]) -> None:
        for msg in msgs:
            self.append(msg)

    @rule(items=st.lists(responses_item(), min_size=1, max_size=5))
    def extend_responses(self, items: list[dict[str, Any]]) -> None:
        for msg in from_responses_items(items):
            self.append(msg)

    @rule()
    def pop_last(self) -> None:
        popped = self.history.pop_last()
        assert (popped is None) == (not self.model)
        if self.model:
            self.model.pop()

    @rule(index=st.integers(-8, 30))
    def truncate_from(self, index: int) -> None:
        removed = self.history.truncate_from(index)
        before = len(self.model)
        del self.model[index:]
        assert removed == before - len(self.model)

    @rule(role=st.sampled_from(["system", "user", "assistant", "tool"]))
    def delete_role(self, role: str) -> None:
        deleted = self.history.delete_where(lambda m: m["role"] == role)
        before = len(self.model)
        self.model = [m for m in self.model if m["role"] != role]
        assert deleted == before - len(self.model)

    @rule(task=st.sampled_from(TASK_IDS))
    def delete_task(self, task: int) -> None:
        keep = [m.get("task_id") != task for m in self.history]
        self.history.delete_where(lambda m: m.get("task_id") == task)
        self.model = [m for m, k in zip(self.model, keep, strict=True) if k]

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def rollback_before(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.model) - 1))
        assert self.history.rollback_before(self.history[index])
        del self.model[index:]

    @rule()
    def rollback_before_foreign_object(self) -> None:
        assert not self.history.rollback_before({"role": "user", "content": "never stored"})

    @rule(text=odd_text)
    def replace_system_prompt(self, text: str) -> None:
        self.history.replace_system_prompt(text)
        if self.model and self.model[0]["role"] == "system":
            return
        self.model.insert(0, {"role": "system", "calls": False})

    @rule(text=odd_text, role=st.sampled_from(["user", "assistant", "tool"]))
    def mutate_last(self, text: str, role: str) -> None:
        def change(m: dict[str, Any]) -> None:
            m["content"] = text

        self.history.mutate_last_matching(lambda m: m["role"] == role, change)

    @rule(msgs=conversation(max_size=6))
    def replace_all(self, msgs: list[dict[str, Any]]) -> None:
        self.history.replace_all(msgs)
        self.model = [self._summary(m) for m in msgs]

    @invariant()
    def operations_match_model(self) -> None:
        assert [self._summary(m) for m in self.history] == self.model
        persistent = [m for m in self.history if not m.get("transient")]
        assert len(self.history.to_list()) == len(persistent)

    @invariant()
    def payloads_are_valid(self) -> None:
        check_payloads(self.history)
        check_payloads(self.history, {1, 2})


TestHistoryMachine = HistoryMachine.TestCase
TestHistoryMachine.settings = settings(settings.default, stateful_step_count=30)
