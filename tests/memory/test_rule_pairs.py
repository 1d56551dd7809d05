"""Merging by meaning (issue 24 item 1): on a labelled set of rule pairs, paraphrases and direct contradictions reach
the canonicaliser's merge judge, unrelated rules mostly do not, and no new rule costs more than three judge calls.

``tests/data/rule_pairs.jsonl`` holds 52 pairs written for this test (20 paraphrases, 12 contradictions, 20 unrelated
pairs, most of the unrelated ones from the same domain; ``bench/bench_canonical.py`` prints the same rates). The
stated rates: with MiniLM at least 95% of paraphrase and contradiction pairs reach the judge and at most 20% of
unrelated ones; with the hashing embedder of the base install, which sees shared words only, at least 75% and at most
25% (a paraphrase that shares no word with its rule cannot be found by word overlap)."""

from __future__ import annotations

import sys
from pathlib import Path

import dspy
import pytest

from memento.core.untrusted import strip_marking
from memento.memory.embedder import HashingEmbedder, SentenceTransformerEmbedder
from memento.testing import judge_reach, load_rule_pairs, scripted_lm

PAIRS = Path(__file__).resolve().parents[1] / "data" / "rule_pairs.jsonl"


@pytest.fixture(scope="module")
def pairs() -> list[dict]:
    return load_rule_pairs(PAIRS)


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


def _share(result: dict, *labels: str) -> float:
    reached = sum(len(result["reached"][label]) for label in labels)
    total = reached + sum(len(result["missed"][label]) for label in labels)
    return reached / total


def test_the_labelled_set(pairs, minilm):
    labels = [row["label"] for row in pairs]
    assert len(pairs) >= 40 and len({row["id"] for row in pairs}) == len(pairs)
    assert labels.count("paraphrase") == 20 and labels.count("contradiction") == 12 and labels.count("unrelated") == 20
    by_id = {row["id"]: row for row in pairs}
    # the probes: a paraphrase MiniLM scores about 0.51, and "use site:gov" against "avoid site:gov"
    low = minilm.embed([by_id["p12"]["stored"], by_id["p12"]["new"]])
    assert 0.45 < float(low[0] @ low[1]) < 0.56
    assert "site:gov" in by_id["c01"]["stored"] and "Avoid site:gov" in by_id["c01"]["new"]


def test_minilm_sends_paraphrases_and_contradictions_to_the_judge(pairs, minilm):
    result = judge_reach(pairs, embedder=minilm)
    assert result["threshold"] == 0.45
    assert _share(result, "paraphrase", "contradiction") >= 0.95, result["missed"]
    assert result["rates"]["unrelated"] <= 0.20, result["reached"]["unrelated"]
    assert "p12" in result["reached"]["paraphrase"] and "c01" in result["reached"]["contradiction"]
    assert max(result["calls"]) <= 3


def test_hashing_embedder_reaches_its_stated_rates(pairs):
    result = judge_reach(pairs, embedder=HashingEmbedder())
    assert result["threshold"] == 0.15
    assert _share(result, "paraphrase", "contradiction") >= 0.75, result["missed"]
    assert result["rates"]["contradiction"] == 1.0  # "use site:gov" / "avoid site:gov" share their words
    assert result["rates"]["unrelated"] <= 0.25, result["reached"]["unrelated"]
    assert max(result["calls"]) <= 3


def test_the_old_near_duplicate_rule_missed_most_of_them(pairs, minilm):
    """The rule this replaces (the best match only, at cosine 0.8) let most paraphrases through as new rules."""
    result = judge_reach(pairs, embedder=minilm, threshold=0.8)
    assert _share(result, "paraphrase", "contradiction") < 0.3


def test_three_runs_stating_one_rule_in_different_words_give_support_3(tmp_path, minilm):
    """Done means: after one batch in which three runs state one rule in three wordings (MiniLM cosines 0.5-0.7,
    few shared words), the rule has support 3."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
    from memento_training_fixture import make_engine, write_data

    import memento.tasks.multihop  # noqa: F401  (registers the task)
    from memento.core.config import Budgets, load_settings
    from memento.memory.canonicalizer import Canonicalizer
    from memento.memory.memento_memory import MementoMemory
    from memento.optimize.memento_trainer import MementoTrainer
    from memento.programs.memento_learner import MementoLearner
    from memento.programs.memento_program import Memento
    from memento.tasks.task import get_task
    from memento.web.factory import web_tools_factory

    wording = {
        "Paul Clyne": "Search each named person separately before comparing them.",
        "Albany County": "Research the two people one at a time, then compare.",
        "Arthur Penn": "Look up every individual on their own before putting them side by side.",
    }
    same = set(wording.values())

    def ops(call):
        return [
            {"op": "add", "text": text, "reason": "worked"}
            for key, text in wording.items()
            if key in call.inputs.get("task", "")
        ]

    engine = make_engine(
        first=[
            {"predicate": lambda c: "search_log" in c.inputs and "operations" in c.output_fields, "operations": ops},
            {  # the merge judge knows the three wordings mean one thing (they reach it as quoted data)
                "predicate": lambda c: "verdict" in c.output_fields,
                "verdict": lambda c: (
                    "same"
                    if {strip_marking(c.inputs["stored"]), strip_marking(c.inputs["candidate"])} <= same
                    else "distinct"
                ),
                "merged": lambda c: strip_marking(c.inputs["stored"]),
            },
        ]
    )
    dspy.configure(lm=scripted_lm(engine))
    corpus, questions = write_data(tmp_path / "data")
    settings = load_settings(flags={"web": {"corpus": str(corpus), "cache_dir": str(tmp_path / "cache")}})
    task = get_task("multihop")
    memory = MementoMemory(tmp_path / "mem", embedder=minilm, stores=["M3"])
    learner = MementoLearner()
    program = Memento(
        task,
        memory=memory,
        web=web_tools_factory(settings),
        budgets=Budgets(initial_questions=2, total_questions=3, steps_per_question=3),
        threads=2,
        stages=learner,
    )
    canon = Canonicalizer(memory.db, embedder=minilm, check=learner.check, merge=learner.merge)
    trainer = MementoTrainer(
        program, task.metric, memory, batch_size=3, threads=2, learner=learner, canonicalizer=canon
    )
    [report] = trainer.fit(task.load(questions)[:3])
    [rule] = memory.web_action.all()
    assert rule.support == 3 and sorted(rule.provenance) == ["q1", "q2", "q3"]
    assert report.candidates_merged == 2 and canon.judge_calls <= 2 * 3
