"""Dated memory in every store: the evidence record and its date, the cutoff filter applied before top-K (SQL in
the MEMENTO stores, FAISS ID selection in the case bank, a score mask in the trajectory bank), hidden counts,
tombstones (each on both backends), and old SQLite stores that load with their items undated."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3

import pytest

from memento.core.dating import DateFilter, run_evidence, trajectory_evidence
from memento.core.types import (
    EvidenceRecord,
    PageResult,
    SearchHit,
    SearchResults,
    SourcePage,
    SourceRun,
    ToolCall,
    Trajectory,
)
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory
from memento.memory.sqlite_store import SQLiteStore
from memento.memory.trajectory_bank import TrajectoryBank

D2001, D2003, D2007, D2008 = dt.date(2001, 5, 1), dt.date(2003, 1, 1), dt.date(2007, 6, 1), dt.date(2008, 1, 1)


def _ev(published: dt.date | None, cutoff: dt.date | None = D2008, url: str = "https://a.org/p") -> EvidenceRecord:
    return EvidenceRecord.of([SourcePage(url=url, published=published)], [SourceRun(task_id="t", cutoff=cutoff)])


# -- the evidence record and its date -------------------------------------------------------------------------
def test_evidence_date_is_the_newest_page_an_undated_page_counting_as_the_run_cutoff() -> None:
    run = [SourceRun(task_id="t1", cutoff=D2008)]
    both = EvidenceRecord.of([SourcePage(url="a", published=D2001), SourcePage(url="b", published=D2007)], run)
    assert both.dated == D2007
    assert EvidenceRecord.of([SourcePage(url="a", published=D2001), SourcePage(url="b")], run).dated == D2008
    assert EvidenceRecord.of([], run).dated == D2008  # no page: the cutoff of the task that learned it
    assert EvidenceRecord.of([SourcePage(url="a")], [SourceRun(task_id="t")]).dated is None  # nothing bounds it
    assert EvidenceRecord.of([SourcePage(url="a", published=D2001)], [SourceRun(task_id="t")]).dated == D2001
    assert EvidenceRecord().dated is None  # an item stored before items were dated
    merged = _ev(D2001).merged(_ev(D2007, url="https://b.org/q"))
    assert merged.dated == D2007 and merged.urls == ["https://a.org/p", "https://b.org/q"]
    again = EvidenceRecord.model_validate_json(merged.model_dump_json())
    assert again == merged and again.dated == D2007


def test_evidence_names_a_url_or_a_domain() -> None:
    record = EvidenceRecord.of([SourcePage(url="https://www.Evil.org/a/"), SourcePage(url="corpus://doc-1")])
    assert record.names("evil.org") and record.names("https://evil.org/a") and record.names("EVIL.org")
    assert not record.names("org.evil") and not record.names("https://evil.org/b") and not record.names("vil.org")
    assert record.names("doc-1")


def test_run_evidence_reads_opened_pages_and_trajectory_evidence_every_page_held() -> None:
    traj = Trajectory(task_text="q", task_id="t9", cutoff=D2008)
    traj.tool_calls.append(
        ToolCall(
            kind="search_web",
            search=SearchResults(query="q", hits=[SearchHit(url="https://s.org/hit", published=D2007)]),
        )
    )
    traj.tool_calls.append(ToolCall(kind="scrape", page=PageResult.of_text(url="https://p.org/x", text="t")))
    assert run_evidence(traj).urls == ["https://p.org/x"] and run_evidence(traj).dated == D2008
    held = trajectory_evidence(traj)
    assert held.urls == ["https://p.org/x", "https://s.org/hit"] and held.task_ids == ["t9"]


def test_date_filter_rule_and_sql() -> None:
    keep, drop = DateFilter.of("2003-01-01"), DateFilter.of(D2003, "drop")
    assert keep.admits(D2001) and not keep.admits(D2003) and keep.admits(None)
    assert drop.verdict(None) == "undated" and drop.verdict(D2007) == "after" and drop.verdict(D2001) is None
    assert DateFilter.of(D2003, enabled=False).admits(D2008)  # switched off: everything passes
    assert not DateFilter.of(None).active and DateFilter.of(None).admits(D2008)
    assert drop.sql("d") == ("(d IS NOT NULL AND d < ?)", ["2003-01-01"])


# -- MEMENTO's stores --------------------------------------------------------------------------------------------
def test_memento_stores_filter_before_top_k_and_count_what_they_hide(location) -> None:
    memory = MementoMemory(location("mem"))
    with memory.transaction(batch=1) as tx:
        for i in range(8):  # the late facts win every ranking (more support) ...
            fact = memory.facts.new_fact("Albany", f"Albany late fact {i}", evidence=_ev(D2007, url=f"https://l/{i}"))
            memory.facts.put(fact.model_copy(update={"support": 9}), tx=tx)
            memory.web_action.add(f"Late rule {i} about Albany", support=9, evidence=_ev(D2007), tx=tx)
        for i in range(3):  # ... the early ones are what a 2003 task may see
            memory.facts.add("Albany", f"Albany early fact {i}", evidence=_ev(D2001, url=f"https://e/{i}"), tx=tx)
            memory.web_action.add(f"Early rule {i} about Albany", support=1, evidence=_ev(D2001), tx=tx)
        memory.craft.add("An undated insight about Albany", tx=tx)  # no evidence: undated
    memory.commit_version(batch=1)
    keep = DateFilter.of(D2003, "keep")
    found = memory.facts.search_facts("Albany", 3, dates=keep)
    assert sorted(f.text for f in found) == [f"Albany early fact {i}" for i in range(3)]
    assert len(memory.facts.search_facts("Albany", 3)) == 3  # unfiltered: the late ones
    assert all(f.evidence.dated == D2007 for f in memory.facts.search_facts("Albany", 3))
    rules = memory.web_action.select("Albany", budget_tokens=10_000, pool=3, dates=keep)
    assert sorted(r.text for r in rules) == [f"Early rule {i} about Albany" for i in range(3)]
    assert memory.db.hidden_counts("facts", keep) == (8, 0)
    assert memory.db.hidden_counts("craft", DateFilter.of(D2003, "drop")) == (0, 1)
    assert [e.text for e in memory.craft.all(dates=keep)] == ["An undated insight about Albany"]
    assert memory.craft.all(dates=DateFilter.of(D2003, "drop")) == []
    rows = {row["id"]: row["dated"] for row in memory.db.items("facts")}
    assert sorted(set(rows.values())) == ["2001-05-01", "2007-06-01"]


def _schema1(path) -> None:
    """A memory.db as schema 1 wrote it (no ``dated`` column), with one fact."""
    path.mkdir(parents=True)
    conn = sqlite3.connect(path / "memory.db")
    conn.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE items (rowid INTEGER PRIMARY KEY AUTOINCREMENT, store TEXT NOT NULL, id TEXT NOT NULL,
            text TEXT NOT NULL DEFAULT '', entity TEXT NOT NULL DEFAULT '', status TEXT NOT NULL DEFAULT 'active',
            weight REAL NOT NULL DEFAULT 0, batch INTEGER NOT NULL DEFAULT 0, tasks TEXT NOT NULL DEFAULT '',
            data TEXT NOT NULL, UNIQUE (store, id));
        CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, batch INTEGER, op TEXT NOT NULL,
            store TEXT NOT NULL, item_id TEXT NOT NULL, before TEXT, after TEXT, at TEXT NOT NULL);
        CREATE TABLE versions (version INTEGER PRIMARY KEY, parent INTEGER, batch INTEGER, end_seq INTEGER NOT NULL,
            note TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'committed');
        CREATE TABLE checkpoints (key TEXT PRIMARY KEY, version INTEGER, value TEXT NOT NULL);
        CREATE VIRTUAL TABLE fts_facts USING fts5(text, entity, content='', tokenize='porter unicode61');
        INSERT INTO meta VALUES ('schema_version', '1'), ('head_version', '1');
        INSERT INTO versions VALUES (1, NULL, 1, 1, 'batch 1', '2024-01-01', 'committed');
        """
    )
    data = {"id": "f-old", "entity": "Dune", "text": "Dune was written by Frank Herbert.", "sources": [], "batch": 1,
            "superseded_by": None, "support": 1, "provenance": ["q1"]}  # fmt: skip
    conn.execute(
        "INSERT INTO items (store, id, text, entity, data) VALUES ('facts', 'f-old', ?, 'Dune', ?)",
        (data["text"], json.dumps(data)),
    )
    conn.execute("INSERT INTO fts_facts (rowid, text, entity) VALUES (1, ?, 'Dune')", (data["text"],))
    conn.commit()
    conn.close()


