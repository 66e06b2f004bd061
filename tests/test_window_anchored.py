"""Issue 18: the anchored estimate gives the window's room back, and no request overflows.

An independent model of the provider: a simulated tokenizer that has nothing
to do with cl100k (a word costs ``1 + len // 4`` tokens, one more for a
quarter of the words chosen by a hash, plus a per-text hash jitter of 0-4
tokens; 4 tokens of framing per message, 3 of priming), so neither the
learned ratio nor the anchored estimate can be exact. It bills every request
it receives; the session learns from those bills through ``record_usage``.
Over random sequences of appends, bills fed back or not, system prompt
changes, tool set changes, stage-1/2 trims and stage-3 overflow attempts,
the TRUE size of every request plus the reserved output never passes the
window. The same check fails when the anchored margin is weakened
(:func:`test_the_check_fails_with_a_weakened_anchored_margin`).
"""

from __future__ import annotations

import json
import random
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

from agentmem import Memory
from agentmem.context._anchored import ratio_room
from agentmem.tokens import LearningEstimator, TiktokenCounter
from agentmem.tokens.messages import message_text_pieces

PROSE = [
    *("the", "a", "of", "to", "and", "is", "in", "that", "it", "for", "on", "with", "as"),
    *("was", "this", "be", "are", "by"),
]
CODE = [
    *("def", "self.value", "return", "x_1", "path/to/mod.py", "==", "0x3f", "import"),
    *("os.path.join(a,", "b)", '{"k":', "1}", "__init__", "-rw-r--r--", "2024-05-01"),
]


def _tool(name: str, words: int) -> dict[str, Any]:
    description = " ".join(PROSE[i % len(PROSE)] for i in range(words))
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }


TOOL_SETS: list[list[dict[str, Any]] | None] = [
    None,
    [_tool("read_file", 20)],
    [_tool("read_file", 20), _tool("run_shell", 120)],
]
WINDOW = 4_000
OUTPUT = 200


# --------------------------------------------------------------------------- the provider


def _true_text(text: str) -> int:
    words = text.split()
    jitter = zlib.crc32(text.encode("utf-8", "surrogatepass")) % 5 if words else 0
    return jitter + sum(
        1 + len(w) // 4 + (zlib.crc32(w.encode("utf-8", "surrogatepass")) % 4 == 0) for w in words
    )


def _true_messages(messages: list[dict[str, Any]]) -> int:
    return 3 + sum(4 + sum(_true_text(p) for p in message_text_pieces(m)) for m in messages)


def true_request(payload: Any, tools: list[dict[str, Any]] | None) -> int:
    """What the simulated provider bills for a request: messages, priming and tool schemas."""
    if isinstance(payload, tuple):  # Anthropic: (system, messages)
        system, messages = payload
        payload = [*([{"role": "system", "content": system}] if system else []), *messages]
    spec = _true_text(json.dumps(tools).replace('"', " ")) if tools else 0
    return _true_messages(payload) + spec


# --------------------------------------------------------------------------- the agent


def _words(rng: random.Random, n: int) -> str:
    share = rng.uniform(0.2, 0.8)  # prose or code-like: the per-text ratio to cl100k differs
    return " ".join(rng.choice(CODE if rng.random() < share else PROSE) for _ in range(n))


