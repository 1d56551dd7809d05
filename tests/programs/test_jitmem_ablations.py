"""JitMem's setup and ablations from settings and the CLI (issue 24 items 2-3): the executor's temperature, output
budget, history window and turns, the curator's sampling and read budgets, the task-blind curator, no retrieval, the
write-time distiller, the training bank built by the base executor, the warm start of a seeded sample, and the staged
bank refresh of the curator optimiser."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dspy
import pytest
from typer.testing import CliRunner

import memento
from memento.cli import app
from memento.core.config import load_settings
from memento.core.types import Trajectory
from memento.core.untrusted import strip_marking
from memento.memory.trajectory_bank import TrajectoryBank
from memento.optimize.jitmem_stream import build_training_bank, run_orderings
from memento.programs.baselines import ClosedBook
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import NO_TRAJECTORIES, JitMemCurator
from memento.programs.registry import build_program
from memento.testing import OpenAICompatServer, ScriptedEngine, react_steps_done

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared corpus
from memento_training_fixture import write_data  # noqa: E402

CURATOR = "You are a memory curator"
JUDGE = "You are judging whether an agent"


def _past(i: int, text: str = "Which state is Albany County in?") -> Trajectory:
    return Trajectory(
        task_id=f"past-{i}", task_text=f"{text} ({i})", inputs={"question": text}, prediction={"answer": "New York"}
    )


def _engine() -> ScriptedEngine:
    engine = ScriptedEngine()
    engine.when(CURATOR, payload="Search the county's page first.")
    engine.when(JUDGE, success=True, reasoning="supported")
    searched: list[str] = []

    def step(call) -> str:  # the executor searches five times, then finishes (counted here: it sees 3 steps)
        if sum(f"Albany County {i}" in call.prompt for i in range(5)) == 0:
            searched.clear()
        return "search_web" if len(searched) < 5 else "finish"

    def args(call) -> dict:
        if len(searched) >= 5:
            return {}
        searched.append(f"Albany County {len(searched)}")
        return {"query": searched[-1]}

    engine.when(predicate=lambda c: "next_tool_name" in c.output_fields, next_tool_name=step, next_tool_args=args)
    engine.when(predicate=lambda c: "answer" in c.output_fields, answer="New York", sources=[])
    return engine


def _body_text(request: dict) -> str:
    return json.dumps(request["body"].get("messages", []))


def test_the_paper_setup_reaches_the_requests(tmp_path):
    """Under ``--preset paper`` the executor's calls go at temperature 1.0 with 4,096 output tokens and see their last
    3 steps, at most 30 of them; the curator's at temperature 0.6, top-p 0.95 and top-k 20 (an OpenAI-compatible
    server accepts top-k in the request body)."""
    corpus, _ = write_data(tmp_path / "data")
    engine = _engine()
    with OpenAICompatServer(engine) as server:
        settings = load_settings(
            flags={
                "run": {"preset": "paper"},
                "lm": {"model": "openai/x", "api_base": server.api_base, "cache": False},
                "web": {"corpus": str(corpus), "cache_dir": str(tmp_path / "cache")},
            }
        )
        roles = memento.configure(settings, set_default=False)
        agent = build_program("jitmem", task="multihop", settings=settings, roles=roles, memory_dir=tmp_path / "m")
        assert agent.executor.max_steps == 30 and agent.executor.agent.history_window == 3
        agent.bank.add(_past(1), True)
        pred = agent(question="Which state is Albany County in?", task_id="t1")
        requests = list(server.requests)
    assert pred.answer == "New York"
    curator = [r["body"] for r in requests if CURATOR in _body_text(r)]
    executor = [r["body"] for r in requests if "next_tool_name" in _body_text(r)]
    assert len(curator) == 1 and len(executor) == 6
    assert (curator[0]["temperature"], curator[0]["top_p"], curator[0]["top_k"]) == (0.6, 0.95, 20)
    assert all(b["temperature"] == 1.0 for b in executor)
    assert all(b.get("max_tokens", b.get("max_completion_tokens")) == 4096 for b in executor)
    steps = [c for c in engine.calls if "next_tool_name" in c.output_fields]
    assert all(react_steps_done(c) <= 3 for c in steps)  # never more than the window
    later = steps[4:]
    assert later and all("earlier steps are not shown (history window 3)" in c.prompt for c in later)
    assert all("Albany County 0" not in c.prompt for c in later)  # the first step is out of the window
    judge = [r["body"] for r in requests if JUDGE in _body_text(r)]
    assert judge and all(b.get("temperature") != 1.0 for b in judge)  # only the executor's calls


def test_top_k_is_sent_only_where_it_is_accepted():
    from memento.llm.lm import top_k_kwargs

    assert top_k_kwargs("openai/gpt-4o", None, 20) == {}  # OpenAI's own API has no top_k
    assert top_k_kwargs("openai/qwen", "http://127.0.0.1:8000/v1", 20) == {"extra_body": {"top_k": 20}}
    assert top_k_kwargs("hosted_vllm/qwen", None, 20) == {"extra_body": {"top_k": 20}}
    assert top_k_kwargs("anthropic/claude", None, 20) == {"top_k": 20}


def test_ablations_and_read_budgets_come_from_the_settings(tmp_path):
    settings = load_settings(
        flags={
            "jitmem": {
                "curator": "blind",
                "retrieval": False,
                "distill": True,
                "curator_result_chars": 50,
                "curator_trajectory_tokens": 200,
            },
            "web": {"backend": "offline"},
        }
    )
    agent = build_program("jitmem", task="multihop", settings=settings, memory_dir=tmp_path)
    assert agent.curator.task_conditioning is False and agent.retrieval is False and agent.distiller is not None
    assert agent.curator.result_chars == 50 and agent.curator.max_tokens_per_trajectory == 200
    plain = build_program("jitmem", task="multihop", settings=load_settings(), memory_dir=tmp_path / "plain")
    assert plain.curator.task_conditioning and plain.retrieval and plain.distiller is None


def test_cli_runs_the_three_ablations_in_one_stream(tmp_path):
    """``--jitmem-curator blind --no-jitmem-retrieval --jitmem-distill``: the curator sees neither the task nor any
    trajectory, and what the stream stores is a write-time summary."""
    corpus, questions = write_data(tmp_path / "data")
    engine = _engine()
    engine.when(predicate=lambda c: "distillate" in c.output_fields, distillate="SUMMARY of the run")
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            ["eval", "--task", "multihop", "--data", str(questions), "--limit", "3", "--method", "jitmem",
             "--lm", "openai/x", "--api-base", server.api_base, "--corpus", str(corpus), "--jitmem-protocol",
             "stream", "--cold", "--orderings", "1", "--stream-batch", "2", "--jitmem-curator", "blind",
             "--no-jitmem-retrieval", "--jitmem-distill", "--out", str(tmp_path / "out")],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    curator = [c for c in engine.calls if CURATOR in c.system or "past_trajectories" in c.inputs]
    assert len(curator) == 3
    assert all(strip_marking(c.inputs["past_trajectories"]) == NO_TRAJECTORIES for c in curator)
    assert all("task" not in c.inputs for c in curator)  # task-blind
    bank = TrajectoryBank(tmp_path / "out" / "ordering-1" / "memory" / "jitmem", read_only=True)
    stored = [t for t, _ in bank.iter_all()]
    assert len(stored) == 3 and all(t.notes[0].startswith("Distilled at write time: SUMMARY") for t in stored)
    assert all(not t.tool_calls for t in stored)


# -- the training bank built by the base executor -------------------------------------------------------------------
@pytest.fixture
def scripted(engine: ScriptedEngine, lm):
    engine.when(CURATOR, payload="guidance")
    engine.when(JUDGE, success=True, reasoning="supported")
    return engine


def test_base_executor_builds_the_training_bank_without_retrieval_or_curator(tmp_path, scripted):
    bank = TrajectoryBank(tmp_path / "bank")
    bank.add(_past(0, "Capital of France?"), True)
    agent = JitMemAgent(ClosedBook("qa"), bank, JitMemCurator())
    examples = [dspy.Example(question="Capital of France?", id="a"), dspy.Example(question="Capital of Peru?", id="b")]
    result = build_training_bank(agent, examples, lambda ex, pred, trace=None: 1.0, base=True)
    assert [i.accepted for i in result.items] == [True, True] and len(bank) == 3
    assert not scripted.calls_matching(CURATOR) and not scripted.calls_matching(JUDGE)
    assert all(i.prediction is not None and i.prediction.jitmem["retrieved"] == [] for i in result.items)


def test_the_paper_preset_builds_the_compare_training_bank_with_the_base_executor():
    settings = load_settings(flags={"run": {"preset": "paper"}})
    from memento.core.presets import apply_preset

    jit = apply_preset(settings, "jitmem").jitmem
    assert (jit.train_executor, jit.train_gate, jit.warm, jit.warm_size) == ("base", "ground_truth", True, 100)


# -- warm start from a seeded sample ---------------------------------------------------------------------------------
def test_warm_start_copies_a_seeded_sample_of_the_training_bank(tmp_path, scripted):
    warm = TrajectoryBank(tmp_path / "train" / "jitmem")
    for i in range(6):
        warm.add(_past(i, f"Capital of country number {i}?"), True)
    warm.close()

    def build(memory_dir: Path) -> JitMemAgent:
        return JitMemAgent(ClosedBook("qa"), TrajectoryBank(memory_dir / "jitmem"), JitMemCurator())

    tasks = [dspy.Example(question=f"Capital of place {i}?", id=f"q{i}") for i in range(2)]
    result = run_orderings(
        build,
        tasks,
        orderings=2,
        batch_size=2,
        seed=7,
        metric=lambda ex, pred, trace=None: 1.0,
        out_dir=tmp_path / "out",
        warm_bank=tmp_path / "train" / "jitmem",
        warm_size=2,
    )
    starts = [o["bank_start"] for o in result.summary["per_ordering"]]
    assert starts == [2, 2] and result.summary["warm_size"] == 2
    banks = [TrajectoryBank(tmp_path / "out" / f"ordering-{n}" / "memory" / "jitmem") for n in (1, 2)]
    kept = [sorted(t.task_id for t, _ in bank.iter_all()) for bank in banks]
    assert kept[0][:2] == kept[1][:2] and len(set(kept[0]) & {f"past-{i}" for i in range(6)}) == 2


# -- staged bank refresh ---------------------------------------------------------------------------------------------
def test_staged_refresh_rebuilds_the_training_bank_with_the_current_curator(tmp_path, engine, lm):
    from memento.optimize.curator_optimizer import optimize_curator_staged

    better = "ALWAYS CITE the founding date found in past runs"
    engine.when(predicate=lambda c: "payload" in c.output_fields and better in c.system, payload="good guidance")
    engine.when(predicate=lambda c: "payload" in c.output_fields, payload="bad guidance")
    engine.when(predicate=lambda c: "good guidance" in c.inputs.get("context", ""), answer="right", sources=[])
    engine.when(predicate=lambda c: "answer" in c.output_fields, answer="wrong", sources=[])
    engine.overrides.update({"new_instruction": better, "proposed_instruction": better})
    bank = TrajectoryBank(tmp_path / "bank")
    for i, city in enumerate(["Lyon", "Paris", "Marseille", "Nice"]):
        bank.add(Trajectory(task_id=f"past-{i}", task_text=f"When was {city} founded?"), accepted=True)
    agent = JitMemAgent(ClosedBook("qa"), bank, JitMemCurator(), judge=False)
    trainset = [
        dspy.Example(question=f"In which year was {c} founded?", id=f"train-{i}")
        for i, c in enumerate(["Lyon", "Paris", "Marseille", "Nice"])
    ]

    def metric(example, pred, trace=None, pred_name=None, pred_trace=None):
        ok = pred.answer == "right"
        return dspy.Prediction(score=float(ok), feedback="correct" if ok else "no founding date in the payload")

    curator, info = optimize_curator_staged(
        agent, trainset, metric, rebuild_dir=tmp_path / "rebuilt", budget=16, optimizer="gepa"
    )
    assert info["stage_budgets"] == [8, 8] and info["rebuilt_bank"] == str(tmp_path / "rebuilt")
    assert agent.bank is not bank and agent.bank.directory == tmp_path / "rebuilt" and len(bank) == 4
    # the rebuild ran the executor with the first stage's curator: its good guidance made the answers right
    assert info["stored"] == info["bank_size"] == 4
    assert {t.task_id for t, _ in agent.bank.iter_all()} == {f"train-{i}" for i in range(4)}
    assert better in curator.curate.signature.instructions
