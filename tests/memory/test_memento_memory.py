"""Persistent dual memory: stores, budgets, exclusion, versions, diff, rollback, export, freeze, copies, threads;
the store tests run on each backend (``location``: SQLite in tmp_path, a fresh PostgreSQL database)."""

from __future__ import annotations

import copy
import filecmp
import sqlite3
import threading

import pytest

from memento.core.errors import DataError, MemoryFrozenError
from memento.core.protocols import MemoryProvider
from memento.core.untrusted import data_blocks
from memento.memory.memento_memory import MementoMemory, MemoryBudgets
from memento.memory.sqlite_store import SQLiteStore, estimate_tokens


def _fill(memory: MementoMemory, batch: int, tag: str) -> None:
    with memory.transaction(batch=batch) as tx:
        memory.craft.add(
            f"For {tag} questions, read the primary source first.", provenance=[f"t{tag}"], batch=batch, tx=tx
        )
        memory.decomposition.add(
            f"When the task names a {tag}, add a sub-question that covers its founding date.",
            provenance=[f"t{tag}"],
            batch=batch,
            tx=tx,
        )
        memory.web_action.add(f"Search the {tag} name in quotes.", provenance=[f"t{tag}"], batch=batch, tx=tx)
        memory.facts.add("Acme Corp", f"Acme Corp makes {tag}.", sources=["https://acme.test"], batch=batch, tx=tx)
    memory.commit_version(batch=batch, note=f"batch {batch}")


def test_memory_implements_provider_and_reads_what_was_written(location):
    memory = MementoMemory(location("mem"))
    assert isinstance(memory, MemoryProvider)
    assert memory.version == 0
    _fill(memory, 1, "company")
    assert memory.version == 1
    assert "primary source" in memory.craft_knowledge("Which company founded Acme?")
    assert "founding date" in memory.decomposition_rules("Which company founded Acme?")
    assert "in quotes" in memory.web_action_rules("anything")
    assert "Acme Corp makes company" in memory.known_facts("What does Acme Corp make?")
    assert memory.search("acme")[0].startswith("[Acme Corp] Acme Corp makes company.")
    # reopening the directory sees the same memory
    again = MementoMemory(location("mem"))
    assert again.version == 1 and len(again.web_action) == 1 and len(again.facts) == 1


def test_rule_status_follows_counts_and_retired_rules_are_never_injected(location):
    memory = MementoMemory(location())
    rule = memory.web_action.add("Prefer official registries over blogs.", batch=1)
    assert rule.status == "active"
    rule = memory.web_action.reinforce(rule.id, support=1, contradiction=3, task_ids=["a"], batch=2)
    assert (rule.support, rule.contradiction, rule.status) == (1, 3, "downweighted")
    assert rule.provenance == ["a"] and rule.updated_batch == 2
    rule = memory.web_action.reinforce(rule.id, support=5, batch=3)
    assert rule.status == "active"
    other = memory.web_action.add("Open the second result when the first is a forum.", support=1)
    memory.web_action.retire(other.id, batch=3)
    text = memory.web_action_rules("registries")
    assert "official registries" in text and "forum" not in text
    stats = memory.web_action.stats()
    assert stats["rules"] == 1 and stats["retired"] == 1 and stats["total_support"] == 7
    assert stats["rules_contradicted"] == 1 and stats["total_contradiction"] == 3


def test_injection_respects_budget_and_prefers_heavy_and_relevant_rules(location):
    memory = MementoMemory(location(), budgets=MemoryBudgets(decomposition=60))
    with memory.transaction(batch=1) as tx:
        for i in range(300):
            memory.decomposition.add(
                f"When the task mentions topic{i}, ask about its origin {i}.", support=i % 7, tx=tx
            )
        heavy = memory.decomposition.add("When a person is named, ask for their birth year.", support=50, tx=tx)
        light = memory.decomposition.add("When a river is named, ask for its length.", support=0, tx=tx)
    text = memory.decomposition_rules("How long is the river Nile?")
    assert estimate_tokens(text) <= 60
    assert heavy.text in text  # best by weight
    assert light.text in text  # lexically relevant to this task
    assert text.count("\n") + 1 < 300  # never the whole book


def test_a_task_never_retrieves_what_its_own_run_wrote(location):
    memory = MementoMemory(location())
    memory.web_action.add("Rule learned from task one.", provenance=["task-1"])
    memory.web_action.add("Rule learned from task two.", provenance=["task-2"])
    memory.facts.add("Nile", "The Nile flows north.", provenance=["task-1"])
    memory.craft.add("Insight from task one about rivers.", provenance=["task-1"])
    view = memory.view(exclude_task_id="task-1")
    assert isinstance(view, MemoryProvider)
    assert "task two" in view.web_action_rules("rule") and "task one" not in view.web_action_rules("rule")
    assert view.known_facts("Nile river") == "" and view.search("Nile") == []
    assert view.craft_knowledge("rivers") == ""
    assert "flows north" in memory.view(exclude_task_id="task-3").known_facts("the Nile")
    # the view records what it injected, for the trainer's credit assignment
    assert len(view.injected["web_action"]) == 1