def drive(
    seed: int,
    *,
    threshold: float,
    provider: str,
    steps: int,
    churn: float,
    anchored: bool = True,
) -> list[tuple[int, int, str, int]]:
    """Run one random agent; returns ``(true size, payload messages, source, ratio count)``.

    ``churn`` is the chance per step of something other than an append: a
    changed system prompt, a changed tool set, a request not billed, or an
    overflow attempt (stage 3). ``anchored=False`` removes the anchored
    estimate (the ratio decides every build, as before issue 18).
    """
    rng = random.Random(seed)
    context = {"proactive_threshold": threshold, "validation_threshold": threshold}
    mem = Memory(incognito=True, token_counter=LearningEstimator(), context=context)
    session = mem.session(context_window=WINDOW, max_output_tokens=OUTPUT)
    if not anchored:
        setattr(session.token_counter, "anchored_estimate", None)  # noqa: B010
    session.history.replace_system_prompt(_words(rng, 40))
    tools = TOOL_SETS[1]
    sent: list[tuple[int, int, str, int]] = []
    for step in range(steps):
        bill, attempt = True, 0
        if rng.random() < churn:
            event = rng.choice(["system", "tools", "unbilled", "overflow"])
            if event == "system":
                session.history.replace_system_prompt(_words(rng, rng.randint(5, 150)))
            elif event == "tools":
                tools = rng.choice(TOOL_SETS)
            elif event == "unbilled":
                bill = False
            else:
                attempt = rng.randint(1, 3)
        role = "user" if step % 2 == 0 else "assistant"
        session.append({"role": role, "content": _words(rng, rng.randint(10, 180))})
        if attempt:
            payload = session.context_after_overflow(attempt, provider, tools=tools)
        else:
            payload = session.context(provider, tools=tools)
        stats = session.context_manager.stats
        true = true_request(payload, tools)
        sent.append((true, stats.messages, stats.estimate_source, stats.tokens + stats.tool_tokens))
        assert true + OUTPUT <= WINDOW, (step, true, stats)
        if stats.estimate_source == "anchored":  # the deciding estimate and its margin, reported
            assert stats.anchored_tokens is not None
            assert stats.anchored_tokens + OUTPUT <= WINDOW
            assert stats.anchor_margin == session.token_counter.anchor_margin
        else:
            assert stats.tokens + stats.tool_tokens + OUTPUT <= WINDOW
        if bill:
            session.record_usage(prompt_tokens=true, completion_tokens=10)
    session.close()
    return sent


@settings(max_examples=scaled(30))
@given(
    seed=st.integers(0, 2**32 - 1),
    threshold=st.sampled_from([0.75, 0.9, 0.97, 1.0]),
    provider=st.sampled_from(["openai", "anthropic"]),
    churn=st.sampled_from([0.0, 0.05, 0.2]),
)
def test_no_request_passes_the_window_by_the_providers_count(
    seed: int, threshold: float, provider: str, churn: float
) -> None:
    """Every request the simulated provider bills, plus the output reserve, fits the window.

    Thresholds up to 1.0 of the budget leave no headroom of their own: the
    anchored decisions then run up to the budget, where only the learned
    anchored margin keeps the true count within it, and after a trim, a
    changed system prompt or tool set only the ratio's bound margin does.
    """
    sent = drive(seed, threshold=threshold, provider=provider, steps=130, churn=churn)
    assert any(source == "anchored" for _, _, source, _ in sent) or threshold == 0.75


SEEDS = range(6)


@pytest.mark.parametrize("weakened", ["zero", "ratio margin"])
def test_the_check_fails_with_a_weakened_anchored_margin(
    monkeypatch: pytest.MonkeyPatch, weakened: str
) -> None:
    """The property's check is not vacuous: with a weaker anchored margin, requests overflow.

    ``zero``: bill + the new part at the fitted ratio, no margin. ``ratio
    margin``: the residuals dropped, the ratio's own margin instead. Seeds
    fixed; the same seeds pass with the learned margin (the next test).
    """
    if weakened == "zero":
        monkeypatch.setattr(LearningEstimator, "_anchor_margin", lambda self: 0.0)
    else:
        monkeypatch.setattr(LearningEstimator, "_anchor_margin", lambda self: self._margin)
    overflows = 0
    for seed in SEEDS:
        try:
            drive(seed, threshold=1.0, provider="openai", steps=200, churn=0.0)
        except AssertionError:
            overflows += 1
    assert overflows >= 1


def test_the_same_seeds_pass_with_the_learned_margin() -> None:
    for seed in SEEDS:
        drive(seed, threshold=1.0, provider="openai", steps=200, churn=0.0)


