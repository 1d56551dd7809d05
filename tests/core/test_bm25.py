"""BM25 engines: bm25s (fast default) and rank_bm25 (reference) rank the shipped corpus and a JitMem bank alike,
and the settings ``web.bm25`` / ``jitmem.bm25`` select them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memento.core.config import load_settings
from memento.core.errors import ConfigError
from memento.core.types import Trajectory
from memento.memory.trajectory_bank import TrajectoryBank
from memento.utils.bm25 import RankBM25Scorer, check_engine
from memento.web.offline_corpus import OfflineCorpus, tokenize

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "multihop"


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "idx"
    OfflineCorpus.build([EXAMPLES / "corpus.jsonl"], out)
    return out


def _questions() -> list[dict]:
    return [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text().splitlines() if line.strip()]


def test_reference_engine_ranks_the_shipped_corpus_like_bm25s(corpus_dir: Path) -> None:
    fast = OfflineCorpus(corpus_dir)
    reference = OfflineCorpus(corpus_dir, bm25="rank_bm25")
    assert (fast.bm25, reference.bm25) == ("bm25s", "rank_bm25")
    questions = _questions()
    assert len(questions) >= 10
    overlaps, gold_fast, gold_ref = [], 0, 0
    for q in questions:
        a = fast.search(q["question"], k=10)
        b = reference.search(q["question"], k=10)
        assert a and b
        assert a[0].url == b[0].url, q["question"]  # the best match is the same document
        overlaps.append(len({r.url for r in a[:5]} & {r.url for r in b[:5]}) / 5)
        gold_fast += sum(t in {r.title for r in a} for t in q["gold_titles"])
        gold_ref += sum(t in {r.title for r in b} for t in q["gold_titles"])
    assert np.mean(overlaps) >= 0.9, overlaps
    assert abs(gold_fast - gold_ref) <= 1  # both find the gold paragraphs (recall@10) equally well


def test_reference_scores_are_rank_bm25_over_the_index_tokens(corpus_dir: Path) -> None:
    from rank_bm25 import BM25Okapi

    reference = OfflineCorpus(corpus_dir, bm25="rank_bm25")
    docs = [json.loads(line) for line in (EXAMPLES / "corpus.jsonl").read_text().splitlines() if line.strip()]
    model = BM25Okapi([tokenize(" ".join([d["title"]] * 2 + [d["text"]])) for d in docs])
    terms = tokenize("John Lanchester novelist")
    expected = np.asarray(model.get_scores(terms))
    best = int(np.argmax(expected))
    hit = reference.search("John Lanchester novelist", k=1)[0]
    assert hit.title == docs[best]["title"]


def _traj(task_id: str, text: str) -> Trajectory:
    return Trajectory(task_id=task_id, task_text=text, inputs={"question": text}, method="react")


def test_jitmem_bank_engines_agree_and_only_bm25s_persists_an_index(tmp_path: Path) -> None:
    questions = [q["question"] for q in _questions()]
    texts = questions + [f"{q} (asked again in other words)" for q in questions[:6]]
    fast = TrajectoryBank(tmp_path / "bank")
    for i, text in enumerate(texts):
        fast.add(_traj(f"t{i}", text), accepted=True)
    fast.close()
    reference = TrajectoryBank(tmp_path / "bank", bm25="rank_bm25", read_only=True)
    fast = TrajectoryBank(tmp_path / "bank", read_only=True)
    for q in questions:
        a = fast.retrieve(q, k=3)
        b = reference.retrieve(q, k=3)
        assert a and b and a[0][0].task_id == b[0][0].task_id
        assert b[0][2] > 0
    writable = TrajectoryBank(tmp_path / "other", bm25="rank_bm25")
    writable.add(_traj("x", "Who founded Lyon?"), accepted=True)
    writable.add(_traj("y", "What is the capital of Peru?"), accepted=True)
    writable.add(_traj("z", "Which river crosses Vienna?"), accepted=True)
    assert [t.task_id for t, _, _ in writable.retrieve("founder of Lyon", k=2)] == ["x"]
    writable.close()
    assert not (tmp_path / "other" / "bm25_index").exists()


def test_settings_select_the_engine(tmp_path: Path) -> None:
    from memento.web.factory import make_backend

    settings = load_settings(
        flags={"web": {"corpus": str(EXAMPLES / "corpus.jsonl"), "bm25": "rank_bm25", "cache_dir": str(tmp_path)}}
    )
    backend = make_backend(settings)
    assert isinstance(backend, OfflineCorpus) and backend.bm25 == "rank_bm25"
    default = make_backend(
        load_settings(flags={"web": {"corpus": str(EXAMPLES / "corpus.jsonl"), "cache_dir": str(tmp_path)}})
    )
    assert isinstance(default, OfflineCorpus) and default.bm25 == "bm25s"

    from memento.programs.registry import build_program

    settings = load_settings(flags={"jitmem": {"bm25": "rank_bm25"}, "memory": {"dir": str(tmp_path / "mem")}})
    program = build_program("jitmem", task="qa", settings=settings)
    assert program.bank.bm25 == "rank_bm25"
    with pytest.raises(Exception, match="bm25"):
        load_settings(flags={"web": {"bm25": "lucene"}})


def test_unknown_engine_and_degenerate_corpora() -> None:
    with pytest.raises(ConfigError, match="unknown BM25 engine 'bm25x'"):
        check_engine("bm25x")
    assert RankBM25Scorer([[], []]).get_scores(["a"]).tolist() == [0.0, 0.0]
    assert RankBM25Scorer([]).get_scores(["a"]).tolist() == []
