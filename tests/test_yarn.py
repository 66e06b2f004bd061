"""Tests for agentmem.yarn: extraction, accumulation, rendering, summarizers, persistence."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import pickle
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import conversation

from agentmem._truncate import omitted_count, truncate_text
from agentmem.errors import AgentMemError, InvalidArgumentError, InvalidMessageError
from agentmem.history import MessageHistory
from agentmem.protocols import Summarizer
from agentmem.yarn import (
    DEFAULT_ASK_TOOLS,
    SUMMARY_INSTRUCTIONS,
    Decision,
    LLMSummarizer,
    ThreadSummary,
    YaRN,
)

GOLDEN = Path(__file__).parent / "golden"

# Anything that looks like a clock time or a date: what a summary must never add.
TIME_LIKE = re.compile(r"\d{1,2}:\d{2}|\d{4}-\d{2}-\d{2}|\bnow\b", re.IGNORECASE)


# --------------------------------------------------------------------------- builders


def user(text: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def assistant(text: Any = None, *calls: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = list(calls)
    return msg


def call(call_id: str, name: str, arguments: Any = None, **args: Any) -> dict[str, Any]:
    raw = arguments if arguments is not None else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def tool(call_id: str, text: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


LONG_REQUEST = (
    "Add rate limiting to the public API. Every endpoint under /v1 must reject more than "
    "100 requests per minute per API key with a 429 and a Retry-After header. " * 4
)


def transcript() -> list[dict[str, Any]]:
    """A realistic slice of an agent session: requests, reads, edits, git, questions."""
    return [
        {"role": "system", "content": "You are a coding agent."},
        user(LONG_REQUEST),
        user("Reminder: the todo list is empty.", system_injected=True),
        assistant(
            "I'll look at the code first.",
            call("c1", "read_file", path="api/server.py"),
            call("c2", "bash", command="git log --oneline -3"),
        ),
        tool("c1", "from flask import Flask\napp = Flask(__name__)\n"),
        tool(
            "c2",
            "3f2a9c1 (HEAD -> main, origin/main) Add health endpoint\n"
            "b7e41d0 Set up Flask app\n"
            "09c8d7e Initial commit\n",
        ),
        assistant(None, call("c3", "ask_user", question="Per API key or per IP address?")),
        tool("c3", "Per API key."),
        assistant(
            None,
            call("c4", "write_file", file_path="api/limits.py", content="..."),
            call("c5", "move_file", old_path="api/old_limits.py", new_path="api/limits_v1.py"),
            call("c6", "edit_files", paths=["api/server.py", "tests/test_limits.py"]),
        ),
        tool("c4", "written"),
        tool("c5", "moved"),
        tool("c6", "edited"),
        assistant(None, call("c7", "bash", command="git commit -am 'Add rate limiter'")),
        tool("c7", "[main 4d5e6f7] Add sliding-window rate limiter\n 3 files changed"),
        assistant("Tests pass. Limits are in api/limits.py.\nShould I document it in README?"),
        user("yes"),
    ]


def fresh(**kwargs: Any) -> ThreadSummary:
    return ThreadSummary.from_messages(transcript(), **kwargs)


# --------------------------------------------------------------------------- extraction


def test_user_requests_are_truncated_and_injected_ones_skipped() -> None:
    s = fresh()
    assert len(s.user_requests) == 2
    first, second = s.user_requests
    assert len(first) == 300 and first.endswith("...")
    assert first[:-3] == " ".join(LONG_REQUEST.split())[:297]
    assert second == "yes"
    assert all("Reminder" not in r for r in s.user_requests)
    assert s.original_request == first


def test_user_requests_keep_the_last_eight_and_skip_empty_ones() -> None:
    msgs = [user(f"request number {i}") for i in range(12)]
    msgs += [user(""), user("   "), user([{"type": "image_url", "image_url": {"url": "x"}}])]
    s = ThreadSummary.from_messages(msgs)
    assert s.user_requests == tuple(f"request number {i}" for i in range(4, 12))
    assert s.original_request == "request number 0"


def test_list_content_and_whitespace_are_flattened() -> None:
    s = ThreadSummary.from_messages(
        [user([{"type": "text", "text": "fix the\n\n  parser"}, {"type": "text", "text": "now"}])]
    )
    assert s.user_requests == ("fix the parser now",)


def test_current_task_is_the_newest_substantive_request() -> None:
    assert fresh().current_task == fresh().user_requests[0]  # "yes" is not a task
    msgs = [user("Migrate the billing tables to Postgres 16"), user("ok go ahead"), user("thanks!")]
    assert ThreadSummary.from_messages(msgs).current_task == msgs[0]["content"]
    yes_please = "Yes please, go ahead and continue with that"
    assert ThreadSummary.from_messages([user(yes_please)]).current_task is None


def test_current_task_argument_wins_when_substantive() -> None:
    task = "Write the migration guide for version two"
    assert fresh(current_task=task).current_task == task
    assert fresh(current_task="ok").current_task == fresh().current_task
    long_task = "x " * 400
    s = fresh(current_task=long_task)
    assert s.current_task is not None and len(s.current_task) == 300


def test_wide_characters_count_double_for_the_task_threshold() -> None:
    s = ThreadSummary.from_messages([user("请修复登录页面的错误")])  # 10 wide characters
    assert s.current_task == "请修复登录页面的错误"


def test_current_task_falls_back_to_the_previous_summary() -> None:
    yarn = YaRN()
    yarn.compress([user("Port the scheduler to asyncio and keep the API")])
    s = yarn.compress([assistant("Done?"), user("yes")])
    assert s.current_task == "Port the scheduler to asyncio and keep the API"


def test_commits_are_what_a_commit_command_made_not_what_git_log_listed() -> None:
    s = fresh()
    # `git log --oneline` listed 3f2a9c1, b7e41d0 and 09c8d7e: listings are not commits.
    assert s.commits == ("4d5e6f7: Add sliding-window rate limiter",)


def test_commit_formats_and_false_positives() -> None:
    output = "\n".join(
        [
            "[main (root-commit) a1b2c3d] First",
            "[detached HEAD 0a0b0c0d] Detached work",
            "[feature/x 1234567] All-digit hash with a branch",
            "[9abcdef] Bare bracket form",
            "[7654321] Looks like a pid prefix",
            "7654321 file.txt",  # `wc -c` output, not a commit
            "  abcdef1 indented, not git output",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  sha256sum line",
            "deadbeefcafe0123456789abcdef0123456789ab full 40-character hash",
        ]
    )
    s = ThreadSummary.from_messages([tool("t", output)])
    assert s.commits == (
        "a1b2c3d: First",
        "0a0b0c0d: Detached work",
        "1234567: All-digit hash with a branch",
        "9abcdef: Bare bracket form",
    )


def test_commits_come_from_command_output_and_subjects_are_capped() -> None:
    subject = "s" * 150
    s = ThreadSummary.from_messages(
        [
            user("abc1234 fix it"),
            assistant("[main abc1234] mine"),
            tool("t", f"abc1234 {subject}"),  # a listing, not a commit
            tool("u", f"[main bcd2345] {subject}"),
        ]
    )
    assert s.commits == (f"bcd2345: {'s' * 97}...",)


def test_commits_dedupe_by_hash_newest_position_wins_and_cap_at_fifteen() -> None:
    lines = [f"[main {i:03d}abcd] commit {i}" for i in range(20)]
    s = ThreadSummary.from_messages(
        [tool("a", "\n".join(lines)), tool("b", "[main 005abcdef0123] commit 5 (full hash)")]
    )
    assert len(s.commits) == 15
    assert s.commits[-1] == "005abcdef0123: commit 5 (full hash)"
    assert sum(c.startswith("005abcd") for c in s.commits) == 1
    assert s.commits[0] == "006abcd: commit 6"


def test_files_from_tool_arguments() -> None:
    # api/server.py was read first and edited later: it sits at its most recent position.
    assert fresh().files_touched == (
        "api/limits.py",
        "api/old_limits.py",
        "api/limits_v1.py",
        "api/server.py",
        "tests/test_limits.py",
    )


def test_files_dedupe_most_recent_last_and_cap_at_thirty() -> None:
    calls = [call(f"c{i}", "read_file", path=f"f{i}.py") for i in range(35)]
    calls.append(call("again", "read_file", filename="f10.py"))
    s = ThreadSummary.from_messages([assistant(None, *calls)])
    assert len(s.files_touched) == 30
    assert s.files_touched[-1] == "f10.py"
    assert s.files_touched[0] == "f5.py"
    assert s.files_touched.count("f10.py") == 1


def test_decision_from_an_ask_tool_and_its_result() -> None:
    s = fresh()
    assert s.decisions[0] == Decision(
        question="Per API key or per IP address?", answer="Per API key."
    )


@pytest.mark.parametrize("key", ["question", "message", "prompt", "text"])
def test_ask_tool_question_argument_names(key: str) -> None:
    s = ThreadSummary.from_messages(
        [assistant(None, call("q", "ask_followup_question", **{key: "Which DB?"})), tool("q", "pg")]
    )
    assert s.decisions == (Decision(question="Which DB?", answer="pg"),)


def test_ask_user_question_list_and_custom_ask_tools() -> None:
    questions = [{"question": "Framework?", "options": []}, {"question": "License?"}]
    msgs = [
        assistant(None, call("q1", "AskUserQuestion", questions=questions)),
        tool("q1", "Flask; MIT"),
        assistant(None, call("q2", "confirm", arguments="not json")),
        tool("q2", ""),
    ]
    s = ThreadSummary.from_messages(msgs, ask_tools={"AskUserQuestion", "confirm"})
    assert s.decisions == (
        Decision(question="Framework? / License?", answer="Flask; MIT"),
        Decision(question="confirm()", answer="(no answer)"),
    )
    assert ThreadSummary.from_messages(msgs, ask_tools=()).decisions == ()


def test_decision_from_an_assistant_question_and_the_user_reply() -> None:
    s = fresh()
    assert s.decisions[-1] == Decision(question="Should I document it in README?", answer="yes")
    s = ThreadSummary.from_messages(
        [assistant("I checked. Options are A or B. Which one do you prefer?"), user("B")]
    )
    assert s.decisions == (Decision(question="Which one do you prefer?", answer="B"),)


def test_no_decision_without_an_immediate_real_user_reply() -> None:
    cases = [
        [assistant("Shall I go on?"), user("continue", system_injected=True), user("yes")],
        [assistant("Shall I go on?"), assistant("Going on."), user("yes")],
        [assistant("Done. Nothing else to ask."), user("thanks")],
        [assistant([{"type": "text", "text": "Shall I?"}]), user("")],
    ]
    for msgs in cases:
        assert ThreadSummary.from_messages(msgs).decisions == ()


def test_decisions_keep_the_last_five_and_cap_each_side() -> None:
    msgs: list[dict[str, Any]] = []
    for i in range(7):
        msgs += [assistant(f"Question {i}?"), user(f"answer {i}")]
    msgs += [assistant("q" * 400 + "?"), user("a" * 400)]
    s = ThreadSummary.from_messages(msgs)
    assert len(s.decisions) == 5
    assert s.decisions[0].question == "Question 3?"
    assert len(s.decisions[-1].question) == 300 and len(s.decisions[-1].answer) == 300


def test_tool_counts_accumulate_across_compressions() -> None:
    assert dict(fresh().tool_counts) == {
        "ask_user": 1,
        "bash": 2,
        "edit_files": 1,
        "move_file": 1,
        "read_file": 1,
        "write_file": 1,
    }
    yarn = YaRN()
    yarn.compress(transcript())
    s = yarn.compress([assistant(None, call("x", "bash", command="ls")), tool("x", "a")])
    assert s.tool_counts["bash"] == 3 and s.tool_counts["read_file"] == 1
    assert s.compressed_messages == len(transcript()) + 2 and s.cycles == 2


def test_odd_but_valid_messages_never_raise() -> None:
    msgs: list[dict[str, Any]] = [
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no?"}]},
        user([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}]),
        assistant(None, {"id": "n", "type": "function", "function": {"arguments": "{"}}),
        assistant(None, call("j", "read_file", arguments='["not", "an", "object"]')),
        assistant(None, call("k", "read_file", arguments="[" * 5000)),
        assistant(None, call("s", "read_file", arguments='{"path": "\\ud800x"}')),
        assistant(None, call("p", "read_file", path=7, paths=["ok.py", 3, None, ""])),
        tool("n", None),
        tool("missing-call", [{"type": "text", "text": "[main abcdef1] via parts"}]),
        {"role": "tool", "content": "no id"},
        {"role": "mystery", "content": "?"},
        {"role": "system", "content": None},
    ]
    s = ThreadSummary.from_messages(msgs)
    assert s.tool_counts["unknown"] == 1
    assert s.files_touched == ("\ufffdx", "ok.py")
    assert s.commits == ("abcdef1: via parts",)
    assert s.compressed_messages == len(msgs)
    s.render()


def test_bad_arguments_raise_invalid_argument_error() -> None:
    yarn = YaRN()
    for bad in ["text", {"role": "user"}, 5, [user("a"), "b"]]:
        with pytest.raises(InvalidArgumentError):
            yarn.compress(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        yarn.compress([user("a")], current_task=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        YaRN(ask_tools="ask_user")
    with pytest.raises(InvalidArgumentError):
        YaRN(summarizer=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        YaRN(main_thread=iter([user("a")]))
    with pytest.raises(InvalidArgumentError):
        ThreadSummary().merge({})  # type: ignore[arg-type]
    assert yarn.summary is None


# --------------------------------------------------------------------------- accumulation


def test_the_summary_keeps_earlier_facts_across_repeated_trims() -> None:
    yarn = YaRN()
    cycle_one = [
        user("Build a CLI that converts CSV files to Parquet with a schema option"),
        assistant(None, call("a", "write_file", path="cli/convert.py")),
        tool("a", "ok"),
        assistant(None, call("b", "bash", command="git commit")),
        tool("b", "[main c0ffee1] Add CSV to Parquet converter"),
    ]
    yarn.compress(cycle_one)
    for cycle in range(2, 6):
        batch = [user(f"Step {cycle}: handle edge case number {cycle} in the converter")]
        for i in range(3):
            batch += [
                assistant(None, call(f"{cycle}-{i}", "edit_file", path=f"cli/part{cycle}_{i}.py")),
                tool(f"{cycle}-{i}", f"[main {cycle}{i}aaaaa] Part {cycle}.{i}"),
                assistant(f"Part {cycle}.{i} is done. Continue with the next part?"),
                user(f"yes, part {cycle}.{i} looks right"),
            ]
        yarn.compress(batch)
    s = yarn.summary
    assert s is not None and s.cycles == 5
    text = s.render()
    assert "[original] Build a CLI that converts CSV files to Parquet" in text
    assert "- c0ffee1: Add CSV to Parquet converter" in text
    assert "- cli/convert.py" in text
    assert "Tool usage: edit_file x12, bash x1, write_file x1" in text
    assert (len(s.commits), len(s.files_touched), len(s.user_requests)) == (13, 13, 8)
    assert len(s.decisions) == 5
    assert s.current_task == "yes, part 5.2 looks right"


def test_caps_drop_the_oldest_facts_first() -> None:
    yarn = YaRN()
    yarn.compress([tool("a", "[main c0ffee1] First commit")])
    for cycle in range(15):
        yarn.compress([tool("b", f"[main {cycle:02d}abcde] Later {cycle}")])
    s = yarn.summary
    assert s is not None and len(s.commits) == 15
    assert "c0ffee1: First commit" not in s.commits and s.commits[-1] == "14abcde: Later 14"


def test_a_question_and_its_answer_may_be_evicted_in_different_cycles() -> None:
    yarn = YaRN()
    yarn.compress([user("Set up CI for the project please"), assistant("GitHub or GitLab?")])
    yarn.compress([assistant(None, call("q", "ask_user", question="Which Python versions?"))])
    s = yarn.compress([user("GitHub"), tool("q", "3.11 and 3.12")])
    # "GitHub" came after the tool call, not right after the question: no pairing.
    assert s.decisions == (Decision(question="Which Python versions?", answer="3.11 and 3.12"),)
    yarn = YaRN()
    yarn.compress([assistant("GitHub or GitLab?")])
    yarn.compress([user("GitHub"), assistant(None, call("q", "ask_user", question="Versions?"))])
    s = yarn.compress([tool("q", "3.11 and 3.12")])
    assert s.decisions == (
        Decision(question="GitHub or GitLab?", answer="GitHub"),
        Decision(question="Versions?", answer="3.11 and 3.12"),
    )


def test_empty_compress_changes_nothing() -> None:
    yarn = YaRN()
    assert yarn.compress([]) == ThreadSummary()
    assert yarn.render_message() is None and yarn.state()["summary"] is None
    first = yarn.compress(transcript())
    assert yarn.compress([]) is first
    assert yarn.summary is first and first.cycles == 1


def test_merge_keeps_the_older_original_and_the_newer_task_and_llm_text() -> None:
    old = ThreadSummary(original_request="a", current_task="task a", llm_text="old prose")
    new = ThreadSummary(original_request="b", current_task=None, llm_text=None)
    merged = old.merge(new)
    assert (merged.original_request, merged.current_task, merged.llm_text) == (
        "a",
        "task a",
        "old prose",
    )
    newer = ThreadSummary(original_request="c", current_task="task c", llm_text="new prose")
    merged = old.merge(newer)
    assert (merged.current_task, merged.llm_text) == ("task c", "new prose")


# --------------------------------------------------------------------------- rendering


def test_render_is_deterministic_and_carries_no_clock() -> None:
    texts = {
        YaRN().compress(transcript()).render(),
        YaRN().compress(transcript()).render(),
        ThreadSummary.from_json(YaRN().compress(transcript()).to_json()).render(),
    }
    assert len(texts) == 1
    (text,) = texts
    assert TIME_LIKE.search(text) is None
    assert text.startswith(f"Summary of {len(transcript())} earlier messages")
    headings = ["Current task:", "Earlier requests:", "Decisions:", "Git commits seen:"]
    headings += ["Files touched:", "Tool usage:"]
    positions = [text.index(h) for h in headings]
    assert positions == sorted(positions)
    assert "Tool usage: bash x2, ask_user x1, edit_files x1, move_file x1, read_file x1," in text


def test_render_omits_empty_sections_and_marks_the_original_once() -> None:
    assert ThreadSummary().render() == "Summary of 0 earlier messages that are no longer shown."
    one = ThreadSummary(compressed_messages=1).render()
    assert one == "Summary of 1 earlier message that is no longer shown."
    s = ThreadSummary(original_request="first", user_requests=("first", "second"))
    text = s.render()
    assert text.count("first") == 1 and "- [original] first\n- second" in text
    for heading in ["Current task:", "Decisions:", "Git commits", "Files", "Tool usage"]:
        assert heading not in text
    s = ThreadSummary(original_request="first", user_requests=("later",))
    assert "- [original] first\n- later" in s.render()


def test_render_message_shape() -> None:
    yarn = YaRN()
    yarn.compress(transcript())
    msg = yarn.render_message()
    assert msg is not None
    assert msg["role"] == "system" and msg["compressed_summary"] is True
    assert msg["content"].startswith("<thread_summary>\n")
    assert msg["content"].endswith("\n</thread_summary>")
    assert yarn.render_message() == msg and yarn.render_message() is not msg


def test_summary_is_immutable_and_picklable() -> None:
    s = fresh()
    with pytest.raises(Exception, match="frozen"):
        s.cycles = 3
    with pytest.raises(TypeError):
        s.tool_counts["bash"] = 9  # type: ignore[index]
    assert pickle.loads(pickle.dumps(s)) == s


# --------------------------------------------------------------------------- summarizers


class RecordingSummarizer:
    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[Mapping[str, Any]], str | None]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None) -> str:
        self.calls.append((list(messages), previous_summary))
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply  # type: ignore[no-any-return]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "agentmem.yarn" and r.levelno >= logging.WARNING]


def test_summarizer_text_is_used_with_the_extractive_facts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = RecordingSummarizer("The agent added rate limiting.", "It documented it.")
    assert isinstance(summarizer, Summarizer)
    yarn = YaRN(summarizer=summarizer)
    batch = transcript()
    s = yarn.compress(batch)
    assert s.llm_text == "The agent added rate limiting."
    assert summarizer.calls[0] == (batch, None)
    previous = s.render()
    s = yarn.compress([user("Now document the limits in the README file")])
    assert s.llm_text == "It documented it."
    assert summarizer.calls[1][1] == previous
    text = s.render()
    assert text.index("It documented it.") < text.index("Current task:")
    assert "4d5e6f7: Add sliding-window rate limiter" in text
    assert _warnings(caplog) == []


@pytest.mark.parametrize(
    "reply", [RuntimeError("model overloaded"), ValueError("bad"), "", "   ", None, 42]
)
def test_a_failing_summarizer_logs_one_warning_and_keeps_the_extractive_summary(
    caplog: pytest.LogCaptureFixture, reply: Any
) -> None:
    yarn = YaRN(summarizer=RecordingSummarizer("First prose.", reply))
    yarn.compress([user("Write the changelog for release two")])
    caplog.clear()
    s = yarn.compress(transcript())
    assert s.llm_text == "First prose."  # unchanged
    assert s.commits and s.cycles == 2  # the extractive part went in
    assert yarn.summary == s
    warnings = _warnings(caplog)
    assert len(warnings) == 1
    if isinstance(reply, Exception):
        assert str(reply) in warnings[0].getMessage()


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), asyncio.CancelledError()])
def test_interrupts_propagate_and_the_extractive_summary_is_kept(exc: BaseException) -> None:
    yarn = YaRN(summarizer=RecordingSummarizer(exc))
    with pytest.raises(type(exc)):
        yarn.compress(transcript())
    assert yarn.summary is not None and yarn.summary.cycles == 1
    assert yarn.summary.llm_text is None


def test_an_async_summarizer_is_warned_about_not_left_unawaited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class AsyncSummarizer:
        async def summarize(self, messages: Any, previous_summary: Any) -> str:
            return "never"

    yarn = YaRN(summarizer=AsyncSummarizer())  # type: ignore[arg-type]
    assert yarn.compress(transcript()).llm_text is None
    assert len(_warnings(caplog)) == 1


class FakeLLM:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[list[dict[str, Any]]] = []

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> Any:
        self.calls.append(messages)
        return self.reply


def test_llm_summarizer_prompt_and_reply() -> None:
    llm = FakeLLM({"role": "assistant", "content": "  Summary text.  "})
    summarizer = LLMSummarizer(llm)
    assert isinstance(summarizer, Summarizer)
    big = "x" * 5000
    msgs = [
        user("Deploy the app"),
        assistant("On it.", call("c1", "bash", command="make deploy")),
        tool("c1", big),
        tool("orphan", "???"),
    ]
    assert summarizer.summarize(msgs, "Earlier: set up the repo.") == "Summary text."
    (prompt,) = llm.calls
    assert prompt[0] == {"role": "system", "content": SUMMARY_INSTRUCTIONS}
    body = prompt[1]["content"]
    assert prompt[1]["role"] == "user"
    assert "Previous summary:\nEarlier: set up the repo." in body
    assert "user: Deploy the app" in body and "assistant: On it." in body
    assert 'assistant called bash({"command": "make deploy"})' in body
    cut = truncate_text(big, 2000)
    assert f"tool result (bash): {cut}" in body
    assert len(cut) <= 2000 and cut.startswith("x" * 1000) and omitted_count(cut) > 3000
    assert "tool result (tool): ???" in body
    assert summarizer.build_prompt(msgs, "Earlier: set up the repo.") == prompt
    assert "Previous summary:\n(none)" in summarizer.build_prompt(msgs, None)[1]["content"]
    for instruction in ["decisions", "file paths", "commands", "errors", "open questions"]:
        assert instruction in SUMMARY_INSTRUCTIONS


def test_llm_summarizer_inside_yarn(caplog: pytest.LogCaptureFixture) -> None:
    yarn = YaRN(summarizer=LLMSummarizer(FakeLLM({"role": "assistant", "content": "Prose."})))
    assert yarn.compress(transcript()).llm_text == "Prose."
    yarn = YaRN(summarizer=LLMSummarizer(FakeLLM("not a message")))
    assert yarn.compress(transcript()).llm_text is None
    assert len(_warnings(caplog)) == 1


def test_llm_summarizer_accepts_async_llms_and_rejects_bad_arguments() -> None:
    async def async_llm(messages: Any, tools: Any = None) -> dict[str, Any]:
        return {}

    class AsyncCallable:
        async def __call__(self, messages: Any, tools: Any = None) -> dict[str, Any]:
            return {}

    for llm in [async_llm, AsyncCallable()]:
        assert LLMSummarizer(llm).is_async  # type: ignore[arg-type]
    assert not LLMSummarizer(FakeLLM({})).is_async
    with pytest.raises(InvalidArgumentError):
        LLMSummarizer("llm")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        LLMSummarizer(FakeLLM({}), max_tool_chars=0)
    with pytest.raises(AgentMemError):
        LLMSummarizer(FakeLLM(["x"])).summarize([user("a")], None)


# --------------------------------------------------------------------------- threads


def test_side_threads_are_archived_as_validated_copies() -> None:
    yarn = YaRN()
    assert yarn.thread_ids() == ["main"] and yarn.thread() == []
    original = user("hello")
    yarn.archive([original], thread_id="subagent-1")
    yarn.archive([user("main one"), user("skip", transient=True)])
    original["content"] = "changed"
    assert yarn.thread("subagent-1") == [user("hello")]
    assert yarn.thread() == [user("main one")]
    assert yarn.thread_ids() == ["main", "subagent-1"]
    with pytest.raises(InvalidMessageError):
        yarn.archive([user("fine"), {"role": "robot"}], thread_id="subagent-1")
    assert yarn.thread("subagent-1") == [user("hello")]
    with pytest.raises(InvalidArgumentError):
        yarn.thread("nope")
    with pytest.raises(InvalidArgumentError):
        yarn.archive([user("a")], thread_id="")


def test_the_main_thread_can_be_the_session_history() -> None:
    history = MessageHistory()
    history.extend([user("one"), assistant("two")])
    yarn = YaRN(main_thread=history)
    history.append(user("three"))
    main = yarn.thread()
    assert [m["content"] for m in main] == ["one", "two", "three"]
    assert main[0] is history[0]  # no second copy
    with pytest.raises(InvalidArgumentError):
        yarn.archive([user("x")])
    yarn.archive([user("side")], thread_id="tool-session")
    assert yarn.thread_ids() == ["main", "tool-session"]
    assert "main" not in yarn.state()["threads"]


# --------------------------------------------------------------------------- persistence


def test_state_round_trip() -> None:
    yarn = YaRN(summarizer=RecordingSummarizer("Prose."))
    yarn.archive(transcript())
    yarn.archive([user("sub task")], thread_id="sub")
    yarn.compress(transcript()[:-1])  # ends on an open question
    yarn.compress([assistant(None, call("q", "ask_user", question="Port?"))])
    state = json.loads(json.dumps(yarn.state()))
    assert state["format"] == "agentmem.yarn" and state["version"] == 1
    restored = YaRN.from_state(state)
    assert restored.summary == yarn.summary
    assert restored.thread_ids() == yarn.thread_ids()
    assert restored.thread() == yarn.thread() and restored.thread("sub") == yarn.thread("sub")
    assert restored.state() == yarn.state()
    # The carried fold state survives: the answer in the next batch pairs with the question.
    s = restored.compress([tool("q", "8080")])
    assert s.decisions[-1] == Decision(question="Port?", answer="8080")


def test_state_with_a_main_thread() -> None:
    history = MessageHistory()
    history.append(user("hi"))
    yarn = YaRN(main_thread=history)
    yarn.compress([user("Refactor the importer into smaller functions")])
    restored = YaRN.from_state(yarn.state(), main_thread=history)
    assert restored.summary == yarn.summary and restored.thread() == yarn.thread()
    owning = YaRN()
    owning.archive([user("own main")])
    with pytest.raises(InvalidArgumentError, match="main thread"):
        YaRN.from_state(owning.state(), main_thread=history)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: "garbage",
        lambda s: {**s, "format": "agentmem.ltm"},
        lambda s: {**s, "version": 99},
        lambda s: {**s, "threads": []},
        lambda s: {**s, "threads": {"main": [{"role": "robot"}]}},
        lambda s: {**s, "pending": {"question": 3}},
        lambda s: {**s, "pending": {"asks": [["id"]]}},
        lambda s: {**s, "summary": {"format": "agentmem.thread-summary"}},
    ],
)
def test_from_state_rejects_garbage(mutate: Any) -> None:
    yarn = YaRN()
    yarn.compress(transcript())
    with pytest.raises(InvalidArgumentError):
        YaRN.from_state(mutate(yarn.state()))


def test_summary_json_round_trip() -> None:
    s = YaRN(summarizer=RecordingSummarizer("Prose.")).compress(transcript())
    data = s.to_json()
    assert data["format"] == "agentmem.thread-summary" and data["version"] == 1
    assert ThreadSummary.from_json(json.loads(json.dumps(data))) == s


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ("not a dict", "expected a thread summary"),
        ({"version": 1}, "format"),
        ({"format": "agentmem.thread-summary"}, "version"),
        ({"format": "agentmem.thread-summary", "version": True}, "version"),
        ({"format": "agentmem.thread-summary", "version": 0}, "version"),
        ({"format": "agentmem.thread-summary", "version": 2}, "newer"),
        ({"format": "agentmem.thread-summary", "version": 1, "cycles": -1}, "cycles"),
        ({"format": "agentmem.thread-summary", "version": 1, "cycles": "3"}, "cycles"),
        ({"format": "agentmem.thread-summary", "version": 1, "commits": "abc"}, "commits"),
        ({"format": "agentmem.thread-summary", "version": 1, "user_requests": [1]}, "user_req"),
        ({"format": "agentmem.thread-summary", "version": 1, "decisions": [{"q": 1}]}, "decis"),
        ({"format": "agentmem.thread-summary", "version": 1, "tool_counts": {"a": 1.5}}, "tool"),
        ({"format": "agentmem.thread-summary", "version": 1, "surprise": 1}, "surprise"),
    ],
)
def test_from_json_rejects_garbage(data: Any, fragment: str) -> None:
    with pytest.raises(InvalidArgumentError, match=fragment):
        ThreadSummary.from_json(data)


def test_golden_version_1_loads() -> None:
    data = json.loads((GOLDEN / "thread-summary-v1.json").read_text(encoding="utf-8"))
    s = ThreadSummary.from_json(data)
    assert s.original_request == "Add rate limiting to the public API and document it"
    assert s.commits[-1] == "b7e41d0: Document rate limits in README"
    assert s.decisions == (
        Decision(
            question="Should the limit be per API key or per IP address?", answer="per API key"
        ),
    )
    assert s.tool_counts == {"ask_user": 1, "bash": 4, "edit_file": 3, "read_file": 2}
    assert (s.compressed_messages, s.cycles, s.llm_text) == (27, 2, None)
    assert s.to_json() == data
    assert "Tool usage: bash x4, edit_file x3, read_file x2, ask_user x1" in s.render()


def test_defaults() -> None:
    assert "ask_user" in DEFAULT_ASK_TOOLS and "AskUserQuestion" in DEFAULT_ASK_TOOLS
    assert YaRN().summary is None
    start = ThreadSummary(original_request="resumed")
    assert YaRN(summary=start).compress([user("x")]).original_request == "resumed"


# --------------------------------------------------------------------------- properties

ASK = "ask_user"
HASHES = ["abc1234", "abc1234ff", "def5678", "0a1b2c3", "9e9e9e9", "1234abc"]
PATHS = ["a.py", "b.py", "src/c.py", "d/e.md", "f.txt"]
words = st.sampled_from(["fix", "the", "parser", "yes", "ok", "add", "tests", "please", "?"])


@st.composite
def rich_message(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A short run of messages rich in the facts YaRN extracts (duplicates likely)."""
    kind = draw(st.sampled_from(["user", "question", "ask", "ask_result", "git", "files", "say"]))
    if kind == "user":
        text = " ".join(draw(st.lists(words, min_size=1, max_size=12)))
        return [user(text, system_injected=draw(st.booleans()))]
    if kind == "question":
        return [assistant(" ".join(draw(st.lists(words, max_size=6))) + " which?")]
    if kind == "ask":
        cid = draw(st.sampled_from(["q1", "q2", "q3"]))
        return [assistant(None, call(cid, ASK, question=draw(words)))]
    if kind == "ask_result":
        return [tool(draw(st.sampled_from(["q1", "q2", "q3"])), draw(words))]
    if kind == "git":
        lines = [
            draw(st.sampled_from(["[main {h}] {s}", "{h} {s}", "{h} (HEAD -> main) {s}"])).format(
                h=draw(st.sampled_from(HASHES)), s=draw(words)
            )
            for _ in range(draw(st.integers(1, 4)))
        ]
        return [tool("g", "\n".join(lines))]
    if kind == "files":
        key = draw(st.sampled_from(["path", "file_path", "new_path", "old_path", "filename"]))
        extra = {"paths": draw(st.lists(st.sampled_from(PATHS), max_size=3))}
        args = {key: draw(st.sampled_from(PATHS)), **extra}
        return [assistant(None, call("f", draw(st.sampled_from(["edit", "read"])), **args))]
    return [assistant(draw(words))]


