"""Issue 18: the prefix-anchored estimate; record_usage takes the provider's usage as it comes."""

from __future__ import annotations

import copy
import math
import random
from types import SimpleNamespace
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

from agentmem import Memory
from agentmem.errors import InvalidArgumentError
from agentmem.llm import parse_usage, reply_usage
from agentmem.tokens import LearningEstimator, count_messages
from agentmem.tokens.messages import message_overhead, message_text_pieces

WORDS = ["alpha", "beta", "gamma", "def", "return", "self", "{", "}", "0x1f", "path/to/file.py"]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _conversation(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 20}]
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append({"role": role, "content": _text(rng, rng.randint(60, 400))})
    return out


def _true_count(est: LearningEstimator, messages: list[dict[str, Any]], ratios: list[float]) -> int:
    """A provider's count: each message's cl100k units at its own true ratio, plus framing."""
    total = 3.0
    for message, ratio in zip(messages, ratios, strict=True):
        total += message_overhead(message)
        total += sum(est.units(p) for p in message_text_pieces(message)) / ratio
    return math.ceil(total)


# ---------------------------------------------------------------- the anchored estimate


def test_anchored_estimate_is_the_bill_plus_the_new_part() -> None:
    rng = random.Random(1)
    est = LearningEstimator()
    messages = _conversation(rng, 6)
    est.observe(messages, 5_000)
    new = {"role": "user", "content": _text(rng, 200)}
    new_tokens = (
        message_overhead(new)
        + sum(est.units(p) for p in message_text_pieces(new)) / est.chars_per_token
    )
    estimate = est.estimate_payload([*messages, new])
    assert estimate == 5_000 + math.ceil(new_tokens * (1 + est.anchor_margin))
    # The very payload billed is estimated at its bill, the tools inside it counted once.
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    est.observe(messages, 5_100, tools=tools)
    assert est.estimate_payload(messages, tools=tools) == 5_100
    assert est.anchored_tokens == 5_100


@pytest.mark.parametrize("change", ["trim", "system", "edit", "tools", "shorter"])
def test_anchor_falls_back_to_the_ratio_when_the_payload_does_not_extend_the_bill(
    change: str,
) -> None:
    rng = random.Random(2)
    est = LearningEstimator()
    messages = _conversation(rng, 8)
    est.observe(messages, 4_000)
    nxt = [*messages, {"role": "user", "content": "next"}]
    tools = None
    if change == "trim":
        nxt = [nxt[0], *nxt[3:]]
    elif change == "system":
        nxt[0] = {"role": "system", "content": "Another prompt."}
    elif change == "edit":
        nxt[4] = {**nxt[4], "content": nxt[4]["content"] + " edited"}
    elif change == "tools":
        tools = [{"type": "function", "function": {"name": "t", "parameters": {}}}]
    else:
        nxt = messages[:-1]
    ratio_estimate = count_messages(nxt, est)
    if tools:
        ratio_estimate += est.count_text(
            '[{"type":"function","function":{"name":"t","parameters":{}}}]'
        )
    assert est.estimate_payload(nxt, tools=tools) == ratio_estimate


def test_anchor_and_its_residuals_survive_state_and_deepcopy() -> None:
    rng = random.Random(3)
    est = LearningEstimator()
    messages = _conversation(rng, 2)
    for step in range(8):
        messages.append({"role": "user", "content": _text(rng, 150)})
        est.observe(messages, 1_000 + 400 * step)
    payload = [*messages, {"role": "assistant", "content": _text(rng, 100)}]
    expected = est.estimate_payload(payload)
    state = est.state()
    assert state["anchor"]["billed"] == 1_000 + 400 * 7
    resumed = LearningEstimator()
    resumed.restore(state)
    assert resumed.estimate_payload(payload) == expected
    assert resumed.anchor_margin == est.anchor_margin
    clone = copy.deepcopy(est)
    clone.observe(payload, 10_000)
    assert est.estimate_payload(payload) == expected  # the copy's anchor is its own
    # A state without the anchor (before issue 18) still loads: ratio estimate.
    del state["anchor"]
    old = LearningEstimator()
    old.restore(state)
    assert old.estimate_payload(payload) == count_messages(payload, old)


