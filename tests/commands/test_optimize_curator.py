"""`memento optimize-curator`: GEPA tunes the JitMem curator from the CLI against a scripted local LM."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memento.cli import app
from memento.core.types import Trajectory
from memento.memory.trajectory_bank import TrajectoryBank
from memento.testing import OpenAICompatServer, ScriptedEngine

BETTER = "ALWAYS CITE the founding date found in past runs"
CITIES = ["Lyon", "Paris", "Marseille", "Nice"]


def _engine() -> ScriptedEngine:
    engine = ScriptedEngine(overrides={"new_instruction": BETTER, "proposed_instruction": BETTER})
    # the curator writes useful notes only under the improved instructions; the executor is right only with them
    engine.when(predicate=lambda c: "payload" in c.output_fields and BETTER in c.system, payload="good guidance")
    engine.when(predicate=lambda c: "payload" in c.output_fields, payload="bad guidance")
    engine.when(predicate=lambda c: "good guidance" in c.inputs.get("context", ""), answer="right")
    engine.when(predicate=lambda c: "answer" in c.output_fields, answer="wrong")
    return engine


def _files(tmp_path: Path) -> tuple[Path, Path]:
    memory = tmp_path / "mem"
    bank = TrajectoryBank(memory / "jitmem")
    for i, city in enumerate(CITIES):
        trajectory = Trajectory(task_id=f"past-{i}", task_text=f"When was {city} founded?", prediction={"answer": "x"})
        bank.add(trajectory, accepted=True)
    bank.close()
    train = tmp_path / "train.jsonl"
    rows = [
        {"id": f"t{i}", "question": f"In which year was {c} founded?", "answers": ["right"]}
        for i, c in enumerate(CITIES)
    ]
    train.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return memory, train


def test_optimize_curator_cli_tunes_the_curator_and_saves_a_reloadable_agent(tmp_path: Path) -> None:
    memory, train = _files(tmp_path)
    engine = _engine()
    env = {"MEMENTO_JITMEM_EXECUTOR": "closed_book", "MEMENTO_LM_CACHE": "false"}
    bank_file = memory / "jitmem" / "trajectories.sqlite3"
    before = bank_file.stat().st_mtime_ns
    with OpenAICompatServer(engine) as server:
        base = ["--lm", "openai/scripted", "--api-base", server.api_base]
        args = ["optimize-curator", "--task", "qa", "--train", str(train), "--memory", str(memory)]
        args += ["--out", str(tmp_path / "cur"), "--optimizer", "gepa", "--budget", "12", "--threads", "1", *base]
        result = CliRunner().invoke(app, args, env=env)
        assert result.exit_code == 0, result.output
        assert "curator instructions changed (gepa, budget 12)" in result.output
        summary = json.loads((tmp_path / "cur" / "curator.json").read_text())
        assert summary["changed"] is True and BETTER in summary["instructions"]
        assert engine.calls_matching("new_instruction")  # the reflection LM proposed the instruction
        assert bank_file.stat().st_mtime_ns == before  # nothing stored while optimising

        # the saved agent reloads into `memento eval` and answers right with the tuned curator
        evaluated = ["eval", "--task", "qa", "--data", str(train), "--method", "jitmem", "--memory", str(memory)]
        evaluated += ["--program", str(tmp_path / "cur" / "program.json"), "--out", str(tmp_path / "ev"), *base]
        result = CliRunner().invoke(app, evaluated, env=env)
        assert result.exit_code == 0, result.output
        assert json.loads((tmp_path / "ev" / "results.json").read_text())["mean"] == 1.0


def test_optimize_curator_refuses_an_empty_bank(tmp_path: Path) -> None:
    (tmp_path / "mem" / "jitmem").mkdir(parents=True)
    TrajectoryBank(tmp_path / "mem" / "jitmem").close()
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"question": "q?", "answers": ["a"]}) + "\n", encoding="utf-8")
    with OpenAICompatServer(_engine()) as server:
        args = ["optimize-curator", "--task", "qa", "--train", str(train), "--memory", str(tmp_path / "mem")]
        args += ["--out", str(tmp_path / "cur"), "--lm", "openai/scripted", "--api-base", server.api_base]
        result = CliRunner().invoke(app, args, env={"MEMENTO_JITMEM_EXECUTOR": "closed_book"})
    assert result.exit_code == 1 and "is empty: fill it first" in result.output


def test_the_reload_hint_repeats_every_flag_that_shaped_the_agent(tmp_path: Path) -> None:
    """The printed `memento eval` line keeps --corpus, --payload-tokens and the models; run as printed, it loads the
    tuned agent (the optimiser and its budget come from the [jitmem] settings, here the environment)."""
    import shlex

    memory, train = _files(tmp_path)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"doc_id": "d1", "title": "Lyon", "text": "Lyon was founded in 43 BC."}) + "\n")
    env = {"MEMENTO_JITMEM_EXECUTOR": "closed_book", "MEMENTO_LM_CACHE": "false", "MEMENTO_JITMEM_CURATOR_BUDGET": "8"}
    with OpenAICompatServer(_engine()) as server:
        base = ["--lm", "openai/scripted", "--api-base", server.api_base]
        args = ["optimize-curator", "--task", "qa", "--train", str(train), "--memory", str(memory), "--threads", "1"]
        args += ["--out", str(tmp_path / "cur"), "--corpus", str(corpus), "--payload-tokens", "500", *base]
        result = CliRunner().invoke(app, args, env={**env, "COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        assert "(gepa, budget 8)" in result.output
        line = next(row for row in result.output.splitlines() if row.startswith("reload: "))
        hint = shlex.split(line.removeprefix("reload: "))
        assert hint[:2] == ["memento", "eval"]
        for flag, value in (("--corpus", str(corpus)), ("--payload-tokens", "500"), ("--api-base", server.api_base)):
            assert hint[hint.index(flag) + 1] == value, (flag, hint)
        hint[hint.index("TEST_DATA")] = str(train)
        result = CliRunner().invoke(app, [*hint[1:], "--out", str(tmp_path / "ev")], env=env)
        assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert saved["mean"] == 1.0
    shown = {row["key"]: (row["value"], row["source"]) for row in saved["provenance"]["settings"]}
    assert shown["web.corpus"] == (str(corpus), "flag") and shown["jitmem.payload_tokens"] == (500, "flag")
