"""The case-memory baselines and the multi-pass CBR runner end to end through the CLI (scripted local LM)."""

from __future__ import annotations

import json
from pathlib import Path

from commands.test_compare import _ENV, multihop  # noqa: F401  (the fixture)
from typer.testing import CliRunner

from memento.cli import app
from memento.optimize.report import CompareReport
from memento.programs.case_memory import CASES_LABEL
from memento.testing import OpenAICompatServer, ScriptedEngine


def _engine(gold: dict[str, str]) -> ScriptedEngine:
    """Answers right only when past cases are in the context (and says so in the answer when they are not)."""

    def searched(call) -> bool:
        return "observation_0" in call.inputs

    def answer(call) -> str:
        question = call.inputs.get("question", "")
        if "research_findings" in call.inputs:  # the CBR agent's final answer: right
            return gold.get(question, "no idea")
        return gold.get(question, "no idea") if CASES_LABEL in call.inputs.get("context", "") else "no cases"

    return ScriptedEngine(
        overrides={
            "answer": answer,
            "next_tool_name": lambda call: "finish" if searched(call) else "search_web",
            "next_tool_args": lambda call: {} if searched(call) else {"query": call.inputs.get("question", "")[:80]},
            "sub_tasks": lambda call: [call.inputs.get("task", "")[:80]],
            "done": True,
        }
    )


def _compare(multihop: dict, tmp_path: Path, server, methods: str, *extra: str) -> tuple[CompareReport, str]:  # noqa: F811
    out = tmp_path / "cmp"
    args = [
        "compare",
        "--task", "multihop",
        "--data", str(multihop["questions"]),
        "--n-train", "6",
        "--n-test", "4",
        "--methods", methods,
        "--budget", "tiny",
        "--out", str(out),
        "--lm", "openai/scripted",
        "--api-base", server.api_base,
        "--corpus", str(multihop["corpus"]),
        "--embedder", "hashing",
        "--threads", "2",
        *extra,
    ]  # fmt: skip
    env = {**_ENV, "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache")}
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    return CompareReport.model_validate_json((out / "results.json").read_text()), result.output


def test_case_memory_baselines_train_their_bank_and_read_it_frozen(multihop: dict, tmp_path: Path) -> None:  # noqa: F811
    engine = _engine(multihop["gold"])
    with OpenAICompatServer(engine) as server:
        report, _ = _compare(multihop, tmp_path, server, "closed_book_cases,few_shot_cases")
        assert list(report.methods) == ["closed_book", "closed_book_cases", "few_shot_cases"]
        for name in ("closed_book_cases", "few_shot_cases"):
            res = report.methods[name]
            assert res.status == "done", res.error
            assert res.info["cases"] == 6 and [p["size"] for p in res.growth] == [4, 6]  # one case per example
            assert res.mean == 1.0  # every test answer read cases (and the scripted model needs them)
        assert report.methods["closed_book"].mean == 0.0
        out = tmp_path / "cmp"
        tested = [
            json.loads(x) for x in (out / "few_shot_cases" / "test" / "trajectories.jsonl").read_text().split("\n") if x
        ]
        assert all(any(n.startswith("cases: retrieved 4 cases by q") for n in t["notes"]) for t in tested)
        # `memento eval` reads the trained bank frozen (the recorded command)
        command = report.methods["closed_book_cases"].artefacts["eval"]
        assert "--method closed_book_cases --memory" in command
        before = (out / "closed_book_cases" / "memory" / "cbr" / "cases.db").stat().st_mtime_ns
        test_file = tmp_path / "test.jsonl"
        rows = {str(json.loads(x)["id"]): x for x in multihop["questions"].read_text().splitlines()}
        test_file.write_text("\n".join(rows[i] for i in report.split["test_ids"]) + "\n")
        args = [a if a != "TEST_DATA" else str(test_file) for a in command.split()[1:]]
        args += ["--lm", "openai/scripted", "--api-base", server.api_base, "--out", str(tmp_path / "ev")]
        result = CliRunner().invoke(app, args, env={**_ENV, "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache")})
        assert result.exit_code == 0, result.output
        assert json.loads((tmp_path / "ev" / "results.json").read_text())["mean"] == 1.0
        assert (out / "closed_book_cases" / "memory" / "cbr" / "cases.db").stat().st_mtime_ns == before