rich_conversation = st.lists(rich_message(), max_size=40).map(
    lambda runs: [m for run in runs for m in run]
)
# The shared `conversation` strategy is slow to draw; small ones keep the suite fast.
any_conversation = st.one_of(rich_conversation, conversation(max_size=8))


@given(msgs=any_conversation, task=st.one_of(st.none(), st.text(max_size=40)))
def test_compress_never_raises(msgs: list[dict[str, Any]], task: str | None) -> None:
    yarn = YaRN(summarizer=RecordingSummarizer("ok"))
    s = yarn.compress(msgs, current_task=task)
    assert s.compressed_messages == len(msgs)
    assert len(s.user_requests) <= 8 and len(s.commits) <= 15 and len(s.decisions) <= 5
    assert all(len(r) <= 300 for r in s.user_requests)
    s.render()
    json.dumps(yarn.state())  # persistable
    assert ThreadSummary.from_json(s.to_json()) == s


@given(msgs=rich_conversation, cuts=st.lists(st.integers(0, 200), max_size=4))
def test_compressing_in_pieces_equals_compressing_at_once(
    msgs: list[dict[str, Any]], cuts: list[int]
) -> None:
    """Holds for every field but ``cycles``, for any split points and any sizes (caps too)."""
    whole = YaRN().compress(msgs)
    pieces = YaRN()
    bounds = sorted({min(c, len(msgs)) for c in cuts} | {0, len(msgs)})
    for start, end in itertools.pairwise(bounds):
        pieces.compress(msgs[start:end])
    if msgs:
        assert pieces.summary is not None
        assert pieces.summary.model_copy(update={"cycles": whole.cycles}) == whole