def test_anchored_error_is_far_below_the_ratio_error_on_a_growing_transcript() -> None:
    """The provider's tokenizer differs per message; the bill of the prefix absorbs that."""
    rng = random.Random(4)
    est = LearningEstimator()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys " * 50}]
    ratios = [3.4]
    ratio_err, anchor_err = [], []
    for step in range(60):
        messages.append({"role": "user", "content": _text(rng, rng.randint(50, 300))})
        ratios.append(rng.uniform(2.8, 4.6))
        true = _true_count(est, messages, ratios)
        if step >= 5:
            ratio_err.append(abs(true / count_messages(messages, est) - 1))
            anchor_err.append(abs(true / est.estimate_payload(messages) - 1))
        est.observe(messages, true)
    assert sorted(anchor_err)[len(anchor_err) // 2] < 0.01
    assert sorted(anchor_err)[len(anchor_err) // 2] * 3 < sorted(ratio_err)[len(ratio_err) // 2]


@settings(max_examples=scaled(40))
@given(
    seed=st.integers(0, 2**32 - 1),
    base=st.floats(2.6, 5.5),
    drift=st.floats(0.0, 0.01),
    spread=st.floats(0.0, 0.15),
)
def test_anchored_estimate_never_lets_a_payload_exceed_the_window(
    seed: int, base: float, drift: float, spread: float
) -> None:
    """A sender that trims whenever the estimate passes the window never overflows it.

    The "true" tokenizer: the provider's tokens per cl100k unit drift by up to
    ``drift`` per request (a random walk kept within +-25% of ``base``), and each
    message deviates from the current level by up to ``spread``. The sender
    appends a message, asks for the estimate, sends when it is within the
    window and otherwise trims to half the window (no headroom beyond the
    estimate's own margin). Every payload sent must fit the window by the
    provider's count.
    """
    rng = random.Random(seed)
    window = 6_000
    est = LearningEstimator()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent. " * 10}]
    level = base
    ratios = [base]
    for _ in range(120):
        level = min(base * 1.25, max(base * 0.75, level * (1 + rng.uniform(-drift, drift))))
        messages.append({"role": "user", "content": _text(rng, rng.randint(20, 600))})
        ratios.append(level * (1 + rng.uniform(-spread, spread)))
        if est.estimate_payload(messages) > window:
            while len(messages) > 2 and est.estimate_payload(messages) > window // 2:
                del messages[1], ratios[1]
        true = _true_count(est, messages, ratios)
        assert true <= window, (true, est.estimate_payload(messages), est)
        est.observe(messages, true)


# ---------------------------------------------------------------- the provider's usage


class _PydanticDetails(pydantic.BaseModel):
    cached_tokens: int | None = None


class _PydanticChatUsage(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    prompt_tokens: int
    completion_tokens: int
    prompt_tokens_details: _PydanticDetails | None = None


USAGES: list[tuple[str, Any, tuple[int, int, int, int]]] = [
    (
        "openai chat dict",
        {
            "prompt_tokens": 1000,
            "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 768},
        },
        (1000, 20, 768, 0),
    ),
    (
        "openai chat pydantic",
        _PydanticChatUsage(
            prompt_tokens=1000,
            completion_tokens=20,
            prompt_tokens_details=_PydanticDetails(cached_tokens=512),
        ),
        (1000, 20, 512, 0),
    ),
    (
        "deepseek",
        {
            "prompt_tokens": 1560,
            "completion_tokens": 94,
            "prompt_cache_hit_tokens": 320,
            "prompt_cache_miss_tokens": 1240,
            "prompt_tokens_details": {"cached_tokens": 320},
        },
        (1560, 94, 320, 0),
    ),
    (
        "deepseek pydantic extra fields",
        _PydanticChatUsage(prompt_tokens=900, completion_tokens=9, prompt_cache_hit_tokens=640),
        (900, 9, 640, 0),
    ),
    (
        "responses object",
        SimpleNamespace(
            input_tokens=2000,
            output_tokens=50,
            input_tokens_details=SimpleNamespace(cached_tokens=1024),
        ),
        (2000, 50, 1024, 0),
    ),
    (
        "anthropic object",
        SimpleNamespace(
            input_tokens=12,
            output_tokens=300,
            cache_creation_input_tokens=1500,
            cache_read_input_tokens=40_000,
        ),
        (41_512, 300, 40_000, 1500),
    ),
    (
        "anthropic dict without caching",
        {
            "input_tokens": 700,
            "output_tokens": 3,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": 0,
        },
        (700, 3, 0, 0),
    ),
]


@pytest.mark.parametrize(
    ("usage", "expected"), [(u, e) for _, u, e in USAGES], ids=[n for n, _, _ in USAGES]
)
def test_parse_usage_reads_every_provider_shape(
    usage: Any, expected: tuple[int, int, int, int]
) -> None:
    figures = parse_usage(usage)
    got = (
        figures.prompt_tokens,
        figures.completion_tokens,
        figures.cached_prompt_tokens,
        figures.cache_write_tokens,
    )
    assert got == expected
    # A whole reply carrying the usage reads the same; reply_usage too.
    assert parse_usage(SimpleNamespace(usage=usage)) == figures
    assert reply_usage({"role": "assistant", "usage": usage})[:2] == expected[:2]


@pytest.mark.parametrize(
    ("usage", "expected"), [(u, e) for _, u, e in USAGES], ids=[n for n, _, _ in USAGES]
)
def test_record_usage_bills_the_cached_parts_apart_and_keeps_them_on_resume(
    tmp_path: Any, usage: Any, expected: tuple[int, int, int, int]
) -> None:
    mem = Memory(root=tmp_path / "m", working_dir=tmp_path)
    with mem.session(model="claude-sonnet-4-5", context_window=100_000) as s:
        sid = s.id
        s.start_task("hello")
        s.context()
        s.record_usage(usage=usage)
        s.record_usage(usage)  # positionally too
        u = s.usage
    assert (u.prompt_tokens, u.completion_tokens) == (2 * expected[0], 2 * expected[1])
    assert (u.cached_prompt_tokens, u.cache_write_tokens) == (2 * expected[2], 2 * expected[3])
    with Memory(root=tmp_path / "m", working_dir=tmp_path).session(sid, create=False) as s:
        assert s.usage == u


def test_record_usage_rejects_unusable_usage_and_keeps_the_positional_form(tmp_path: Any) -> None:
    mem = Memory(root=tmp_path / "m", working_dir=tmp_path)
    with mem.session(model="deepseek-chat", context_window=50_000) as s:
        assert s.prompt_estimate() is None  # nothing built yet
        s.start_task("hello")
        s.context()
        for bad in ({"completion_tokens": 3}, SimpleNamespace(total=4), object()):
            with pytest.raises(InvalidArgumentError, match="usage"):
                s.record_usage(usage=bad)
        with pytest.raises(InvalidArgumentError, match="not both"):
            s.record_usage(10, usage={"prompt_tokens": 10})
        for bad_number in (1.5, "10", True, -1):
            with pytest.raises(InvalidArgumentError):
                s.record_usage(bad_number)
        assert s.usage.requests == 0
        s.record_usage(120, 7, 0.5)
        assert (s.usage.prompt_tokens, s.usage.completion_tokens, s.usage.cost_usd) == (120, 7, 0.5)


def test_anthropic_usage_with_caching_calibrates_to_the_true_total(tmp_path: Any) -> None:
    """``input_tokens`` alone (the old documented call) excludes the cache; usage= does not."""
    rng = random.Random(5)
    mem = Memory(root=tmp_path / "m", working_dir=tmp_path)
    with mem.session(model="claude-sonnet-4-5", context_window=200_000) as s:
        s.history.replace_system_prompt("You are a coding agent. " * 200)
        s.start_task(_text(rng, 400))
        counter = s.history.token_counter
        assert isinstance(counter, LearningEstimator)
        true_ratio = 3.3  # the provider's tokens are denser than cl100k's
        for _ in range(8):
            s.context()
            sent = s.context_manager.last_build
            assert sent is not None
            truth = math.ceil(
                sum(counter.units(p) for m in sent.messages for p in message_text_pieces(m))
                / true_ratio
                + sum(message_overhead(m) for m in sent.messages)
                + 3
            )
            usage = SimpleNamespace(
                input_tokens=25,
                cache_creation_input_tokens=400,
                cache_read_input_tokens=truth - 425,
                output_tokens=60,
            )
            s.record_usage(usage=usage)
            s.append({"role": "assistant", "content": _text(rng, 60)})
            s.append({"role": "user", "content": _text(rng, 120)})
        assert counter.chars_per_token == pytest.approx(true_ratio, rel=0.03)
        s.context()
        sent = s.context_manager.last_build
        assert sent is not None
        truth = (
            sum(counter.units(p) for m in sent.messages for p in message_text_pieces(m))
            / true_ratio
        )
        assert count_messages(sent.messages, counter) >= truth
        assert counter.estimate_payload(sent.messages) >= truth
