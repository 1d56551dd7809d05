"""Canonicalisation: no-data rejection, LLM check, near-duplicate merge with counts summed, fact supersession; on both
backends."""

from __future__ import annotations

from types import SimpleNamespace

import dspy

from memento.memory.canonicalizer import Candidate, Canonicalizer, is_no_data
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory
from memento.programs.memento_learner import MementoLearner
from memento.testing import ScriptedEngine, scripted_lm


def _canon(memory: MementoMemory, lm=None) -> Canonicalizer:
    """A canonicaliser with the learning module's stages under ``lm`` (the configured LM when None; False: none)."""
    if lm is False:
        return Canonicalizer(memory.db, embedder=HashingEmbedder(), threshold=0.6)
    learner = MementoLearner(roles=SimpleNamespace(reflection_lm=lm, lm=lm) if lm is not None else None)
    return Canonicalizer(memory.db, embedder=HashingEmbedder(), threshold=0.6, check=learner.check, merge=learner.merge)


def test_no_data_patterns():
    for text in ("No data", "not found.", "Unknown", "N/A", "could not determine the year", "", "  x "):
        assert is_no_data(text), text
    assert not is_no_data("The Nile is 6,650 km long.")


def test_near_duplicate_rules_merge_and_counts_sum(location):
    memory = MementoMemory(location())
    stored = memory.web_action.add("Put the full company name in quotes when searching.", support=2, provenance=["a"])
    engine = ScriptedEngine().when(
        "Put the full company name", verdict="same", merged="Quote the full company name in searches."
    )
    engine.when("accept", accept=True, reason="specific")
    lm = scripted_lm(engine)
    plan = _canon(memory, lm).plan(
        "web_action",
        [
            Candidate(text="Put the full company name in quotes when you search.", provenance=["b"], support=3),
            Candidate(text="Prefer court records over press releases for rulings.", provenance=["c"]),
            Candidate(text="No data", provenance=["d"]),
        ],
    )
    assert [op.action for op in plan] == ["merge", "add", "reject"]
    assert plan[0].target == stored.id and plan[2].reason == "no data"
    with memory.transaction(batch=1) as tx:
        counts = memory.apply("web_action", plan, batch=1, tx=tx)
    assert counts == {"add": 1, "merge": 1, "supersede": 0, "contradict": 0, "reject": 1}
    merged = memory.web_action.get(stored.id)
    assert merged is not None
    # support counts independent runs: one new run ("b") backs the stored rule, whatever the candidate's own count
    assert merged.support == 3 and merged.provenance == ["a", "b"]
    assert merged.text == "Quote the full company name in searches."
    assert len(memory.web_action) == 2
    assert len(engine.calls_matching("free of near-duplicates")) == 1


def test_duplicates_within_one_batch_merge_into_the_new_item(location):
    memory = MementoMemory(location())
    plan = _canon(memory, lm=False).plan(
        "craft",
        [
            Candidate(text="Check the official docket before news articles.", provenance=["a"]),
            Candidate(text="check the official docket before news articles", provenance=["b"]),
        ],
    )
    assert [op.action for op in plan] == ["add", "merge"] and plan[1].target == "new:0"
    with memory.transaction(batch=1) as tx:
        memory.apply("craft", plan, batch=1, tx=tx)
    [entry] = memory.craft.all()
    assert entry.support == 2 and entry.provenance == ["a", "b"]


def test_llm_check_rejects_unsupported_candidates(location):
    memory = MementoMemory(location())
    engine = ScriptedEngine().when("moon is made of cheese", accept=False, reason="unsupported")
    engine.when("accept", accept=True, reason="ok")
    lm = scripted_lm(engine)
    plan = _canon(memory, lm).plan(
        "facts",
        [
            Candidate(text="The moon is made of cheese.", entity="Moon", evidence="a children's story"),
            Candidate(text="The Moon orbits Earth every 27.3 days.", entity="Moon", sources=["https://nasa.test"]),
            Candidate(text="A fact without its entity.", entity=""),
        ],
    )
    assert [op.action for op in plan] == ["reject", "add", "reject"]
    assert plan[0].reason == "unsupported" and plan[2].reason == "fact without an entity"
    assert len(engine.calls_matching("may be stored")) == 2