def _oracle_tail(items: list[str], limit: int, key: Any) -> tuple[str, ...]:
    """Independent model: walk backwards, keep the first unseen key, stop at the cap."""
    out: list[str] = []
    seen: set[str] = set()
    for item in reversed(items):
        if key(item) not in seen:
            seen.add(key(item))
            out.append(item)
        if len(out) == limit:
            break
    return tuple(reversed(out))


summaries = st.builds(
    ThreadSummary,
    original_request=st.one_of(st.none(), words),
    user_requests=st.lists(words, max_size=10).map(tuple),
    current_task=st.one_of(st.none(), words),
    commits=st.lists(
        st.builds(lambda h, s: f"{h}: {s}", st.sampled_from(HASHES), words), max_size=20
    ).map(tuple),
    files_touched=st.lists(st.sampled_from(PATHS + [f"g{i}" for i in range(30)]), max_size=35).map(
        tuple
    ),
    decisions=st.lists(st.builds(Decision, question=words, answer=words), max_size=7).map(tuple),
    tool_counts=st.dictionaries(st.sampled_from(["bash", "read", "edit"]), st.integers(0, 5)),
    compressed_messages=st.integers(0, 100),
    cycles=st.integers(0, 10),
    llm_text=st.one_of(st.none(), words),
)


