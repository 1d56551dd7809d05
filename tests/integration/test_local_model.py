"""A real model end to end (issue 21 item 3): the bundled SmolLM2-135M-Instruct, in process, on one thread.

Through the CLI in this process (the model is loaded once and its prompt cache serves every test), at the smallest
budgets: ``run`` of aet, jitmem, react, cbr and (on the memory the train test trained) memento, ``eval`` of two
examples, ``train`` of one batch of two and ``compare`` of closed_book and memento on two and two. Every LM call's
reply parses (counted from ``--log-lm``), every stage gives typed outputs, and the artefacts are complete. Without
the ``[local]`` extra these tests skip; with ``CI=true`` they fail, so CI cannot pass without running them.
Their time and where it goes (prompt tokens evaluated, served by the prompt cache, generated): docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.utils.extras import has_extra, install_hint

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "multihop" / "corpus.jsonl"
QUESTIONS = ROOT / "examples" / "multihop" / "questions.jsonl"
QUESTION = "What profession does John Lanchester and Alan Dean Foster have in common?"

pytestmark = pytest.mark.slow
# jitmem on an empty bank makes react's calls: react right after it is served by the prompt cache; memento runs on
# the memory the train test trains (below)
RUN_METHODS = ["aet", "jitmem", "react", "cbr"]


@pytest.fixture(autouse=True)
def _engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not has_extra("local"):
        message = f"the local model tests need the 'local' extra: {install_hint('local')}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    import dspy

    # DSPy's in-memory cache on, as a user's run has it (the suite's fixture turns it off): a request repeated within
    # one command (the same candidate checked twice) is answered once; a fresh cache per test, so that every test
    # makes its own model calls
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    settings = {
        "MEMENTO_LOCAL_THREADS": "1",
        "MEMENTO_RUN_THREADS": "1",
        "MEMENTO_BUDGETS_INITIAL_QUESTIONS": "1",
        "MEMENTO_BUDGETS_TOTAL_QUESTIONS": "2",
        "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "2",
        "MEMENTO_TRAINER_EXPLORATION": "0",
        "MEMENTO_CBR_MAX_CYCLES": "1",
        "MEMENTO_WEB_CORPUS": str(CORPUS),
        "MEMENTO_RUN_OUTPUT_DIR": str(tmp_path / "runs"),
        "MEMENTO_MEMORY_DIR": str(tmp_path / "memory"),
    }
    for key, value in settings.items():
        monkeypatch.setenv(key, value)


def _cli(*args: str, log: Path) -> str:
    result = CliRunner().invoke(app, [*args, "--lm", "local", "--log-lm", str(log)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def _parsed_everywhere(log: Path) -> Counter[str]:
    """Every reply of the log parsed into its signature; the calls per stage."""
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert records, "no LM call was logged"
    failed = [(r["stage"], r["predictor"], r["parse_error"]) for r in records if r["parsed"] is not True]
    assert failed == [], failed
    assert all(r["error"] is None for r in records)
    return Counter(str(r["stage"]) for r in records)


def _questions(tmp_path: Path, n: int) -> Path:
    lines = QUESTIONS.read_text(encoding="utf-8").splitlines()[:n]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _trajectory(out: Path) -> dict[str, Any]:
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["error"] is None, data["error"]
    assert isinstance(data["prediction"]["answer"], str) and data["prediction"]["answer"].strip()
    for node in data["nodes"]:
        assert "AdapterParseError" not in str(node.get("error") or ""), node
    return data


def test_greedy_decoding_under_a_schema_gives_llama_cpp_own_tokens() -> None:
    """The engine's greedy grammar sampler (the best token checked against the grammar first) writes what
    llama-cpp-python's own sampler (the whole vocabulary filtered at every token) writes, token for token; and so
    does a prompt state the engine's prompt cache kept."""
    from llama_cpp import Llama

    from memento.llm.local_lm import _engine_llama, _GreedyGrammarSampler, bundled_model_path

    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "maxLength": 120}, "hops": {"type": "array", "maxItems": 2,
                       "items": {"type": "string", "maxLength": 60}}},
        "required": ["answer", "hops"],
        "additionalProperties": False,
    }  # fmt: skip
    messages = [{"role": "user", "content": f"{QUESTION} Reply in JSON with the answer and the hops."}]
    replies = []
    for llama_class in (Llama, _engine_llama(Llama)):
        llama = llama_class(model_path=str(bundled_model_path()), n_ctx=2048, n_threads=1, verbose=False)
        reply = llama.create_chat_completion(
            messages=messages, temperature=0.0, seed=0, max_tokens=120,
            response_format={"type": "json_object", "schema": schema},
        )  # fmt: skip
        replies.append(reply["choices"][0]["message"]["content"])
    assert replies[0] == replies[1]
    assert set(json.loads(replies[1])) == {"answer", "hops"}
    # a prompt state from the engine's cache (saved without the last batch's logits) gives the same reply: after
    # another prompt, the first is loaded from the cache and only its last token evaluated again
    from llama_cpp import LlamaRAMCache

    llama.set_cache(LlamaRAMCache(capacity_bytes=1 << 28))
    for text in (messages[0]["content"], "Name one profession. Reply in JSON.", messages[0]["content"]):
        llama.first_eval = None
        reply = llama.create_chat_completion(
            messages=[{"role": "user", "content": text}], temperature=0.0, seed=0, max_tokens=120,
            response_format={"type": "json_object", "schema": schema},
        )  # fmt: skip
    assert llama.first_eval == 1
    assert reply["choices"][0]["message"]["content"] == replies[0]
    assert _GreedyGrammarSampler.applies({"grammar": object(), "temp": 0.0})
    assert not _GreedyGrammarSampler.applies({"grammar": object(), "temp": 0.7})


