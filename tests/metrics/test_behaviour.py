"""MEMENTO's Table 8/10 measures (questions per sample, steps per question, repeated URLs, scratchpad size, memory
items) in every evaluation, not only in training reports (issue 24 item 4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dspy
from typer.testing import CliRunner

import memento.tasks.multihop  # noqa: F401  (registers the task)
from memento.cli import app
from memento.core.config import Budgets, load_settings
from memento.core.types import Node, Trajectory, Usage
from memento.metrics.behaviour import behaviour_of, describe_behaviour, summarize_behaviour
from memento.metrics.evaluation import evaluate
from memento.optimize.report import CompareReport, MethodResult, render_markdown
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.tasks.task import get_task
from memento.testing import OpenAICompatServer, scripted_lm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from memento_training_fixture import make_engine, write_data  # noqa: E402


def test_behaviour_of_a_tree_and_of_a_flat_agent():
    tree = Trajectory(
        task_text="t",
        nodes=[
            Node(id="root", parent_id=None, wave=-1, question="t"),
            Node(id="q1", parent_id="root", wave=0, question="Who?", answer="Ann", status="answered", steps=3),
            Node(id="q2", parent_id="root", wave=0, question="Where?", status="failed", steps=5),
        ],
        usage=Usage(searches=4, unique_urls=6, repeated_urls=2),
        injected_memory={"craft": ["c1", "c2"], "web_action": ["r1"]},
    )
    flat = Trajectory(task_text="t", nodes=[Node(id="root", parent_id=None, wave=0, question="t", steps=7)])
    got = behaviour_of(tree)
    assert got["questions"] == 2 and got["steps"] == 8 and got["repeated_urls"] == 2
    assert got["scratchpad_chars"] == len("Who?") + len("Ann") and got["memory_items"] == 3
    assert behaviour_of(flat)["questions"] == 0 and behaviour_of(flat)["steps"] == 7
    summary = summarize_behaviour([got, behaviour_of(flat)])
    assert summary["questions_per_sample"] == 1.0 and summary["steps_per_question"] == 7.5  # (8 + 7) / 2 questions
    assert summary["repeated_urls_per_sample"] == 1.0 and summary["memory_items_per_sample"] == 1.5
    assert "questions/sample 1" in describe_behaviour(summary)


def test_evaluate_reports_behaviour_per_example_and_overall(tmp_path):
    dspy.configure(lm=scripted_lm(make_engine()))
    corpus, questions = write_data(tmp_path / "data")
    settings = load_settings(flags={"web": {"corpus": str(corpus), "cache_dir": str(tmp_path / "cache")}})
    from memento.web.factory import web_tools_factory

    task = get_task("multihop")
    program = AdaptiveExplorationTree(
        task,
        web=web_tools_factory(settings),
        budgets=Budgets(initial_questions=2, total_questions=2, steps_per_question=3),
        threads=2,
    )
    result = evaluate(program, task.load(questions)[:2], task.metric, threads=2)
    assert all(r.behaviour["questions"] == 2 and r.behaviour["steps"] == 4 for r in result.examples)
    assert result.behaviour["questions_per_sample"] == 2.0 and result.behaviour["steps_per_question"] == 2.0
    assert result.behaviour["scratchpad_chars_per_sample"] > 0 and "repeated_urls_per_sample" in result.behaviour


def test_eval_command_prints_and_writes_behaviour(tmp_path):
    corpus, questions = write_data(tmp_path / "data")
    with OpenAICompatServer(make_engine()) as server:
        result = CliRunner().invoke(
            app,
            ["eval", "--task", "multihop", "--data", str(questions), "--limit", "2", "--method", "aet",
             "--lm", "openai/x", "--api-base", server.api_base, "--corpus", str(corpus),
             "--out", str(tmp_path / "out")],
            env={"MEMENTO_BUDGETS_INITIAL_QUESTIONS": "2", "MEMENTO_BUDGETS_TOTAL_QUESTIONS": "2",
                 "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "3"},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "behaviour: questions/sample 2" in result.stdout and "steps/question 2" in result.stdout
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["behaviour"]["questions_per_sample"] == 2.0
    assert all(e["behaviour"]["questions"] == 2 for e in saved["examples"])
    report = CliRunner().invoke(app, ["report", str(tmp_path / "out"), "--out", str(tmp_path / "report.html")])
    assert report.exit_code == 0, report.output
    assert "behaviour: questions/sample 2" in (tmp_path / "report.html").read_text()


def test_compare_report_shows_each_methods_behaviour():
    report = CompareReport(task="multihop", metric="em")
    report.methods["aet"] = MethodResult(
        method="aet", status="done", behaviour={"questions_per_sample": 4.0, "steps_per_question": 2.5}
    )
    text = render_markdown(report)
    assert "## Behaviour (test, per sample; MEMENTO Tables 8/10)" in text
    assert "- `aet`: questions/sample 4, steps/question 2.5" in text