@given(a=summaries, b=summaries, c=summaries)
def test_merge_is_associative_and_matches_an_independent_model(
    a: ThreadSummary, b: ThreadSummary, c: ThreadSummary
) -> None:
    left = a.merge(b).merge(c)
    assert left == a.merge(b.merge(c))
    assert left.commits == _oracle_tail(
        [*a.commits, *b.commits, *c.commits], 15, lambda entry: entry[:7]
    )
    assert left.files_touched == _oracle_tail(
        [*a.files_touched, *b.files_touched, *c.files_touched], 30, lambda p: p
    )
    assert left.user_requests == (*a.user_requests, *b.user_requests, *c.user_requests)[-8:]
    assert left.decisions == (*a.decisions, *b.decisions, *c.decisions)[-5:]
    for name in ("bash", "read", "edit"):
        expected = sum(s.tool_counts.get(name, 0) for s in (a, b, c))
        assert left.tool_counts.get(name, 0) == expected


# --------------------------------------------------------------------------- shell-only agents

SHELL_CASES: list[tuple[str, list[str]]] = [
    ("sed -i 's/old/new/g' src/app.py", ["src/app.py"]),
    ("sed -i.bak -e 's/a/b/' -e 's/c/d/' lib/x.py lib/y.py", ["lib/x.py", "lib/y.py"]),
    ("sed -i '' 's/a/b/' mac.txt", ["mac.txt"]),
    ("sed -n '1,20p' README.md", []),
    ("cat > 'my dir/notes.md' <<'EOF'\n# Notes\nrm -rf / > nothing\nEOF", ["my dir/notes.md"]),
    ("cat <<EOF > conf.ini\n[main]\nkey = 1\nEOF\ncat conf.ini", ["conf.ini"]),
    ("python - <<'EOF'\nopen('x').read()\nprint(1 > 0)\nEOF", []),
    ("cd repo && python -m pytest -x 2>&1 | tail -5", []),
    ("make build >/dev/null 2>&1 && echo ok", []),
    ("echo 'x = 1' >> pkg/__init__.py && git add -A", ["pkg/__init__.py"]),
    ("printf '%s\\n' a b | tee -a out/log.txt other.txt >/dev/null", ["out/log.txt", "other.txt"]),
    ("mv src/old.py src/new.py", ["src/old.py", "src/new.py"]),
    ("git mv docs/a.md docs/b.md && git commit -m 'rename'", ["docs/a.md", "docs/b.md"]),
    ("cp -r templates/base.html site/index.html", ["site/index.html"]),
    ('rm -f build/tmp.o "dist/my file.whl"', ["build/tmp.o", "dist/my file.whl"]),
    ("git rm --cached secrets.env", ["secrets.env"]),
    ("perl -pi -e 's/foo/bar/' lib/Foo.pm", ["lib/Foo.pm"]),
    ("bash -lc 'cd /repo && sed -i \"s/a/b/\" setup.cfg'", ["setup.cfg"]),
    ("FOO=1 sudo tee /etc/hosts.d/x < input.txt", ["/etc/hosts.d/x"]),
    ("grep -rn TODO src/ > $OUT; ls *.py > files.txt", ["files.txt"]),
    ("touch a.txt; find . -name '*.pyc' -delete", ["a.txt"]),
    ("echo hi 1>&2; ls 2> errors.log", ["errors.log"]),
    ("git log --oneline -5 && git diff HEAD~1 -- src/x.py", []),
    (
        "cat <<'EOF' > fix.patch\n--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-x\n+y\n"
        "--- a/old.py\n+++ /dev/null\nEOF\npatch -p1 < fix.patch",
        ["fix.patch", "src/app.py", "old.py"],
    ),
    ("git apply <<'EOF'\n--- a/x/y.py\n+++ b/x/y.py\n@@ -1 +1 @@\nEOF", ["x/y.py"]),
    ("cat <<'EOF' > notes.md\n--- a/keep.py\n+++ b/keep.py\nEOF", ["notes.md"]),
]