def test_an_old_memory_loads_read_only_and_migrated_with_its_items_undated(tmp_path) -> None:
    _schema1(tmp_path / "old")
    frozen = MementoMemory(tmp_path / "old", read_only=True)  # nothing written: every item reads as undated
    assert frozen.db.dated_column == "NULL"
    assert [f.id for f in frozen.facts.search_facts("Dune", 5, dates=DateFilter.of(D2003, "keep"))] == ["f-old"]
    assert frozen.facts.search_facts("Dune", 5, dates=DateFilter.of(D2003, "drop")) == []
    assert frozen.db.hidden_counts("facts", DateFilter.of(D2003, "drop")) == (0, 1)
    frozen.close()
    db = SQLiteStore(tmp_path / "old")  # a writable open migrates: schema 3, the column added, the item undated
    assert db.meta("schema_version") == "3" and db.dated_column == "dated"
    assert [row["dated"] for row in db.items("facts")] == [None]
    assert db.hidden_counts("facts", DateFilter.of(D2003, "drop")) == (0, 1)
    db.close()
    memory = MementoMemory(tmp_path / "old")
    fact = memory.facts.get("f-old")
    assert fact is not None and fact.evidence.empty and memory.version == 1


# -- the case bank ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["cosine", "q"])
def test_case_bank_filters_inside_faiss_so_k_eligible_cases_come_back(location, policy) -> None:
    bank = CaseBank(location("cbr"), HashingEmbedder(dim=64), prefilter=4)
    late = [bank.add(f"founder of the Acme corporation {i}", "plan", 1.0, evidence=_ev(D2007)) for i in range(12)]
    early = [bank.add(f"Acme history question {i}", "plan", 1.0, evidence=_ev(D2001)) for i in range(4)]
    undated = bank.add("founder of the Acme corporation, no date", "plan", 1.0)
    query = "founder of the Acme corporation"
    assert {c.id for c, _ in bank.retrieve(query, k=4, policy=policy)} <= {c.id for c in [*late, undated]}
    keep = DateFilter.of(D2003, "keep")
    got = {c.id for c, _ in bank.retrieve(query, k=5, policy=policy, dates=keep)}
    assert got == {c.id for c in [*early, undated]}
    drop = DateFilter.of(D2003, "drop")
    assert {c.id for c, _ in bank.retrieve(query, k=4, policy=policy, dates=drop)} == {c.id for c in early}
    assert bank.hidden_counts(keep) == (12, 0) and bank.hidden_counts(drop) == (12, 1)
    assert bank.get(early[0].id).evidence.dated == D2001


