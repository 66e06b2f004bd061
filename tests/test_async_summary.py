"""The LLM summarizer on the sans-IO driver, and the async path through YaRN and the context.

A sync and an async scripted LLM that answer the same prompt with the same
text must give the same thread summary and the same payloads; a sync build
with an async summarizer keeps the extractive summary, says to call
``acontext()``, and never leaves a coroutine un-awaited.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled
from provider_rules import anthropic_violations, openai_violations

from agentmem import INTERNAL_FIELDS, LLMSummarizer, Memory, Session
from agentmem.errors import InvalidArgumentError, LLMError, SessionClosedError
from agentmem.llm import run_flow
from agentmem.testing import AsyncScriptedLLM, ScriptedLLM
from agentmem.yarn import YaRN


def _prose(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A deterministic 'summary' of the prompt: equal prompts give equal text."""
    digest = hashlib.sha256(messages[-1]["content"].encode()).hexdigest()[:12]
    return {"role": "assistant", "content": f"  Prose {digest}.  "}


def _twins(n: int = 200) -> tuple[ScriptedLLM, AsyncScriptedLLM]:
    return ScriptedLLM([_prose] * n), AsyncScriptedLLM([_prose] * n)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def batch(i: int) -> list[dict[str, Any]]:
    return [
        user(f"Step {i}: update src/mod_{i}.py"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "edit", "arguments": f'{{"path": "src/mod_{i}.py"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "content": "edited"},
    ]


def _yarn_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "agentmem.yarn" and r.levelno >= logging.WARNING
    ]


# --------------------------------------------------------------------------- LLMSummarizer


def test_sync_and_async_llms_give_the_same_summary_and_prompt() -> None:
    sync_llm, async_llm = _twins()
    sync_s, async_s = LLMSummarizer(sync_llm), LLMSummarizer(async_llm)
    assert not sync_s.is_async and async_s.is_async
    text = sync_s.summarize(batch(1), "Earlier: set up.")
    assert text == asyncio.run(async_s.asummarize(batch(1), "Earlier: set up."))
    assert text.startswith("Prose ") and text == text.strip()
    assert sync_llm.calls == async_llm.calls
    assert sync_llm.calls[0][0] == sync_s.build_prompt(batch(1), "Earlier: set up.")
    # asummarize drives a sync LLM too; the flow itself is driver-neutral.
    assert asyncio.run(sync_s.asummarize(batch(1), "Earlier: set up.")) == text
    assert run_flow(async_s.summarize_flow(batch(1), "Earlier: set up."), sync_llm) == text


def test_summarize_with_an_async_llm_raises_without_calling_it() -> None:
    llm = AsyncScriptedLLM([_prose])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(LLMError, match="async"):
            LLMSummarizer(llm).summarize(batch(1), None)
    assert llm.calls == []


def test_llm_failures_propagate_from_the_summarizer() -> None:
    summarizer = LLMSummarizer(AsyncScriptedLLM([RuntimeError("provider down")]))
    with pytest.raises(RuntimeError, match="provider down"):
        asyncio.run(summarizer.asummarize(batch(1), None))


# --------------------------------------------------------------------------- YaRN


def test_acompress_awaits_an_async_summarizer_and_matches_compress() -> None:
    sync_llm, async_llm = _twins()
    sync_yarn = YaRN(summarizer=LLMSummarizer(sync_llm))
    async_yarn = YaRN(summarizer=LLMSummarizer(async_llm))
    for i in range(3):
        expected = sync_yarn.compress(batch(i), current_task="ship it")
        got = asyncio.run(async_yarn.acompress(batch(i), current_task="ship it"))
        assert got == expected and got.llm_text is not None
    assert sync_llm.calls == async_llm.calls and len(async_llm.calls) == 3


def test_sync_compress_with_an_async_summarizer_keeps_the_extractive_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    llm = AsyncScriptedLLM([_prose])
    yarn = YaRN(summarizer=LLMSummarizer(llm))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = yarn.compress(batch(1))
        gc.collect()
    assert summary.llm_text is None and summary.files_touched == ("src/mod_1.py",)
    assert llm.calls == []  # never called, so nothing was left un-awaited
    (message,) = _yarn_warnings(caplog)
    assert "async" in message and "acontext()" in message


