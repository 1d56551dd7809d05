"""OfflineCorpus: readers, malformed lines, persistence, atomic rebuilds, BM25 ranking and date cutoffs."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from memento.web.errors import AfterCutoff, CorpusError, CorpusFormatError, UndatedRefused
from memento.web.offline_corpus import OfflineCorpus, read_source
from memento.web.search_result import SearchBackend

DOCS = [
    {"doc_id": "d1", "title": "Albany County", "text": "Albany County is a county in New York. Its seat is Albany."},
    {"doc_id": "d2", "title": "Paul Clyne", "text": "Paul Clyne was the District Attorney of Albany County."},
    {"doc_id": "d3", "title": "Cape Verde", "text": "Cape Verde is an island country in the Atlantic Ocean."},
    {"doc_id": "d4", "title": "River Thames", "text": "The Thames flows through London to the North Sea."},
]


def write_jsonl(path, rows, extra_lines=()):
    lines = [json.dumps(r) for r in rows] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_build_search_and_get(tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", DOCS)
    corpus = OfflineCorpus.build([src], tmp_path / "idx")
    assert isinstance(corpus, SearchBackend)
    assert len(corpus) == 4 and corpus.report.documents == 4 and corpus.report.skipped == 0
    hits = corpus.search("who was district attorney of Albany County", k=2)
    assert [h.title for h in hits] == ["Paul Clyne", "Albany County"]
    assert hits[0].url == "corpus://d2" and hits[0].source == "offline" and "District Attorney" in hits[0].snippet
    doc = corpus.get("corpus://d3")
    assert doc is not None and doc.text.startswith("Cape Verde")
    assert corpus.get("corpus://nope") is None
    assert corpus.search("the of and", k=5) == []  # stopwords only
    assert corpus.search("zyzzyva", k=5) == []  # unknown word
    reopened = OfflineCorpus(tmp_path / "idx")  # persistent: a later process opens it
    assert [h.url for h in reopened.search("Thames London", k=1)] == ["corpus://d4"]


def test_generic_jsonl_with_urls_dates_and_cutoff(tmp_path):
    rows = [
        {
            "url": "https://news.example/a",
            "title": "Election 2016",
            "text": "The election result in 2016.",
            "published": "2016-11-09",
        },
        {
            "url": "https://news.example/b",
            "title": "Election 2020",
            "text": "The election result in 2020.",
            "published": "2020-11-07T10:00:00Z",
        },
        {"url": "https://news.example/c", "title": "Election essay", "text": "Thoughts about an election result."},
    ]
    corpus = OfflineCorpus.build([write_jsonl(tmp_path / "g.jsonl", rows)], tmp_path / "idx")
    every = {h.url for h in corpus.search("election result", k=10)}
    assert every == {r["url"] for r in rows}
    kept = corpus.search("election result", k=10, before=dt.date(2020, 1, 1))
    assert {h.url for h in kept} == {"https://news.example/a", "https://news.example/c"}
    assert corpus.search("election result", k=10, before="2020-11-07", undated="drop")[0].published == dt.date(
        2016, 11, 9
    )
    assert len(corpus.search("election result", k=10, before="2020-11-08", undated="drop")) == 2
    page = corpus.page("https://news.example/a", before=dt.date(2020, 1, 1))
    assert page.title == "Election 2016" and page.published == dt.date(2016, 11, 9)
    with pytest.raises(AfterCutoff):
        corpus.page("https://news.example/b", before=dt.date(2020, 1, 1))
    with pytest.raises(UndatedRefused):
        corpus.page("https://news.example/c", before=dt.date(2020, 1, 1), undated="drop")
    assert corpus.page("https://elsewhere.example/") is None


def test_wiki_vital_json_and_stable_ids(tmp_path):
    data = {
        "Lisbon": {"title": "Lisbon", "extract": "Lisbon is the capital of Portugal."},
        "Porto": {"title": "Porto", "extract": "Porto is a city in northern Portugal."},
    }
    (tmp_path / "w.json").write_text(json.dumps(data), encoding="utf-8")
    a = OfflineCorpus.build([tmp_path / "w.json"], tmp_path / "a")
    b = OfflineCorpus.build([tmp_path / "w.json"], tmp_path / "b")
    urls_a = [h.url for h in a.search("capital of Portugal", k=2)]
    assert urls_a == [h.url for h in b.search("capital of Portugal", k=2)]  # hash-derived ids are stable
    assert urls_a[0].startswith("corpus://") and getattr(a.get(urls_a[0]), "title", None) == "Lisbon"


def test_malformed_lines_reported_with_file_and_line_and_skipped(tmp_path):
    src = write_jsonl(
        tmp_path / "bad.jsonl",
        DOCS[:2],
        extra_lines=[
            "{not json",
            json.dumps(["a list"]),
            json.dumps({"title": "no text"}),
            json.dumps({"text": "x", "published": "someday"}),
            json.dumps(DOCS[0]),
        ],
    )
    seen: list[str] = []
    corpus = OfflineCorpus.build([src], tmp_path / "idx", on_error=lambda e: seen.append(str(e)))
    assert corpus.report.documents == 2 and corpus.report.skipped == 4 and corpus.report.duplicates == 1
    assert [s.split(": ")[0] for s in seen] == [f"{src}:{n}" for n in (3, 4, 5, 6)]
    assert "invalid JSON" in seen[0] and "missing or empty 'text'" in seen[2] and "unreadable date" in seen[3]
    assert OfflineCorpus(tmp_path / "idx").report.skipped == 4  # the report is kept with the index
    with pytest.raises(CorpusFormatError, match=r"bad\.jsonl:3: invalid JSON"):
        OfflineCorpus.build([src], tmp_path / "strict", strict=True)
    assert not (tmp_path / "strict").exists()  # a failed build leaves nothing behind
    assert not list(tmp_path.glob(".strict.building-*"))


def test_read_source_raises_without_handler(tmp_path):
    src = write_jsonl(tmp_path / "x.jsonl", [], extra_lines=["[]"])
    with pytest.raises(CorpusFormatError, match=r"x\.jsonl:1: expected a JSON object"):
        list(read_source(src))
    with pytest.raises(CorpusError, match="not found"):
        list(read_source(tmp_path / "missing.jsonl"))


def test_rebuild_is_atomic_and_refuses_foreign_dirs(tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", DOCS)
    OfflineCorpus.build([src], tmp_path / "idx")
    write_jsonl(src, DOCS[:1])
    rebuilt = OfflineCorpus.build([src], tmp_path / "idx")
    assert len(rebuilt) == 1 and len(OfflineCorpus(tmp_path / "idx")) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "idx"]  # no temp or old dirs left
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(CorpusError, match="refusing"):
        OfflineCorpus.build([src], foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"
    write_jsonl(tmp_path / "empty.jsonl", [], extra_lines=["oops"])
    with pytest.raises(CorpusError, match="no documents"):
        OfflineCorpus.build([tmp_path / "empty.jsonl"], tmp_path / "idx")
    assert len(OfflineCorpus(tmp_path / "idx")) == 1  # the old index survives a failed rebuild
    with pytest.raises(CorpusError, match="not an offline corpus index"):
        OfflineCorpus(foreign)


def test_deepcopy_shares_the_corpus(tmp_path):
    import copy

    corpus = OfflineCorpus.build([write_jsonl(tmp_path / "c.jsonl", DOCS)], tmp_path / "idx")
    assert copy.deepcopy({"c": corpus})["c"] is corpus


def test_shipped_sample_is_consistent(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples" / "multihop"
    corpus = OfflineCorpus.build([root / "corpus.jsonl"], tmp_path / "idx", strict=True)
    questions = [json.loads(line) for line in (root / "questions.jsonl").read_text().splitlines() if line.strip()]
    assert len(questions) == 12 and 200 <= len(corpus) <= 400
    docs = [corpus.get(f"corpus://{json.loads(x)['doc_id']}") for x in (root / "corpus.jsonl").open()]
    titles = {doc.title for doc in docs if doc is not None}
    for q in questions:
        assert q["answers"] and set(q["gold_titles"]) <= titles
    found = sum(bool(set(q["gold_titles"]) & {h.title for h in corpus.search(q["question"], k=10)}) for q in questions)
    assert found == len(questions)
    assert (root / "ATTRIBUTION.md").read_text().count("CC BY") >= 2