def test_case_bank_forget_tombstones_and_logs(location) -> None:
    bank = CaseBank(location("cbr"), HashingEmbedder(dim=64))
    a = bank.add("Who founded Acme?", "plan a", 1.0, evidence=_ev(D2001, url="https://evil.org/x"))
    b = bank.add("Who founded Initech?", "plan b", 1.0)
    assert bank.forget([a.id, "case-unknown"], reason="source evil.org") == [a.id]
    assert bank.forget([a.id], reason="again") == []  # a tombstone is final
    assert [c.id for c, _ in bank.retrieve("Who founded Acme?", k=4)] == [b.id]
    assert len(bank) == 1 and [c["case_id"] for c in bank.changes()] == [a.id]
    assert bank.changes()[0]["reason"] == "source evil.org" and bank.changes()[0]["op"] == "forget"
    bank.close()
    again = CaseBank(location("cbr"), HashingEmbedder(dim=64), frozen=True)  # a new index caught up (on disk too)
    assert [c.id for c, _ in again.retrieve("Who founded Acme?", k=4)] == [b.id]


def test_an_old_case_bank_loads_with_its_cases_undated(tmp_path) -> None:
    bank = CaseBank(tmp_path / "cbr", HashingEmbedder(dim=32))
    case = bank.add("Who founded Acme?", "plan", 1.0)
    bank.close()
    conn = sqlite3.connect(tmp_path / "cbr" / "cases.db")  # back to the first layout: no dated columns
    for column in ("dated", "evidence", "forgotten_at"):
        conn.execute("DROP INDEX IF EXISTS cases_dated")
        conn.execute(f"ALTER TABLE cases DROP COLUMN {column}")
    conn.commit()
    conn.close()
    frozen = CaseBank(tmp_path / "cbr", HashingEmbedder(dim=32), frozen=True)
    assert frozen.get(case.id).evidence.empty
    assert [c.id for c, _ in frozen.retrieve("Acme", k=2, dates=DateFilter.of(D2003, "keep"))] == [case.id]
    assert frozen.retrieve("Acme", k=2, dates=DateFilter.of(D2003, "drop")) == []
    frozen.close()
    writable = CaseBank(tmp_path / "cbr", HashingEmbedder(dim=32))  # migrated
    assert writable.hidden_counts(DateFilter.of(D2003, "drop")) == (0, 1)


