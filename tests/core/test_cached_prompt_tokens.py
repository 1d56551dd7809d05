"""Prompt tokens a prompt cache served: counted by the local engine (the tokens llama.cpp did not evaluate),
reported by a provider (``prompt_tokens_details.cached_tokens``), and carried into ``--log-lm`` (``tokens.
cached_prompt``), the usage meter (per role and stage) and a replay of the log."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import dspy

from memento.core.types import Usage
from memento.llm import local_lm
from memento.llm.lm_replay import ReplayBook
from memento.llm.local_lm import LocalEngine
from memento.records.lm_log import LMCallLog
from memento.records.usage import UsageMeter
from memento.testing import ScriptedEngine, scripted_lm


class _FakeLlama:
    """Stands in for llama-cpp-python's ``Llama``: words are tokens; the state of the last call is kept, so a
    prompt that extends it evaluates only the new words in one ``eval``, then one token per generated token."""

    def __init__(self) -> None:
        self.state: list[str] = []
        self.evals: list[int] = []

    def eval(self, tokens: Any) -> None:
        self.evals.append(len(tokens))
        self.state.extend(tokens)

    def create_chat_completion(self, *, messages: list[dict[str, str]], **options: Any) -> dict[str, Any]:
        prompt = " ".join(m["content"] for m in messages).split()
        common = 0
        while common < min(len(prompt), len(self.state)) and prompt[common] == self.state[common]:
            common += 1
        common = min(common, len(prompt) - 1)  # llama.cpp re-evaluates a fully cached prompt's last token
        self.state = self.state[:common]
        self.eval(prompt[common:])
        reply = ["ok", "done"]
        for token in reply:
            self.eval([token])
        return {
            "id": "x",
            "choices": [{"message": {"content": " ".join(reply)}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": 2, "total_tokens": len(prompt) + 2},
        }


def test_the_local_engine_reports_the_prompt_tokens_llama_cpp_did_not_evaluate(monkeypatch) -> None:
    from dspy.lm15 import Config, Message, Request

    llama = local_lm._engine_llama(_FakeLlama)()
    monkeypatch.setattr(local_lm, "_load", lambda *args: local_lm._Loaded(llama))
    engine = LocalEngine("m.gguf")

    def ask(text: str) -> Any:
        return engine.complete(Request(model="local", messages=(Message.user(text),), config=Config()))

    first = ask("one two three four")
    assert (first.usage.input_tokens, first.usage.cache_read_tokens) == (4, 0)
    longer = ask("one two three four five six")  # the first four tokens are still evaluated
    assert (longer.usage.input_tokens, longer.usage.cache_read_tokens) == (6, 4)
    again = ask("one two three four five six")  # all cached but the last, which llama.cpp evaluates again
    assert again.usage.cache_read_tokens == 5
    other = ask("seven")
    assert other.usage.cache_read_tokens == 0
    assert llama.evals[:3] == [4, 1, 1]  # a call's first evaluation is its prompt's uncached rest


class _Cached(ScriptedEngine):
    """A scripted engine whose provider says how many prompt tokens its cache served."""

    def __init__(self, cached: int) -> None:
        super().__init__(overrides={"answer": "Paris"})
        self.cached = cached

    def complete(self, request: Any) -> Any:
        response = super().complete(request)
        usage = dataclasses.replace(response.usage, cache_read_tokens=self.cached)
        return dataclasses.replace(response, usage=usage)


def test_cached_prompt_tokens_reach_the_call_log_the_usage_meter_and_a_replay(tmp_path: Path) -> None:
    log = tmp_path / "lm.jsonl"
    lm = scripted_lm(_Cached(cached=7))
    with dspy.context(lm=lm), LMCallLog(log), UsageMeter() as meter:
        dspy.Predict("question -> answer")(question="capital of France?")
        dspy.Predict("question -> answer")(question="capital of Italy?")
    records = LMCallLog.read(log)
    assert [r["tokens"]["cached_prompt"] for r in records] == [7, 7]
    assert all(r["tokens"]["prompt"] > 7 for r in records)
    usage = meter.usage()
    assert usage.cached_prompt_tokens == 14 and usage.prompt_tokens == sum(r["tokens"]["prompt"] for r in records)
    assert [s.cached_prompt_tokens for s in usage.by_stage.values()] == [14]
    assert usage.add(usage).cached_prompt_tokens == 28
    assert Usage.model_validate(usage.model_dump()).cached_prompt_tokens == 14

    # a replay of the log serves the same usage, the cached prompt tokens included
    book = ReplayBook(log)
    assert [call.cached_prompt_tokens for calls in book._calls.values() for call in calls] == [7, 7]