def test_a_candidate_proposed_again_is_checked_once_per_plan(location):
    """The 135M model proposes the same item again and again: one check per distinct candidate and evidence (the
    same verdict for each copy), so the LLM is not asked the identical question again (with DSPy's cache off)."""
    memory = MementoMemory(location())
    engine = ScriptedEngine().when("moon is made of cheese", accept=False, reason="unsupported")
    canon = _canon(memory, scripted_lm(engine))

    def cheese(evidence: str, run: str) -> Candidate:
        return Candidate(text="The moon is made of cheese.", entity="Moon", evidence=evidence, provenance=[run])

    plan = canon.plan(
        "facts",
        [
            cheese("a children's story", "a"),
            cheese("a children's story", "b"),
            cheese("a children's story", "c"),
            cheese("a cartoon", "d"),  # other evidence: checked on its own
        ],
    )
    assert [(op.action, op.reason) for op in plan] == [("reject", "unsupported")] * 4
    assert len(engine.calls_matching("may be stored")) == 2 == canon.check_calls
    canon.plan("facts", [cheese("a cartoon", "e")])  # a new plan asks again
    assert len(engine.calls_matching("may be stored")) == 3 == canon.check_calls


def test_contradicting_fact_supersedes_the_old_one_which_is_kept(location):
    memory = MementoMemory(location())
    old = memory.facts.add("Acme Corp", "Acme Corp's CEO is Alice Smith.", sources=["https://old.test"])
    engine = ScriptedEngine().when(
        "contradicts",
        predicate=lambda c: "Acme Corp's CEO" in c.prompt and "stored" in c.inputs,
        verdict="contradicts",
        merged="",
    )
    engine.when("accept", accept=True, reason="ok")
    with dspy.context(lm=scripted_lm(engine)):
        plan = _canon(memory).plan(
            "facts", [Candidate(text="Acme Corp's CEO is Bob Jones.", entity="acme corp", sources=["https://new.test"])]
        )
    assert [op.action for op in plan] == ["supersede"] and plan[0].target == old.id
    with memory.transaction(batch=2) as tx:
        memory.apply("facts", plan, batch=2, tx=tx)
    facts = {f.text: f for f in memory.facts.all()}
    assert facts["Acme Corp's CEO is Alice Smith."].superseded_by == facts["Acme Corp's CEO is Bob Jones."].id
    assert "Bob Jones" in memory.known_facts("Who runs Acme Corp?")
    assert "Alice" not in memory.known_facts("Who runs Acme Corp?")
    assert len(memory.facts) == 1 and memory.facts.stats()["superseded"] == 1


def test_distinct_verdict_adds(location):
    memory = MementoMemory(location())
    memory.decomposition.add("When a film is named, add a sub-question that covers its director.")
    engine = ScriptedEngine(overrides={"verdict": "distinct", "merged": "", "accept": True})
    plan = _canon(memory, scripted_lm(engine)).plan(
        "decomposition", [Candidate(text="When a film is named, add a sub-question that covers its release year.")]
    )
    assert [op.action for op in plan] == ["add"]


def test_contradicts_verdict_raises_the_stored_rules_contradiction_count(location):
    memory = MementoMemory(location())
    stored = memory.web_action.add("Search news sites first for court rulings.", support=1, provenance=["a"])
    engine = ScriptedEngine().when(
        predicate=lambda c: "stored" in c.inputs, verdict="contradicts", merged="Search court records first."
    )
    engine.when("accept", accept=True, reason="ok")
    plan = _canon(memory, scripted_lm(engine)).plan(
        "web_action",
        [
            Candidate(text="Search news sites first for court rulings, never dockets.", provenance=["b"]),
            Candidate(text="Search news sites first for court rulings, never dockets!", provenance=["c"]),
        ],
    )
    assert [op.action for op in plan] == ["contradict", "contradict"]
    assert {op.target for op in plan} == {stored.id}
    with memory.transaction(batch=1) as tx:
        counts = memory.apply("web_action", plan, batch=1, tx=tx)
    assert counts["contradict"] == 2
    rule = memory.web_action.get(stored.id)
    assert rule is not None
    assert (rule.support, rule.contradiction) == (1, 2) and rule.status == "downweighted"
    assert len(memory.web_action) == 1  # down-weighted, not retracted


def test_one_run_proposing_the_same_rule_twice_counts_once(location):
    memory = MementoMemory(location())
    plan = _canon(memory, lm=False).plan(
        "decomposition",
        [
            Candidate(text="When two people are compared, ask about each one.", provenance=["r1"]),
            Candidate(text="when two people are compared, ask about each one", provenance=["r1"]),
            Candidate(text="When two people are compared ask about each one", provenance=["r2"]),
        ],
    )
    assert [op.action for op in plan] == ["add", "merge", "merge"]
    with memory.transaction(batch=1) as tx:
        memory.apply("decomposition", plan, batch=1, tx=tx)
    [rule] = memory.decomposition.all()
    assert rule.support == 2 and rule.provenance == ["r1", "r2"]
