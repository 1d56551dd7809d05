"""Review fixes for MEMENTO memory and the case bank: rollback to a rolled-back version, the cbr builder's policy and
frozen bank, read-only and corrupt case banks, copies, empty cases, and `memento memory diff` counting."""

from __future__ import annotations

import copy

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.config import load_settings
from memento.core.errors import DataError, MemoryFrozenError
from memento.memory.case_bank import DB_NAME, CaseBank, CaseBankError, StoredEmbedder
from memento.memory.database import DatabaseError
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory
from memento.memory.sqlite_store import SQLiteStore
from memento.programs.case_based_agent import build_cbr
from memento.tasks import get_task


def _one_line(text: str) -> bool:
    return len(text.strip().splitlines()) == 1


# -- 1. rollback -----------------------------------------------------------------------------------------------


def _two_versions(directory) -> SQLiteStore:
    db = SQLiteStore(directory)
    with db.transaction(batch=1) as tx:
        tx.put("craft", "c-1", {"id": "c-1", "text": "one"}, text="one")
    db.commit_version(batch=1)
    with db.transaction(batch=2) as tx:
        tx.put("craft", "c-2", {"id": "c-2", "text": "two"}, text="two")
    db.commit_version(batch=2)
    return db


def test_rolling_forward_to_a_rolled_back_version_is_refused(tmp_path):
    db = _two_versions(tmp_path)
    db.rollback(1)
    seq = db.last_seq()
    with pytest.raises(DataError, match="^version 2 was rolled back; retrain instead$"):
        db.rollback(2)
    # nothing changed: still at version 1, version 2 still rolled back, no log entry
    assert db.head_version == 1 and set(db.state_at()) == {("craft", "c-1")}
    assert [v["status"] for v in db.versions()] == ["committed", "rolled_back"] and db.last_seq() == seq
    db.close()


def test_cli_rollback_1_then_2_is_a_one_line_error(tmp_path):
    _two_versions(tmp_path / "mem").close()
    runner = CliRunner()
    first = runner.invoke(app, ["memory", "rollback", "1", "--memory", str(tmp_path / "mem")])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["memory", "rollback", "2", "--memory", str(tmp_path / "mem")])
    assert second.exit_code == 1 and "version 2 was rolled back; retrain instead" in second.output
    assert _one_line(second.output) and "version 1 -> 2" not in second.output
    assert SQLiteStore(tmp_path / "mem", read_only=True).head_version == 1


# -- 2. the cbr method's policy --------------------------------------------------------------------------------


def test_cbr_builder_explores_when_training_is_greedy_when_frozen_and_keeps_policy_a_kwarg(tmp_path):
    settings = load_settings(flags={"memory": {"dir": str(tmp_path)}, "web": {"backend": "offline"}})
    task = get_task("multihop")
    training = build_cbr(task=task, settings=settings)
    assert (training.policy, training.alpha, training.k, training.bank.min_pairs) == ("softmax", 1.0, 4, 32)
    training.bank.close()
    assert build_cbr(task=task, settings=settings, frozen=True).policy == "q"
    assert build_cbr(task=task, settings=settings, policy="cosine").policy == "cosine"
    tuned = load_settings(
        flags={
            "memory": {"dir": str(tmp_path)},
            "web": {"backend": "offline"},
            "cbr": {"k": 2, "alpha": 0.25, "min_pairs": 8, "train_policy": "q", "prefilter": 10, "qgate_hidden": 16},
        }
    )
    agent = build_cbr(task=task, settings=tuned)
    assert (agent.policy, agent.alpha, agent.k, agent.bank.min_pairs, agent.bank.prefilter) == ("q", 0.25, 2, 8, 10)
    assert agent.bank.gate.gate.hidden == 16 and agent.bank.gate.lr == 0.001


def test_untrained_gate_ranks_q_exactly_like_cosine(tmp_path):
    bank = CaseBank(tmp_path, HashingEmbedder(dim=64), min_pairs=4)
    bank.add_many(
        [{"task_text": f"capital of country {i} river {i % 3}", "plan": "p", "reward": 1.0} for i in range(9)]
    )
    query = "which river runs through the capital of country 4"
    cosine = [(c.id, round(s, 6)) for c, s in bank.retrieve(query, k=4, policy="cosine")]
    q = [(c.id, round(s, 6)) for c, s in bank.retrieve(query, k=4, policy="q")]
    assert q == cosine and len(q) == 4
    assert not bank.gate_trained and bank._gate.built is None  # the gate was never even built
    # once the gate has learned, q scores are its probabilities, no longer the cosine similarities
    bank.record(query, [cid for cid, _ in cosine], [1.0, 0.0, 0.0, 1.0])
    assert bank.gate_trained
    assert [round(s, 6) for _, s in bank.retrieve(query, k=4, policy="q")] != [s for _, s in cosine]


