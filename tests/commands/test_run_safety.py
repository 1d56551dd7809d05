"""`memento run`: concurrent CBR runs on one bank keep every case; any task's inputs; the live-web notice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from memento.cli import app
from memento.testing import OpenAICompatServer, ScriptedEngine

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "multihop" / "corpus.jsonl"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMENTO_")}
    env.update(
        MEMENTO_LM_CACHE="false",
        MEMENTO_WEB_CACHE_DIR=str(tmp_path / "webcache"),
        DSPY_CACHEDIR=str(tmp_path / "dspy"),
        COLUMNS="200",
    )
    return env


def test_three_concurrent_cbr_runs_keep_all_three_cases(tmp_path: Path) -> None:
    from memento.memory.case_bank import CaseBank

    memory = tmp_path / "mem"
    with OpenAICompatServer(latency=0.05) as server:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "memento.cli",
                    "run",
                    "--task",
                    "qa",
                    "--method",
                    "cbr",
                    "--question",
                    f"Who wrote book number {i}?",
                    "--memory",
                    str(memory),
                    "--corpus",
                    str(CORPUS),
                    "--lm",
                    "openai/x",
                    "--api-base",
                    server.api_base,
                    "--out",
                    str(tmp_path / f"run{i}.json"),
                ],
                env=_env(tmp_path),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for i in range(3)
        ]
        results = [p.communicate(timeout=600) for p in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert "Traceback" not in err
    cases = CaseBank(memory / "cbr", frozen=True).cases()
    assert len(cases) == 3
    assert all(any(f"book number {i}?" in c.task_text for c in cases) for i in range(3))
    # every case is in the retrieval index too (no process saved an index that lost another's case)
    (namespace,) = {c.namespace for c in cases}
    bank = CaseBank(memory / "cbr", namespace=namespace, frozen=True)
    for i in range(3):
        assert len(bank.retrieve(f"Who wrote book number {i}?", k=3)) == 3
    for i in range(3):
        saved = json.loads((tmp_path / f"run{i}.json").read_text())
        assert saved["provenance"]["roles"]["lm"]["model"] == "openai/x"
        assert saved["provenance"]["started_at"] <= saved["provenance"]["ended_at"]  # ISO times of this run


def test_run_takes_any_task_inputs(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    example = tmp_path / "row.json"
    example.write_text(json.dumps({"question": "Who wrote Dune?", "answers": ["Frank Herbert"]}))
    with OpenAICompatServer(engine) as server:
        base = ["run", "--task", "qa", "--method", "closed_book", "--lm", "openai/x", "--api-base", server.api_base,
                "--out", str(tmp_path / "t.json")]  # fmt: skip
        by_input = CliRunner().invoke(app, [*base, "--input", "question=Where is Albany?"])
        assert by_input.exit_code == 0, by_input.output
        assert "Where is Albany?" in engine.calls[-1].prompt
        by_file = CliRunner().invoke(app, [*base, "--example", str(example)])
        assert by_file.exit_code == 0, by_file.output
        assert "Who wrote Dune?" in engine.calls[-1].prompt
        calls = server.chat_requests
        unknown = CliRunner().invoke(app, [*base, "--input", "topic=x"])
        malformed = CliRunner().invoke(app, [*base, "--input", "question"])
        missing = CliRunner().invoke(app, base)
        assert server.chat_requests == calls
    assert unknown.exit_code == 1 and "'topic' is not an input of task 'qa'" in unknown.output
    assert malformed.exit_code == 1 and "is not name=value" in malformed.output
    assert missing.exit_code == 1 and "task 'qa' needs question" in missing.output


def test_first_live_web_search_says_so_once(monkeypatch, capsys) -> None:
    from memento.config import load_settings
    from memento.web import factory
    from memento.web.ddgs_backend import DDGSBackend

    class _Client:
        def text(self, query: str, **kwargs: object) -> list[dict]:
            return [{"title": "T", "href": "https://example.org/a", "body": "b"}]

    monkeypatch.setattr(DDGSBackend, "_get_client", lambda self: _Client())
    factory.reset_live_web_notice()
    backend = factory.make_backend(load_settings())
    backend.search("first")
    backend.search("second")
    err = capsys.readouterr().err
    assert err.count("searching the live web") == 1 and "--corpus" in err
    # with a corpus configured there is no notice
    factory.reset_live_web_notice()
    corpus = factory.make_backend(load_settings(flags={"web": {"corpus": str(CORPUS)}}))
    corpus.search("Albany")
    assert "live web" not in capsys.readouterr().err
