"""The incremental build equals a fresh build, whatever happened to the history in between.

A :class:`ContextManager` keeps state from one build to the next (the
repair stream and its running count, the system prompt and summary with
their counts, OpenAI views, payload cuts), all of it keyed by what it was
computed from. The oracle here is a brand-new manager over the same window,
YaRN and settings: it has no state, so every difference is a stale cache.

The generated agent loops go beyond appends: history rewrites
(``delete_where``, ``truncate_from``, ``replace_system_prompt``,
``mutate_last_matching``), calibration of a learning estimator from reported
prompt sizes (what ``Session.record_usage`` feeds it: the last payload and a
prompt-token figure), which moves the counter's ``epoch`` and so every count,
task-chain switches between builds, changing injections, overflow builds
(stage-3 trims that pin the anchor) and one manager alternating between two
windows.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from profiles import scaled

from agentmem import (
    ContextManager,
    LearningEstimator,
    MessageHistory,
    ShortTermMemory,
    YaRN,
    count_messages,
)
from agentmem.protocols import counter_epoch

SYSTEM = "You are a careful coding agent."
CHAINS: tuple[frozenset[int] | None, ...] = (
    None,
    frozenset({1}),
    frozenset({1, 2}),
    frozenset({3}),
)

Step = tuple[str, Any]


class Rig:
    """One conversation: history (with a learning estimator), window, YaRN."""

    def __init__(self) -> None:
        self.counter = LearningEstimator(unit="chars")
        self.history = MessageHistory(token_counter=self.counter)
        self.history.replace_system_prompt(SYSTEM)
        self.window = ShortTermMemory(self.history)
        self.yarn = YaRN(main_thread=self.history)
        self.n = 0
        self.last_payload: list[dict[str, Any]] = []

    def tool_round(self, output: str, task: int | None) -> None:
        self.n += 1
        call_id = f"call_{self.n}"
        extra = {} if task is None else {"task_id": task}
        self.history.append(
            {
                "role": "assistant",
                "content": f"Running step {self.n}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": "ls"})},
                    }
                ],
                **extra,
            }
        )
        self.history.append({"role": "tool", "tool_call_id": call_id, "content": output, **extra})


ACTIONS = (
    "tool", "calibrate", "user", "tool", "delete", "answer", "truncate", "tool", "system",
    "calibrate", "mutate", "user", "overflow",
)  # fmt: skip


@st.composite
def action(draw: st.DrawFn) -> Step:
    kind = draw(st.sampled_from(ACTIONS))
    task = st.sampled_from([None, 1, 2, 3])
    if kind == "user":
        return kind, (draw(st.text(min_size=1, max_size=80)), draw(task))
    if kind == "tool":
        return kind, ("x" * draw(st.sampled_from([300, 10, 1_500, 9_000])), draw(task))
    if kind == "answer":
        return kind, draw(st.text(max_size=200))
    if kind in ("delete", "truncate"):
        return kind, draw(st.integers(0, 200))
    if kind == "system":
        return kind, draw(st.sampled_from([SYSTEM, SYSTEM + " Be brief.", "Other."]))
    if kind == "mutate":
        return kind, draw(st.sampled_from(["y" * 40, "z" * 3_000]))
    if kind == "calibrate":
        return kind, draw(st.sampled_from([0.4, 0.7, 1.5, 2.5, 4.0]))
    return kind, draw(st.integers(1, 3))  # an overflow build (stage 3)


@st.composite
def build(draw: st.DrawFn) -> Step:
    chain = draw(st.sampled_from(CHAINS))
    injections = draw(st.sampled_from([(), ("Known: the repo uses uv.",)]))
    provider = draw(st.sampled_from(["openai", "anthropic"]))
    return "build", (chain, injections, provider, draw(st.booleans()))


@st.composite
def steps(draw: st.DrawFn) -> tuple[int, list[Step]]:
    """A window size and a script: rounds of one to three actions, each round ending in a build."""
    window = draw(st.sampled_from([2_000, 32_000, 8_000]))
    out: list[Step] = []
    current = draw(build())
    for _ in range(draw(st.integers(2, 15))):
        out.extend(draw(st.lists(action(), min_size=1, max_size=3)))
        # Hosts keep their chain and injections for stretches and switch now and then:
        # a stale cache shows between two builds with the same arguments.
        if draw(st.integers(0, 3)) == 3:
            current = draw(build())
        out.append(current)
        if draw(st.booleans()):  # the host reports the usage of what it just sent
            out.append(("calibrate", draw(st.sampled_from([0.4, 0.7, 1.5, 2.5, 4.0]))))
    return window, out


def apply(rig: Rig, step: Step) -> None:
    """Run one non-build step on ``rig``."""
    kind, value = step
    history = rig.history
    if kind == "user":
        text, task = value
        history.append(
            {"role": "user", "content": text, **({} if task is None else {"task_id": task})}
        )
    elif kind == "tool":
        rig.tool_round(*value)
    elif kind == "answer":
        history.append({"role": "assistant", "content": value})
    elif kind == "delete" and len(history):
        target = history[value % len(history)]
        history.delete_where(lambda m: m is target)
    elif kind == "truncate" and len(history) > 1:
        history.truncate_from(1 + value % (len(history) - 1))
    elif kind == "system":
        history.replace_system_prompt(value)
    elif kind == "mutate":

        def rewrite(m: dict[str, Any]) -> None:
            m["content"] = value

        history.mutate_last_matching(lambda m: m["role"] == "tool", rewrite)
    elif kind == "calibrate":
        # What Session.record_usage does with a reported prompt size: the estimator
        # learns from the payload last sent (the epoch moves when the ratio does).
        sent = rig.last_payload or history.to_api()
        # (Two reports: the first sample alone never moves the prior.)
        for _ in range(2):
            reported = int(count_messages(sent, rig.counter) * value) + 1
            rig.counter.observe(sent, reported)


def check_build(rig: Rig, manager: ContextManager, value: Any) -> None:
    """Build incrementally, then with a fresh manager; both must agree on everything."""
    chain, injections, provider, pad = value
    args: dict[str, Any] = {
        "provider": provider,
        "injections": injections,
        "task_chain": chain,
        "force_reasoning_content_pad": pad,
    }
    result = manager.build_result(rig.window, rig.yarn, **args)
    note(f"built {args}: {result.stats}")
    fresh = ContextManager(manager.settings).build_result(rig.window, rig.yarn, **args)
    assert fresh.payload == result.payload
    assert fresh.messages == result.messages
    assert fresh.stats.tokens == result.stats.tokens
    assert fresh.stats.trims == []  # the incremental build left nothing to trim
    if provider == "openai":
        rig.last_payload = result.payload  # type: ignore[assignment]


@settings(max_examples=scaled(60))
@given(steps())
def test_incremental_build_equals_a_fresh_build(loop: tuple[int, list[Step]]) -> None:
    window, script = loop
    rig = Rig()
    manager = ContextManager({"context_window": window})
    epochs = {counter_epoch(rig.counter)}
    for step in script:
        kind, value = step
        if kind == "build":
            check_build(rig, manager, value)
        elif kind == "overflow":
            manager.build_after_overflow(rig.window, rig.yarn, value)
        else:
            apply(rig, step)
        epochs.add(counter_epoch(rig.counter))
    note(f"epochs seen: {sorted(epochs)}")
    event(f"epochs seen: {min(len(epochs), 3)}")
    event(f"builds: {min(sum(k == 'build' for k, _ in script), 5)}")


@settings(max_examples=scaled(30))
@given(steps(), steps())
def test_one_manager_over_two_windows_equals_fresh_builds(
    first: tuple[int, list[Step]], second: tuple[int, list[Step]]
) -> None:
    """Alternating windows: neither window's state leaks into, or is reset by, the other's."""
    rigs = (Rig(), Rig())
    manager = ContextManager({"context_window": first[0]})
    for a, b in zip(first[1], second[1], strict=False):
        for rig, (kind, value) in zip(rigs, (a, b), strict=True):
            if kind == "build":
                check_build(rig, manager, value)
            elif kind == "overflow":
                manager.build_after_overflow(rig.window, rig.yarn, value)
            else:
                apply(rig, (kind, value))
