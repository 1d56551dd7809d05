"""The one scrubber: URL credentials with or without a scheme, `api_base` credentials split off before any client,
every log record (libraries' own handlers included), MLflow spans, and DSPy's response cache."""

from __future__ import annotations

import io
import logging

import dspy
import pytest

import memento
from memento.core.config import load_settings
from memento.testing import OpenAICompatServer
from memento.utils.scrub import (
    contains_secret,
    install_record_scrubber,
    register_secret,
    scrub,
    scrub_span,
    split_credentials,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Cannot connect to host user:pw@127.0.0.1:8000 ssl:default", "Cannot connect to host ***:***@127.0.0.1:8000"),
        ("resolving alice:S3cret@[::1]:80/v1 failed", "resolving ***:***@[::1]:80/v1 failed"),
        ("see http://u:p@example.org/a", "see http://***:***@example.org/a"),
    ],
)
def test_url_credentials_are_masked_with_or_without_a_scheme(text: str, expected: str) -> None:
    assert scrub(text).startswith(expected)


def test_an_email_address_is_not_a_credential() -> None:
    assert scrub("write to john@example.org about it") == "write to john@example.org about it"


def test_split_credentials() -> None:
    assert split_credentials("http://us%40er:p%3Aw@127.0.0.1:8000/v1?x=1") == (
        "http://127.0.0.1:8000/v1?x=1",
        "us@er",
        "p:w",
    )
    assert split_credentials("http://127.0.0.1:8000/v1") == ("http://127.0.0.1:8000/v1", None, None)


def test_an_api_base_with_credentials_reaches_the_server_as_a_basic_header_only() -> None:
    with OpenAICompatServer() as server:
        base = server.api_base.replace("http://", "http://alice:Pw-basic-4471@")
        settings = load_settings(flags={"lm": {"model": "openai/x", "api_base": base, "cache": False}})
        roles = memento.configure(settings, set_default=False)
        assert "Pw-basic-4471" not in str(roles.lm.kwargs.get("api_base"))
        roles.lm("hello")
        (request,) = server.requests
    assert request["authorization"] == "Basic YWxpY2U6UHctYmFzaWMtNDQ3MQ=="  # base64("alice:Pw-basic-4471")
    assert contains_secret("Pw-basic-4471") and scrub("x Pw-basic-4471 y") == "x **** y"


def test_every_log_record_is_scrubbed_whatever_its_handler() -> None:
    register_secret("log-secret-99117")
    install_record_scrubber()
    stream = io.StringIO()
    own = logging.getLogger("some.library.with.its.own.handler")
    own.propagate = False
    handler = logging.StreamHandler(stream)
    own.addHandler(handler)
    try:
        own.warning("provider said: Incorrect API key provided: %s", "log-secret-99117")
        try:
            raise ValueError("key log-secret-99117 refused")
        except ValueError:
            own.exception("failed")
    finally:
        own.removeHandler(handler)
    assert "log-secret-99117" not in stream.getvalue() and "Incorrect API key provided: ****" in stream.getvalue()


def test_a_span_is_scrubbed_before_export() -> None:
    pytest.importorskip("mlflow")
    from mlflow.entities import SpanEvent
    from mlflow.entities.span import LiveSpan
    from opentelemetry.sdk.trace import TracerProvider

    register_secret("span-secret-55123")
    otel = TracerProvider().get_tracer("test").start_span("lm call")  # not MLflow's provider: nothing is exported
    span = LiveSpan(otel, trace_id="tr-test")
    span.set_inputs({"messages": ["use span-secret-55123"]})
    span.add_event(SpanEvent.from_exception(ValueError("Incorrect API key provided: span-secret-55123")))
    span.set_status("ERROR")
    scrub_span(span)
    assert "span-secret-55123" not in str(span.attributes)
    assert "span-secret-55123" not in str([e.attributes for e in span.events])
    assert "Incorrect API key provided: ****" in str([e.attributes for e in span.events])


def test_a_response_holding_a_secret_is_never_cached(tmp_path) -> None:
    register_secret("cache-secret-20993")
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(tmp_path / "cache"))
    try:
        with OpenAICompatServer(echo_key_in_completion=True) as server:
            settings = load_settings(flags={"lm": {"model": "openai/x", "api_base": server.api_base, "cache": True}})
            roles = memento.configure(settings, set_default=False)
            for _ in range(2):
                roles.lm("hello", api_key="cache-secret-20993")
            echoed = server.chat_requests
            for _ in range(2):
                roles.lm("hello")  # the same prompt with the local placeholder key: cached after the first call
            assert echoed == 2 and server.chat_requests == 3
    finally:
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    assert not any(b"cache-secret-20993" in p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())
