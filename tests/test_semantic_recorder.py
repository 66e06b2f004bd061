"""Recorder: never blocks the turn, drops with a count when full, bounded flush and close."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled
from semantic_fakes import FakeClient

from agentmem.errors import ConfigurationError, InvalidArgumentError
from agentmem.semantic import CloseReport, Recorder


def test_records_reach_the_client_in_order_and_flush_waits_for_them() -> None:
    client = FakeClient()
    with Recorder(client, user_id="martin", infer=False) as rec:
        for i in range(20):
            assert rec.record(f"fact {i}") is True
        assert rec.flush(10) is True
        assert client.added == [f"fact {i}" for i in range(20)]
        assert rec.recorded == 20 and rec.pending == 0
        assert all(call[1][1:] == ("martin", False) for call in client.calls)
    assert rec.close_report == CloseReport(flushed=True, left=0, dropped=0, failed=0)


def test_record_never_blocks_and_drops_when_full() -> None:
    client = FakeClient()
    client.gate = threading.Event()  # add() waits until the test releases it
    rec = Recorder(client, user_id="martin", maxsize=2)
    try:
        assert rec.record("first")
        assert client.entered.wait(10)  # the worker holds "first" inside add()
        # The queue holds two more; every further record returns at once, dropped,
        # while the client is still blocked (the gate is not released yet).
        results = [rec.record(f"more {i}") for i in range(5)]
        assert not client.gate.is_set()
        assert results == [True, True, False, False, False]
        assert rec.dropped == 3
        assert client.added == []  # nothing got past the blocked call yet
        client.gate.set()
        assert rec.flush(10)
        assert client.added == ["first", "more 0", "more 1"]
    finally:
        client.gate.set()
        report = rec.close()
    assert report == CloseReport(flushed=True, left=0, dropped=3, failed=0)


def test_a_full_queue_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeClient()
    client.gate = threading.Event()
    rec = Recorder(client, user_id="martin", maxsize=1)
    try:
        rec.record("a")
        assert client.entered.wait(10)
        rec.record("b")
        with caplog.at_level(logging.WARNING, logger="agentmem.semantic"):
            assert rec.record("c") is False
        assert any("full" in r.getMessage() for r in caplog.records)
    finally:
        client.gate.set()
        rec.close()


def test_close_with_a_stuck_client_returns_after_its_bound_and_reports_what_is_left() -> None:
    client = FakeClient()
    client.gate = threading.Event()  # never released while close runs: the client is stuck
    rec = Recorder(client, user_id="martin", maxsize=8)
    for i in range(4):
        rec.record(f"x{i}")
    assert client.entered.wait(10)
    report = rec.close(timeout=0.05)
    # close returned although the client never answered: all four are reported left.
    assert not client.gate.is_set()
    assert report == CloseReport(flushed=False, left=4, dropped=0, failed=0)
    assert rec.close_report is report
    # Recording after close drops (with a count) instead of queueing forever.
    assert rec.record("late") is False
    assert rec.dropped == 1
    client.gate.set()
    assert rec.close() is report  # idempotent: the first report, at once
    # The worker stops after its stuck call returns; nothing queued is sent afterwards.
    assert rec._worker is not None
    rec._worker.join(10)
    assert not rec._worker.is_alive()
    assert client.added == ["x0"]


def test_close_is_idempotent_and_a_context_manager() -> None:
    client = FakeClient()
    rec = Recorder(client, user_id="martin")
    with rec:
        rec.record("hello")
    first = rec.close_report
    assert first == CloseReport(flushed=True, left=0, dropped=0, failed=0)
    assert rec.close() is first
    assert rec.closed
    assert client.added == ["hello"]


def test_a_recorder_that_never_recorded_owns_no_thread() -> None:
    rec = Recorder(FakeClient(), user_id="martin")
    assert rec._worker is None
    assert rec.close() == CloseReport(flushed=True, left=0, dropped=0, failed=0)


def test_client_failures_are_counted_logged_and_the_worker_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeClient()
    client.fail_on = "BAD"
    with (
        caplog.at_level(logging.ERROR, logger="agentmem.semantic"),
        Recorder(client, user_id="martin") as rec,
    ):
        for text in ("ok 1", "BAD 1", "ok 2", "BAD 2", "ok 3"):
            rec.record(text)
        assert rec.flush(10)
    assert client.added == ["ok 1", "ok 2", "ok 3"]
    assert (rec.recorded, rec.failed) == (3, 2)
    assert rec.close_report == CloseReport(flushed=True, left=0, dropped=0, failed=2)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("add failed for user 'martin'" in m for m in messages) == 2
    # The user's words are not written to the log, only their size.
    assert not any("BAD 1" in m for m in messages)


class _Interrupting(FakeClient):
    def add(self, messages: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if messages == "stop":
            raise KeyboardInterrupt
        return super().add(messages, **kwargs)


def test_keyboard_interrupt_in_the_worker_is_logged_and_stops_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = _Interrupting()
    with caplog.at_level(logging.ERROR, logger="agentmem.semantic"):
        rec = Recorder(client, user_id="martin")
        rec.record("before")
        rec.record("stop")
        rec.record("after")
        assert rec.flush(10) is False  # the worker stopped with an item left
        assert isinstance(rec.worker_error, KeyboardInterrupt)
        assert rec.record("later") is False  # nothing queues for a dead worker
        report = rec.close(timeout=1)
    assert client.added == ["before"]
    assert report.left == 2 and not report.flushed  # "stop" itself and "after"
    assert any("KeyboardInterrupt" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"user_id": ""}, "user_id"),
        ({"user_id": 3}, "user_id"),
        ({"user_id": "u", "maxsize": 0}, "maxsize"),
        ({"user_id": "u", "maxsize": True}, "maxsize"),
        ({"user_id": "u", "flush_timeout": -1}, "flush_timeout"),
        ({"user_id": "u", "flush_timeout": float("nan")}, "flush_timeout"),
        ({"user_id": "u", "infer": "yes"}, "infer"),
        ({"user_id": "u", "agent_id": ""}, "agent_id"),
    ],
)
def test_bad_configuration_is_refused_naming_the_argument(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigurationError, match=field):
        Recorder(FakeClient(), **kwargs)


def test_bad_client_and_bad_payloads() -> None:
    with pytest.raises(ConfigurationError, match="client"):
        Recorder(object(), user_id="u")  # type: ignore[arg-type]
    rec = Recorder(FakeClient(), user_id="u")
    with pytest.raises(InvalidArgumentError, match="text_or_messages"):
        rec.record(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="text_or_messages"):
        rec.record(["not a message"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="timeout"):
        rec.flush(-1)
    assert rec.record("   ") is False  # nothing to remember: not queued, not dropped
    assert rec.record([{"role": "user", "content": "tabs"}]) is True
    assert rec.close().dropped == 0


@settings(max_examples=scaled(30))
@given(
    st.lists(st.sampled_from(["ok", "BAD", "slow"]), max_size=30),
    st.integers(min_value=1, max_value=6),
)
def test_every_record_is_accounted_for(items: list[str], maxsize: int) -> None:
    """recorded + failed + dropped + left == every record() that was not blank."""
    client = FakeClient()
    client.fail_on = "BAD"
    client.gate = threading.Event()
    rec = Recorder(client, user_id="u", maxsize=maxsize)
    accepted = [rec.record(f"{kind} {i}") for i, kind in enumerate(items)]
    client.gate.set()
    report = rec.close(timeout=10)
    assert report.left == 0
    assert rec.recorded + rec.failed == sum(accepted)
    assert rec.dropped == len(items) - sum(accepted)
    # The model: the accepted items, in order, minus the refused ones.
    expected = [f"{k} {i}" for i, k in enumerate(items) if accepted[i] and k != "BAD"]
    assert client.added == expected


def test_aclose_waits_off_the_event_loop() -> None:
    import asyncio

    client = FakeClient()
    client.gate = threading.Event()

    async def host() -> CloseReport:
        async with Recorder(client, user_id="martin") as rec:
            rec.record("async words")
            # The loop stays free while the recorder waits for the blocked client.
            closing = asyncio.ensure_future(rec.aclose(timeout=10))
            await asyncio.sleep(0.01)
            assert not closing.done()
            client.gate.set()
            report = await closing
        assert rec.close_report is report
        return report

    report = asyncio.run(host())
    assert report == CloseReport(flushed=True, left=0, dropped=0, failed=0)
    assert client.added == ["async words"]
