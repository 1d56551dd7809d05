"""Structured outputs per role: what each ``structured_outputs`` mode sends, the schema form a server takes, one
retry with the parse error shown, typed text fields, and ``parsed``/``parse_error`` in the LM call log."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils.exceptions import AdapterParseError

from memento.core.config import load_settings
from memento.llm.lm import build_lm
from memento.llm.structured_adapter import StructuredAdapter, is_self_hosted
from memento.records.lm_log import LMCallLog
from memento.testing import OpenAICompatServer, ScriptedEngine, schema_problem, scripted_lm

LLAMA_CPP_OPENAPI = {  # the part of llama-cpp-python's /openapi.json that says how it takes a schema
    "info": {"title": "llama.cpp Python API"},
    "components": {
        "schemas": {
            "ChatCompletionRequestResponseFormat": {
                "properties": {"type": {"type": "string", "enum": ["text", "json_object"]}, "schema": {}},
                "required": ["type"],
            }
        }
    },
}


class Capital(dspy.Signature):
    """Name the capital."""

    country: str = dspy.InputField()
    capital: str = dspy.OutputField()
    cities: list[str] = dspy.OutputField()


def _lm(server: OpenAICompatServer, mode: str | None = None) -> dspy.LM:
    role = {"model": "openai/x", "api_base": server.api_base, "cache": False, "num_retries": 0}
    if mode is not None:
        role["structured_outputs"] = mode
    return build_lm(load_settings(flags={"lm": role}).role("lm"))


def _ask(lm: dspy.LM) -> dspy.Prediction:
    with dspy.context(adapter=StructuredAdapter(), lm=lm):
        return dspy.Predict(Capital)(country="France")


def test_auto_sends_the_signature_schema_to_a_self_hosted_server() -> None:
    engine = ScriptedEngine(overrides={"capital": "Paris", "cities": ["Paris", "Lyon"]})
    with OpenAICompatServer(engine, require_schema=True) as server:
        pred = _ask(_lm(server))
        body = server.requests[-1]["body"]
    assert pred.capital == "Paris" and pred.cities == ["Paris", "Lyon"] and not server.refused
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["capital", "cities"] and schema["properties"]["cities"]["maxItems"] == 8
    assert schema["properties"]["capital"]["maxLength"] > 0
    assert schema_problem(body) is None


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("json", {"type": "json_object"}), ("off", None)],
)
def test_json_and_off_modes(mode: str, expected: dict | None) -> None:
    engine = ScriptedEngine(overrides={"capital": "Paris", "cities": ["Paris"]})
    with OpenAICompatServer(engine) as server:
        pred = _ask(_lm(server, mode))
        body = server.requests[-1]["body"]
    assert pred.capital == "Paris"
    assert body.get("response_format") == expected
    system = body["messages"][0]["content"]
    # off: DSPy's ChatAdapter sections; otherwise the JSON adapter's prompt
    assert ("[[ ## completed ## ]]" in system) is (mode == "off")


def test_a_server_that_wants_the_schema_refuses_a_role_set_to_off() -> None:
    with OpenAICompatServer(require_schema=True) as server:
        with pytest.raises(Exception, match="no response_format"):
            _ask(_lm(server, "off"))
    assert server.refused and "no response_format" in server.refused[0]


def test_the_schema_goes_as_json_object_to_a_server_that_only_takes_that_form() -> None:
    engine = ScriptedEngine(overrides={"capital": "Paris", "cities": ["Paris"]})
    with OpenAICompatServer(engine, require_schema=True, openapi=LLAMA_CPP_OPENAPI) as server:
        pred = _ask(_lm(server))
        fmt = server.requests[-1]["body"]["response_format"]
    assert pred.capital == "Paris" and not server.refused
    assert fmt["type"] == "json_object" and fmt["schema"]["required"] == ["capital", "cities"]


def test_an_unparseable_reply_is_asked_for_once_more_with_the_error(tmp_path) -> None:
    engine = ScriptedEngine(overrides={"capital": "Paris", "cities": ["Paris"]}).when("France", raw="no json", times=1)
    log_path = tmp_path / "lm.jsonl"
    with OpenAICompatServer(engine) as server:
        lm = _lm(server)
        with LMCallLog(log_path):
            pred = _ask(lm)
    assert pred.capital == "Paris" and server.chat_requests == 2
    feedback = engine.calls[1].messages[-1]["content"]
    assert engine.calls[1].messages[-2] == {"role": "assistant", "content": "no json"}
    assert feedback.startswith("Your reply could not be used: LM response cannot be serialized to a JSON object")
    records = LMCallLog.read(log_path)
    assert [(r["parsed"], bool(r["parse_error"])) for r in records] == [(False, True), (True, False)]
    assert records[0]["parse_error"].startswith("AdapterParseError: LM response cannot be serialized")


def test_a_second_failure_is_the_stage_failure() -> None:
    engine = ScriptedEngine().when("France", raw="still no json", times=5)
    with OpenAICompatServer(engine) as server:
        with pytest.raises(AdapterParseError):
            _ask(_lm(server))
    assert server.chat_requests == 2  # one retry, no more


def test_a_text_field_is_never_an_object() -> None:
    reply = '{"capital": {"city": "Paris", "since": 987}, "cities": ["Paris"]}'
    engine = ScriptedEngine(overrides={"capital": "Paris", "cities": ["Paris"]}).when("France", raw=reply, times=1)
    with OpenAICompatServer(engine) as server:
        pred = _ask(_lm(server))
    assert pred.capital == "Paris"  # the object was refused and asked for again
    assert "field capital must be text, not a JSON dict" in engine.calls[1].messages[-1]["content"]


def test_each_role_keeps_its_own_mode_and_roles_inherit_lm() -> None:
    settings = load_settings(
        flags={
            "lm": {"model": "openai/a", "api_base": "http://127.0.0.1:9/v1", "structured_outputs": "json"},
            "judge_lm": {"model": "openai/j", "structured_outputs": "off"},
        }
    )
    assert settings.role("reflection_lm").structured_outputs == "json"
    assert settings.role("judge_lm").structured_outputs == "off"
    lm = build_lm(settings.role("lm"))
    assert lm.structured_outputs == "json" and is_self_hosted(lm)
    assert not is_self_hosted(scripted_lm())
    assert ("lm.structured_outputs", "json", "flag") in settings.effective()


def test_the_log_says_null_for_a_call_no_adapter_parsed(tmp_path) -> None:
    lm = scripted_lm(ScriptedEngine())
    with LMCallLog(tmp_path / "lm.jsonl"):
        lm("a raw prompt")
    (record,) = LMCallLog.read(tmp_path / "lm.jsonl")
    assert record["parsed"] is None and record["parse_error"] is None