def test_multi_pass_cbr_reports_every_pass_and_baselines_reuse_its_bank(multihop: dict, tmp_path: Path) -> None:  # noqa: F811
    engine = _engine(multihop["gold"])
    with OpenAICompatServer(engine) as server:
        report, output = _compare(
            multihop, tmp_path, server, "closed_book_cases,cbr", "--cbr-passes", "2", "--cbr-min-pairs", "4"
        )
    assert list(report.methods) == ["closed_book", "cbr", "closed_book_cases"]  # cbr first: its bank is read
    cbr = report.methods["cbr"]
    assert cbr.status == "done", cbr.error
    assert [p["pass"] for p in cbr.info["passes"]] == [1, 2] and all(p["n"] == 6 for p in cbr.info["passes"])
    assert all(p["score"] == 1.0 for p in cbr.info["passes"])
    assert [p["pass"] for p in cbr.curve] == [1, 1, 2, 2] and [p["size"] for p in cbr.growth] == [4, 6, 10, 12]
    assert cbr.info["own_cases"] is False and cbr.info["gate_ready"] is True  # 4 min pairs reached
    baseline = report.methods["closed_book_cases"]
    assert baseline.info["memory_from"] == "cbr" and baseline.costs.train.lm_calls == 0 and baseline.mean == 1.0
    md = (tmp_path / "cmp" / "results.md").read_text()
    assert "## Training passes" in md and "pass 1: 1.000, pass 2: 1.000" in md
    # the terminal shows every pass's score too (not only the files)
    assert "cbr training score per pass: 1: 1.000, 2: 1.000" in " ".join(output.split())


def test_few_shot_cases_shows_demonstrations_and_closed_book_cases_none(tmp_path: Path) -> None:
    import dspy
    import pytest

    from memento.core.config import load_settings
    from memento.core.errors import ConfigError, DataError
    from memento.programs.registry import build_program

    settings = load_settings(flags={"memory": {"dir": str(tmp_path)}, "cbr": {"k": 2}})
    train = [dspy.Example(question=f"q{i}?", answers=[f"a{i}"]) for i in range(8)]
    few = build_program("few_shot_cases", task="qa", settings=settings, trainset=train)
    closed = build_program("closed_book_cases", task="qa", settings=settings, trainset=train)
    assert len(few.answer.demos) == 5 and closed.answer.demos == [] and few.k == closed.k == 2
    assert (few.method, closed.method) == ("few_shot_cases", "closed_book_cases")
    with pytest.raises(ConfigError, match="needs a training set"):
        build_program("few_shot_cases", task="qa", settings=settings)
    with pytest.raises(DataError, match="no case bank"):
        build_program("closed_book_cases", task="qa", settings=settings, memory_dir=tmp_path / "none", frozen=True)


def test_case_labels_follow_the_shared_success_threshold(tmp_path: Path) -> None:
    """The baselines label a past case SUCCESS/FAILURE by `trainer.success_threshold`, like the CBR planner."""
    import dspy

    from memento.core.config import load_settings
    from memento.memory.case_bank import CaseBank
    from memento.memory.embedder import HashingEmbedder
    from memento.programs.registry import build_program
    from memento.testing import scripted_lm

    bank = CaseBank(tmp_path / "cbr", HashingEmbedder(dim=64), min_pairs=0)
    bank.add("Which river flows through Paris?", "Answer given:\nanswer: Seine", 0.75, trajectory_ref="t0")
    bank.close()
    labels = {}
    for threshold in (0.5, 0.8):
        settings = load_settings(flags={"trainer": {"success_threshold": threshold}, "cbr": {"policy": "cosine"}})
        program = build_program("closed_book_cases", task="multihop", settings=settings, memory_dir=tmp_path)
        engine = ScriptedEngine(overrides={"answer": "Seine"})
        with dspy.context(lm=scripted_lm(engine)):
            program(question="What river runs through the French capital?")
        prompt = engine.calls[-1].prompt
        labels[threshold] = "SUCCESS" if "[SUCCESS, reward 0.75]" in prompt else "FAILURE"
        assert "reward 0.75" in prompt
    assert labels == {0.5: "SUCCESS", 0.8: "FAILURE"}