@pytest.mark.parametrize("method", RUN_METHODS)
def test_run_every_method(method: str, tmp_path: Path) -> None:
    if method == "cbr" and not has_extra("cbr"):
        pytest.skip("the cbr method needs the [cbr] extra")
    log, out = tmp_path / "lm.jsonl", tmp_path / f"{method}.json"
    output = _cli("run", "--task", "multihop", "--method", method, "--question", QUESTION, "--out", str(out), log=log)
    assert "answer:" in output
    stages = _parsed_everywhere(log)
    data = _trajectory(out)
    if method in ("aet", "memento"):
        assert {"decompose", "solve", "answer"} <= set(stages), stages
        assert len(data["nodes"]) >= 2  # the root and at least one sub-question
    report = CliRunner().invoke(app, ["report", str(out)])  # the HTML report of the run (no LM needed)
    assert report.exit_code == 0, report.output
    assert out.with_suffix(".html").stat().st_size > 1000


def test_eval_two_examples(tmp_path: Path) -> None:
    log, out = tmp_path / "lm.jsonl", tmp_path / "eval"
    data = _questions(tmp_path, 2)
    _cli("eval", "--task", "multihop", "--data", str(data), "--method", "closed_book", "--out", str(out), log=log)
    _parsed_everywhere(log)
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert len(results["examples"]) == 2
    for example in results["examples"]:
        assert example["error"] is None and isinstance(example["prediction"]["answer"], str)
        assert isinstance(example["score"], float)


def test_train_one_batch_of_two_then_run_memento(tmp_path: Path) -> None:
    log, memory = tmp_path / "lm.jsonl", tmp_path / "mem"
    data = _questions(tmp_path, 2)
    args = ["train", "--task", "multihop", "--data", str(data), "--memory", str(memory), "--batch-size", "2"]
    _cli(*args, log=log)
    stages = _parsed_everywhere(log)
    assert "distill" in " ".join(stages) or len(stages) > 3, stages
    from memento.memory.memento_memory import MementoMemory

    versions = MementoMemory(memory, read_only=True).versions()
    assert [v["batch"] for v in versions][-1:] == [1], versions  # batch 1 committed as a memory version
    # `run --method memento` reads the memory just trained
    out = tmp_path / "memento.json"
    args = ["run", "--task", "multihop", "--method", "memento", "--question", QUESTION, "--memory", str(memory)]
    _cli(*args, "--out", str(out), log=tmp_path / "run.jsonl")
    _parsed_everywhere(tmp_path / "run.jsonl")
    _trajectory(out)


def test_compare_closed_book_and_memento(tmp_path: Path) -> None:
    log, out = tmp_path / "lm.jsonl", tmp_path / "cmp"
    data = _questions(tmp_path, 4)
    args = [
        "compare", "--task", "multihop", "--data", str(data), "--methods", "closed_book,memento",
        "--budget", "tiny", "--n-train", "2", "--n-test", "2", "--memory-train-limit", "2", "--out", str(out),
    ]  # fmt: skip
    _cli(*args, log=log)
    _parsed_everywhere(log)
    report = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(report["methods"]) == {"closed_book", "memento"}
    for method in report["methods"].values():
        assert method["status"] == "done", method["error"]
        assert len(method["scores"]) == 2
    assert (out / "results.md").exists()
