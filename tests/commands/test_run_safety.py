"""`memento run`: concurrent CBR and JitMem runs on one memory (a directory or PostgreSQL) keep every case and
trajectory and do not wait for each other; any task's inputs; the live-web notice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
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


class _Rendezvous(ScriptedEngine):
    """A scripted LM whose first call of each of ``n`` runs (told apart by "book number i" in the prompt) waits
    until all ``n`` runs have a call in flight: runs serialised by a lock would never meet (the wait times out).
    After one timed-out wait no call waits again, so a run that died early costs the others one wait, not one per
    call (its error then shows in the test's failure instead of a subprocess timeout)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.seen: set[str] = set()
        self.met = False
        self.gave_up = False
        self._cond = threading.Condition()

    def reply(self, system: str, messages: list[dict[str, str]], **options: Any) -> str:
        found = re.search(r"book number (\d+)", " ".join(m["content"] for m in messages))
        if found is not None:
            with self._cond:
                self.seen.add(found.group(1))
                self._cond.notify_all()
                if not self.gave_up:
                    met = self._cond.wait_for(lambda: len(self.seen) >= self.n, timeout=120)
                    self.met, self.gave_up = self.met or met, not met
        return super().reply(system, messages, **options)


def _overlapping_runs(timeline: list[tuple[float, float, str]]) -> set[frozenset[str]]:
    """The pairs of runs (by question number) with LM calls in flight at the same time, from the server's log."""
    spans = []
    for started, ended, prompt in timeline:
        found = re.search(r"book number (\d+)", prompt)
        if found is not None:
            spans.append((started, ended, found.group(1)))
    return {frozenset((a[2], b[2])) for a in spans for b in spans if a[2] != b[2] and a[0] < b[1] and b[0] < a[1]}


@pytest.mark.parametrize("method", ["cbr", "jitmem"])
def test_three_concurrent_runs_keep_every_case_and_trajectory_and_overlap(tmp_path: Path, location, method) -> None:
    memory = location("mem")
    engine = _Rendezvous(3)
    with OpenAICompatServer(engine, latency=0.05) as server:
        commands = [
            [sys.executable, "-m", "memento.cli", "run", "--task", "qa", "--method", method,
             "--question", f"Who wrote book number {i}?", "--memory", str(memory), "--corpus", str(CORPUS),
             "--lm", "openai/x", "--api-base", server.api_base, "--out", str(tmp_path / f"run{i}.json")]
            for i in range(3)
        ]  # fmt: skip
        env = {**_env(tmp_path), "MEMENTO_JITMEM_TRAIN_GATE": "ground_truth"}
        procs = [
            subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for cmd in commands
        ]
        results = [p.communicate(timeout=600) for p in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert "Traceback" not in err
    # no run waited for another: the three met at the server, and its log shows their LM calls overlapping
    assert engine.met and len(_overlapping_runs(server.timeline)) == 3
    if method == "cbr":
        _check_cases(memory)
    else:
        _check_trajectories(memory)
    for i in range(3):
        saved = json.loads((tmp_path / f"run{i}.json").read_text())
        assert saved["provenance"]["roles"]["lm"]["model"] == "openai/x"


def _check_cases(memory) -> None:
    from memento.memory.case_bank import CaseBank

    cases = CaseBank(memory / "cbr", frozen=True).cases()
    assert len(cases) == 3
    assert all(any(f"book number {i}?" in c.task_text for c in cases) for i in range(3))
    # every case is in the retrieval index too (no process saved an index that lost another's case)
    (namespace,) = {c.namespace for c in cases}
    bank = CaseBank(memory / "cbr", namespace=namespace, frozen=True)
    for i in range(3):
        assert len(bank.retrieve(f"Who wrote book number {i}?", k=3)) == 3


def _check_trajectories(memory) -> None:
    from memento.memory.trajectory_bank import TrajectoryBank

    bank = TrajectoryBank.open_read_only(memory / "jitmem")
    stored = sorted(t.task_text for t, _ in bank.iter_all())
    assert len(stored) == 3 and all(any(f"book number {i}?" in t for t in stored) for i in range(3)), stored
    assert len(bank.retrieve("Who wrote book number 1?", k=3)) == 3


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
    from memento.core.config import load_settings
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
