"""`memento run`: --out as a directory, --out checked before any LM call, a failed final write falling back to
run.output_dir, and the memory methods (memento needs a trained memory; cbr/jitmem learn online)."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.testing import build_corpus

DOCS = [
    {"url": "https://ex.org/dune", "title": "Dune (novel)", "text": "Dune is a 1965 novel by Frank Herbert."},
    {"url": "https://ex.org/herbert", "title": "Frank Herbert", "text": "Frank Herbert was born in Tacoma."},
]


def invoke(*args: str):
    return CliRunner().invoke(app, ["run", *args])


def closed_book(server, *args: str):
    return invoke("--method", "closed_book", "--task", "qa", "--lm", "openai/x", "--api-base", server.api_base,
                  "--question", "Who wrote Dune?", *args)  # fmt: skip


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMENTO_RUN_OUTPUT_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


def test_out_directory_gets_the_trajectory_inside(engine, openai_server, tmp_path, runs_dir):
    engine.when("Who wrote Dune?", answer="Frank Herbert")
    out = tmp_path / "results"
    out.mkdir()
    result = closed_book(openai_server, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "is a directory" in result.output
    files = list(out.glob("run-*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["prediction"]["answer"] == "Frank Herbert" and data["task_id"] in files[0].name
    assert f"trajectory written to {files[0]}" in result.output
    assert not runs_dir.exists() or not list(runs_dir.glob("*.json"))


def test_unusable_out_is_one_line_before_any_lm_call(engine, openai_server, tmp_path, runs_dir):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = closed_book(openai_server, "--out", str(blocker / "t.json"))
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("memento: error: --out ") and "is a file" in lines[0]
    assert openai_server.chat_requests == 0  # nothing spent


def test_failed_final_write_falls_back_to_output_dir(engine, openai_server, tmp_path, runs_dir):
    out_dir = tmp_path / "vanishing"
    out_dir.mkdir()

    def answer_and_break_the_out_dir(call):  # the --out directory turns into a file while the LM works
        shutil.rmtree(out_dir)
        out_dir.write_text("now a file")
        return "Frank Herbert"

    engine.when("Who wrote Dune?", answer=answer_and_break_the_out_dir)
    result = closed_book(openai_server, "--out", str(out_dir / "t.json"))
    assert result.exit_code == 0, result.output
    assert "cannot write the trajectory to" in result.output
    data = json.loads((runs_dir / "t.json").read_text())  # nothing lost: the run's trajectory is in run.output_dir
    assert data["prediction"]["answer"] == "Frank Herbert" and data["usage"]["lm_calls"] == 1


def test_unknown_method_is_one_line(openai_server, runs_dir):
    result = closed_book(openai_server, "--method", "nope")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1
    assert lines[0].startswith("memento: error: unknown method 'nope'; available: ")
    assert "cbr" in lines[0] and "jitmem" in lines[0] and "memento" in lines[0]
    assert openai_server.chat_requests == 0


def test_memento_without_a_trained_memory_is_one_line(openai_server, tmp_path, runs_dir):
    result = closed_book(openai_server, "--method", "memento", "--memory", str(tmp_path / "mem"))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1
    assert "no trained memory at" in lines[0] and "memento train --memory" in lines[0]
    assert openai_server.chat_requests == 0 and not (tmp_path / "mem").exists()


def test_memory_is_ignored_by_a_memoryless_method_with_a_warning(engine, openai_server, tmp_path, runs_dir):
    engine.when("Who wrote Dune?", answer="Frank Herbert")
    result = closed_book(openai_server, "--memory", str(tmp_path / "mem"))
    assert result.exit_code == 0, result.output
    assert "method closed_book reads no memory; --memory is ignored" in result.output
    assert not (tmp_path / "mem").exists()


@pytest.fixture
def corpus_dir(tmp_path):
    build_corpus(DOCS, tmp_path)
    return tmp_path / "index"


def test_jitmem_run_learns_online_and_the_next_run_retrieves_it(engine, openai_server, corpus_dir, tmp_path, runs_dir):
    engine.when(predicate=lambda c: "next_tool_name" in c.output_fields, next_tool_name="finish", next_tool_args={})
    engine.when(predicate=lambda c: "success" in c.output_fields, success=True)
    memory = tmp_path / "mem"
    args = ("--method", "jitmem", "--task", "qa", "--lm", "openai/x", "--api-base", openai_server.api_base,
            "--corpus", str(corpus_dir), "--memory", str(memory))  # fmt: skip
    first = invoke(*args, "--question", "Who wrote Dune?", "--out", str(tmp_path / "a.json"))
    assert first.exit_code == 0, first.output
    second = invoke(*args, "--question", "Who wrote the novel Dune?", "--out", str(tmp_path / "b.json"))
    assert second.exit_code == 0, second.output
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())
    assert any("retrieved 0 trajectories" in n for n in a["notes"])
    assert any(f"retrieved 1 trajectories ['{a['task_id']}']" in n for n in b["notes"])  # learned from run 1
