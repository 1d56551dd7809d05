"""The trajectory bank's page store: full page texts stored once by content hash, records carrying hash + length,
text given back on read, old banks still readable, credentials never stored, size on disk in `memory stats`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.types import AgentStep, Node, PageResult, SearchHit, SearchResults, ToolCall, Trajectory, text_sha256
from memento.memory.trajectory_bank import SCHEMA_VERSION, TrajectoryBank, disk_usage
from memento.programs.jitmem_curator import render_trajectory

PAGE = "Lugdunum was founded in 43 BC by Lucius Munatius Plancus. " * 200  # 11,600 characters


def _trajectory(task_id: str, task_text: str, page_text: str = PAGE, url: str = "corpus://lyon") -> Trajectory:
    page = PageResult.of_text(url=url, title="Lyon", text=page_text)
    hits = SearchResults(query="lyon founder", hits=[SearchHit(url=url, title="Lyon", snippet="Lugdunum " * 80)])
    search = ToolCall(kind="search_web", args={"query": "lyon founder"}, search=hits, node_id="root")
    scrape = ToolCall(kind="scrape", args={"url": url}, page=page, node_id="root")
    return Trajectory(
        task_id=task_id,
        task_text=task_text,
        nodes=[Node(id="root", question=task_text, answer="Plancus", status="answered")],
        tool_calls=[search, scrape],
        steps=[
            AgentStep(node_id="root", index=0, thought="search first", tool_name="search_web", call_id=search.id),
            AgentStep(node_id="root", index=1, thought="read the Lyon page", tool_name="scrape", call_id=scrape.id),
        ],
        prediction={"answer": "Plancus"},
    )


def _page_rows(directory: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(directory / "trajectories.sqlite3") as conn:
        return conn.execute("SELECT sha256, chars FROM pages").fetchall()


def test_a_page_read_by_two_trajectories_is_stored_once_and_given_back_whole(tmp_path):
    bank = TrajectoryBank(tmp_path / "bank")
    bank.add(_trajectory("t1", "Who founded Lyon?"), accepted=True)
    with bank.batch():
        bank.add(_trajectory("t2", "When was Lyon founded?"), accepted=True)
    assert _page_rows(tmp_path / "bank") == [(text_sha256(PAGE), len(PAGE))]
    with sqlite3.connect(tmp_path / "bank" / "trajectories.sqlite3") as conn:
        records = [r[0] for r in conn.execute("SELECT record FROM records")]
    assert len(records) == 2 and all(PAGE[:200] not in r and text_sha256(PAGE) in r for r in records)
    assert bank.stats().pages == 1 and bank.stats().page_chars == len(PAGE)
    bank.close()
    reader = TrajectoryBank(tmp_path / "bank", read_only=True)
    [(got, _, _)] = reader.retrieve("Who founded Lyon?", k=1)
    page, search = got.tool_calls[1].page, got.tool_calls[0].search
    assert page is not None and search is not None
    assert page.text == PAGE and page.text_loaded
    assert search.hits[0].snippet == "Lugdunum " * 80
    assert [s.thought for s in got.steps] == ["search first", "read the Lyon page"]
    assert reader.page_text(text_sha256(PAGE)) == PAGE and reader.page_text("0" * 64) is None
    # clipping happens when the curator's prompt is rendered, not before
    rendered = render_trajectory(got, max_tokens=1500)
    assert "thought: read the Lyon page" in rendered and PAGE[:100].strip() in rendered and PAGE not in rendered


def test_pages_of_a_checkpointed_batch_survive_a_crash_before_it_was_applied(location):
    loc = location()
    bank = TrajectoryBank(loc / "bank")
    staged: list[dict] = []

    def checkpoint_then_crash(rows):
        staged.extend(json.loads(json.dumps(rows)))  # what the stream's checkpoint line holds
        raise RuntimeError("killed after the checkpoint")

    with pytest.raises(RuntimeError), bank.batch(key="run:0", before_apply=checkpoint_then_crash):
        bank.add(_trajectory("t1", "Who founded Lyon?"), accepted=True)
    assert len(bank) == 0 and PAGE[:50] not in json.dumps(staged)  # the checkpoint carries the hash, not the text
    assert bank.apply_rows(staged, key="run:0")
    [got] = bank.get("t1")
    assert _page_text(got.tool_calls[1]) == PAGE


def test_an_old_bank_with_clipped_results_still_loads_and_is_migrated(tmp_path):
    directory = tmp_path / "old"
    directory.mkdir()
    old = {  # a record as the bank stored it before typed results: clipped text, no ids, no steps, no pages
        "task_id": "old-1",
        "task_text": "Who founded Lyon?",
        "nodes": [{"id": "root", "question": "Who founded Lyon?", "answer": "Plancus", "status": "answered"}],
        "tool_calls": [
            {"kind": "scrape", "args": {"url": "corpus://lyon"}, "result": "Title: Lyon\nURL: corpus://lyon\n\nLug…",
             "result_urls": ["corpus://lyon"], "cached": False, "ms": 3.0, "error": None, "node_id": "root"}
        ],
        "notes": [],
        "prediction": {"answer": "Plancus"},
    }  # fmt: skip
    with sqlite3.connect(directory / "trajectories.sqlite3") as conn:
        conn.executescript(
            """
            CREATE TABLE trajectories (seq INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL,
                task_text TEXT NOT NULL, label INTEGER NOT NULL, stored_at TEXT NOT NULL DEFAULT '');
            CREATE TABLE records (seq INTEGER PRIMARY KEY, record TEXT NOT NULL);
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO meta VALUES ('policy', 'success_only');
            """
        )
        conn.execute("INSERT INTO trajectories(task_id, task_text, label) VALUES ('old-1', 'Who founded Lyon?', 1)")
        conn.execute("INSERT INTO records(seq, record) VALUES (1, ?)", (json.dumps(old),))
    reader = TrajectoryBank(directory, read_only=True)
    [(got, _, _)] = reader.retrieve("founded Lyon", k=1)
    assert got.tool_calls[0].page is None and got.tool_calls[0].result.endswith("Lug…")
    assert "-> Title: Lyon URL: corpus://lyon Lug…" in render_trajectory(got) and reader.stats().pages == 0
    reader.close()
    assert getattr(disk_usage(directory), "pages", None) == 0
    writer = TrajectoryBank(directory)  # the migration: the page store is added, the old record stays readable
    writer.add(_trajectory("new-1", "Who founded Lugdunum?"), accepted=True)
    assert writer._meta("schema") == str(SCHEMA_VERSION)
    assert {t.task_id for t, _ in writer.iter_all()} == {"old-1", "new-1"}
    assert _page_text(writer.get("new-1")[0].tool_calls[1]) == PAGE


def test_url_credentials_and_secrets_never_reach_the_bank_files(tmp_path):
    from memento.utils.scrub import register_secret

    register_secret("sk-bank-secret-0123456789")
    text = "Mirror https://admin:hunter2@mirror.example/x and key sk-bank-secret-0123456789. " * 50
    bank = TrajectoryBank(tmp_path / "bank")
    bank.add(_trajectory("t1", "Where is the mirror?", text, url="https://bob:pw123@ex.org/page"), accepted=True)
    bank.close()
    blob = b"".join(p.read_bytes() for p in (tmp_path / "bank").rglob("*") if p.is_file())
    for secret in (b"hunter2", b"pw123", b"sk-bank-secret-0123456789"):
        assert secret not in blob
    [got] = TrajectoryBank(tmp_path / "bank", read_only=True).get("t1")
    assert getattr(got.tool_calls[1].page, "url", None) == "https://***:***@ex.org/page"
    assert "***:***@mirror.example" in got.pages()[0].text


def test_memory_stats_reports_the_bank_size_on_disk(tmp_path):
    bank = TrajectoryBank(tmp_path / "mem" / "jitmem")
    bank.add(_trajectory("t1", "Who founded Lyon?"), accepted=True)
    bank.close()
    usage = disk_usage(tmp_path / "mem" / "jitmem")
    assert usage is not None
    assert usage.pages == 1 and usage.page_bytes == len(PAGE.encode()) and usage.db_bytes >= usage.page_bytes
    assert usage.total_bytes >= usage.db_bytes + usage.index_bytes > 0
    runner = CliRunner()
    out = runner.invoke(app, ["memory", "stats", "--memory", str(tmp_path / "mem"), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["jitmem_bank"]["pages"] == 1 and data["jitmem_bank"]["total_bytes"] == usage.total_bytes
    text = runner.invoke(app, ["memory", "stats", "--memory", str(tmp_path / "mem")])
    assert text.exit_code == 0 and "jitmem trajectory bank" in text.output and "1 pages" in text.output


def _page_text(call: ToolCall) -> str | None:
    """The text of a scrape call's page (``None``: the call holds no page)."""
    return call.page.text if call.page is not None else None
