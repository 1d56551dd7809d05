"""`memento memory copy` end to end (issue 25, Done means): a memory trained through `memento train` on SQLite is
copied to PostgreSQL and back; `memory diff --against` finds nothing between any two of the three, and `memento eval
--method memento` with each sends the same prompts and gives the same results on a test server whose answers are a
digest of the prompt. An eval with an empty memory is the control: its prompts and answers differ, so the test would
see a copy that lost or reordered anything the program reads."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.memory.memento_memory import MementoMemory
from memento.testing import OpenAICompatServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from memento_training_fixture import make_engine, write_data  # noqa: E402

ENV = {
    "COLUMNS": "200",
    "MEMENTO_LM_CACHE": "false",
    "MEMENTO_RUN_THREADS": "1",
    "MEMENTO_BUDGETS_INITIAL_QUESTIONS": "2",
    "MEMENTO_BUDGETS_TOTAL_QUESTIONS": "3",
    "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "3",
}
LEARNED = "Search the full name of a person in quotes."  # an M3 rule the training writes (memento_training_fixture)


def _digest(call: Any) -> str:
    return hashlib.sha256(call.prompt.encode()).hexdigest()[:12]


def _engine() -> Any:
    """The fixture's scripted LM, every answer tagged with a digest of the whole prompt it answers: a sub-question's
    answer (its prompt holds the M1 insights, M3 rules and M4 facts the memory gave) and each synthesis carry theirs
    to the final answer, whose prompt holds them (and the sub-questions M2 shaped)."""
    final = {
        "predicate": lambda c: "answer" in c.output_fields and "research_findings" in c.inputs,
        "answer": lambda c: f"{'New York' if 'Albany' in c.inputs.get('question', '') else 'Paris'} #{_digest(c)}",
    }
    inner = {"predicate": lambda c: "answer" in c.output_fields, "answer": lambda c: f"New York #{_digest(c)}"}
    return make_engine(first=[final, inner])


def _cli(args: list[str], env: dict[str, str], server: OpenAICompatServer | None = None) -> str:
    lm = ["--lm", "openai/scripted", "--api-base", server.api_base] if server is not None else []
    result = CliRunner().invoke(app, [*args, *lm], env={**ENV, **env})
    assert result.exit_code == 0, result.output
    return result.output


def _eval(memory: object, name: str, tmp_path: Path, corpus: Path, data: Path, env: dict[str, str]) -> dict:
    out = tmp_path / f"eval-{name}"
    with OpenAICompatServer(_engine()) as server:
        _cli(["eval", "--task", "multihop", "--data", str(data), "--method", "memento", "--memory", str(memory),
              "--corpus", str(corpus), "--out", str(out)], env, server)  # fmt: skip
        prompts = sorted(prompt for _, _, prompt in server.timeline)
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return {
        "answers": [(e["index"], e["id"], e["prediction"], e["score"], e["error"]) for e in results["examples"]],
        "summary": [results[k] for k in ("n", "mean", "ci_low", "ci_high", "errors", "complete")],
        "lm_calls": results["usage"]["lm_calls"],
        "prompts": prompts,
    }


@pytest.mark.slow
def test_a_trained_memory_copied_to_postgresql_and_back_evaluates_identically(tmp_path: Path, pg_location) -> None:
    corpus, data = write_data(tmp_path / "data")
    env = {"MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache")}
    trained, back, empty = tmp_path / "trained", tmp_path / "back", tmp_path / "empty"
    with OpenAICompatServer(_engine()) as server:
        _cli(["train", "--task", "multihop", "--data", str(data), "--memory", str(trained), "--batch-size", "3",
              "--corpus", str(corpus), "--embedder", "hashing"], env, server)  # fmt: skip
    dsn = pg_location("copied")
    assert "verified identical" in _cli(["memory", "copy", str(trained), str(dsn)], env)
    assert "verified identical" in _cli(["memory", "copy", str(dsn), str(back)], env)
    for one, other in ((trained, dsn), (dsn, back), (trained, back)):
        assert "same contents" in _cli(["memory", "diff", "--memory", str(one), "--against", str(other)], env)
    MementoMemory(empty).close()  # a new memory, version 0

    memories = {"sqlite": trained, "postgres": dsn, "back": back, "empty": empty}
    evals = {name: _eval(memory, name, tmp_path, corpus, data, env) for name, memory in memories.items()}
    sqlite = evals["sqlite"]
    assert MementoMemory(trained, read_only=True).version == 2 and len(sqlite["answers"]) == 6
    assert any(LEARNED in p for p in sqlite["prompts"])  # the trained memory reached the prompts
    assert all("#" in answer[2]["answer"] for answer in sqlite["answers"]), sqlite["answers"]
    assert evals["postgres"] == sqlite and evals["back"] == sqlite
    # the control: without the memory the prompts, so the answers, differ
    assert not any(LEARNED in p for p in evals["empty"]["prompts"])
    assert [a[2] for a in evals["empty"]["answers"]] != [a[2] for a in sqlite["answers"]]
