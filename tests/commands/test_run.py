"""`memento run` end to end: a real OpenAI-compatible HTTP round trip, an offline corpus, the trajectory file."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.testing import build_corpus, script_search_then_scrape

DOCS = [
    {"url": "https://ex.org/dune", "title": "Dune (novel)", "text": "Dune is a 1965 novel by Frank Herbert."},
    {"url": "https://ex.org/herbert", "title": "Frank Herbert", "text": "Frank Herbert was born in Tacoma."},
    {"url": "https://ex.org/other", "title": "Other", "text": "Nothing relevant here."},
]


@pytest.fixture
def corpus_dir(tmp_path):
    build_corpus(DOCS, tmp_path)
    return tmp_path / "index"


def script(engine) -> None:
    script_search_then_scrape(engine, "https://ex.org/herbert")
    engine.when("sub_questions", sub_questions=["Who wrote Dune?", "Where was Frank Herbert born?"])
    engine.when("new_questions", times=1, new_questions=[{"question": "What is Tacoma?", "parent_id": "q2"}])
    engine.when("new_questions", new_questions=[])
    engine.when("research_findings", answer="Tacoma")


def invoke(*args: str):
    return CliRunner().invoke(app, ["run", *args])


def test_run_through_an_openai_compatible_server(engine, openai_server, corpus_dir, tmp_path):
    script(engine)
    out = tmp_path / "t.json"
    result = invoke(
        "--task", "multihop", "--lm", "openai/x", "--api-base", openai_server.api_base,
        "--question", "Where was the author of Dune born?", "--corpus", str(corpus_dir), "--out", str(out),
        "--threads", "2", "--trace",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "answer: Tacoma" in result.output
    assert "wave 0" in result.output and "wave 1" in result.output and "reflect" in result.output  # --trace
    assert "q3" in result.output and "What is Tacoma?" in result.output  # the compact tree
    data = json.loads(out.read_text())
    assert data["prediction"]["answer"] == "Tacoma"
    assert data["usage"]["lm_calls"] == openai_server.chat_requests > 0
    assert data["usage"]["searches"] == 3 and data["usage"]["fetches"] == 3
    assert {n["id"] for n in data["nodes"]} == {"root", "q1", "q2", "q3"}
    assert next(n for n in data["nodes"] if n["id"] == "q2")["status"] == "decomposed"
    assert all(c["node_id"] in {"q1", "q2", "q3"} for c in data["tool_calls"])
    assert "not-needed" not in out.read_text()  # no key material in the saved trajectory


def test_budget_flags_are_hard_limits(engine, openai_server, corpus_dir, tmp_path):
    script(engine)
    out = tmp_path / "t.json"
    result = invoke(
        "--lm", "openai/x", "--api-base", openai_server.api_base, "--question", "Where was the author of Dune born?",
        "--corpus", str(corpus_dir), "--out", str(out), "--initial-questions", "1", "--total-questions", "1",
        "--steps-per-question", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    subs = [n for n in data["nodes"] if n["id"] != "root"]
    assert len(subs) == 1 and subs[0]["steps"] <= 1
    assert data["usage"]["lm_calls"] == openai_server.chat_requests


def test_closed_book_needs_no_corpus_and_writes_under_output_dir(engine, openai_server, tmp_path, monkeypatch):
    engine.when("Who wrote Dune?", answer="Frank Herbert")
    monkeypatch.setenv("MEMENTO_RUN_OUTPUT_DIR", str(tmp_path / "runs"))
    result = invoke("--method", "closed_book", "--task", "qa", "--lm", "openai/x", "--api-base",
                    openai_server.api_base, "--question", "Who wrote Dune?")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "answer: Frank Herbert" in result.output
    files = list((tmp_path / "runs").glob("run-*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["method"] == "closed_book" and data["usage"]["lm_calls"] == 1 == openai_server.chat_requests


def test_no_lm_is_one_line_naming_the_flag(tmp_path):
    result = invoke("--question", "Who wrote Dune?", "--out", str(tmp_path / "t.json"))
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("memento: error: no language model configured")
    assert "--lm" in lines[0] and "MEMENTO_LM" in lines[0]
    assert not (tmp_path / "t.json").exists()


def test_empty_question_is_refused():
    result = invoke("--question", "  ", "--lm", "openai/x")
    assert result.exit_code == 1
    assert "--question is empty" in result.output


def test_unknown_method_lists_the_available_ones(openai_server):
    result = invoke("--question", "Q?", "--lm", "openai/x", "--api-base", openai_server.api_base, "--method", "nope")
    assert result.exit_code == 1
    assert "unknown method 'nope'" in result.output and "aet" in result.output


def test_unreachable_server_is_one_line(monkeypatch):
    monkeypatch.setenv("MEMENTO_LM_NUM_RETRIES", "0")
    result = invoke("--question", "Q?", "--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1",
                    "--method", "closed_book")  # fmt: skip
    assert result.exit_code == 1
    assert "unreachable" in result.output and "Traceback" not in result.output
