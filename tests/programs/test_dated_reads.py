"""The cutoff in the read paths of a run: MEMENTO's view records what it shows and what it hides, the session memory
hides answers resting on late pages, the web tools count what the undated policy drops, and the one undated policy
reaches every program build_program makes."""

from __future__ import annotations

import datetime as dt
from typing import Any

from memento.core.config import load_settings
from memento.core.dating import DateFilter
from memento.core.types import DatingRecord, Evidence, EvidenceRecord, SearchResults, SourcePage, SourceRun
from memento.memory.memento_memory import MementoMemory
from memento.programs.registry import build_program
from memento.programs.session_memory import SessionMemory
from memento.tasks.task import get_task
from memento.testing import build_corpus
from memento.web.web_tools import WebTools

D2001, D2003, D2007 = dt.date(2001, 5, 1), dt.date(2003, 1, 1), dt.date(2007, 6, 1)


def _ev(day: dt.date | None) -> EvidenceRecord:
    return EvidenceRecord.of([SourcePage(url="https://a.org/p", published=day)], [SourceRun(task_id="t")])


def test_the_view_records_every_item_shown_with_its_date_and_what_each_store_hid(tmp_path) -> None:
    memory = MementoMemory(tmp_path)
    with memory.transaction(batch=1) as tx:
        memory.facts.add("Nile", "The Nile is long (2001).", evidence=_ev(D2001), tx=tx)
        memory.facts.add("Nile", "The Nile floods (2007).", evidence=_ev(D2007), tx=tx)
        memory.web_action.add("Search the river's name.", support=2, evidence=_ev(D2007), tx=tx)
        memory.craft.add("Read the atlas first.", tx=tx)  # undated
    dating = DatingRecord(cutoff=D2003)
    view = memory.view(exclude_task_id="q", dates=DateFilter.of(D2003), dating=dating)
    assert "(2001)" in view.known_facts("How long is the Nile?") and "(2007)" not in view.known_facts("Nile")
    assert view.web_action_rules("Nile") == ""
    assert view.search("Nile floods") == ["[Nile] The Nile is long (2001)."]  # search_memory: 2007 is no candidate
    assert "Read the atlas first." in view.craft_knowledge("Nile atlas")
    shown = {(s.store, s.dated) for s in dating.shown}
    assert shown == {("facts", D2001), ("craft", None)}
    assert dating.hidden == {"facts": 1, "web_action": 1}
    dropped = DatingRecord(cutoff=D2003)
    memory.view(dates=DateFilter.of(D2003, "drop"), dating=dropped).craft_knowledge("Nile atlas")
    assert dropped.shown == [] and dropped.undated_dropped == {"craft": 1}


def test_session_memory_hides_answers_resting_on_pages_its_task_may_not_see() -> None:
    dating = DatingRecord(cutoff=D2003)
    session = SessionMemory(dates=DateFilter.of(D2003, "drop"), dating=dating)
    session.add("n1", "Nile length?", "6,650 km", [Evidence(url="https://a.org/old", published=D2001)])
    session.add("n2", "Nile floods?", "every year", [Evidence(url="https://a.org/new", published=D2007)])
    session.add("n3", "Nile source?", "Lake Victoria", [Evidence(url="https://a.org/undated")])
    assert [e.node_id for e in session.entries()] == ["n1"]
    assert [e.node_id for e in session.search("Nile floods")] == ["n1"] and "every year" not in session.render()
    assert dating.hidden == {"session": 1} and dating.undated_dropped == {"session": 1}


def test_web_tools_count_what_the_undated_policy_drops_and_still_fill_k(tmp_path) -> None:
    docs = [
        {"url": "https://u.org/1", "title": "Nile undated", "text": "nile river nile"},
        {"url": "https://d.org/1", "title": "Nile dated", "text": "nile river", "published": "2001-01-01"},
        {"url": "https://d.org/2", "title": "Nile later", "text": "nile", "published": "2002-01-01"},
    ]
    corpus = build_corpus(docs, tmp_path)
    keep = WebTools(corpus, cutoff=D2003, undated="keep", k=2)
    kept = keep.search("nile river")
    assert isinstance(kept, SearchResults)
    assert {h.url for h in kept.hits} == {"https://u.org/1", "https://d.org/1"}
    drop = WebTools(corpus, cutoff=D2003, undated="drop", k=2)
    dropped = drop.search("nile river")
    assert isinstance(dropped, SearchResults)
    assert {h.url for h in dropped.hits} == {"https://d.org/1", "https://d.org/2"}  # k filled
    assert drop.open("https://u.org/1").type == "error"
    assert drop.counts()["undated_dropped"] == 2 and keep.counts()["undated_dropped"] == 0


def test_build_program_gives_every_program_the_one_undated_policy(tmp_path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"title": "x", "text": "y"}\n', encoding="utf-8")
    flags: dict[str, dict[str, Any]] = {
        "web": {"corpus": str(corpus), "undated": "drop"},
        "memory": {"cutoff_filter": False},
    }
    settings = load_settings(flags=flags)
    for method in ("aet", "react", "closed_book"):
        program = build_program(method, task="multihop", settings=settings)
        assert program.undated == "drop" and program.cutoff_filter is False
    jit = build_program("jitmem", task="multihop", settings=settings, memory_dir=tmp_path / "mem")
    assert jit.undated == "drop" and jit.executor.undated == "drop" and jit.cutoff_filter is False
    default = build_program("aet", task=get_task("multihop"), settings=load_settings(flags={"web": flags["web"] | {
        "undated": None}}))  # fmt: skip
    assert default.undated == "keep"  # not set, no task default
