"""MEMENTO's legal protocol on a small JUSTICE-shaped fixture: the 2010 filter, the leakage filter (drops with their
evidence), the seeded split equal to compare's, resume, and the same split twice."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import dspy
import pytest

from memento.core.config import load_settings
from memento.core.errors import ConfigError, LMUnavailableError
from memento.optimize.compare_data import split_examples
from memento.optimize.legal_protocol import LegalProtocol, case_year
from memento.programs.leakage_probe import LeakageProbe
from memento.tasks.legal import LegalTask
from memento.testing import scripted_lm
from memento.web.factory import web_tools_factory

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from legal_protocol_fixture import make_engine, write_corpus, write_justice  # noqa: E402

KEPT = ["102", "103", "104", "105", "106", "107", "108", "114"]


def _ids(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [row["ID"] for row in csv.DictReader(handle)]


@pytest.fixture
def setup(tmp_path):
    data = write_justice(tmp_path / "justice.csv")
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    settings = load_settings(flags={"web": {"corpus": str(corpus), "cache_dir": str(tmp_path / "cache")}})
    return data, settings


def _protocol(settings, **kw) -> LegalProtocol:
    options: dict[str, Any] = dict(n_train=3, n_test=4, seed=42, threads=2, key={"lm": "scripted"})
    options.update(kw)
    return LegalProtocol(probe=LeakageProbe(web=web_tools_factory(settings), max_steps=4), **options)


def test_keeps_drops_with_evidence_and_splits_as_compare_does(setup, tmp_path):
    data, settings = setup
    engine = make_engine()
    records: list[dict[str, Any]] = []
    with dspy.context(lm=scripted_lm(engine)):
        report = _protocol(settings, on_case=records.append).run(data, tmp_path / "out")
    out = tmp_path / "out"
    # the 2010 filter: terms 2009, 2005 and none are never screened; a blank label is skipped by the loader
    assert _ids(out / "candidates.csv") == ["101", "102", "103", "104", "105", "106", "107", "108", "109", "110", "114"]
    assert report.counts == {"rows": 14, "no_term": 1, "recent": 11, "loaded": 10, "screened_now": 10, "kept": 8,
                             "dropped": 2, "failed": 0}  # fmt: skip
    assert report.skipped == {"blank first_party_winner": 1}
    assert sorted(r["id"] for r in records) == sorted([*KEPT, "101", "109"])
    assert not any("mining lease" in call.prompt for call in engine.calls)  # 2009: before the filter, never read
    # kept.csv: the source's rows, unchanged, in file order
    assert _ids(out / "kept.csv") == KEPT
    with data.open(newline="", encoding="utf-8") as handle:
        source = {row["ID"]: row for row in csv.DictReader(handle)}
    with (out / "kept.csv").open(newline="", encoding="utf-8") as handle:
        assert all(row == source[row["ID"]] for row in csv.DictReader(handle))
    # dropped.jsonl: each drop with the agent's evidence
    dropped = {d["id"]: d for d in map(json.loads, (out / "dropped.jsonl").read_text().splitlines())}
    assert set(dropped) == {"101", "109"}
    harbour = dropped["101"]
    assert harbour["verdict"] == "dropped" and harbour["label"] == "petitioner" and harbour["cutoff"] == "2009-01-01"
    assert harbour["agent"]["found"] is True and harbour["agent"]["winning_party"] == "petitioner"
    assert "ruled for the petitioner" in harbour["agent"]["quote"]
    assert harbour["evidence"]["url"] == "corpus://harbour-ruling" and harbour["evidence"]["published"] == "2008-05-01"
    assert harbour["queries"] == ["harbour permit"] and harbour["pages"] == ["corpus://harbour-ruling"]
    assert harbour["reason"] == "retrieved: corpus://harbour-ruling holds the quoted decision"
    assert dropped["109"]["evidence"]["url"] == "corpus://tax-credit-note"  # a snippet before the cutoff suffices
    journal = {r.get("id"): r for r in map(json.loads, (out / "screening.jsonl").read_text().splitlines())}
    assert journal["102"]["reason"] == "the agent found no page stating the decision"
    assert journal["103"]["reason"] == "the agent reported the respondent as the winner; the petitioner won"
    assert journal["104"]["reason"] == "the agent named the winner, but no page it read holds the sentence it quoted"
    # the split: what `memento compare --data kept.csv --n-train 3 --n-test 4 --seed 42` makes, rows in its order
    train, test = split_examples(LegalTask().load(out / "kept.csv"), n_train=3, n_test=4, seed=42)
    assert _ids(out / "train.csv") == [ex.id for ex in train] == report.train
    assert _ids(out / "test.csv") == [ex.id for ex in test] == report.test
    assert not set(report.train) & set(report.test) and set(report.train) | set(report.test) <= set(KEPT)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["split"]["train_ids"] == report.train and summary["split"]["seed"] == 42
    assert summary["split"]["same_as"].endswith("--n-train 3 --n-test 4 --seed 42")
    assert "January 1st of (term - 5)" in summary["rules"]["cutoff"] and summary["key"]["lm"] == "scripted"
    assert summary["usage_this_run"]["lm_calls"] == len(engine.calls)


def test_seed_42_gives_the_same_split_twice_and_a_rerun_resumes(setup, tmp_path):
    data, settings = setup
    engine = make_engine()
    with dspy.context(lm=scripted_lm(engine)):
        first = _protocol(settings).run(data, tmp_path / "a")
        calls = len(engine.calls)
        again = _protocol(settings).run(data, tmp_path / "a")  # resumes the journal: nothing screened twice
        assert len(engine.calls) == calls and again.counts["screened_now"] == 0
        other = _protocol(settings).run(data, tmp_path / "b")  # from scratch, elsewhere
        seven = _protocol(settings, seed=7).run(data, tmp_path / "c")
    for name in ("kept.csv", "dropped.jsonl", "train.csv", "test.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert first.train == again.train == other.train and first.test == again.test == other.test
    assert (seven.train, seven.test) != (first.train, first.test)  # the seed decides the split


def test_a_failed_case_is_left_out_then_screened_again(setup, tmp_path):
    data, settings = setup
    broken = {"water rights"}  # this case's replies cannot be parsed, until it is fixed
    engine = make_engine(first=[{"predicate": lambda c: any(k in c.prompt for k in broken), "raw": "no fields"}])
    with dspy.context(lm=scripted_lm(engine)):
        report = _protocol(settings, threads=1).run(data, tmp_path / "out")
        assert report.failed == ["106"] and report.counts["kept"] == 7 and "106" not in _ids(tmp_path / "out/kept.csv")
        lines = (tmp_path / "out" / "screening.jsonl").read_text().splitlines()
        failed = next(r for r in map(json.loads, lines) if r.get("id") == "106")
        assert failed["verdict"] == "failed" and "AdapterParseError" in failed["error"]
        broken.clear()
        again = _protocol(settings, threads=1).run(data, tmp_path / "out")
    assert again.counts["screened_now"] == 1 and again.failed == [] and _ids(tmp_path / "out" / "kept.csv") == KEPT


def test_a_split_larger_than_the_kept_cases_is_reported_not_written(setup, tmp_path):
    data, settings = setup
    with dspy.context(lm=scripted_lm(make_engine())):
        report = _protocol(settings, n_train=60, n_test=120).run(data, tmp_path / "out")
    assert report.split_error == "asked for 60 train + 120 test examples but the data has only 8"
    assert _ids(tmp_path / "out" / "kept.csv") == KEPT
    assert not (tmp_path / "out" / "train.csv").exists() and not (tmp_path / "out" / "test.csv").exists()


def test_other_settings_do_not_resume_a_journal(setup, tmp_path):
    data, settings = setup
    with dspy.context(lm=scripted_lm(make_engine())):
        _protocol(settings).run(data, tmp_path / "out", limit=4)
        with pytest.raises(ConfigError, match=r"screened with other settings \(lm: 'scripted' != 'other'\).*--fresh"):
            _protocol(settings, key={"lm": "other"}).run(data, tmp_path / "out", limit=4)
        fresh = _protocol(settings, key={"lm": "other"}).run(data, tmp_path / "out", limit=4, fresh=True)
    assert fresh.counts["screened_now"] == fresh.counts["loaded"] == 4


def test_an_unreachable_lm_stops_the_run_and_keeps_the_finished_cases(setup, tmp_path):
    data, settings = setup
    from dspy.utils.exceptions import LMTransportError

    def down(call):
        raise LMTransportError("connection refused", model="scripted/test")

    engine = make_engine(first=[{"predicate": lambda c: "copyright music" in c.prompt, "raw": down}])
    with dspy.context(lm=scripted_lm(engine, num_retries=0)), pytest.raises(LMUnavailableError, match="unreachable"):
        _protocol(settings, threads=1).run(data, tmp_path / "out")
    lines = (tmp_path / "out" / "screening.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines[1:]] == ["101", "102", "103", "104", "105", "106"]


def test_case_year_counts_a_range_by_its_last_year():
    assert [case_year(t) for t in ("2010", "2009-2010", "1789-1850", "n/a")] == [2010, 2010, 1850, None]
