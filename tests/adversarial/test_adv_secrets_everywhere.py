"""No file memento writes holds an API key or an `--api-base` password, whatever the provider echoes.

Issue 23: the MLflow directory held the raw key (a traceback in traces.json), the trainer's checkpoint row in
memory.db held a key the provider echoed, and a password in `--api-base http://user:pw@host/v1` reached stderr,
results.json and the LM call log, and was resolved as a host name. Here a local provider echoes the credential it
receives in a 401 body, or in every completion; `run`, `eval`, `train` and `compare` run with `--mlflow` and `--log-lm`,
`report` renders what they wrote, and every byte of every file under the test's directory (outputs, memory and bank
SQLite files with any WAL, the MLflow store, DSPy's cache, the URL cache, HOME) is searched for the key, the password
and the Basic token they travel as.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memento.testing import OpenAICompatServer

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "multihop" / "corpus.jsonl"
KEY = "k3y-EVERYWHERE-not-provider-shaped-7781"
USER, PASSWORD = "alice", "Pw-in-api-base-5519"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def _data(tmp_path: Path) -> Path:
    rows = [{"id": f"q{i}", "question": f"Which river runs through town {i}?", "answers": ["Ouse"]} for i in range(4)]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _setup(tmp_path: Path, source: str, server: OpenAICompatServer) -> tuple[dict[str, str], list[str]]:
    """The environment and the LM flags that hand the credential to memento through ``source``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMENTO_") and not k.endswith("_API_KEY")}
    env.update(
        HOME=str(tmp_path / "home"),
        DSPY_CACHEDIR=str(tmp_path / "dspy-cache"),  # DSPy's response cache is on: it must stay clean too
        MEMENTO_WEB_CACHE_DIR=str(tmp_path / "url-cache"),
        MEMENTO_LM_NUM_RETRIES="0",
        MEMENTO_BUDGETS_INITIAL_QUESTIONS="1",
        MEMENTO_BUDGETS_TOTAL_QUESTIONS="1",
        MEMENTO_BUDGETS_STEPS_PER_QUESTION="2",
        COLUMNS="80",
    )
    api_base = server.api_base
    if source == "MEMENTO_LM_API_KEY":
        env["MEMENTO_LM_API_KEY"] = KEY
    elif source == "OPENAI_API_KEY":
        env["OPENAI_API_KEY"] = KEY
    elif source == "api_key_env":
        env.update(MEMENTO_LM_API_KEY_ENV="MY_PROVIDER_KEY", MY_PROVIDER_KEY=KEY)
    else:  # credentials in the URL
        api_base = api_base.replace("http://", f"http://{USER}:{PASSWORD}@")
    flags = ["--lm", "openai/x", "--api-base", api_base, "--corpus", str(CORPUS), "--threads", "2"]
    return env, flags


def _memento(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memento.cli", "-vv", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip


def _observe(tmp_path: Path, name: str) -> list[str]:
    return ["--mlflow", f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}", "--log-lm", str(tmp_path / f"{name}.jsonl")]


def _leaks(tmp_path: Path, printed: str) -> list[str]:
    needles = [KEY, PASSWORD, TOKEN]
    hits = [f"<printed>: {n}" for n in needles if n in printed]
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits.extend(f"{path.relative_to(tmp_path)}: {n}" for n in needles if n.encode() in data)
    return hits


@pytest.mark.parametrize("source", ["MEMENTO_LM_API_KEY", "api_base password"])
def test_a_provider_echoing_the_credential_in_completions_leaves_it_in_no_file(tmp_path: Path, source: str) -> None:
    data = _data(tmp_path)
    (tmp_path / "work").mkdir()
    printed = ""
    with OpenAICompatServer(echo_key_in_completion=True) as server:
        env, lm = _setup(tmp_path, source, server)
        runs = {
            "run": ["run", "--method", "memento", "--memory", str(tmp_path / "mem"), "--out", "run.json",
                    "Which river runs through York?"],
            "train": ["train", "--task", "qa", "--data", str(data), "--memory", str(tmp_path / "mem"),
                      "--batch-size", "2", "--embedder", "hashing", *_observe(tmp_path, "train")],
            "eval": ["eval", "--task", "qa", "--data", str(data), "--method", "memento", "--memory",
                     str(tmp_path / "mem"), "--out", "eval", *_observe(tmp_path, "eval")],
            "compare": ["compare", "--task", "qa", "--data", str(data), "--n-train", "2", "--n-test", "2",
                        "--methods", "closed_book,memento,jitmem,cbr", "--embedder", "hashing", "--out", "cmp",
                        *_observe(tmp_path, "compare")],
        }  # fmt: skip
        for name in ("train", "run", "eval", "compare"):
            proc = _memento([*runs[name], *lm], env, tmp_path / "work")
            printed += proc.stdout + proc.stderr
            # no crash (libraries' -vv DEBUG lines may quote tracebacks inside their messages)
            assert "\nTraceback (most recent call last)" not in "\n" + proc.stderr, (name, proc.stderr[-3000:])
        assert server.chat_requests > 0
        if source == "api_base password":  # the credentials travelled as a Basic header, never in the URL
            assert {r["authorization"] for r in server.requests} == {f"Basic {TOKEN}"}
    for target in ("eval", "cmp", str(tmp_path / "mem")):
        proc = _memento(["report", target], env, tmp_path / "work")
        printed += proc.stdout + proc.stderr
        assert proc.returncode == 0, proc.stderr[-3000:]
    work = tmp_path / "work"
    assert (work / "eval" / "results.json").exists() and (work / "cmp" / "results.json").exists()
    assert (work / "eval" / "report.html").exists() and any((tmp_path / "mlflow").rglob("*"))
    assert any((tmp_path / "dspy-cache").rglob("*")) and (tmp_path / "mem" / "memory.db").exists()
    assert _leaks(tmp_path, printed) == []


@pytest.mark.parametrize("source", ["OPENAI_API_KEY", "MEMENTO_LM_API_KEY", "api_key_env", "api_base password"])
def test_a_provider_echoing_the_credential_in_a_401_leaves_it_in_no_file(tmp_path: Path, source: str) -> None:
    data = _data(tmp_path)
    (tmp_path / "work").mkdir()
    with OpenAICompatServer(echo_key_status=401) as server:
        env, lm = _setup(tmp_path, source, server)
        args = ["eval", "--task", "qa", "--data", str(data), "--method", "closed_book", "--out", "eval"]
        proc = _memento([*args, *_observe(tmp_path, "eval"), *lm], env, tmp_path / "work")
        assert server.requests, "the provider was never asked"
    assert proc.returncode == 1 and "refused the API key" in proc.stderr, proc.stderr[-3000:]
    assert any((tmp_path / "mlflow").rglob("*"))  # the MLflow run (and its trace of the failed call) was written
    assert _leaks(tmp_path, proc.stdout + proc.stderr) == []