def test_a_residual_beyond_the_95th_percentile_does_not_overflow() -> None:
    """Found by a wider sweep (20 seeds x 2 churn rates, 200 steps): with the 95th
    percentile of the residuals as the anchored margin, request 144 of this run
    (a new part under-counted by 39%, 3.6 standard deviations) passed the window.
    The margin now covers the largest residual kept."""
    drive(8, threshold=1.0, provider="openai", steps=200, churn=0.2)


def test_the_ratio_decides_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the ratio count decides near the budget, its cap leaves room for its under-count.

    Found by the property test with 40 examples: on this run, with the ratio
    count capped at the whole budget (``bound_margin`` = ``margin``), request
    119 was under-counted past the window. It passes with the bound, and fails
    without it.
    """
    drive(1_000_000, threshold=1.0, provider="openai", steps=130, churn=0.0)
    monkeypatch.setattr(LearningEstimator, "bound_margin", property(lambda self: self.margin))
    with pytest.raises(AssertionError, match=r"^\(119, "):
        drive(1_000_000, threshold=1.0, provider="openai", steps=130, churn=0.0)


def test_the_anchored_estimate_gives_the_room_back() -> None:
    """The anchored payloads keep more messages than the ratio-only cap on the same sequence.

    Some request is sent whole although its ratio count is over the budget
    (before issue 18's second part the ratio count capped every payload).
    """
    ratio_only = drive(11, threshold=1.0, provider="openai", steps=160, churn=0.0, anchored=False)
    anchored = drive(11, threshold=1.0, provider="openai", steps=160, churn=0.0)
    budget = WINDOW - OUTPUT
    assert all(ratio <= budget for _, _, _, ratio in ratio_only)
    over = [(true, ratio) for true, _, source, ratio in anchored if ratio > budget]
    assert over and all(true <= budget for true, _ in over)
    skip = 30  # the first requests fit either way
    kept_before = sum(messages for _, messages, _, _ in ratio_only[skip:])
    kept_after = sum(messages for _, messages, _, _ in anchored[skip:])
    true_before = sum(true for true, _, _, _ in ratio_only[skip:])
    true_after = sum(true for true, _, _, _ in anchored[skip:])
    print(f"messages kept {kept_before} -> {kept_after}, true tokens {true_before} -> {true_after}")
    assert kept_after > kept_before and true_after > true_before


# --------------------------------------------------------------------------- the ratio's bound


def test_bound_margin_covers_every_under_count_of_the_ratio_seen() -> None:
    """``bound_margin`` covers each sample's under-count at the published ratio."""
    rng = random.Random(4)
    est = LearningEstimator()
    assert est.bound_margin == est.margin  # fewer than 3 samples: the ratio's margin
    messages = [{"role": "user", "content": _words(rng, 400)}]
    for _ in range(40):
        messages = [{"role": "user", "content": _words(rng, rng.randint(100, 600))}]
        est.observe(messages, true_request(messages, None))
    state = est.state()
    errors = [state["ratio"] / sample - 1 for sample in state["samples"]]
    assert est.bound_margin >= max(max(errors), est.margin)
    assert est.bound_margin > est.margin  # wider than the 90% the margin covers
    fixed = LearningEstimator(margin=0.2)
    for _ in range(5):
        fixed.observe(messages, true_request(messages, None))
    assert fixed.bound_margin == 0.2


def test_ratio_room_shrinks_the_budget_by_the_bound() -> None:
    rng = random.Random(6)
    est = LearningEstimator()
    for _ in range(20):
        messages = [{"role": "user", "content": _words(rng, rng.randint(100, 600))}]
        est.observe(messages, true_request(messages, None))
    room = ratio_room(est, 10_000)
    assert room == int(10_000 * (1 + est.margin) / (1 + est.bound_margin)) < 10_000
    assert ratio_room(TiktokenCounter("cl100k_base"), 10_000) == 10_000