def test_versions_diff_rollback_and_deterministic_export(location, tmp_path):
    memory = MementoMemory(location("mem"))
    _fill(memory, 1, "company")
    memory.export(tmp_path / "v1")
    rule = memory.web_action.all()[0]
    with memory.transaction(batch=2) as tx:
        memory.web_action.reinforce(rule.id, support=2, batch=2, tx=tx)
        memory.web_action.update_text(rule.id, "Search the company name in double quotes.", batch=2, tx=tx)
        memory.craft.remove(memory.craft.all()[0].id, tx=tx)
        memory.facts.add("Beta Ltd", "Beta Ltd sells rivets.", batch=2, tx=tx)
    assert memory.commit_version(batch=2) == 2
    diff = memory.diff(1, 2)
    assert diff.stores["craft"].removed and diff.stores["craft"].chars_deleted > 0
    assert diff.stores["web_action"].modified == [rule.id] and diff.stores["web_action"].chars_modified > 0
    assert len(diff.stores["facts"].added) == 1 and diff.stores["facts"].chars_added == len(
        "Beta Ltd: Beta Ltd sells rivets."
    )
    assert diff.stores["facts"].chars_after == sum(len(f"{f.entity}: {f.text}") for f in memory.facts.all())
    # the past version can be exported without rolling back
    memory.export(tmp_path / "v1_again", version=1)
    assert _same_tree(tmp_path / "v1", tmp_path / "v1_again")
    assert memory.snapshot(1)["stores"]["web_action"][0]["support"] == 0
    memory.rollback(1)
    assert memory.version == 1
    memory.export(tmp_path / "v1_after_rollback")
    assert _same_tree(tmp_path / "v1", tmp_path / "v1_after_rollback")
    # version 2 stays reachable and the log is append-only (the rollback is audited)
    assert memory.snapshot(2)["stores"]["web_action"][0]["support"] == 2
    assert [v["status"] for v in memory.versions()] == ["committed", "rolled_back"]
    assert any(c["op"] == "rollback" for c in memory.db.changes())
    # a new version after a rollback gets a fresh number whose parent is the restored version
    _fill(memory, 2, "river")
    assert memory.version == 3 and memory.versions()[-1]["parent"] == 1
    assert memory.db.integrity_check() == "ok"
    with pytest.raises(DataError, match="unknown memory version 9"):
        memory.rollback(9)


def _same_tree(a, b) -> bool:
    names = sorted(p.name for p in a.iterdir())
    if names != sorted(p.name for p in b.iterdir()):
        return False
    return all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)


def test_failed_update_leaves_previous_state(location):
    memory = MementoMemory(location())
    memory.facts.add("Nile", "The Nile is long.")
    with pytest.raises(RuntimeError):
        with memory.transaction(batch=1) as tx:
            memory.facts.add("Nile", "A second fact.", tx=tx)
            raise RuntimeError("crash mid-update")
    assert [f.text for f in memory.facts.all()] == ["The Nile is long."]
    assert len(memory.db.changes()) == 1


def test_freeze_makes_every_write_raise_and_read_only_open(location):
    memory = MementoMemory(location("m"))
    _fill(memory, 1, "company")
    memory.freeze()
    rule = memory.web_action.all()[0]
    for write in (
        lambda: memory.web_action.add("x rule text"),
        lambda: memory.web_action.reinforce(rule.id, support=1),
        lambda: memory.facts.add("E", "a fact text"),
        lambda: memory.craft.add("an insight text"),
        lambda: memory.rollback(0),
        lambda: memory.commit_version(batch=2),
    ):
        with pytest.raises(MemoryFrozenError, match="frozen"):
            write()
    assert memory.web_action_rules("x")  # reads still work
    ro = MementoMemory(location("m"), read_only=True)
    assert ro.frozen and ro.version == 1
    with pytest.raises(MemoryFrozenError):
        ro.facts.add("E", "another fact text")
    with pytest.raises(DataError, match="no memory"):
        MementoMemory(location("missing"), read_only=True)


def test_deep_copy_shares_memory(location):
    memory = MementoMemory(location())
    holder = {"memory": memory, "view": memory.view()}
    clone = copy.deepcopy(holder)
    assert clone["memory"] is memory and copy.copy(memory) is memory and clone["view"] is holder["view"]
    clone["memory"].facts.add("Nile", "Written through the copy.")
    assert memory.facts.all()[0].text == "Written through the copy."


