"""`compare` builds every method through the method registry: a registered method is compared like a built-in one,
and the memory runners (memento, cbr, jitmem, the case-memory baselines) call the registered builders, training form
(``frozen=False``) then test form (``frozen=True``)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import dspy
import pytest

from memento.core.config import load_settings
from memento.memory.embedder import HashingEmbedder
from memento.optimize.compare import compare, parse_methods
from memento.programs import registry
from memento.tasks.task import get_task
from memento.testing import OpenAICompatServer, ScriptedEngine

ROWS = [(f"Who founded Company{i}?", f"Person{i}") for i in range(6)]


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Any]:
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"id": f"e{i}", "question": q, "answers": [a]}) + "\n"
                                 for i, (q, a) in enumerate(ROWS)))  # fmt: skip
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": f"d{i}", "title": f"Company{i}", "text": f"{q} {a}."}) + "\n"
                              for i, (q, a) in enumerate(ROWS)))  # fmt: skip
    return {"questions": questions, "corpus": corpus}


def _settings(server: OpenAICompatServer, data: dict[str, Any], tmp_path: Path):
    return load_settings(
        flags={
            "lm": {"model": "openai/scripted", "api_base": server.api_base, "cache": False},
            "web": {"corpus": str(data["corpus"]), "cache_dir": str(tmp_path / "webcache")},
            "budgets": {"initial_questions": 1, "total_questions": 2, "steps_per_question": 2},
            "run": {"threads": 2, "seed": 42},
            "compare": {"preset": "tiny", "memory_batch_size": 2},
        }
    )


class _Echo(dspy.Module):
    """Answers every question with the settings' few-shot demo count (a knob the builder read)."""

    def __init__(self, demos: int) -> None:
        super().__init__()
        self.demos = demos

    def forward(self, question: str, **_: Any) -> dspy.Prediction:
        return dspy.Prediction(answer=f"echo {self.demos}")


def test_a_registered_method_is_compared_through_its_builder(data, tmp_path) -> None:
    calls: list[dict[str, Any]] = []

    @registry.register_method("echo_fake")
    def build_echo(*, task, settings, roles=None, trainset=None, memory_dir=None) -> _Echo:
        calls.append({"task": task.name, "train": len(trainset or []), "settings": settings})
        return _Echo(settings.baselines.few_shot_demos)

    try:
        assert [(s.name, s.kind) for s in parse_methods("echo_fake")] == [("echo_fake", "program")]
        task = get_task("qa")
        with OpenAICompatServer(ScriptedEngine()) as server:
            settings = _settings(server, data, tmp_path).model_copy(deep=True)
            settings.baselines.few_shot_demos = 7
            report = compare(task, "echo_fake", baseline="echo_fake", out_dir=tmp_path / "out", settings=settings,
                             data=task.load(data["questions"]), n_train=3, n_test=3)  # fmt: skip
        result = report.methods["echo_fake"]
        assert list(report.methods) == ["echo_fake"] and result.status == "done", result.error
        # built at training (artefact saved) and again at test (artefact reloaded), from the comparison's settings
        assert len(calls) == 2 and all(c["task"] == "qa" and c["train"] == 3 for c in calls)
        assert all(c["settings"].baselines.few_shot_demos == 7 for c in calls)
        predictions = (tmp_path / "out" / "echo_fake" / "test" / "results.json").read_text()
        assert "echo 7" in predictions
    finally:
        registry._BUILDERS.pop("echo_fake", None)
        registry._INFO.pop("echo_fake", None)


def test_memory_runners_build_through_the_registry(data, tmp_path, monkeypatch) -> None:
    seen: list[tuple[str, Any, tuple[str, ...]]] = []
    methods = ("memento", "cbr", "jitmem", "closed_book_cases")
    registry.method_names()  # load the built-in methods before wrapping them
    for method in methods:
        original = registry._BUILDERS[method]

        def wrapped(*, _method=method, _original=original, **kwargs: Any) -> Any:
            injected = tuple(sorted(k for k in registry.INJECTED if kwargs.get(k) is not None))
            seen.append((_method, kwargs.get("frozen"), injected))
            return _original(**kwargs)

        wrapped.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]  # the builder's own parameters
        monkeypatch.setitem(registry._BUILDERS, method, wrapped)
    engine = ScriptedEngine(overrides={"sub_tasks": ["Who founded it?"], "done": True, "reward": 1.0,
                                       "answer": "Person0", "success": True})  # fmt: skip
    task = get_task("qa")
    with OpenAICompatServer(engine) as server:
        report = compare(task, ",".join(methods), baseline="cbr", out_dir=tmp_path / "out",
                         settings=_settings(server, data, tmp_path), embedder=HashingEmbedder(),
                         data=task.load(data["questions"]), n_train=4, n_test=2)  # fmt: skip
    assert {n: r.status for n, r in report.methods.items()} == dict.fromkeys(methods, "done"), {
        n: r.error for n, r in report.methods.items()
    }
    for method in ("memento", "cbr", "jitmem"):
        built = [(frozen, injected) for name, frozen, injected in seen if name == method]
        assert built[0][0] is False and built[-1][0] is True, (method, built)  # trained, then tested frozen
        assert all("embedder" in injected for _, injected in built if method != "jitmem"), (method, built)
    # the training forms got the comparison's counting web factory and (cbr) the metric as reward
    assert ("cbr", False, ("embedder", "reward_fn", "web")) in seen
    assert ("memento", False, ("embedder", "web")) in seen
    # the case-memory baseline read the bank cbr trained: it built only its test form
    assert [f for n, f, _ in seen if n == "closed_book_cases"] == [True]
    assert report.methods["memento"].budgets["memory_batch_size"] == 2  # [compare] memory_batch_size
