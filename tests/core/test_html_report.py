"""`memento report`: self-contained HTML for a trajectory, a memory directory and a compare directory, rendered in a
real headless Chromium (the system's ``chromium`` and ``chromium-driver`` packages, driven by selenium).

The browser test fails, not skips, when the browser is missing and ``CI=true``: CI installs it (``.ci/run``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.types import Evidence, Node, ToolCall, Trajectory, Usage
from memento.records.html_report import report_kind, write_report

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HOSTILE = '<script>window.__pwned = 1</script><img src="http://example.org/x.png">'


def make_trajectory(task_text: str = "What profession do John Lanchester and Alan Dean Foster share?") -> Trajectory:
    nodes = [
        Node(id="root", parent_id=None, wave=-1, question=task_text, answer="Both are novelists.", status="answered"),
        Node(id="q1", parent_id="root", wave=0, question="Who is John Lanchester?", status="decomposed"),
        Node(
            id="q1.1",
            parent_id="q1",
            wave=1,
            question="What did John Lanchester write?",
            answer="Novels such as Capital.",
            status="answered",
            steps=3,
            evidence=[
                Evidence(
                    url="https://en.wikipedia.org/wiki/John_Lanchester",
                    title="John Lanchester",
                    snippet="British journalist and novelist",
                    published=dt.date(2019, 5, 1),
                ),
                Evidence(url="corpus://doc-7", title=HOSTILE, snippet="a page whose title carries markup"),
            ],
        ),
        Node(
            id="q2",
            parent_id="root",
            wave=0,
            question="Who is Alan Dean Foster?",
            answer="A novelist.",
            status="answered",
            steps=2,
        ),
        Node(id="q3", parent_id="root", wave=1, question="Are they related?", status="failed", error="step budget"),
    ]
    calls = [
        ToolCall(kind="search_web", args={"query": "John Lanchester"}, result="3 results", ms=41.0, node_id="q1.1"),
        ToolCall(
            kind="scrape",
            args={"url": "https://en.wikipedia.org/wiki/John_Lanchester"},
            result="page text",
            ms=120.5,
            cached=True,
            node_id="q1.1",
        ),
        ToolCall(kind="search_web", args={"query": "Alan Dean Foster"}, result=HOSTILE, ms=35.0, node_id="q2"),
        ToolCall(kind="search_memory", args={"query": "novelists"}, result="", ms=2.0, error="memory empty"),
    ]
    return Trajectory(
        task_text=task_text,
        method="aet",
        nodes=nodes,
        tool_calls=calls,
        prediction={"answer": "novelist"},
        usage=Usage(lm_calls=9, prompt_tokens=1200, completion_tokens=300, searches=2, fetches=1),
        timings={"decompose_s": 0.8, "wave_0_s": 2.5, "wave_1_s": 1.25, "synthesize_s": 0.4, "total_s": 5.1},
    )


def make_memory(directory: Path) -> Path:
    from memento.memory.embedder import HashingEmbedder
    from memento.memory.memento_memory import MementoMemory

    mem = MementoMemory(directory, embedder=HashingEmbedder())
    with mem.transaction(batch=1) as tx:
        first = mem.decomposition.add("Ask for each person's profession separately.", batch=1, support=1, tx=tx)
        mem.web_action.add("Search the person's name, then scrape the encyclopedia page.", batch=1, support=2, tx=tx)
        mem.craft.add("Compare entities by listing each one's attributes first.", batch=1, tx=tx)
        mem.commit_version(batch=1, note="batch 1", tx=tx)
    with mem.transaction(batch=2) as tx:
        mem.decomposition.reinforce(first.id, support=2, contradiction=1, batch=2, tx=tx)
        mem.decomposition.add(f"Never trust {HOSTILE} pages.", batch=2, support=1, tx=tx)
        mem.facts.add("John Lanchester", "John Lanchester is a British novelist.", batch=2, tx=tx)
        mem.commit_version(batch=2, note="batch 2", tx=tx)
    return directory


def make_compare(directory: Path) -> Path:
    from memento.metrics.evaluation import EvalResult, ExampleResult, write_results
    from memento.optimize.costs import PhaseCost
    from memento.optimize.report import BaselineDiff, CompareReport, MethodResult
    from memento.optimize.report import write_report as write_compare

    report = CompareReport(
        task="multihop",
        metric="multihop:default",
        baseline="closed_book",
        seed=42,
        split={"n_train": 2, "n_test": 2},
        lm_roles={"lm": "openai/x"},
    )
    for name, slug, mean, kind in (
        ("closed_book", "closed_book", 0.5, "program"),
        ("gepa:react", "gepa-react", 1.0, "optimizer"),
    ):
        res = MethodResult(
            method=name,
            kind=kind,
            base="react",
            status="done",
            scores=[mean, mean],
            example_ids=["a", "b"],
            mean=mean,
            ci_low=mean - 0.25,
            ci_high=min(1.0, mean + 0.25),
        )
        res.costs.train = PhaseCost(
            lm_calls=0 if kind == "program" else 40, prompt_tokens=0 if kind == "program" else 9000, wall_seconds=1.5
        )
        res.costs.test = PhaseCost(lm_calls=4, prompt_tokens=800, wall_seconds=0.7)
        if name != "closed_book":
            res.vs_baseline = BaselineDiff(baseline="closed_book", diff=0.5, ci_low=0.5, ci_high=0.5, n=2)
        report.methods[name] = res
        examples = [
            ExampleResult(
                index=i,
                id=ex,
                inputs={"question": f"q {ex}"},
                prediction={"answer": "novelist"},
                score=mean,
                trajectory=make_trajectory(f"{name} question {ex}"),
            )
            for i, ex in enumerate(("a", "b"))
        ]
        write_results(
            EvalResult(task="multihop", method=name, n=2, mean=mean, examples=examples), directory / slug / "test"
        )
    write_compare(report, directory)
    return directory


# -- plain HTML checks (no browser) -------------------------------------------------------------------------------
def test_report_kinds_and_escaping(tmp_path: Path) -> None:
    traj = make_trajectory()
    path = tmp_path / "run.json"
    path.write_text(traj.model_dump_json(), encoding="utf-8")
    assert report_kind(path) == "trajectory"
    page = write_report(path).read_text(encoding="utf-8")
    assert "<script>window.__pwned" not in page and "&lt;script&gt;window.__pwned" in page
    assert 'src="http' not in page and "Content-Security-Policy" in page
    for node in traj.nodes:
        assert f'data-node-id="{node.id}"' in page
    assert report_kind(make_memory(tmp_path / "mem")) == "memory"
    assert report_kind(make_compare(tmp_path / "cmp")) == "compare"
    assert report_kind(tmp_path / "cmp" / "gepa-react" / "test") == "eval"


def test_report_cli_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(tmp_path / "missing.json")])
    assert result.exit_code == 1 and "no such file or directory" in result.stderr
    (tmp_path / "other.json").write_text("[1, 2]", encoding="utf-8")
    result = runner.invoke(app, ["report", str(tmp_path / "other.json")])
    assert result.exit_code == 1 and "does not hold a JSON object" in result.stderr
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 1 and "no results.json" in result.stderr


# -- the headless browser -----------------------------------------------------------------------------------------
def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}: .ci/run installs chromium and chromium-driver", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")) or not Path(CHROMEDRIVER).exists():
        _missing(f"no headless browser ({CHROMIUM}, {CHROMEDRIVER})")
    try:
        from selenium import webdriver
    except ImportError:
        _missing("selenium is not installed (the dev extra declares it)")
    os.environ["SE_OFFLINE"] = "true"  # selenium manager never looks anything up
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM if Path(CHROMIUM).exists() else (shutil.which("chromium") or CHROMIUM)
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1280,1600",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def _open(browser, page: Path) -> list[dict]:
    browser.get_log("browser")  # drop what an earlier page logged
    browser.get(page.resolve().as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    return [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _check_tree(browser, traj: Trajectory) -> None:
    from selenium.webdriver.common.by import By

    ids = [el.get_attribute("data-node-id") for el in browser.find_elements(By.CSS_SELECTOR, "[data-node-id]")]
    assert sorted(ids) == sorted(n.id for n in traj.nodes)
    browser.execute_script("setAll(true)")
    for node in traj.nodes:
        summary = browser.find_element(By.CSS_SELECTOR, f'[data-node-id="{node.id}"] > summary')
        assert summary.is_displayed() and node.question[:20] in summary.text
    assert browser.execute_script("return window.__pwned === undefined")


def test_trajectory_report_in_browser(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    traj = make_trajectory()
    path = tmp_path / "run.json"
    path.write_text(traj.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(app, ["report", str(path)])
    assert result.exit_code == 0, result.output
    page = tmp_path / "run.html"
    assert f"trajectory report: {page}" in result.stdout
    assert _open(browser, page) == []
    _check_tree(browser, traj)
    assert browser.find_element(By.ID, "node-count").text == f"{len(traj.nodes)} nodes"
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Both are novelists." in body and "search_web" in body and "120 ms cached" in body
    assert "step budget" in body and "memory empty" in body  # a failed node and a failed tool call
    waves = browser.find_element(By.XPATH, "//h2[text()='Waves']/following-sibling::table[1]").text
    assert "2.50" in waves and "1.25" in waves  # per-wave timings


def test_memory_report_in_browser(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    memory = make_memory(tmp_path / "mem")
    result = CliRunner().invoke(app, ["report", str(memory), "--diff", "1", "2"])
    assert result.exit_code == 0, result.output
    assert _open(browser, memory / "report.html") == []
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "current version 2; 3 versions" in body or "current version 2" in body
    # the reinforced rule's history: +1/−0 at version 1, +3/−1 at version 2
    row = browser.find_element(By.XPATH, "//tr[td[contains(., 'Ask for each person')]]").text
    assert "+1/−0" in row and "+3/−1" in row
    assert "Diff: version 1 → 2" in body
    diff_rows = browser.find_elements(By.CSS_SELECTOR, "tr.added, tr.modified")
    assert len(diff_rows) == 3 and any("support 1 → 3" in r.text for r in diff_rows)
    assert browser.execute_script("return window.__pwned === undefined")


def test_compare_report_in_browser(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    directory = make_compare(tmp_path / "cmp")
    result = CliRunner().invoke(app, ["report", str(directory)])
    assert result.exit_code == 0, result.output
    assert _open(browser, directory / "report.html") == []
    rows = browser.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert [r.find_element(By.TAG_NAME, "code").text for r in rows] == ["closed_book", "gepa:react"]
    assert "+0.500 [+0.500, +0.500] *" in rows[1].text and "0.500 [0.250, 0.750]" in rows[0].text
    widths = browser.execute_script("return Array.from(document.images).map(i => i.naturalWidth)")
    assert widths and all(w > 0 for w in widths)  # the plots are inline and render
    link = rows[1].find_element(By.LINK_TEXT, "trajectories")
    assert link.get_attribute("href").endswith("gepa-react/test/report.html")
    link.click()
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    nodes = browser.find_elements(By.CSS_SELECTOR, "[data-node-id]")
    assert len(nodes) == 2 * len(make_trajectory().nodes)  # both test examples' trees
    assert json.loads((directory / "gepa-react" / "test" / "results.json").read_text())["n"] == 2
