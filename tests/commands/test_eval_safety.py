"""`memento eval`: provenance in results.json, an --out of another run is kept, failures are not success,
and the per-role LM concurrency limit holds across threads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.testing import OpenAICompatServer

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "multihop" / "corpus.jsonl"
ENV = {"MEMENTO_LM_CACHE": "false", "COLUMNS": "200"}


def _data(tmp_path: Path, n: int = 4) -> Path:
    rows = [{"id": f"q{i}", "question": f"What is item number {i}?", "answers": [f"item {i}"]} for i in range(n)]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _eval(server: OpenAICompatServer, data: Path, out: Path, *extra: str, env: dict | None = None):
    args = ["eval", "--task", "qa", "--data", str(data), "--lm", "openai/x", "--api-base", server.api_base,
            "--out", str(out), "--corpus", str(CORPUS), *extra]  # fmt: skip
    return CliRunner().invoke(app, args, env={**ENV, **(env or {})})


def test_results_record_provenance_and_another_method_is_refused(tmp_path: Path) -> None:
    data, out = _data(tmp_path), tmp_path / "out"
    with OpenAICompatServer() as server:
        first = _eval(server, data, out, "--method", "closed_book", "--judge-lm", "openai/judge", env={
            "MEMENTO_LM_API_KEY": "sk-secret-123456789"})  # fmt: skip
        assert first.exit_code == 0, first.output
        saved = json.loads((out / "results.json").read_text())
        prov = saved["provenance"]
        assert prov["roles"]["lm"]["model"] == "openai/x" and prov["roles"]["judge_lm"]["model"] == "openai/judge"
        assert prov["roles"]["lm"]["api_base"] == server.api_base
        assert prov["versions"]["memento"] and prov["versions"]["dspy"] == "3.4.1" and "litellm" in prov["versions"]
        import hashlib

        assert prov["data"]["data"]["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
        assert prov["started_at"] <= prov["ended_at"]
        settings = {row["key"]: row for row in prov["settings"]}
        assert settings["lm.model"]["source"] == "flag" and settings["lm.api_key"]["source"] == "env"
        assert "sk-secret-123456789" not in (out / "results.json").read_text()
        assert saved["run_key"]["method"] == "closed_book"

        second = _eval(server, data, out, "--method", "react")
        assert second.exit_code == 1
        assert "holds results of another run (method: 'closed_book' != 'react')" in second.output
        assert json.loads((out / "results.json").read_text())["method"] == "closed_book"
        # settings that change answers are part of the key too; threads are not
        other = _eval(server, data, out, "--method", "closed_book", env={"MEMENTO_LM_TEMPERATURE": "0.7"})
        assert other.exit_code == 1 and "lm.temperature" in other.output
        same = _eval(server, data, out, "--method", "closed_book", "--threads", "3", "--judge-lm", "openai/judge")
        assert same.exit_code == 0, same.output
        assert json.loads((out / "results.json").read_text())["resumed"] == 4
        fresh = _eval(server, data, out, "--method", "react", "--fresh")
        assert fresh.exit_code == 0, fresh.output
        assert json.loads((out / "results.json").read_text())["method"] == "react"


def test_out_newdir_is_created(tmp_path: Path) -> None:
    data = _data(tmp_path, 1)
    with OpenAICompatServer() as server:
        result = _eval(server, data, tmp_path / "new" / "deeper", "--method", "closed_book")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "new" / "deeper" / "results.json").exists()


def test_every_example_failing_is_not_success(tmp_path: Path) -> None:
    data, out = _data(tmp_path, 3), tmp_path / "out"
    with OpenAICompatServer(always_status=500) as server:
        result = _eval(server, data, out, "--method", "closed_book", env={"MEMENTO_LM_NUM_RETRIES": "0"})
    assert result.exit_code == 1, result.output
    assert "every example of closed_book failed (3 of 3)" in result.output
    saved = json.loads((out / "results.json").read_text())
    assert saved["errors"] == 3


@pytest.mark.parametrize(("limit", "bounded"), [(None, False), ("2", True)])
def test_max_concurrency_bounds_requests_in_flight(tmp_path: Path, limit: str | None, bounded: bool) -> None:
    data, out = _data(tmp_path, 4), tmp_path / "out"
    env = {"MEMENTO_LM_MAX_CONCURRENCY": limit} if limit else {}
    with OpenAICompatServer(latency=0.15) as server:
        result = _eval(server, data, out, "--method", "aet", "--threads", "4", env=env)
    assert result.exit_code == 0, result.output
    if bounded:
        assert server.max_in_flight == 2
    else:  # the test can fail: without the limit, four threads put more than two requests in flight
        assert server.max_in_flight > 2
