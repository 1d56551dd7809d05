"""Task registry and the multihop, opinion and sales loaders and metrics."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path

import dspy
import pytest

from memento.core.errors import ConfigError, DataError
from memento.tasks import get_task, task_names
from memento.tasks.sales import months_before


def _jsonl(path: Path, rows: Sequence[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_registry_has_every_task_with_distinct_signatures() -> None:
    assert {"qa", "multihop", "legal", "opinion", "sales"} <= set(task_names())
    signatures = [get_task(name).signature for name in ("qa", "multihop", "legal", "opinion", "sales")]
    assert len({s.__name__ for s in signatures}) == 5
    legal = get_task("legal").signature
    assert legal.output_fields["winning_party"].annotation.__args__ == ("petitioner", "respondent")
    assert get_task("opinion").higher_is_better is False
    with pytest.raises(ConfigError, match="no metric 'bleu'"):
        get_task("opinion").make_metric("bleu")


def test_multihop_loader_drops_docs_and_keeps_labels(tmp_path: Path) -> None:
    rows = [
        {"id": "h1", "question": "Q one?", "answers": ["A"], "gold_titles": ["T"],
         "docs": [{"title": "T", "text": "x"}]},
        {"id": "m1", "question": "Q two?", "answers": "B", "gold_titles": [], "docs": [],
         "decomposition": [{"question": "s1", "answer": "b0"}, {"question": "#1 s2", "answer": "B"}]},
        {"id": "h2", "question": "Q three?", "answers": ["C"]},
    ]  # fmt: skip
    path = _jsonl(tmp_path / "q.jsonl", rows)
    task = get_task("multihop")
    examples = task.load(path, limit=2)
    assert len(examples) == 2
    assert examples[0].inputs().toDict() == {"question": "Q one?"}
    assert "docs" not in examples[0] and examples[0].gold_titles == ["T"]
    assert examples[1].answers == ["B"] and examples[1].decomposition[1]["answer"] == "B"
    f1 = task.metric(examples[0], dspy.Prediction(answer="A"))
    assert f1.score == 1.0
    em = task.make_metric("em")(examples[1], dspy.Prediction(answer="B b"))
    assert em.score == 0.0 and em.f1 == pytest.approx(2 / 3)


def test_multihop_loader_errors_name_the_line(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "q.jsonl", [{"question": "ok", "answers": ["a"]}, "{not json", {"answers": ["a"]}])
    with pytest.raises(DataError, match=r"q.jsonl:2"):
        get_task("multihop").load(path)
    path = _jsonl(tmp_path / "r.jsonl", [{"question": "ok", "answers": []}])
    with pytest.raises(DataError, match="non-empty answers"):
        get_task("multihop").load(path)


def test_opinion_loader_and_metric(tmp_path: Path) -> None:
    rows = [
        {"id": "o1", "question": "Spending on space?", "options": ["Too little", "About right", "Too much"],
         "subgroup": "Liberals", "distribution": {"Too little": 20, "About right": 50, "Too much": 30}},
        {"question": "Q2", "options": ["Yes", "No"], "subgroup": "All", "distribution": [0.25, 0.75],
         "cutoff": "2022-01-01"},
    ]  # fmt: skip
    task = get_task("opinion")
    examples = task.load(_jsonl(tmp_path / "o.jsonl", rows))
    assert examples[0].distribution == pytest.approx({"Too little": 0.2, "About right": 0.5, "Too much": 0.3})
    assert set(examples[0].inputs().keys()) == {"question", "options", "subgroup"}
    assert task.cutoff(examples[1]) == dt.date(2022, 1, 1)
    pred = dspy.Prediction(distribution={"too little": 0.5, "About right": 0.5, "Nonsense": 3})
    result = task.metric(examples[0], pred)
    # repaired p = (0.5, 0.5, eps) -> TVD = (0.3 + 0 + 0.3) / 2
    assert result.tvd == pytest.approx(0.3, abs=1e-5) and result.score == pytest.approx(0.7, abs=1e-5)
    assert "Spending on space?" in task.task_text(examples[0])


@pytest.mark.parametrize(
    "row, message",
    [
        ({"question": "q", "options": ["a"], "subgroup": "s", "distribution": [1]}, "at least two"),
        ({"question": "q", "options": ["a", "b"], "subgroup": "s", "distribution": {"c": 1}}, "unknown options"),
        ({"question": "q", "options": ["a", "b"], "subgroup": "s", "distribution": [1]}, "2 options"),
        ({"question": "q", "options": ["a", "b"], "subgroup": "s", "distribution": {"a": -1}}, "invalid share"),
        ({"question": "q", "options": ["a", "b"], "subgroup": "s", "distribution": [0, 0]}, "all zeros"),
        ({"question": "q", "options": ["a", "b"], "subgroup": "s"}, "not an opinion row"),
    ],
)
def test_opinion_loader_rejects_bad_rows(tmp_path: Path, row: dict, message: str) -> None:
    with pytest.raises(DataError, match=message):
        get_task("opinion").load(_jsonl(tmp_path / "o.jsonl", [row]))


def test_sales_loader_cutoff_and_text(tmp_path: Path) -> None:
    rows = [
        {"id": "s1", "seller": {"name": "Acme", "about": "data platform"}, "products": ["Stream", "Lake"],
         "customer": "Globex", "date": "2024-08-31",
         "value_propositions": [{"pain_point": "late data", "mechanism": "Stream", "evidence": "press"}, "cost"]},
        {"seller": "S", "products": "P", "customer": "C", "value_propositions": [{"pain_point": "p"}],
         "cutoff": "2023-01-01"},
    ]  # fmt: skip
    task = get_task("sales")
    first, second = task.load(_jsonl(tmp_path / "s.jsonl", rows))
    assert first.cutoff == "2024-02-29" and task.cutoff(first) == dt.date(2024, 2, 29)
    assert set(first.inputs().keys()) == {"seller", "products", "customer", "cutoff"}
    assert first.seller == "name: Acme; about: data platform" and first.products == "- Stream\n- Lake"
    assert first.value_propositions[1] == {"pain_point": "cost", "mechanism": "", "evidence": ""}
    assert second.cutoff == "2023-01-01" and set(second.inputs().keys()) == {"seller", "products", "customer", "cutoff"}
    bad = _jsonl(tmp_path / "b.jsonl", [{"seller": "S", "products": "P", "customer": "C", "value_propositions": []}])
    with pytest.raises(DataError, match="non-empty"):
        task.load(bad)


def test_sales_cutoff_is_six_months_before_the_publication_date_and_an_undated_story_is_refused(tmp_path: Path):
    row = {"seller": "S", "products": "P", "customer": "C", "value_propositions": ["p"]}
    task = get_task("sales")
    stories = [
        {**row, "published": "2024-05-17"},
        {**row, "date": "2023-08-31T09:30:00Z"},
        {**row, "cutoff": "2020-01-01"},
    ]
    published, dated, own = task.load(_jsonl(tmp_path / "s.jsonl", stories))
    assert (published.date, published.cutoff) == ("2024-05-17", "2023-11-17")  # six months before, as MEMENTO §4.1
    assert (dated.date, dated.cutoff) == ("2023-08-31", "2023-02-28")
    assert own.cutoff == "2020-01-01" and "date" not in own  # the user's cutoff, no date needed
    assert task.cutoff(published) == dt.date(2023, 11, 17) and "cutoff" in published.inputs().keys()
    undated = _jsonl(tmp_path / "u.jsonl", [{**row, "published": "2024-05-17"}, row])
    with pytest.raises(
        DataError, match=r"u.jsonl:2: no publication date: the search cutoff is 6 months before"
    ) as info:
        task.load(undated)
    assert "\n" not in str(info.value) and '"published": "YYYY-MM-DD"' in str(info.value)
    with_option = get_task("sales", cutoff="2022-06-30").load(undated)  # the user set a cutoff for undated rows
    assert [ex.cutoff for ex in with_option] == ["2023-11-17", "2022-06-30"]
    assert get_task("sales", cutoff_months=3).load(undated, limit=1)[0].cutoff == "2024-02-17"
    bad_rows = [
        ({**row, "published": "last May"}, "published 'last May'"),
        ({**row, "cutoff": "soon"}, "cutoff 'soon'"),
    ]
    for bad_row, what in bad_rows:
        with pytest.raises(DataError, match=f"b.jsonl:1: {what} is not a date YYYY-MM-DD"):
            task.load(_jsonl(tmp_path / "b.jsonl", [bad_row]))
    with pytest.raises(ConfigError, match="the sales cutoff must be a date"):
        get_task("sales", cutoff="next year")


def test_months_before() -> None:
    assert months_before(dt.date(2024, 8, 31), 6) == dt.date(2024, 2, 29)
    assert months_before(dt.date(2024, 3, 15), 6) == dt.date(2023, 9, 15)
    assert months_before(dt.date(2023, 1, 31), 1) == dt.date(2022, 12, 31)


def test_every_task_runs_through_a_program_and_its_metric(tmp_path: Path, lm, engine) -> None:
    """Each task's signature is usable by a real program (ClosedBook) and its metric scores the output."""
    from memento.programs.baselines import ClosedBook

    engine.overrides.update(
        distribution={"Yes": 0.25, "No": 0.75},
        value_propositions=[{"pain_point": "late data", "mechanism": "Stream", "evidence": "press"}],
        winning_party="respondent",
        score=4,
    )
    cases = {
        "opinion": dspy.Example(
            question="Q?", options=["Yes", "No"], subgroup="All", distribution={"Yes": 0.5, "No": 0.5}
        ).with_inputs("question", "options", "subgroup"),
        "sales": dspy.Example(
            seller="S", products="P", customer="C", value_propositions=[{"pain_point": "late data"}]
        ).with_inputs("seller", "products", "customer"),
        "legal": dspy.Example(
            facts="The petitioner sued.", winning_party="respondent", cutoff="1990-01-01"
        ).with_inputs("facts", "cutoff"),
    }
    scores = {}
    for name, example in cases.items():
        task = get_task(name)
        pred = ClosedBook(task)(**example.inputs())
        assert pred.trajectory.error is None, (name, pred.trajectory.error)
        scores[name] = task.metric(example, pred).score
    assert scores["opinion"] == pytest.approx(0.75)  # TVD 0.25
    assert scores["sales"] == pytest.approx(4 / 5)
    assert scores["legal"] == 1.0