def test_a_coroutine_from_a_sync_summarizer_is_closed_warned_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    made: list[Any] = []

    async def prose() -> str:
        return "never"

    class Sneaky:  # sync def, returns a coroutine
        def summarize(self, messages: Any, previous_summary: Any) -> Any:
            made.append(prose())
            return made[-1]

    yarn = YaRN(summarizer=Sneaky())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "never awaited" RuntimeWarning would fail here
        assert yarn.compress(batch(1)).llm_text is None
        gc.collect()
    assert made and made[0].cr_frame is None  # closed
    (message,) = _yarn_warnings(caplog)
    assert "closed, not awaited" in message and "acontext()" in message
    # The async path awaits the very same summarizer.
    assert asyncio.run(YaRN(summarizer=Sneaky()).acompress(batch(1))).llm_text == "never"


def test_an_older_compression_never_overwrites_a_newer_ones_text() -> None:
    release = asyncio.Event()

    class Slow:
        is_async = True

        async def asummarize(self, messages: Any, previous_summary: Any) -> str:
            if "mod_0" in str(messages):
                await release.wait()  # the first compression's summary arrives last
                return "old text"
            release.set()
            return "new text"

        def summarize(self, messages: Any, previous_summary: Any) -> str:
            raise AssertionError("the sync path must not run")

    yarn = YaRN(summarizer=Slow())

    async def both() -> None:
        await asyncio.gather(yarn.acompress(batch(0)), yarn.acompress(batch(1)))

    asyncio.run(both())
    assert yarn.summary is not None
    assert yarn.summary.llm_text == "new text" and yarn.summary.cycles == 2


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), asyncio.CancelledError()])
def test_interrupts_in_an_async_summarizer_propagate_and_keep_the_facts(
    exc: BaseException,
) -> None:
    yarn = YaRN(summarizer=LLMSummarizer(AsyncScriptedLLM([exc])))
    with pytest.raises(type(exc)):
        asyncio.run(yarn.acompress(batch(1)))
    assert yarn.summary is not None and yarn.summary.files_touched == ("src/mod_1.py",)


def test_an_llm_error_in_the_async_path_is_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    yarn = YaRN(summarizer=LLMSummarizer(AsyncScriptedLLM([ValueError("bad gateway")])))
    assert asyncio.run(yarn.acompress(batch(1))).llm_text is None
    (message,) = _yarn_warnings(caplog)
    assert "bad gateway" in message


@settings(max_examples=scaled(40))
@given(
    sizes=st.lists(st.integers(0, 3), min_size=1, max_size=5),
    fail=st.sets(st.integers(0, 4)),
)
def test_sync_and_async_compressions_agree(sizes: list[int], fail: set[int]) -> None:
    # Model: the async twin of any compression sequence, with failures at the same
    # calls, yields exactly the sync summaries.
    def script() -> list[Any]:
        return [RuntimeError("x") if i in fail else _prose for i in range(len(sizes))]

    sync_yarn = YaRN(summarizer=LLMSummarizer(ScriptedLLM(script())))
    async_yarn = YaRN(summarizer=LLMSummarizer(AsyncScriptedLLM(script())))
    logging.getLogger("agentmem.yarn").disabled = True
    try:
        start = 0
        for size in sizes:
            messages = [m for i in range(start, start + size) for m in batch(i)]
            start += size
            assert sync_yarn.compress(messages) == asyncio.run(async_yarn.acompress(messages))
    finally:
        logging.getLogger("agentmem.yarn").disabled = False


# --------------------------------------------------------------------------- the session


def _session(tmp_path: Path, name: str, llm: Any) -> Session:
    mem = Memory(
        root=tmp_path / name,
        working_dir=tmp_path,
        summarizer=LLMSummarizer(llm),
        durability="normal",
    )
    s = mem.session(name="long", context_window=1_500)
    s.start_task("Rename the module everywhere.")
    return s


def _round(s: Session, i: int) -> None:
    s.append(
        {
            "role": "assistant",
            "content": f"Renaming file {i}.",
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "edit", "arguments": f'{{"path": "src/f{i}.py"}}'},
                }
            ],
        }
    )
    s.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "renamed\n" * 12})


def _summary_text(payload: list[dict[str, Any]]) -> str:
    return next(
        m["content"]
        for m in payload
        if m["role"] == "system" and str(m["content"]).startswith("<thread_summary>")
    )


