"""`memento eval` end to end against the local OpenAI-compatible test server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.testing import OpenAICompatServer, ScriptedEngine

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
QUESTIONS = SHARED / "multihop" / "questions.jsonl"


def _fixture(tmp_path: Path, n: int = 20) -> tuple[Path, list[dict]]:
    if not QUESTIONS.exists():
        pytest.skip("shared data not present beside the clone")
    rows = []
    with QUESTIONS.open(encoding="utf-8") as handle:
        for line in handle:
            rows.append(json.loads(line))
            if len(rows) == n:
                break
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path, rows


def test_eval_multihop_closed_book_writes_results(tmp_path: Path) -> None:
    data, rows = _fixture(tmp_path)
    gold = {r["question"]: r["answers"][0] for r in rows}
    engine = ScriptedEngine()
    # the model answers correctly on every other question (by order of the calls it sees)
    engine.overrides["answer"] = lambda call: (
        gold.get(call.inputs.get("question", ""), "no idea") if call.index % 2 == 0 else "no idea"
    )
    out = tmp_path / "out"
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "--task", "multihop",
                "--data", str(data),
                "--limit", "20",
                "--method", "closed_book",
                "--lm", "openai/x",
                "--api-base", server.api_base,
                "--threads", "1",
                "--out", str(out),
            ],
            env={"COLUMNS": "200"},
        )  # fmt: skip
        requests = server.chat_requests
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "results.json").read_text())
    assert saved["n"] == 20 and len(saved["examples"]) == 20
    assert saved["usage"]["lm_calls"] == requests == 20
    assert saved["judge_usage"]["lm_calls"] == 0
    scores = [e["score"] for e in saved["examples"]]
    assert scores == [1.0 if i % 2 == 0 else 0.0 for i in range(20)]
    assert saved["mean"] == pytest.approx(0.5)
    assert saved["ci_low"] <= 0.5 <= saved["ci_high"] and saved["ci_low"] < saved["ci_high"]
    first = saved["examples"][0]
    assert first["inputs"] == {"question": rows[0]["question"]}
    assert first["prediction"]["answer"] == rows[0]["answers"][0]
    assert "docs" not in json.dumps(first["inputs"])
    # the evidence paragraphs never reach the model
    assert all(rows[0]["docs"][0]["text"][:60] not in call.prompt for call in engine.calls)
    assert "mean 0.500" in result.output


def test_eval_missing_data_is_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["eval", "--task", "multihop", "--data", str(tmp_path / "nope.jsonl"), "--lm", "openai/x"]
    )
    assert result.exit_code == 1
    assert "data file not found" in result.output


def test_eval_unknown_metric_is_one_line_error(tmp_path: Path) -> None:
    data, _ = _fixture(tmp_path, n=2)
    result = CliRunner().invoke(
        app,
        ["eval", "--task", "multihop", "--data", str(data), "--metric", "bleu", "--lm", "openai/x",
         "--api-base", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o")],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "no metric 'bleu'" in result.output


def test_eval_loads_a_saved_program_state(tmp_path: Path) -> None:
    from memento.core.config import load_settings
    from memento.programs.registry import build_program

    data, _ = _fixture(tmp_path, n=2)
    program = build_program("closed_book", task="multihop", settings=load_settings())
    state_path = tmp_path / "program.json"
    program.save(str(state_path))
    state = json.loads(state_path.read_text())
    state["answer"]["signature"]["instructions"] = "OPTIMISED INSTRUCTIONS 7431: answer tersely."
    state_path.write_text(json.dumps(state))
    engine = ScriptedEngine()
    with OpenAICompatServer(engine) as server:
        args = ["eval", "--task", "multihop", "--data", str(data), "--lm", "openai/x", "--api-base", server.api_base]
        result = CliRunner().invoke(app, [*args, "--program", str(state_path), "--out", str(tmp_path / "o")])
        assert result.exit_code == 0, result.output
        assert len(engine.calls) == 2
        assert all("OPTIMISED INSTRUCTIONS 7431" in call.system for call in engine.calls)
        broken = tmp_path / "broken.json"
        broken.write_text("{not json")
        result = CliRunner().invoke(app, [*args, "--program", str(broken), "--out", str(tmp_path / "o2")])
    assert result.exit_code == 1
    assert "cannot load program state" in result.output