@pytest.mark.parametrize(("command", "expected"), SHELL_CASES)
def test_files_written_by_shell_commands(command: str, expected: list[str]) -> None:
    s = ThreadSummary.from_messages(
        [assistant(None, call("c1", "bash", command=command)), tool("c1", "")]
    )
    assert list(s.files_touched) == list(dict.fromkeys(expected))


@pytest.mark.parametrize(
    "function",
    [
        {"name": "execute_bash", "arguments": json.dumps({"cmd": "sed -i 's/a/b/' f.py"})},
        {
            "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", "sed -i s/a/b/ f.py"]}),
        },
        {"name": "run_shell", "arguments": json.dumps({"script": "sed -i s/a/b/ f.py"})},
        {"name": "bash", "arguments": "sed -i 's/a/b/' f.py"},  # not JSON: the command itself
        {"name": "bash", "arguments": json.dumps("sed -i 's/a/b/' f.py")},  # a JSON string
    ],
)
def test_command_argument_shapes(function: dict[str, Any]) -> None:
    msg = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": function}],
    }
    assert ThreadSummary.from_messages([msg]).files_touched == ("f.py",)


def test_input_of_a_non_shell_tool_is_not_read_as_a_command() -> None:
    s = ThreadSummary.from_messages(
        [assistant(None, call("c1", "python", input="if a > b:\n    print(a)"))]
    )
    assert s.files_touched == ()


