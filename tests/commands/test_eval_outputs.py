"""Review fixes: FewShot on partly labelled demos, `eval --out` checks and fallback, partial results when the LM
goes away, judge gate cleanup, `eval --task legal --llm-scrub`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import dspy
import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.errors import ConfigError, LMUnavailableError
from memento.metrics.answer_match import AnswerMatch
from memento.metrics.evaluation import evaluate
from memento.metrics.verdict_judge import VerdictJudge
from memento.programs.baselines import FewShot
from memento.tasks import get_task
from memento.testing import OpenAICompatServer, ScriptedEngine

COLUMNS = ["ID", "name", "docket", "term", "first_party", "second_party", "facts", "first_party_winner"]
CASES = [
    ("Peter Stanley", "Illinois", "<p>Peter Stanley sued Illinois. Stanley lost.</p>", "True"),
    ("John Giglio", "United States", "<p>Giglio was convicted by the United States.</p>", "False"),
    ("Sally Reed", "Cecil Reed", "<p>Sally Reed and Cecil Reed separated.</p>", "True"),
]


def _legal_csv(tmp_path: Path) -> Path:
    path = tmp_path / "justice.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for i, (first, second, facts, winner) in enumerate(CASES):
            writer.writerow(
                {"ID": str(i), "name": f"{first} v. {second}", "docket": f"d{i}", "term": "1971", "first_party": first,
                 "second_party": second, "facts": facts, "first_party_winner": winner}
            )  # fmt: skip
    return path


def _questions(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "questions.jsonl"
    rows = [{"id": f"q{i}", "question": f"Question {i}?", "answers": [f"A{i}"]} for i in range(n)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


# -- 2. FewShot with demos that carry only some output fields -------------------------------------------------
def test_few_shot_on_legal_examples_uses_winning_party_only_labels(tmp_path: Path, lm, engine) -> None:
    task = get_task("legal")
    trainset = task.load(_legal_csv(tmp_path))
    program = FewShot(task, trainset=trainset, k=2, seed=1)
    assert len(program.answer.demos) == 2
    for demo in program.answer.demos:
        assert demo["winning_party"] in ("petitioner", "respondent")
        assert "reasoning" not in demo and "disposition" not in demo
    program(facts="The petitioner sued the respondent.")
    prompt = engine.calls[0].prompt
    assert "not supplied" in prompt.lower()
    assert sum(demo["facts"] in prompt for demo in program.answer.demos) == 2
    unlabelled = [dspy.Example(facts="f").with_inputs("facts")]
    with pytest.raises(ConfigError, match="carries the task's outputs"):
        FewShot(task, trainset=unlabelled)


# -- 3. --out validated before any LM call; a failing final write falls back -----------------------------------
def test_eval_out_that_is_a_file_fails_before_any_lm_call(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("not a directory")
    engine = ScriptedEngine()
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            ["eval", "--task", "multihop", "--data", str(_questions(tmp_path)), "--lm", "openai/x",
             "--api-base", server.api_base, "--out", str(target)],
        )  # fmt: skip
        requests = server.chat_requests
    assert result.exit_code == 1
    assert "is a file, not a directory" in result.output
    assert "Traceback" not in result.output
    assert requests == 0 and len(engine.calls) == 0
    assert target.read_text() == "not a directory"


def test_eval_final_write_failure_falls_back_to_output_dir(tmp_path: Path, monkeypatch) -> None:
    import memento.metrics.evaluation as evaluation

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    real = evaluation.write_results

    def flaky(result, out_dir):
        if Path(out_dir) == out:
            raise PermissionError(13, "Permission denied")
        return real(result, out_dir)

    monkeypatch.setattr(evaluation, "write_results", flaky)
    engine = ScriptedEngine()
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            ["eval", "--task", "multihop", "--data", str(_questions(tmp_path)), "--lm", "openai/x",
             "--api-base", server.api_base, "--threads", "1", "--out", str(out)],
            env={"COLUMNS": "250"},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "cannot write results to" in result.output
    saved = json.loads((tmp_path / "runs" / "eval-multihop-closed_book" / "results.json").read_text())
    assert saved["n"] == 3 and saved["complete"] is True and len(engine.calls) == 3


# -- 4. an LM that goes away midway keeps the finished examples -----------------------------------------------
class _DiesOnThird(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.predict = dspy.Predict("question -> answer")

    def forward(self, question: str) -> dspy.Prediction:
        if question == "dead":
            raise LMUnavailableError("LM server unreachable at http://127.0.0.1:9/v1")
        return self.predict(question=question)


def test_lm_unavailable_midway_writes_partial_results(tmp_path: Path, lm, engine) -> None:
    engine.overrides["answer"] = lambda call: call.inputs["question"].upper()
    examples = [
        dspy.Example(question=q, answers=[q.upper()], id=f"e{i}").with_inputs("question")
        for i, q in enumerate(["a", "b", "dead", "c"])
    ]
    with pytest.raises(LMUnavailableError) as info:
        evaluate(_DiesOnThird(), examples, AnswerMatch(score="em"), threads=1, out_dir=tmp_path / "o", task="t")
    partial = getattr(info.value, "partial_result")  # noqa: B009 - set on the error by evaluate
    assert partial.complete is False and partial.n == 2 and partial.total == 4
    saved = json.loads((tmp_path / "o" / "results.json").read_text())
    assert saved["complete"] is False
    assert "LM server unreachable" in saved["error"]
    assert [e["id"] for e in saved["examples"]] == ["e0", "e1"]
    assert [e["score"] for e in saved["examples"]] == [1.0, 1.0]
    assert saved["mean"] == 1.0 and saved["n"] == 2 and saved["total"] == 4
    # a complete run says so
    done = evaluate(_DiesOnThird(), examples[:2], AnswerMatch(score="em"))
    assert done.complete is True and done.error is None and done.total == 2


# -- 5. judge gates are dropped whatever the outcome -----------------------------------------------------------
def test_judge_inflight_gates_are_removed_after_errors(lm, engine) -> None:
    engine.when("bad answer", raw="I cannot decide, sorry")
    judge = VerdictJudge()
    example = dspy.Example(question="q", answers=["a"])
    assert judge(example, dspy.Prediction(answer="bad answer")).score == 0.0
    assert judge.judge_errors == 1 and judge._inflight == {}
    assert judge(example, dspy.Prediction(answer="a")).score == 1.0
    assert judge._inflight == {}
    dead = dspy.LM("openai/x", api_base="http://127.0.0.1:9/v1", api_key="k", num_retries=0, cache=False)
    fatal = VerdictJudge(lm=dead)
    with pytest.raises(LMUnavailableError):
        fatal(example, dspy.Prediction(answer="b"))
    assert fatal._inflight == {}


# -- 6. eval --task legal --llm-scrub --------------------------------------------------------------------------
def test_eval_legal_llm_scrub_flag(tmp_path: Path) -> None:
    data = _legal_csv(tmp_path)
    engine = ScriptedEngine(
        overrides={"scrubbed_facts": lambda call: call.inputs["facts"].replace("sued", "brought suit against")}
    )
    base = ["eval", "--task", "legal", "--data", str(data), "--lm", "openai/x", "--threads", "1"]
    with OpenAICompatServer(engine) as server:
        plain = CliRunner().invoke(app, [*base, "--api-base", server.api_base, "--out", str(tmp_path / "o1")])
        plain_calls = [c for c in engine.calls if "scrubbed_facts" in c.output_fields]
        scrubbed = CliRunner().invoke(
            app, [*base, "--api-base", server.api_base, "--out", str(tmp_path / "o2"), "--llm-scrub"]
        )
        scrub_calls = [c for c in engine.calls if "scrubbed_facts" in c.output_fields]
        wrong_task = CliRunner().invoke(
            app,
            ["eval", "--task", "multihop", "--data", str(_questions(tmp_path)), "--lm", "openai/x",
             "--api-base", server.api_base, "--out", str(tmp_path / "o3"), "--llm-scrub"],
        )  # fmt: skip
    assert plain.exit_code == 0, plain.output
    assert scrubbed.exit_code == 0, scrubbed.output
    assert plain_calls == [] and len(scrub_calls) == 3  # off by default; one scrub per example with the flag
    assert "LLM scrub accepted for 3 of 3 examples (3 LM calls)" in scrubbed.output
    before = json.loads((tmp_path / "o1" / "results.json").read_text())["examples"][0]["inputs"]["facts"]
    after = json.loads((tmp_path / "o2" / "results.json").read_text())["examples"][0]["inputs"]["facts"]
    assert before.startswith("The petitioner sued the respondent.")
    assert after.startswith("The petitioner brought suit against the respondent.")
    assert wrong_task.exit_code == 1 and "takes no option 'llm_scrub'" in wrong_task.output