def test_acontext_with_an_async_summarizer_equals_context_with_a_sync_one(
    tmp_path: Path,
) -> None:
    sync_llm, async_llm = _twins()
    sync_s = _session(tmp_path, "sync", sync_llm)
    async_s = _session(tmp_path, "async", async_llm)
    for i in range(30):
        _round(sync_s, i)
        _round(async_s, i)
        expected = sync_s.context()
        got = asyncio.run(async_s.acontext())
        assert got == expected
        assert openai_violations(got, internal_fields=INTERNAL_FIELDS) == []
    assert async_llm.calls and sync_llm.calls == async_llm.calls
    assert "Prose " in _summary_text(got)
    system, turns = asyncio.run(async_s.acontext("anthropic"))
    assert (system, turns) == sync_s.context("anthropic")
    assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []
    for attempt in (1, 2, 3):
        expected = sync_s.context_after_overflow(attempt, reported_tokens=2_000)
        got = asyncio.run(async_s.acontext_after_overflow(attempt, reported_tokens=2_000))
        assert got == expected
        assert openai_violations(got, internal_fields=INTERNAL_FIELDS) == []
    assert sync_llm.calls == async_llm.calls
    assert async_s.yarn.summary == sync_s.yarn.summary


def test_sync_context_with_an_async_summarizer_falls_back_and_says_acontext(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async_llm = AsyncScriptedLLM([_prose] * 50)
    s = _session(tmp_path, "a", async_llm)
    plain = Memory(root=tmp_path / "plain", working_dir=tmp_path, durability="normal")
    extractive = plain.session(name="long", context_window=1_500)
    extractive.start_task("Rename the module everywhere.")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(30):
            _round(s, i)
            _round(extractive, i)
            payload = s.context()
            # The same payload a memory without a summarizer builds: the extractive summary.
            assert payload == extractive.context()
        gc.collect()
    assert async_llm.calls == []
    assert "Prose" not in _summary_text(payload)
    messages = _yarn_warnings(caplog)
    assert messages and all("acontext()" in m for m in messages)
    # The async twin of the same session now uses it.
    for i in range(30, 60):
        _round(s, i)
        payload = asyncio.run(s.acontext())
    assert async_llm.calls and "Prose " in _summary_text(payload)


def test_acontext_checks_its_arguments_like_context(tmp_path: Path) -> None:
    s = _session(tmp_path, "args", AsyncScriptedLLM([]))
    for bad in (
        lambda: s.acontext("gemini"),
        lambda: s.acontext(injections="text"),  # type: ignore[arg-type]
        lambda: s.acontext_after_overflow(0),
        lambda: s.acontext_after_overflow(1, reported_tokens=-1),
    ):
        with pytest.raises(InvalidArgumentError):
            asyncio.run(bad())  # type: ignore[arg-type]
    s.close()
    with pytest.raises(SessionClosedError):
        asyncio.run(s.acontext())


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), asyncio.CancelledError()])
def test_an_interrupted_summary_leaves_the_session_consistent(
    tmp_path: Path, exc: BaseException
) -> None:
    llm = AsyncScriptedLLM([exc, *[_prose] * 50])
    s = _session(tmp_path, "interrupted", llm)
    interrupted = False
    for i in range(30):
        _round(s, i)
        try:
            payload = asyncio.run(s.acontext())
        except type(exc):
            interrupted = True
            continue
        assert openai_violations(payload, internal_fields=INTERNAL_FIELDS) == []
    assert interrupted and s.yarn.summary is not None
    # Every message that left the window is in the summary, the interrupted trim's
    # included (its extractive part was stored before the summarizer ran), and the
    # summarizer's prose came back with the next trim.
    summary = s.yarn.summary
    # (history[0] is never folded: the context treats it as the prompt, and here it is
    # the task's user message, which stays pinned as the anchor.)
    assert summary.compressed_messages == s.window.start - 1 > 0
    evicted_calls = [m for m in list(s.history)[: s.window.start] if m.get("tool_calls")]
    assert len(summary.files_touched) == len(evicted_calls)
    assert summary.llm_text is not None and summary.llm_text.startswith("Prose ")
    assert s.context_manager.last_build is not None