def test_mini_swe_agent_bash_blocks_in_assistant_content() -> None:
    messages = [
        user("Fix the off-by-one in the pager and commit it."),
        assistant(
            "THOUGHT: patch the loop bound.\n\n```bash\n"
            "sed -i 's/range(n)/range(n + 1)/' src/pager.py && git commit -am 'Fix pager'\n```"
        ),
        user(
            "<returncode>0</returncode>\n<output>\n[main 9f8e7d6] Fix pager\n"
            " 1 file changed, 1 insertion(+)\n</output>",
        ),
        assistant(
            "```bash\ncat <<'EOF' > tests/test_pager.py\ndef test_last():\n    assert 1\nEOF\n```"
        ),
        user("<returncode>0</returncode>\n<output>\n9f8e7d6 Fix pager\n1a2b3c4 Init\n</output>"),
        assistant("Here is how you could do it:\n```python\nwith open('x.py', 'w') as f: ...\n```"),
    ]
    s = ThreadSummary.from_messages(messages)
    assert s.files_touched == ("src/pager.py", "tests/test_pager.py")
    assert s.commits == ("9f8e7d6: Fix pager",)


def test_shell_extraction_never_raises_on_odd_commands() -> None:
    odd = [
        "echo 'unbalanced > x.txt",
        "cat <<EOF > never_closed.txt\nbody",
        ">",
        "sed -i",
        "bash -c",
        "git -C",
        "\\\n\\\n",
        "((((",
        "x" * 50_000 + " > big.txt",
    ]
    for command in odd:
        s = ThreadSummary.from_messages([assistant(None, call("c", "bash", command=command))])
        assert all(isinstance(f, str) and f for f in s.files_touched)
    s = ThreadSummary.from_messages([assistant(None, call("c", "bash", command=odd[1]))])
    assert s.files_touched == ("never_closed.txt",)


