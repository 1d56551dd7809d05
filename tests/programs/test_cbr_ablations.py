"""Memento's ablations from settings and the CLI (issue 24 item 3): the "+Planning" rung (k = 0), the kernel-based
episodic Q of Eq. 9 as a retrieval policy, the gate over the whole bank (prefilter 0), softmax(Q / alpha) as Eq. 7
writes it, the executor-level bank and the eviction capacity."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from memento.cli import app
from memento.core.config import load_settings
from memento.memory.case_bank import CaseBank
from memento.memory.retrieval_policy import pick
from memento.programs.registry import build_program
from memento.testing import LookupEmbedder, OpenAICompatServer, ScriptedEngine, react_steps_done

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the agent's scripted LM
from programs.test_case_based_agent import make_agent, script  # noqa: E402


def _unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


# -- k = 0: the "+Planning" rung ---------------------------------------------------------------------------------
def test_k_zero_is_accepted_and_the_planner_reads_no_case(tmp_path, engine, lm):
    settings = load_settings(flags={"cbr": {"k": 0, "prefilter": 0}, "memory": {"dir": str(tmp_path / "built")}})
    assert settings.cbr.k == 0 and settings.cbr.prefilter == 0
    assert build_program("cbr", task="multihop", settings=settings).k == 0
    script(engine)
    agent = make_agent(tmp_path, k=0)
    agent(question="What is the capital of the country where the Eiffel Tower is?", task_id="t1")
    pred = agent(question="What is the capital of the country where the Colosseum is?", task_id="t2")
    assert len(agent.bank) == 2 and pred.cbr["retrieved"] == []  # cases are kept, never read
    planner = [c for c in engine.calls if "sub_tasks" in c.output_fields]
    assert planner and all(not c.inputs["past_cases"].strip() for c in planner)


# -- the kernel-based episodic Q of Eq. 9 -------------------------------------------------------------------------
def _kernel_bank(where: Any) -> tuple[CaseBank, LookupEmbedder]:
    """Two cases equally close to a query; case "helps" was useful for queries like it, case "hurts" was not."""
    emb = LookupEmbedder(4)
    emb.table.update(
        {
            "helps": _unit(1, 1, 0, 0),
            "hurts": _unit(1, -1, 0, 0),
            **{f"past {i}": _unit(1, 0, 0.1 * i, 0) for i in range(6)},
            "new task": _unit(1, 0, 0.05, 0),
        }
    )
    bank = CaseBank(where, emb, seed=0)
    helps = bank.add("helps", "plan a", reward=0.0)  # its own episode says nothing good...
    hurts = bank.add("hurts", "plan b", reward=1.0)  # ...and this one's own reward is high
    for i in range(6):  # ...but past uses tell the truth
        bank.record(f"past {i}", [helps, hurts], [1.0, 0.0])
    return bank, emb


def test_kernel_q_averages_the_rewards_of_a_cases_past_uses(location):
    where = location()  # on both storage backends
    bank, emb = _kernel_bank(where)
    ids = [c.id for c in bank.cases()]
    q = bank.kernel_q("new task", ids)
    assert q[0] > 0.7 and q[1] < 0.3  # the uses for similar queries dominate the cases' own rewards
    top = bank.retrieve("new task", k=1, policy="kernel")
    assert top[0][0].task_text == "helps" and top[0][1] == pytest.approx(q[0])
    # deterministic: a fresh bank object over the same pairs gives the same Q
    again = CaseBank(where, bank.embedder, seed=0)
    assert np.allclose(again.kernel_q("new task", ids), q)
    # a case never used has its own episode only: its Q is its own reward
    emb.table["unused"] = _unit(1, 0, 0, 1)
    fresh = bank.add("unused", "plan c", reward=0.25)
    assert bank.kernel_q("new task", [fresh.id])[0] == pytest.approx(0.25)


def test_kernel_policy_from_the_settings(tmp_path):
    settings = load_settings(flags={"cbr": {"policy": "kernel", "train_policy": "kernel"}})
    agent = build_program("cbr", task="multihop", settings=settings, memory_dir=tmp_path)
    assert agent.policy == "kernel"


# -- the gate over the whole bank ---------------------------------------------------------------------------------
class _LovesDimensionThree(nn.Module):
    """A gate that ignores the query and scores a case by its last coordinate."""

    def __init__(self) -> None:
        super().__init__()
        self.dim = 4
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(20 * c[:, 3] + self.bias)


def test_prefilter_zero_lets_the_gate_score_the_whole_bank(location):
    where = location()  # on both storage backends
    emb = LookupEmbedder(4)
    emb.table["query"] = _unit(1, 0, 0, 0)
    bank = CaseBank(where, emb, gate=_LovesDimensionThree(), min_pairs=0, prefilter=4)
    for i in range(10):
        emb.table[f"near {i}"] = _unit(1, 0.1 * i, 0, 0)
        bank.add(f"near {i}", "plan", reward=1.0)
    emb.table["far"] = _unit(0, 0, 0.2, 1)  # the least similar case, the gate's favourite
    far = bank.add("far", "plan", reward=1.0)
    bank.record("query", [far], 1.0)  # the gate has learned something: it ranks
    assert far.id not in [c.id for c, _ in bank.retrieve("query", k=1, policy="q")]  # not among 4 nearest
    assert [c.id for c, _ in bank.retrieve("query", k=1, policy="q", prefilter=0)] == [far.id]
    whole = CaseBank(where, emb, gate=_LovesDimensionThree(), min_pairs=0, prefilter=0)
    assert [c.id for c, _ in whole.retrieve("query", k=1, policy="q")] == [far.id]


# -- softmax(Q / alpha), Memento's Eq. 7 ------------------------------------------------------------------------------
def test_softmax_over_q_samples_as_eq_7_writes_it():
    q = np.array([0.9, 0.1])
    rng = np.random.default_rng(0)
    firsts = {
        over: np.mean([pick("softmax", q, 1, alpha=1.0, logits=True, rng=rng, softmax_over=over)[0] == 0
                       for _ in range(4000)])
        for over in ("q", "logit")
    }  # fmt: skip
    assert firsts["q"] == pytest.approx(np.exp(0.9) / (np.exp(0.9) + np.exp(0.1)), abs=0.03)  # 0.69
    assert firsts["logit"] > 0.97  # logit(0.9) = 2.2 against -2.2
    settings = load_settings(flags={"cbr": {"softmax_over": "q"}})
    assert settings.cbr.softmax_over == "q"


# -- the executor-level bank and the capacity, from settings and the CLI ----------------------------------------------
def test_executor_bank_and_capacity_come_from_the_settings(tmp_path):
    settings = load_settings(flags={"cbr": {"executor_bank": True, "executor_k": 3, "capacity": 5}})
    agent = build_program("cbr", task="multihop", settings=settings, memory_dir=tmp_path)
    assert agent.executor_bank is not None and agent.executor_bank.dir == tmp_path / "cbr_executor"
    assert agent.executor_k == 3
    assert agent.bank.capacity == 5 and agent.bank.eviction and agent.executor_bank.capacity == 5
    assert build_program("cbr", task="multihop", settings=load_settings(), memory_dir=tmp_path).executor_bank is None


def test_cli_runs_cbr_without_cases_with_the_executor_bank_and_a_capacity(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from memento_training_fixture import write_data

    corpus, _ = write_data(tmp_path / "data")
    engine = ScriptedEngine()
    engine.when(predicate=lambda c: "sub_tasks" in c.output_fields, sub_tasks=["Where is Albany County?"], done=True)
    engine.when(
        predicate=lambda c: "next_tool_name" in c.output_fields and react_steps_done(c) == 0,
        next_tool_name="search_web",
        next_tool_args={"query": "Albany County"},
    )
    engine.when(predicate=lambda c: "next_tool_name" in c.output_fields, next_tool_name="finish", next_tool_args={})
    engine.when(predicate=lambda c: "reward" in c.output_fields, reward=1.0, reasoning="ok")
    memory = tmp_path / "mem"
    with OpenAICompatServer(engine) as server:
        for question in ("Which state is Albany County in?", "Which country is Albany County in?"):
            result = CliRunner().invoke(
                app,
                ["run", "--task", "multihop", "--method", "cbr", "--question", question, "--memory", str(memory),
                 "--corpus", str(corpus), "--lm", "openai/x", "--api-base", server.api_base, "--cbr-k", "0",
                 "--cbr-executor-bank", "--cbr-executor-k", "1", "--cbr-capacity", "1", "--json"],
            )  # fmt: skip
            assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    trajectory = json.loads(Path(out["trajectory"]).read_text())
    assert trajectory["cbr"]["retrieved"] == []  # k = 0
    tools = CaseBank(memory / "cbr_executor", frozen=True)
    assert len(tools) == 1  # capacity 1: the older tool case was evicted
    second = [c for c in engine.calls if "next_tool_name" in c.output_fields and "country" in c.inputs["task"]]
    assert any("Tool use on similar past sub-tasks" in c.inputs["context"] for c in second)
    assert len(CaseBank(memory / "cbr", frozen=True)) == 1


# -- the new read paths go through the task's date filter (issue 22's no-future-leaks rule) -------------------------
def _dated(day: str):
    import datetime as dt

    from memento.core.types import EvidenceRecord, SourcePage

    return EvidenceRecord(pages=[SourcePage(url=f"https://ex.org/{day}", published=dt.date.fromisoformat(day))])


def test_kernel_policy_and_the_whole_bank_see_only_cases_before_the_cutoff(tmp_path):
    from memento.core.dating import DateFilter

    emb = LookupEmbedder(4)
    emb.table.update({"old": _unit(1, 0.2, 0, 0), "new": _unit(1, 0.1, 0, 0), "query": _unit(1, 0, 0, 0)})
    bank = CaseBank(tmp_path, emb, gate=_LovesDimensionThree(), min_pairs=0, prefilter=0)
    old = bank.add("old", "plan", reward=0.2, evidence=_dated("2019-03-01"))
    new = bank.add("new", "plan", reward=1.0, evidence=_dated("2023-03-01"))
    bank.record("query", [old, new], [0.0, 1.0])
    cutoff = DateFilter.of("2021-01-01", "keep")
    for policy in ("kernel", "q", "softmax"):
        assert [c.id for c, _ in bank.retrieve("query", k=2, policy=policy, dates=cutoff)] == [old.id], policy
    assert new.id in [c.id for c, _ in bank.retrieve("query", k=2, policy="kernel")]  # no cutoff: both compete


def test_the_paper_profile_injects_only_items_before_the_cutoff(tmp_path):
    from memento.core.dating import DateFilter
    from memento.memory.memento_memory import MementoMemory

    memory = MementoMemory(tmp_path, profile="paper")
    memory.web_action.add("Old rule: search the archive.", evidence=_dated("2019-03-01"))
    memory.web_action.add("New rule: search the 2023 ruling.", evidence=_dated("2023-03-01"))
    memory.craft.add("Old insight: read the docket.", evidence=_dated("2019-03-01"))
    memory.craft.add("New insight: the 2023 ruling settles it.", evidence=_dated("2023-03-01"))
    view = memory.view(dates=DateFilter.of("2021-01-01", "keep"))
    assert view.web_action_rules("anything").splitlines() == [
        "- Old rule: search the archive. (support 0, contradicted 0)"
    ]
    assert view.craft_knowledge("anything") == "- Old insight: read the docket."
    assert len(memory.view().web_action_rules("anything").splitlines()) == 2
