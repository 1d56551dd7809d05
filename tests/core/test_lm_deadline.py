"""Every LM call ends by its role's deadline (retries included); a cancel sends no further request and stops the
wait for calls in flight after the grace period; an in-process engine can honour the same deadline."""

from __future__ import annotations

import threading
import time

import pytest

import memento
from memento.core import cancel
from memento.core.config import load_settings
from memento.core.error_policy import is_fatal
from memento.core.errors import Cancelled, LMDeadlineExceeded
from memento.llm.lm import MementoLM
from memento.llm.lm_deadline import call_deadline, call_with_deadline, check_deadline, wait_before_retry
from memento.records.lm_log import LMCallLog
from memento.testing import OpenAICompatServer, ScriptedEngine


@pytest.fixture(autouse=True)
def _clean_flag():
    cancel.reset_cancel()
    cancel.set_cancel_grace(3.0)
    yield
    cancel.reset_cancel()
    cancel.set_cancel_grace(3.0)


def _roles(server: OpenAICompatServer, **lm: object):
    settings = load_settings(flags={"lm": {"model": "openai/x", "api_base": server.api_base, "cache": False, **lm}})
    return memento.configure(settings, set_default=False)


def _wait_for(condition, seconds: float = 60.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def _call_in_thread(roles) -> tuple[threading.Thread, list[BaseException]]:
    """Start ``roles.lm("hello")`` in a thread; the list receives what it raised."""
    errors: list[BaseException] = []

    def call() -> None:
        try:
            roles.lm("hello")
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    return worker, errors


def test_a_call_to_a_provider_that_never_answers_ends_at_its_deadline() -> None:
    with OpenAICompatServer(hang_after=0) as server:
        roles = _roles(server, deadline=1, num_retries=3)
        with pytest.raises(LMDeadlineExceeded) as caught:
            roles.lm("hello")
        assert server.chat_requests == 1  # the attempt that hangs; no retry was started
    message = str(caught.value)
    assert "openai/x" in message and "deadline of 1 s" in message and "role lm" in message
    assert "\n" not in message
    assert is_fatal(caught.value)  # a provider that does not answer stops the run in one line


def test_the_deadline_covers_the_retries() -> None:
    with OpenAICompatServer(always_status=503) as server:
        roles = _roles(server, deadline=2, num_retries=8)  # back-off 1 s, 2 s, 4 s ...: the second retry is late
        with pytest.raises(LMDeadlineExceeded, match="a retry would start after its deadline"):
            roles.lm("hello")
        assert len(server.requests) == 2


def test_a_cancel_during_the_back_off_sends_no_further_request() -> None:
    with OpenAICompatServer(always_status=503) as server:
        roles = _roles(server, deadline=60, num_retries=3)
        worker, errors = _call_in_thread(roles)
        _wait_for(lambda: len(server.requests) == 1)
        cancel.request_cancel()
        worker.join(30)
        assert not worker.is_alive()
        time.sleep(2.5)  # past the back-offs of the first two retries
        assert len(server.requests) == 1
    assert len(errors) == 1 and isinstance(errors[0], Cancelled)


def test_a_cancel_stops_waiting_for_a_call_in_flight_after_the_grace_period() -> None:
    cancel.set_cancel_grace(0.2)
    with OpenAICompatServer(hang_after=0) as server:
        roles = _roles(server, deadline=300)
        worker, errors = _call_in_thread(roles)
        _wait_for(lambda: server.chat_requests == 1)
        cancel.request_cancel()
        worker.join(30)
        assert not worker.is_alive()
        with pytest.raises(Cancelled):  # and no new call starts
            roles.lm("again")
        assert server.chat_requests == 1
    assert len(errors) == 1 and isinstance(errors[0], Cancelled)
    assert "grace period" in str(errors[0])


class _SlowLocalEngine(ScriptedEngine):
    """An in-process engine that generates one "token" every 10 ms and checks the call's deadline between them."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = 0
        self.deadlines: list[float | None] = []

    def complete(self, request):
        self.deadlines.append(call_deadline())
        while True:
            check_deadline()
            self.tokens += 1
            time.sleep(0.01)


def test_an_in_process_engine_honours_the_role_deadline() -> None:
    engine = _SlowLocalEngine()
    lm = MementoLM("local/slow", engine=engine, cache=False, num_retries=0)
    lm.memento_deadline = 0.5
    with pytest.raises(LMDeadlineExceeded):
        lm("hello")
    assert engine.deadlines and engine.deadlines[0] is not None  # the engine saw the call's deadline
    time.sleep(0.3)
    stopped_at = engine.tokens
    time.sleep(0.3)
    assert engine.tokens == stopped_at  # the engine stopped working once the deadline had passed


def test_outside_a_call_check_deadline_only_checks_for_a_cancel() -> None:
    check_deadline()
    assert call_deadline() is None
    assert wait_before_retry(0.0) == 0.0
    cancel.request_cancel()
    with pytest.raises(Cancelled):
        check_deadline()
    with pytest.raises(Cancelled):
        wait_before_retry(0.0)


def test_call_with_deadline_returns_results_and_raises_errors_of_the_call() -> None:
    assert call_with_deadline(lambda: 42, seconds=5, what="x") == 42
    with pytest.raises(ZeroDivisionError):
        call_with_deadline(lambda: 1 / 0, seconds=5, what="x")


def test_the_call_log_records_an_abandoned_call(tmp_path) -> None:
    with OpenAICompatServer(hang_after=0) as server:
        roles = _roles(server, deadline=1)
        log = LMCallLog(tmp_path / "calls.jsonl", roles=roles)
        log.install()
        try:
            with pytest.raises(LMDeadlineExceeded):
                roles.lm("hello")
        finally:
            log.uninstall()
            log.close()
    (record,) = LMCallLog.read(tmp_path / "calls.jsonl")
    assert record["role"] == "lm" and record["error"].startswith("abandoned")