def test_extraction_module_reads_the_same_facts_the_summary_holds() -> None:
    from agentmem.yarn._extract import Fold

    fold = Fold(DEFAULT_ASK_TOOLS, None, {})
    for msg in transcript():
        fold.feed(msg)
    facts = fold.facts(None)
    s = fresh()
    assert facts.user_requests == s.user_requests and facts.current_task == s.current_task
    assert facts.commits == s.commits and facts.files_touched == s.files_touched
    assert [Decision(question=q, answer=a) for q, a in facts.decisions] == list(s.decisions)
    assert facts.tool_counts == dict(s.tool_counts)
    assert facts.compressed_messages == s.compressed_messages == len(transcript())


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "python - <<'EOF'\nwith open('out/report.txt', 'w') as f:\n    f.write('x')\nEOF",
            ["out/report.txt"],
        ),
        ("python3 -c \"from pathlib import Path; Path('a.cfg').write_text('1')\"", ["a.cfg"]),
        ("python -c \"print(open('README.md').read())\"", []),
        ("echo \"open('x.txt', 'w')\" > notes.md", ["notes.md"]),  # not python: only the redirect
    ],
)
def test_python_run_from_the_shell_writing_literal_paths(command: str, expected: list[str]) -> None:
    s = ThreadSummary.from_messages([assistant(None, call("c1", "bash", command=command))])
    assert list(s.files_touched) == expected


