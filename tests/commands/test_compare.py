"""`memento compare` end to end against the local OpenAI-compatible server (issue 9's "done means").

20 multi-hop examples (the first 20 rows of ``shared/data/multihop`` when present, else synthesised ones) and a tiny
local corpus made of their evidence paragraphs. The scripted LM answers a question correctly only when the
instructions it is given carry the marker GEPA's reflection proposes, so a compiled program differs measurably from
its base program, and a reloaded program must carry the compiled instructions to reproduce the test predictions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dspy
import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.config import load_settings
from memento.core.errors import ConfigError
from memento.core.untrusted import data_blocks
from memento.llm.lm import configure
from memento.metrics.evaluation import evaluate
from memento.optimize.compare import compare
from memento.optimize.report import CompareReport
from memento.programs.registry import build_program
from memento.tasks.task import get_task
from memento.testing import OpenAICompatServer, ScriptedEngine

MARKER = "IMPROVED"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "multihop" / "questions.jsonl"


def _rows() -> list[dict]:
    if SHARED.exists():
        with SHARED.open(encoding="utf-8") as handle:
            return [json.loads(line) for line, _ in zip(handle, range(20), strict=False)]
    rows = []
    for i in range(20):
        person, town = f"Person{i}", f"Town{i}"
        rows.append(
            {
                "id": f"syn-{i}",
                "question": f"In which town was the founder of Company{i} born?",
                "answers": [town],
                "docs": [
                    {"doc_id": f"c{i}", "title": f"Company{i}", "text": f"Company{i} was founded by {person}."},
                    {"doc_id": f"p{i}", "title": person, "text": f"{person} was born in {town}."},
                ],
            }
        )
    return rows


@pytest.fixture
def multihop(tmp_path: Path) -> dict:
    rows = _rows()
    questions = tmp_path / "questions.jsonl"
    corpus = tmp_path / "corpus.jsonl"
    docs: dict[str, dict[str, Any]] = {}
    with questions.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({k: v for k, v in row.items() if k != "docs"}) + "\n")
            for doc in row.get("docs") or []:
                if isinstance(doc, dict):
                    docs[str(doc.get("doc_id") or doc.get("title"))] = doc
    with corpus.open("w", encoding="utf-8") as handle:
        for doc in docs.values():
            handle.write(json.dumps(doc) + "\n")
    gold = {row["question"].strip(): row["answers"][0] for row in rows}
    return {"questions": questions, "corpus": corpus, "gold": gold}


def _engine(gold: dict[str, str]) -> ScriptedEngine:
    def answer(call) -> str:
        question = call.inputs.get("question", "")
        return gold.get(question, "no idea") if MARKER in call.instructions else "no idea"

    def searched(call) -> bool:
        return "observation_0" in call.inputs  # the ReAct trajectory renders its steps as fields

    def verdict(call) -> str:
        references = [r.strip().lower() for r in call.inputs.get("reference_answer", "").split("|")]
        predicted = call.inputs.get("predicted_answer", "")
        predicted = (data_blocks(predicted) or [predicted])[0]  # the judged answer is quoted data
        return "correct" if predicted.strip().lower() in references else "incorrect"

    engine = ScriptedEngine(
        overrides={
            "answer": answer,
            # ReAct: one web search, then finish
            "next_tool_name": lambda call: "finish" if searched(call) else "search_web",
            "next_tool_args": lambda call: {} if searched(call) else {"query": call.inputs.get("question", "")[:80]},
            "new_instruction": f"{MARKER}: name the final entity exactly.",
            "verdict": verdict,
        }
    )
    return engine


def _eval_artefact(
    runner: CliRunner, command: str, report: CompareReport, multihop: dict, server, env: dict, out: Path
) -> dict[str, str]:
    """Run the recorded ``memento eval`` command on the test split; returns question -> predicted answer."""
    rows = {}
    with multihop["questions"].open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            rows[str(row["id"])] = line
    test_file = out.parent / "test_split.jsonl"
    test_file.write_text("".join(rows[i] for i in report.split["test_ids"]), encoding="utf-8")
    args = [a if a != "TEST_DATA" else str(test_file) for a in command.split()[1:]]
    args += ["--lm", "openai/scripted", "--api-base", server.api_base, "--out", str(out), "--threads", "2"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    examples = json.loads((out / "results.json").read_text())["examples"]
    assert len(examples) == len(report.split["test_ids"])
    return {e["inputs"]["question"]: e["prediction"]["answer"] for e in examples}


def _recorded(out: Path, slug: str) -> dict[str, str]:
    examples = json.loads((out / slug / "test" / "results.json").read_text())["examples"]
    return {e["inputs"]["question"]: e["prediction"]["answer"] for e in examples}


_ENV = {
    "MEMENTO_LM_CACHE": "false",
    "MEMENTO_BUDGETS_TOTAL_QUESTIONS": "3",
    "MEMENTO_BUDGETS_INITIAL_QUESTIONS": "2",
    "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "3",
}


def _settings(server: OpenAICompatServer, multihop: dict, tmp_path: Path):
    return load_settings(
        flags={
            "lm": {"model": "openai/scripted", "api_base": server.api_base, "cache": False},
            "web": {"corpus": str(multihop["corpus"]), "cache_dir": str(tmp_path / "webcache")},
            "budgets": {"initial_questions": 2, "total_questions": 3, "steps_per_question": 3},
            "run": {"threads": 2, "seed": 42},
        }
    )


def test_compare_cli_end_to_end_counts_resume_and_reload(multihop: dict, tmp_path: Path) -> None:
    engine = _engine(multihop["gold"])
    out = tmp_path / "cmp"
    runner = CliRunner()
    with OpenAICompatServer(engine) as server:
        args = [
            "compare",
            "--task", "multihop",
            "--data", str(multihop["questions"]),
            "--n-train", "12",
            "--n-test", "8",
            "--methods", "closed_book,aet,gepa:react,miprov2:react",
            "--budget", "tiny",
            "--metric", "judge",
            "--out", str(out),
            "--lm", "openai/scripted",
            "--api-base", server.api_base,
            "--corpus", str(multihop["corpus"]),
            "--threads", "2",
        ]  # fmt: skip
        env = {**_ENV, "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache")}
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 0, result.output
        requests_first = server.chat_requests

        # the three kinds of output
        report = CompareReport.model_validate_json((out / "results.json").read_text())
        assert (out / "results.md").read_text().count("| `") == 4
        assert (out / "score_vs_cost.png").read_bytes()[:4] == b"\x89PNG"
        assert list(report.methods) == ["closed_book", "aet", "gepa:react", "miprov2:react"]
        assert all(m.status == "done" for m in report.methods.values()), {n: m.error for n, m in report.methods.items()}

        # every LM request the server received is in results.json; judge calls are reported apart and are real
        counted = sum(m.costs.train.lm_calls + m.costs.test.lm_calls for m in report.methods.values())
        assert counted == report.totals.lm_calls == requests_first
        judge = sum(m.costs.train.judge_calls + m.costs.test.judge_calls for m in report.methods.values())
        assert judge == len(engine.calls_matching("reference_answer")) > 0
        # one verdict per test example; the judge memoises per (example, prediction) but every method has its own
        # judge, so a method's judge cost does not depend on which methods ran before it
        for m in report.methods.values():
            assert m.costs.test.judge_calls == 8 < m.costs.test.lm_calls
        assert report.methods["closed_book"].costs.train.lm_calls == 0
        assert report.methods["gepa:react"].costs.train.by_role["reflection_lm"].lm_calls > 0
        assert report.methods["gepa:react"].costs.test.searches == 8  # one search per test example
        assert report.methods["gepa:react"].costs.train.searches == report.methods["gepa:react"].info["program_runs"]
        assert report.methods["closed_book"].costs.test.searches == 0

        # budgets reported; scores, CI and the paired difference against closed_book
        assert report.methods["gepa:react"].budgets["max_metric_calls"] == 24
        assert (
            report.methods["miprov2:react"].budgets["minibatch_size"]
            <= report.methods["miprov2:react"].budgets["val_size"]
        )
        gepa = report.methods["gepa:react"]
        assert gepa.mean == 1.0 and report.methods["closed_book"].mean == 0.0
        assert gepa.vs_baseline is not None and gepa.vs_baseline.diff == 1.0 and gepa.vs_baseline.n == 8
        assert len(gepa.scores) == 8 and gepa.example_ids == report.split["test_ids"]
        assert "## Measures" not in (out / "results.md").read_text()  # the judge has no extra measures

        # resumable: a rerun does nothing (every method has its done marker) and changes no result
        again = runner.invoke(app, args, env=env)
        assert again.exit_code == 0, again.output
        assert server.chat_requests == requests_first
        assert "already done" in again.output
        rerun = CompareReport.model_validate_json((out / "results.json").read_text())
        assert rerun.methods["gepa:react"].scores == gepa.scores

        # the saved GEPA program, reloaded into a fresh base program, reproduces the recorded test predictions
        compiled = json.loads((out / "gepa-react" / "program.json").read_text())
        assert any(MARKER in state["signature"]["instructions"] for state in compiled.values() if "signature" in state)
        recorded = json.loads((out / "gepa-react" / "test" / "results.json").read_text())["examples"]
        settings = _settings(server, multihop, tmp_path)
        roles = configure(settings, set_default=False)
        task = get_task("multihop")
        fresh = build_program("react", task=task, settings=settings, roles=roles)
        fresh.load(str(out / "gepa-react" / "program.json"))
        by_question = {e.question: e for e in task.load(multihop["questions"])}
        examples = [by_question[row["inputs"]["question"]] for row in recorded]
        with dspy.context(lm=roles.lm):
            replay = evaluate(fresh, examples, task.metric, threads=2, roles=roles)
        assert [r.prediction["answer"] for r in replay.examples] == [r["prediction"]["answer"] for r in recorded]
        assert all(r.score == 1.0 for r in replay.examples)
        base = build_program("react", task=task, settings=settings, roles=roles)  # without the compiled state
        with dspy.context(lm=roles.lm):
            plain = evaluate(base, examples[:2], task.metric, threads=1, roles=roles)
        assert [r.prediction["answer"] for r in plain.examples] != [r["prediction"]["answer"] for r in recorded[:2]]

        # ... and so does `memento eval` given the command recorded with the artefact
        command = report.methods["gepa:react"].artefacts["eval"]
        assert "--method react --program" in command
        replayed = _eval_artefact(runner, command, report, multihop, server, env, tmp_path / "eval-gepa")
        assert replayed == _recorded(out, "gepa-react")


def test_a_crashing_method_is_recorded_and_the_others_finish(
    multihop: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memento.programs import registry

    registry.method_names()  # loads the built-in methods first

    def refusing(**_: object) -> None:
        raise ConfigError("unknown method 'no_such_program' (this builder refuses every input)")

    monkeypatch.setitem(registry._BUILDERS, "no_such_program", refusing)  # a known name whose builder crashes
    engine = _engine(multihop["gold"])
    task = get_task("multihop")
    data = task.load(multihop["questions"])
    with OpenAICompatServer(engine) as server:
        settings = _settings(server, multihop, tmp_path)
        out = tmp_path / "cmp"
        report = compare(
            task,
            "gepa:no_such_program,few_shot",
            out_dir=out,
            settings=settings,
            data=data,
            n_train=6,
            n_test=4,
            budget="tiny",
        )
        assert list(report.methods) == ["closed_book", "gepa:no_such_program", "few_shot"]  # baseline added first
        broken = report.methods["gepa:no_such_program"]
        assert broken.status == "error" and "unknown method 'no_such_program'" in (broken.error or "")
        assert broken.mean is None and not (out / "gepa-no_such_program" / "done").exists()
        assert (out / "gepa-no_such_program" / "error.txt").exists()
        assert report.methods["few_shot"].status == "done" and report.methods["few_shot"].vs_baseline is not None
        assert set(report.methods["few_shot"].measures) >= {"f1", "em"}  # the F1 metric's extra measures
        assert "- `few_shot`: em=0.000, f1=0.000" in (out / "results.md").read_text()
        assert "error: train: ConfigError" in (out / "results.md").read_text()
        assert server.chat_requests == report.totals.lm_calls == 8

        # a directory holding another split is refused rather than mixed
        with pytest.raises(ConfigError, match="different seed, train_ids, test_ids"):
            compare(task, "closed_book", out_dir=out, settings=settings, data=data, n_train=6, n_test=4, seed=1)
        with pytest.raises(ConfigError, match="different budget"):
            compare(task, "closed_book", out_dir=out, settings=settings, data=data, n_train=6, n_test=4, budget="light")


def test_compare_cli_refuses_bad_arguments(tmp_path: Path) -> None:
    runner = CliRunner()
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"question": "q?", "answers": ["a"]}) + "\n")
    base = ["compare", "--task", "multihop", "--methods", "closed_book", "--out", str(tmp_path / "o")]
    result = runner.invoke(app, [*base, "--data", str(data), "--train", str(data), "--test", str(data)])
    assert result.exit_code == 1 and "either --data" in result.output
    result = runner.invoke(app, [*base, "--train", str(tmp_path / "missing.jsonl"), "--test", str(data)])
    assert result.exit_code == 1 and "data file not found" in result.output
    result = runner.invoke(app, [*base, "--data", str(data), "--budget", "huge", "--lm", "openai/x"])
    assert result.exit_code == 1 and "unknown budget preset 'huge'" in result.output


def test_memory_methods_train_in_batches_and_test_frozen(multihop: dict, tmp_path: Path) -> None:
    from memento.memory.case_bank import CaseBank
    from memento.memory.embedder import HashingEmbedder
    from memento.memory.memento_memory import MementoMemory
    from memento.memory.trajectory_bank import TrajectoryBank

    engine = _engine(multihop["gold"])
    task = get_task("multihop")
    data = task.load(multihop["questions"])
    out = tmp_path / "cmp"
    with OpenAICompatServer(engine) as server:
        settings = _settings(server, multihop, tmp_path)
        kwargs = {"out_dir": out, "settings": settings, "data": data, "n_train": 12, "n_test": 8, "budget": "tiny"}
        report = compare(task, "react_memory,memento,jitmem,cbr", embedder=HashingEmbedder(), **kwargs)
        assert list(report.methods) == ["closed_book", "memento", "jitmem", "cbr", "react_memory"]  # memento first
        assert all(m.status == "done" for m in report.methods.values()), {n: m.error for n, m in report.methods.items()}
        assert server.chat_requests == report.totals.lm_calls

        memento, jitmem, cbr, react_memory = (report.methods[n] for n in ("memento", "jitmem", "cbr", "react_memory"))
        for m in (memento, jitmem, cbr):  # tiny budget: 12 training examples in batches of 4
            assert [p["batch"] for p in m.curve] == [1, 2, 3] and [p["batch"] for p in m.growth] == [1, 2, 3]
            assert m.budgets["memory_batch_size"] == 4 and m.budgets["train_examples"] == 12
            assert m.costs.train.lm_calls > 0
        assert [p["size"] for p in jitmem.growth] == sorted(p["size"] for p in jitmem.growth)
        assert jitmem.costs.train.searches == 12  # the scripted ReAct executor searches once per task
        assert [p["size"] for p in cbr.growth] == [4, 8, 12]  # every training task retained one case
        assert cbr.costs.train.judge_calls == 0  # training rewards come from the metric, not the judge
        # training explores (softmax over the gate's logits), testing is greedy Q
        assert cbr.info["policy"] == "softmax" and cbr.info["test_policy"] == "q"
        # every training call that found cases sampled (batches 2 and 3 always find some; batch 1 races)
        assert list(cbr.info["train_retrievals"]) == ["softmax"] and 8 <= cbr.info["train_retrievals"]["softmax"] <= 11
        assert cbr.info["passes"] == [{"pass": 1, "score": cbr.info["passes"][0]["score"], "n": 12}]
        tested = [json.loads(line) for line in (out / "cbr" / "test" / "trajectories.jsonl").read_text().splitlines()]
        assert tested and all(any(" cases by q" in n for n in t["notes"]) for t in tested)
        assert (out / "learning_curve.png").exists() and (out / "memory_growth.png").exists()

        # react_memory reads the memory memento trained: no training of its own
        assert react_memory.info["memory_from"] == "memento" and react_memory.costs.train.lm_calls == 0

        # test runs used frozen state: neither memory changed while testing
        version = MementoMemory(out / "memento" / "memory", read_only=True).version
        assert version == memento.info["memory_version"] == 3
        assert len(TrajectoryBank(out / "jitmem" / "memory" / "jitmem")) == jitmem.info["bank_size"]
        bank = CaseBank(out / "cbr" / "memory" / "cbr", HashingEmbedder(), frozen=True)
        assert bank.count() == cbr.info["cases"] == 12

        # the frozen memories reload into `memento eval` and reproduce the recorded predictions, read-only
        runner, env = CliRunner(), {**_ENV, "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache")}
        env["MEMENTO_WEB_CORPUS"] = str(multihop["corpus"])
        for name in ("memento", "react_memory"):
            command = report.methods[name].artefacts["eval"]
            assert f"--method {name} --memory" in command
            replayed = _eval_artefact(runner, command, report, multihop, server, env, tmp_path / f"eval-{name}")
            assert replayed == _recorded(out, name)
        assert MementoMemory(out / "memento" / "memory", read_only=True).version == version

        # a method whose training finished but whose test did not is only tested again
        (out / "jitmem" / "done").unlink()
        before = server.chat_requests
        again = compare(task, "react_memory,memento,jitmem,cbr", embedder=HashingEmbedder(), **kwargs)
        assert again.methods["jitmem"].costs.train == jitmem.costs.train
        assert server.chat_requests - before == again.methods["jitmem"].costs.test.lm_calls > 0
        assert again.methods["jitmem"].scores == jitmem.scores


def test_an_unreachable_lm_stops_the_comparison_with_one_line(multihop: dict, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["compare", "--task", "multihop", "--data", str(multihop["questions"]), "--n-train", "2", "--n-test", "2"]
    args += ["--methods", "closed_book", "--out", str(tmp_path / "o"), "--lm", "openai/x"]
    args += ["--api-base", "http://127.0.0.1:9/v1"]  # nothing listens on the discard port
    result = runner.invoke(app, args, env={"MEMENTO_LM_NUM_RETRIES": "0"})
    assert result.exit_code == 1
    assert "unreachable" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o" / "closed_book" / "done").exists()


def test_compare_cli_with_train_and_test_files_and_budget_flags(multihop: dict, tmp_path: Path) -> None:
    lines = multihop["questions"].read_text(encoding="utf-8").splitlines(keepends=True)
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    train.write_text("".join(lines[:5]), encoding="utf-8")
    test.write_text("".join(lines[5:8]), encoding="utf-8")
    engine = _engine(multihop["gold"])
    with OpenAICompatServer(engine) as server:
        args = ["compare", "--task", "multihop", "--train", str(train), "--test", str(test)]
        args += ["--methods", "bootstrap:closed_book", "--budget", "tiny", "--bootstrap-max-demos", "3"]
        args += ["--out", str(tmp_path / "o"), "--lm", "openai/scripted", "--api-base", server.api_base]
        result = CliRunner().invoke(app, args, env={"MEMENTO_LM_CACHE": "false"})
        assert result.exit_code == 0, result.output
        report = CompareReport.model_validate_json((tmp_path / "o" / "results.json").read_text())
        assert report.split["n_train"] == 5 and report.split["n_test"] == 3
        boot = report.methods["bootstrap:closed_book"]
        assert boot.budgets["max_bootstrapped_demos"] == 3 and report.budget["bootstrap_max_bootstrapped_demos"] == 3
        assert boot.costs.train.lm_calls == 5  # one teacher run per training example
        assert server.chat_requests == report.totals.lm_calls == 5 + 3 + 3
        assert "memento compare: multihop (5 train / 3 test)" in result.output


def test_llm_preprocessing_is_counted_once_before_any_method(tmp_path: Path) -> None:
    from memento.tasks.qa import QATask

    class ScrubbedQA(QATask):
        name = "scrubbed_qa_for_compare_test"

        def preprocess(self, example: dspy.Example) -> dspy.Example:
            clean = dspy.Predict("text -> scrubbed")(text=example.question).scrubbed
            return example.copy(question=clean)

    data = [dspy.Example(question=f"q{i}?", answers=["a"], id=f"s{i}").with_inputs("question") for i in range(5)]
    engine = ScriptedEngine(overrides={"scrubbed": lambda call: call.inputs["text"].upper()})
    with OpenAICompatServer(engine) as server:
        settings = load_settings(flags={"lm": {"model": "openai/x", "api_base": server.api_base, "cache": False}})
        task = ScrubbedQA()
        report = compare(task, "closed_book", out_dir=tmp_path, settings=settings, data=data, n_train=2, n_test=3)
        assert report.preprocess.lm_calls == 5 and report.methods["closed_book"].costs.test.lm_calls == 3
        assert server.chat_requests == report.totals.lm_calls == 8
        assert "includes 5 LM calls of the task's preprocessing" in (tmp_path / "results.md").read_text()
        answered = {c.inputs.get("question") for c in engine.calls if "answer" in c.output_fields}
        # the methods only ever saw scrubbed inputs
        assert answered and all(q is not None and q.isupper() for q in answered)