def test_parallel_readers_and_writers_are_safe(location):
    memory = MementoMemory(location())
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(40):
                memory.facts.add(f"Entity{n}", f"Fact number {i} of writer {n}.")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(40):
                memory.known_facts("Entity1 Entity2")
                memory.search("writer")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)] + [
        threading.Thread(target=reader) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(memory.facts) == 160 and len(memory.db.changes()) == 160
    assert memory.db.integrity_check() == "ok"


def test_corrupt_database_is_a_clear_error(tmp_path):
    (tmp_path / "memory.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(DataError, match="not a usable memory database"):
        SQLiteStore(tmp_path)


def test_wal_mode(tmp_path):
    MementoMemory(tmp_path).facts.add("Nile", "The Nile flows through Egypt.")
    conn = sqlite3.connect(tmp_path / "memory.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_text_index_follows_updates_rollbacks_and_other_writers(location):
    memory = MementoMemory(location())
    egypt = memory.facts.add("Nile", "The Nile flows through Egypt.")
    memory.facts.add("Nile", "The Nile is long.")
    memory.facts.put(egypt.model_copy(update={"text": "The Nile floods yearly."}))
    assert memory.facts.search("Egypt") == []
    assert memory.facts.search("floods") == ["[Nile] The Nile floods yearly."]
    other = MementoMemory(location())  # another handle (another process's writes arrive the same way)
    assert other.facts.search("floods") == ["[Nile] The Nile floods yearly."]
    other.facts.add("Danube", "The Danube floods Vienna.")
    assert len(memory.facts.search("floods")) == 2
    with pytest.raises(RuntimeError), memory.transaction(batch=1) as tx:
        memory.facts.add("Rhine", "The Rhine floods Cologne.", tx=tx)
        assert len(memory.facts.search("floods")) == 3  # the transaction sees its own writes
        raise RuntimeError("rolled back")
    assert len(memory.facts.search("floods")) == 2  # ...and nobody sees them after the rollback
    memory.db.rollback(0)
    assert memory.facts.search("floods") == [] and memory.facts.search("long") == []
    assert other.facts.search("floods") == []
    assert memory.db.integrity_check() == "ok"


def test_exclusion_matches_task_ids_literally(location):
    memory = MementoMemory(location())
    memory.web_action.add("Rule from the task with an underscore.", provenance=["q_1"])
    memory.web_action.add("Rule from a similar-looking task.", provenance=["qx1"])
    text = memory.view(exclude_task_id="q_1").web_action_rules("rule")
    assert "similar-looking" in text and "underscore" not in text
    assert "underscore" in memory.view(exclude_task_id="q%").web_action_rules("rule")


def test_craft_relevance_check_keeps_what_the_llm_selects(location):
    from memento.memory.embedder import HashingEmbedder
    from memento.testing import ScriptedEngine, scripted_lm

    memory = MementoMemory(location(), embedder=HashingEmbedder())
    memory.craft.add("For court cases, read the docket first.")
    memory.craft.add("For court cases about patents, check the patent office.")
    memory.craft.add("For films, check the studio's release notes.")
    from types import SimpleNamespace

    from memento.programs.memento_learner import MementoLearner

    def stage(lm):  # the learning module's relevance stage, run under the agent LM
        return MementoLearner(roles=SimpleNamespace(lm=lm, reflection_lm=None)).relevance

    engine = ScriptedEngine().when(predicate=lambda c: "relevant" in c.output_fields, relevant=[2, 99])
    lm = scripted_lm(engine)
    text = memory.view(relevance=stage(lm)).craft_knowledge("Who won the patent court case?")
    [call] = engine.calls
    [entries] = data_blocks(call.inputs["entries"])  # the entries are quoted data for the relevance check
    shown = entries.splitlines()
    assert len(shown) == 3 and "patent" in shown[0]  # embedding re-rank puts the closest entry first
    assert text == "- " + shown[1].split(". ", 1)[1]  # only the selected entry; out-of-range numbers ignored
    broken = ScriptedEngine().when(predicate=lambda c: "relevant" in c.output_fields, raw="no fields here")
    kept = memory.view(relevance=stage(scripted_lm(broken))).craft_knowledge("Who won the patent court case?")
    assert kept.count("\n") == 2  # an unusable judgement keeps the prefilter's choice
    plain = MementoMemory(location())
    import dspy

    with dspy.context(lm=lm):
        assert plain.craft_knowledge("court cases").count("\n") == 2  # prefilter only: matches + most supported
    assert len(engine.calls) == 1  # no relevance call without a relevance stage


def test_craft_entries_tied_on_similarity_and_support_rank_by_batch_then_text_not_by_random_id(location):
    """Two runs that learn the same M1 entries (threads vs Ray, a rerun) give them different random ids: the re-rank
    must not depend on them, or the relevance prompt lists the same entries in another order."""
    from memento.core.types import CraftEntry
    from memento.memory.embedder import HashingEmbedder

    memory = MementoMemory(location(), embedder=HashingEmbedder())
    search, open_page = "Search each named person separately.", "Open the encyclopedia page of the entity."
    for entry_id, text in (("c-0", search), ("c-1", open_page)):
        memory.craft.put(CraftEntry(id=entry_id, text=text, batch=1))
    task = "Are Paul Clyne and David Soares both district attorneys?"
    vectors = HashingEmbedder().embed([task, search, open_page])
    assert list(vectors[1:] @ vectors[0]) == [0.0, 0.0]  # no word in common: equal similarity, equal support
    assert [e.text for e in memory.craft.candidates(task, 5)] == [open_page, search]  # by text, not by id