# -- the trajectory bank ---------------------------------------------------------------------------------------
def _traj(text: str, task_id: str, published: dt.date | None, *, url: str = "https://a.org/p") -> Trajectory:
    traj = Trajectory(task_text=text, task_id=task_id, cutoff=D2008)
    traj.tool_calls.append(ToolCall(kind="scrape", page=PageResult.of_text(url=url, text=text, published=published)))
    return traj


def test_trajectory_bank_masks_scores_before_top_k_and_tombstones(location) -> None:
    bank = TrajectoryBank(location("jit"), bm25="rank_bm25")
    for i in range(6):
        bank.add(_traj(f"founder of Acme corporation case {i}", f"late{i}", D2007), accepted=True)
    for i in range(2):
        bank.add(_traj(f"Acme question {i}", f"early{i}", D2001, url="https://evil.org/x"), accepted=True)
    for i in range(24):  # unrelated tasks, so the query's words are rare enough to score (BM25 idf)
        bank.add(_traj(f"rainfall in Lima during {1980 + i}", f"rain{i}", D2001), accepted=True)
    keep = DateFilter.of(D2003, "keep")
    hits = bank.search("founder of Acme corporation", k=3, dates=keep)
    assert sorted(h.trajectory.task_id for h in hits) == ["early0", "early1"]
    assert all(h.dated == D2001 and h.item_id.startswith("traj-") for h in hits)
    assert len(bank.retrieve("founder of Acme corporation", k=3)) == 3
    assert bank.hidden_counts(keep) == (6, 0)
    entry = next(e for e in bank.entries() if e.task_id == "early0")
    assert entry.evidence.names("evil.org") and entry.dated == D2001
    assert bank.forget([entry.seq], reason="evil.org") == [entry.item_id]
    assert [h.trajectory.task_id for h in bank.search("Acme question", k=3, dates=keep)] == ["early1"]
    assert len(bank) == 31 and bank.get("early0") == [] and bank.changes()[0]["item_id"] == entry.item_id
    assert "Acme question 0" in bank.full_text(entry.seq)


def test_an_old_trajectory_bank_reads_undated(tmp_path) -> None:
    bank = TrajectoryBank(tmp_path / "jit")
    bank.add(_traj("Who founded Acme?", "t1", D2001), accepted=True)
    bank.close()
    conn = sqlite3.connect(tmp_path / "jit" / "trajectories.sqlite3")
    conn.execute("ALTER TABLE trajectories DROP COLUMN dated")
    conn.execute("ALTER TABLE trajectories DROP COLUMN forgotten_at")
    conn.commit()
    conn.close()
    frozen = TrajectoryBank(tmp_path / "jit", read_only=True)
    assert [h.dated for h in frozen.search("Acme", k=2, dates=DateFilter.of(D2003, "keep"))] == [None]
    assert frozen.search("Acme", k=2, dates=DateFilter.of(D2003, "drop")) == []
    assert frozen.hidden_counts(DateFilter.of(D2003, "drop")) == (0, 1)
    frozen.close()
    writable = TrajectoryBank(tmp_path / "jit")  # migrated; the old row stays undated
    assert writable.hidden_counts(DateFilter.of(D2003, "drop")) == (0, 1)