# ---------------------------------------------------------------- persistence hooks (sessions)


def _msgs(tag: str, n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{tag} {i}"} for i in range(n)]


def test_state_without_threads_keeps_only_their_order() -> None:
    yarn = YaRN(main_thread=[])
    yarn.archive(_msgs("b", 2), "b")
    yarn.archive(_msgs("a", 1), "a")
    full = yarn.state()
    assert full["threads"] == {"b": _msgs("b", 2), "a": _msgs("a", 1)}
    assert "thread_order" not in full
    light = yarn.state(include_threads=False)
    assert "threads" not in light
    assert light["thread_order"] == ["b", "a"]
    assert {k: v for k, v in light.items() if k != "thread_order"} == {
        k: v for k, v in full.items() if k != "threads"
    }


def test_unsaved_threads_lists_only_what_came_after_the_last_mark() -> None:
    yarn = YaRN(main_thread=[])
    assert yarn.unsaved_threads() == {}
    yarn.archive(_msgs("b", 2), "b")
    yarn.archive(_msgs("a", 1), "a")
    first = yarn.unsaved_threads()
    assert first == {"b": (0, _msgs("b", 2)), "a": (0, _msgs("a", 1))}
    yarn.archive(_msgs("b-late", 1), "b")  # after the snapshot, before the mark
    yarn.mark_saved(first)
    assert yarn.unsaved_threads() == {"b": (2, _msgs("b-late", 1))}
    yarn.mark_saved(yarn.unsaved_threads())
    assert yarn.unsaved_threads() == {}
    yarn.archive([{"role": "user", "content": "t", "transient": True}], "a")
    assert yarn.unsaved_threads() == {}  # nothing archived: nothing to save


def test_from_state_places_saved_threads_first_and_state_threads_after() -> None:
    legacy = YaRN(main_thread=[])
    legacy.archive(_msgs("json-c", 1), "c")
    legacy.archive(_msgs("json-a", 1), "a")
    state = legacy.state()  # an older release's state: threads inside
    state["thread_order"] = ["a", "empty"]
    yarn = YaRN.from_state(
        state, main_thread=[], saved_threads={"a": _msgs("row-a", 2), "b": _msgs("row-b", 1)}
    )
    assert yarn.thread_ids() == ["main", "a", "empty", "b", "c"]
    assert yarn.thread("a") == _msgs("row-a", 2) + _msgs("json-a", 1)
    assert yarn.thread("empty") == []
    assert yarn.unsaved_threads() == {"c": (0, _msgs("json-c", 1)), "a": (2, _msgs("json-a", 1))}
    # without saved_threads (a standalone YaRN) nothing is owed to an owner
    assert YaRN.from_state(state, main_thread=[]).unsaved_threads() == {}


@pytest.mark.parametrize("order", ["a", [1], None])
def test_from_state_refuses_a_bad_thread_order(order: Any) -> None:
    state = YaRN(main_thread=[]).state(include_threads=False)
    state["thread_order"] = order
    with pytest.raises(InvalidArgumentError, match="thread_order"):
        YaRN.from_state(state, main_thread=[], saved_threads={})


def test_from_state_refuses_a_saved_thread_named_main() -> None:
    state = YaRN(main_thread=[]).state(include_threads=False)
    with pytest.raises(InvalidArgumentError, match="main"):
        YaRN.from_state(state, main_thread=[], saved_threads={"main": _msgs("m", 1)})
