"""Every stage's predictor has a name a user reads (issue 27 item 4): the ``predictor`` of ``--log-lm``, usage by stage
and the reports name the ReAct step and extraction after the agent's signature, not DSPy's anonymous
``StringSignature``; the names survive an optimiser's new instructions, a deep copy and ``save``/``load``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import dspy
from commands.test_structured_roles import _data  # the four questions and corpus of the role test
from typer.testing import CliRunner

from memento.cli import app
from memento.programs.registry import method_names
from memento.records.lm_log import LMCallLog
from memento.records.usage import NamedPredictors, UsageMeter, predictor_name
from memento.testing import OpenAICompatServer, ScriptedEngine

GENERIC = "StringSignature"


def test_every_method_logs_each_stage_with_a_named_predictor(tmp_path: Path) -> None:
    questions, corpus = _data(tmp_path)
    log = tmp_path / "calls.jsonl"
    engine = ScriptedEngine(overrides={"answer": "Town0", "verdict": "correct", "success": True})
    methods = method_names()
    with OpenAICompatServer(engine) as server:
        env = {
            "MEMENTO_LM_CACHE": "false",
            "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "web"),
            "MEMENTO_BUDGETS_INITIAL_QUESTIONS": "1",
            "MEMENTO_BUDGETS_TOTAL_QUESTIONS": "1",
            "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "2",
        }
        args = [
            "compare", "--task", "multihop", "--data", str(questions), "--n-train", "2", "--n-test", "2",
            "--methods", ",".join(methods), "--budget", "tiny", "--metric", "judge", "--out", str(tmp_path / "cmp"),
            "--lm", "openai/x", "--api-base", server.api_base, "--corpus", str(corpus), "--threads", "1",
            "--log-lm", str(log),
        ]  # fmt: skip
        result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    records = LMCallLog.read(log)
    pairs = {(r["stage"], r["predictor"]) for r in records}
    assert all(r["predictor"] and GENERIC not in r["predictor"] and GENERIC not in r["stage"] for r in records), pairs
    # the ReAct agents' step and extraction, named after the agent's signature (plain ReAct, react_memory, the
    # AET solver and MEMENTO's exploration agent), and the stages around them
    assert {
        ("solve", "AnswerMultiHopQuestionReAct.react"),
        ("solve", "AnswerMultiHopQuestionReAct.extract"),
        ("solve", "AnswerMultiHopQuestionReActMemory.react"),
        ("solve", "SolveSubQuestion.react"),
        ("solve", "SolveSubQuestion.extract"),
        ("explore", "ExploreResearchCraft.react"),
        ("decompose", "Decompose"),
        ("synthesize", "SynthesizeNode"),
        ("answer", "AnswerMultiHopQuestionClosedBook"),
        ("answer", "AnswerMultiHopQuestionFromFindings"),
        ("answer", "AnswerMultiHopQuestionFromCasePlan"),
        ("plan", "PlanFromCases"),
        ("curate", "CurateMemory"),
        ("distill_craft", "DistillCraftInsights"),
    } <= pairs, pairs
    report = json.loads((tmp_path / "cmp" / "results.json").read_text(encoding="utf-8"))
    assert set(report["methods"]) == set(methods)
    assert all(m["status"] == "done" for m in report["methods"].values())
    for path in (tmp_path / "cmp").rglob("*"):  # results, per-method usage, trajectories, the HTML report
        if path.is_file() and path.suffix in {".json", ".jsonl", ".md", ".html"}:
            assert GENERIC not in path.read_text(encoding="utf-8", errors="replace"), path


class _Agent(dspy.Module, metaclass=NamedPredictors):
    def __init__(self) -> None:
        super().__init__()
        self.step = dspy.Predict(dspy.Signature("question -> answer").with_instructions("Answer."))
        self.answer = dspy.Predict(_Answer)
        self.think = dspy.ChainOfThought(_Answer)


class _Answer(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def test_names_survive_new_instructions_copies_and_load(tmp_path: Path) -> None:
    agent = _Agent()
    names = {path: p.predictor_name for path, p in agent.named_predictors()}
    # an anonymous signature is named by the module and attribute holding it; ChainOfThought's inner predictor by
    # its own path
    assert names == {"step": "_Agent.step", "answer": "_Answer", "think.predict": "_Agent.think.predict"}
    for _, predictor in agent.named_predictors():  # what GEPA and MIPROv2 do to a candidate
        predictor.signature = predictor.signature.with_instructions("Be brief.")
    assert all(p.signature.__name__ == GENERIC for _, p in agent.named_predictors())
    agent.save(str(tmp_path / "agent.json"))
    loaded = _Agent()
    loaded.load(str(tmp_path / "agent.json"))
    for program in (agent, copy.deepcopy(agent), loaded):
        assert {path: p.predictor_name for path, p in program.named_predictors()} == names

    engine = ScriptedEngine(overrides={"answer": "Paris", "reasoning": "r"})
    log_path = tmp_path / "calls.jsonl"
    with OpenAICompatServer(engine) as server:
        lm = dspy.LM("openai/x", api_base=server.api_base, api_key="k", cache=False)
        with LMCallLog(log_path), UsageMeter() as meter, dspy.context(lm=lm):
            for predictor in (loaded.step, loaded.answer, loaded.think):
                predictor(question="Capital of France?")
    assert [r["predictor"] for r in LMCallLog.read(log_path)] == ["_Agent.step", "_Answer", "_Agent.think.predict"]
    assert set(meter.usage().by_stage) == {"_Agent.step", "_Answer", "_Agent.think.predict"}


def test_a_module_built_without_names_is_named_by_its_path() -> None:
    class Plain(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.draft = dspy.ChainOfThought("question -> answer")

    plain = Plain()
    inner = plain.draft.predict
    assert predictor_name(inner, (plain, plain.draft)) == "Plain.draft.predict"
    assert predictor_name(dspy.Predict(_Answer)) == "_Answer"
    assert predictor_name(dspy.Predict("q -> a")) == GENERIC  # nothing to name it after
