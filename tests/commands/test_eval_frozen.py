"""`memento eval` is test time: memory-bearing methods read their memory and never write to it."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memento.cli import app
from memento.core.types import Trajectory
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.memory.trajectory_bank import TrajectoryBank
from memento.testing import OpenAICompatServer, ScriptedEngine

QUESTIONS = [
    {"id": "q1", "question": "Which river flows through Ardenford?", "answers": ["Lune"]},
    {"id": "q2", "question": "Who founded the Ardenford library?", "answers": ["Mira Holt"]},
]
DOCS = [
    {"doc_id": "d1", "title": "Ardenford", "text": "Ardenford is a town on the river Lune."},
    {"doc_id": "d2", "title": "Ardenford library", "text": "The Ardenford library was founded by Mira Holt."},
]


def _files(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "questions.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in QUESTIONS) + "\n", encoding="utf-8")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n", encoding="utf-8")
    return data, corpus


def _eval(server: OpenAICompatServer, data: Path, corpus: Path, out: Path, *extra: str):
    return CliRunner().invoke(
        app,
        [
            "eval", "--task", "multihop", "--data", str(data), "--corpus", str(corpus), "--threads", "1",
            "--lm", "openai/x", "--api-base", server.api_base, "--out", str(out), *extra,
        ],
        env={"COLUMNS": "200", "MEMENTO_WEB_CACHE_DIR": str(out.parent / "webcache")},
    )  # fmt: skip


def test_eval_jitmem_reads_the_bank_and_never_stores(tmp_path: Path) -> None:
    data, corpus = _files(tmp_path)
    memory = tmp_path / "mem"
    bank = TrajectoryBank(memory / "jitmem")
    bank.add(Trajectory(task_text="Which river flows through Ardenford?", prediction={"answer": "Lune"}), accepted=True)
    bank.close()
    engine = ScriptedEngine(overrides={"answer": "Lune"})
    with OpenAICompatServer(engine) as server:
        result = _eval(server, data, corpus, tmp_path / "out", "--method", "jitmem", "--memory", str(memory))
    assert result.exit_code == 0, result.output
    reopened = TrajectoryBank(memory / "jitmem")
    assert len(reopened) == 1  # two evaluated tasks, nothing stored
    # the stored trajectory was retrieved and curated: the curator saw its final answer
    assert any("Lune" in c.prompt and "past_trajectories" in c.prompt for c in engine.calls)
    # and no success judge ran (frozen: no gate, no write)
    assert not engine.calls_matching("judging whether an agent successfully completed a task")


def test_eval_cbr_reopens_the_bank_with_its_embedder_and_retains_nothing(tmp_path: Path) -> None:
    data, corpus = _files(tmp_path)
    memory = tmp_path / "mem"
    bank = CaseBank(memory / "cbr", HashingEmbedder(dim=64))
    bank.add("Which river flows through Ardenford?", "1. find the town's article", 1.0)
    bank.close()
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": "Lune"})) as server:
        result = _eval(server, data, corpus, tmp_path / "out", "--method", "cbr", "--memory", str(memory))
    assert result.exit_code == 0, result.output
    reopened = CaseBank(memory / "cbr", HashingEmbedder(dim=64))
    assert reopened.count() == 1
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["n"] == 2 and saved["errors"] == 0


def test_eval_few_shot_takes_demos_from_train(tmp_path: Path) -> None:
    data, corpus = _files(tmp_path)
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": "Lune"})) as server:
        missing = _eval(server, data, corpus, tmp_path / "o1", "--method", "few_shot")
        ok = _eval(server, data, corpus, tmp_path / "o2", "--method", "few_shot", "--train", str(data))
        engine_prompts = [r["body"] for r in server.requests]
    assert missing.exit_code == 1 and "--train" in missing.output
    assert ok.exit_code == 0, ok.output
    # the demonstrations (labelled training answers) are in the prompts
    assert any("Mira Holt" in json.dumps(body) for body in engine_prompts)


def _trained_memento_memory(directory: Path) -> None:
    from memento.memory.memento_memory import MementoMemory

    memory = MementoMemory(directory)
    with memory.transaction(batch=1) as tx:
        memory.craft.add("For town questions, read the town's own article first.", batch=1, tx=tx)
        memory.web_action.add("Search the town name in quotes.", batch=1, tx=tx)
        memory.facts.add("Ardenford", "Ardenford lies on the river Lune.", sources=["https://a.test"], batch=1, tx=tx)
    memory.commit_version(batch=1, note="batch 1")
    memory.close()


def test_llm_and_5_shot_plus_memento_read_the_memory_given_with_memory(tmp_path: Path) -> None:
    """MEMENTO's "LLM + Memento" and "5-shot + Memento" rows (issue 24 item 3): ``--memory DIR`` reaches the plain and
    the few-shot LLM's prompts as closed_book_memory / few_shot_memory, read-only; closed_book says it ignores it."""
    data, corpus = _files(tmp_path)
    memory = tmp_path / "mem"
    _trained_memento_memory(memory)
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": "Lune"})) as server:
        plain = _eval(server, data, corpus, tmp_path / "o1", "--method", "closed_book", "--memory", str(memory))
        n_plain = len(server.requests)
        llm = _eval(server, data, corpus, tmp_path / "o2", "--method", "closed_book_memory", "--memory", str(memory))
        n_llm = len(server.requests)
        shot = _eval(server, data, corpus, tmp_path / "o3", "--method", "few_shot_memory", "--memory", str(memory),
                     "--train", str(data))  # fmt: skip
        bodies = [json.dumps(r["body"]) for r in server.requests]
        missing = _eval(server, data, corpus, tmp_path / "o4", "--method", "closed_book_memory",
                        "--memory", str(tmp_path / "none"))  # fmt: skip
    for result in (plain, llm, shot):
        assert result.exit_code == 0, result.output
    assert "method closed_book reads no memory; --memory is ignored: use --method closed_book_memory" in plain.output
    rule, fact = "Search the town name in quotes", "Ardenford lies on the river Lune"
    assert not any(rule in body for body in bodies[:n_plain])  # the plain LLM: no memory
    assert all(rule in body and fact in body for body in bodies[n_plain:n_llm])  # LLM + Memento: every call
    few = bodies[n_llm:]
    assert few and all(rule in body and "Mira Holt" in body for body in few)  # 5-shot + Memento: demos and memory
    assert missing.exit_code != 0 and "reads a trained MEMENTO memory" in missing.output
    from memento.memory.memento_memory import MementoMemory

    assert MementoMemory(memory).version == 1  # read, never written
