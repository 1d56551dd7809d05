"""Every LM role sends its signature's JSON schema (issue 21): a server that refuses any request without it serves a
whole comparison — the agent, the judge, memory distillation (reflection), JitMem's curator and the CBR planner — each
role on a model name of its own, so the requests show which role sent them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.testing import OpenAICompatServer, ScriptedEngine, schema_problem
from memento.utils.extras import has_extra

ROLES = {
    "lm": "openai/agent",
    "judge_lm": "openai/judge",
    "reflection_lm": "openai/reflection",
    "curator_lm": "openai/curator",
    "planner_lm": "openai/planner",
}


def _data(tmp_path: Path) -> tuple[Path, Path]:
    questions, corpus = tmp_path / "q.jsonl", tmp_path / "corpus.jsonl"
    rows, docs = [], []
    for i in range(4):
        rows.append({"id": f"q{i}", "question": f"Where was the founder of Company{i} born?", "answers": [f"Town{i}"]})
        docs.append({"doc_id": f"d{i}", "title": f"Company{i}", "text": f"Company{i} was founded in Town{i}."})
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return questions, corpus


@pytest.mark.skipif(not has_extra("cbr"), reason="the cbr method needs the [cbr] extra")
def test_every_role_sends_the_signature_schema(tmp_path: Path) -> None:
    questions, corpus = _data(tmp_path)
    engine = ScriptedEngine(overrides={"answer": "Town0", "verdict": "correct", "success": True})
    with OpenAICompatServer(engine, require_schema=True) as server:
        env = {
            "MEMENTO_LM_CACHE": "false",
            "MEMENTO_REFLECTION_LM": ROLES["reflection_lm"],
            "MEMENTO_CURATOR_LM": ROLES["curator_lm"],
            "MEMENTO_PLANNER_LM": ROLES["planner_lm"],
            "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "web"),
            "MEMENTO_BUDGETS_INITIAL_QUESTIONS": "1",
            "MEMENTO_BUDGETS_TOTAL_QUESTIONS": "1",
            "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "2",
        }
        args = [
            "compare", "--task", "multihop", "--data", str(questions), "--n-train", "2", "--n-test", "2",
            "--methods", "closed_book,memento,jitmem,cbr", "--budget", "tiny", "--metric", "judge",
            "--out", str(tmp_path / "cmp"), "--lm", ROLES["lm"], "--judge-lm", ROLES["judge_lm"],
            "--api-base", server.api_base, "--corpus", str(corpus), "--threads", "1",
        ]  # fmt: skip
        result = CliRunner().invoke(app, args, env=env)
        bodies = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert result.exit_code == 0, result.output
    assert server.refused == [] and bodies
    assert all(schema_problem(body) is None for body in bodies)
    seen = {body["model"] for body in bodies}
    assert {model.split("/", 1)[1] for model in ROLES.values()} <= seen, seen
    report = json.loads((tmp_path / "cmp" / "results.json").read_text())
    assert all(method["status"] == "done" for method in report["methods"].values())


def test_the_opinion_task_sends_one_number_per_option_of_each_question(tmp_path: Path) -> None:
    """An opinion distribution is a mapping over the question's options: the schema sent names exactly this
    question's options (a server requiring the schema serves the eval), and the prediction has those keys."""
    rows = [
        {"id": "o1", "question": "Is the economy improving?", "options": ["Yes", "No"], "subgroup": "Farmers",
         "distribution": [0.4, 0.6]},
        {"id": "o2", "question": "How often do you read news?", "options": ["Daily", "Weekly", "Never"],
         "subgroup": "Students", "distribution": [0.5, 0.3, 0.2]},
    ]  # fmt: skip
    data = tmp_path / "opinion.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    def follow_schema(call: Any) -> dict[str, float]:  # a model under constrained decoding writes the schema's keys
        fmt = call.response_format
        keys = (fmt.get("schema") or fmt["json_schema"]["schema"])["properties"]["distribution"]["required"]
        return dict.fromkeys(keys, 1 / len(keys))

    engine = ScriptedEngine(overrides={"distribution": follow_schema})
    with OpenAICompatServer(engine, require_schema=True) as server:
        args = ["eval", "--task", "opinion", "--data", str(data), "--method", "closed_book", "--lm", "openai/agent",
                "--api-base", server.api_base, "--out", str(tmp_path / "eval")]  # fmt: skip
        result = CliRunner().invoke(app, args, env={"MEMENTO_LM_CACHE": "false"})
        bodies = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert result.exit_code == 0, result.output
    assert server.refused == [] and len(bodies) == 2
    sent: list[list[str]] = []
    for body in bodies:
        fmt = body["response_format"]
        schema = fmt.get("schema") or fmt["json_schema"]["schema"]
        sent.append(schema["properties"]["distribution"]["required"])
    assert sorted(sent) == sorted(list(map(str, r["options"])) for r in rows)
    report = json.loads((tmp_path / "eval" / "results.json").read_text())
    for example in report["examples"]:
        assert example["error"] is None
        row = next(r for r in rows if r["id"] == example["id"])
        assert set(example["prediction"]["distribution"]) == set(row["options"])
        assert isinstance(example["score"], float)
