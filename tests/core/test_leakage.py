"""The leakage audit: counted from what each example was shown (memory items with their dates, pages and search
results), summed per run, reported at the top of a comparison that leaked, listed by ``memento report``."""

from __future__ import annotations

import datetime as dt
import json

from memento.core.types import DatingRecord, PageResult, SearchHit, SearchResults, ShownItem, ToolCall, Trajectory
from memento.metrics.evaluation import EvalResult, ExampleResult, render_markdown
from memento.optimize.report import CompareReport, MethodResult
from memento.optimize.report import render_markdown as compare_markdown
from memento.records.html_report import write_report
from memento.records.leakage import LeakageAudit

C = dt.date(2003, 1, 1)


def _trajectory(*, leak: bool) -> Trajectory:
    shown = [ShownItem(store="facts", id="f-old", dated=dt.date(2001, 1, 1)), ShownItem(store="craft", id="c-1")]
    if leak:
        shown.append(ShownItem(store="cases", id="case-late", dated=dt.date(2007, 1, 1)))
    dating = DatingRecord(cutoff=C, shown=shown, hidden={"facts": 3}, undated_dropped={"craft": 1},
                          pages_undated_dropped=2)  # fmt: skip
    traj = Trajectory(task_text="q", cutoff=C, dating=dating)
    hits = [SearchHit(url="https://a.org/1", published=dt.date(2002, 1, 1)), SearchHit(url="https://a.org/2")]
    if leak:
        hits.append(SearchHit(url="https://a.org/late", published=C))  # on the cutoff day: after it
    traj.tool_calls.append(ToolCall(kind="search_web", search=SearchResults(query="q", hits=hits)))
    traj.tool_calls.append(
        ToolCall(kind="scrape", page=PageResult.of_text(url="https://a.org/1", text="t", published=dt.date(2002, 1, 1)))
    )
    return traj


def test_an_example_is_audited_from_what_it_was_shown() -> None:
    clean = LeakageAudit.of(_trajectory(leak=False))
    assert (clean.items_shown, clean.items_after_cutoff, clean.items_undated_kept) == (2, 0, 1)
    assert (clean.pages_shown, clean.pages_after_cutoff, clean.pages_undated_kept) == (2, 0, 1)
    assert (clean.items_hidden, clean.items_undated_dropped, clean.pages_undated_dropped) == (3, 1, 2)
    assert clean.leaked == 0 and clean.examples_leaking == 0
    leaky = LeakageAudit.of(_trajectory(leak=True))
    assert leaky.items_after_cutoff == 1 and leaky.pages_after_cutoff == 1 and leaky.leaked == 2
    assert leaky.after_cutoff == ["cases:case-late 2007-01-01", "page:https://a.org/late 2003-01-01"]
    total = LeakageAudit.total([clean, leaky])
    assert (total.examples, total.examples_leaking, total.items_hidden, total.leaked) == (2, 1, 6, 2)
    assert total.by_store["facts"].shown == 2 and total.by_store["cases"].after_cutoff == 1
    assert LeakageAudit.of(None, cutoff=C).cutoff == C  # a program without a trajectory: nothing counted
    assert LeakageAudit.of(Trajectory(task_text="q")).leaked == 0  # no cutoff: nothing is after it


def test_results_and_reports_say_when_a_method_leaked(tmp_path) -> None:
    leaky = LeakageAudit.of(_trajectory(leak=True))
    result = EvalResult(task="multihop", method="cbr", n=1, total=1, mean=0.5, leakage=LeakageAudit.total([leaky]),
                        examples=[ExampleResult(index=0, id="x1", leakage=leaky)])  # fmt: skip
    markdown = render_markdown(result)
    assert "**Leakage: 2 memory items and pages dated on or after" in markdown and "| 0 | x1 | 2003-01-01 |" in markdown
    report = CompareReport(task="multihop", metric="f1", methods={
        "cbr": MethodResult(method="cbr", status="done", leakage=LeakageAudit.total([leaky])),
        "aet": MethodResult(method="aet", status="done", leakage=LeakageAudit.total([LeakageAudit.of(
            _trajectory(leak=False))])),
    })  # fmt: skip
    text = compare_markdown(report)
    assert text.index("**Leakage: these methods were shown") < text.index("| method | status |")
    assert "`cbr` (1 memory items, 1 pages, in 1 examples)" in text and "`aet` (" not in text.split("| method")[0]
    assert "## Leakage audit (test)" in text
    out = tmp_path / "eval"
    out.mkdir()
    (out / "results.json").write_text(json.dumps(result.model_dump(mode="json")), encoding="utf-8")
    page = write_report(out).read_text(encoding="utf-8")
    assert "Leakage audit" in page and "cases:case-late" in page and "2003-01-01" in page