# -- 3. frozen banks are never created, and open read-only ------------------------------------------------------


def test_frozen_cbr_on_a_missing_bank_is_a_one_line_error_and_creates_nothing(tmp_path):
    settings = load_settings(flags={"web": {"backend": "offline"}})
    typo = tmp_path / "typo_dir"
    with pytest.raises(DataError, match="no case bank at") as err:
        build_cbr(task=get_task("multihop"), settings=settings, memory_dir=typo, frozen=True)
    assert _one_line(str(err.value)) and not typo.exists()
    with pytest.raises(CaseBankError, match="missing cases.db"):
        CaseBank(typo / "cbr", HashingEmbedder(dim=16), frozen=True)
    assert not typo.exists()


def test_frozen_bank_opens_read_only(location, backend):
    loc = location()
    with CaseBank(loc, HashingEmbedder(dim=32)) as bank:
        case = bank.add("Who founded Acme?", "1. search", reward=1.0)
    before = (loc / DB_NAME).read_bytes() if backend == "sqlite" else None
    frozen = CaseBank(loc, HashingEmbedder(dim=32), frozen=True)
    assert [c.id for c, _ in frozen.retrieve("Acme founder", k=2)] == [case.id]
    with pytest.raises(DatabaseError, match="readonly|read-only"):
        frozen._store.db.execute("CREATE TABLE probe (x TEXT)")  # the connection itself refuses writes
    with pytest.raises(MemoryFrozenError):
        frozen.add("another", "plan", reward=0.0)
    frozen.close()
    if backend == "sqlite":
        assert (loc / DB_NAME).read_bytes() == before


# -- 4. a corrupt cases.db is one typed line --------------------------------------------------------------------


def test_corrupt_case_bank_is_a_one_line_case_bank_error(tmp_path):
    bank_dir = tmp_path / "mem" / "cbr"
    bank_dir.mkdir(parents=True)
    garbage = b"this is not a sqlite database\n" * 200
    (bank_dir / DB_NAME).write_bytes(garbage)
    for frozen in (False, True):
        with pytest.raises(CaseBankError, match="not a usable case bank") as err:
            CaseBank(bank_dir, HashingEmbedder(dim=16), frozen=frozen)
        assert _one_line(str(err.value))
    with pytest.raises(CaseBankError, match="not a usable case bank"):
        StoredEmbedder.of(bank_dir)
    result = CliRunner().invoke(app, ["memory", "qgate-stats", "--memory", str(tmp_path / "mem")])
    assert result.exit_code == 1 and "not a usable case bank" in result.output and _one_line(result.output)
    assert (bank_dir / DB_NAME).read_bytes() == garbage  # the file is left as it was


# -- 6. copies, empty cases, diff counting ----------------------------------------------------------------------


def test_shallow_copy_is_the_same_bank_and_empty_task_text_is_refused(tmp_path):
    bank = CaseBank(tmp_path, HashingEmbedder(dim=16))
    assert copy.copy(bank) is bank and copy.deepcopy(bank) is bank
    for text in ("", "   \n"):
        with pytest.raises(CaseBankError, match="non-empty task_text"):
            bank.add(text, "1. search", reward=1.0)
    with pytest.raises(CaseBankError, match="non-empty task_text"):
        bank.add_many([{"task_text": "fine", "plan": "p", "reward": 1.0}, {"task_text": "", "plan": "p", "reward": 0}])
    assert len(bank) == 0  # nothing of the refused batch was stored


def test_diff_counts_support_only_changes_as_modified(tmp_path):
    memory = MementoMemory(tmp_path / "mem")
    with memory.transaction(batch=1) as tx:
        rule = memory.web_action.add("Search the company name in quotes.", provenance=["t1"], batch=1, tx=tx)
    memory.commit_version(batch=1)
    with memory.transaction(batch=2) as tx:
        memory.web_action.reinforce(rule.id, support=2, batch=2, tx=tx)
    memory.commit_version(batch=2)
    d = memory.diff(1, 2).stores["web_action"]
    assert d.modified == [rule.id] and d.chars_modified == 0 and not d.added and not d.removed
    assert memory.diff(1, 1).stores["web_action"].modified == []
    memory.db.close()
    result = CliRunner().invoke(app, ["memory", "diff", "1", "2", "--memory", str(tmp_path / "mem")])
    assert result.exit_code == 0, result.output
    assert f"~ web_action {rule.id}: Search the company name in quotes. (support 0 -> 2)" in result.output
    assert "support, contradiction or status" in " ".join(result.output.split())
