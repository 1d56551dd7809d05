"""A provider that stops answering cannot hold a run: SIGTERM ends `eval`, `train` and `compare` within seconds
(exit 143), no request is sent after the signal, and what finished is on disk; SIGKILL and a double Ctrl-C lose no
finished example either (the evaluation journal), and a rerun resumes from it.

The CLI runs in a subprocess (``python -m memento.cli``: the command's exit backstop is on) against a local
OpenAI-compatible server that answers its first requests and then reads requests without ever answering them.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memento.testing import OpenAICompatServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared helper
from cli_subprocess import CORPUS, cli_env  # noqa: E402

N = 12


def _data(tmp_path: Path, n: int = N) -> Path:
    rows = [{"id": f"q{i}", "question": f"What is item number {i}?", "answers": [f"item {i}"]} for i in range(n)]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    # in-flight calls get 1 s; the backstop ends the process 5 s after that at most
    return cli_env(tmp_path, MEMENTO_RUN_CANCEL_GRACE="1")


def _cmd(command: str, tmp_path: Path, server: OpenAICompatServer) -> list[str]:
    data = _data(tmp_path)
    common = ["--lm", "openai/x", "--api-base", server.api_base, "--threads", "2", "--corpus", str(CORPUS)]
    args = {
        "eval": ["--task", "qa", "--data", str(data), "--method", "closed_book", "--out", str(tmp_path / "out")],
        "train": ["--task", "qa", "--data", str(data), "--memory", str(tmp_path / "mem"), "--batch-size", "2",
                  "--embedder", "hashing"],
        "compare": ["--task", "qa", "--data", str(data), "--n-train", "4", "--n-test", "8", "--methods",
                    "closed_book", "--out", str(tmp_path / "cmp")],
    }[command]  # fmt: skip
    return [sys.executable, "-m", "memento.cli", command, *args, *common]


def _wait(condition, proc: subprocess.Popen, what: str, seconds: float = 240.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the command ended before {what}: {proc.communicate()[1][-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _versions(memory: Path) -> int:
    db = memory / "memory.db"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM versions").fetchone()[0])
    except sqlite3.Error:
        return 0


def _answered(server: OpenAICompatServer) -> list[str]:
    """The examples the provider answered before it hung: which 4 depends on how the two threads were scheduled (a
    thread may send q4 before the other sends q3)."""
    asked = [call.prompt for call in server.engine.calls]
    answered = sorted(f"q{i}" for i in range(N) if any(f"item number {i}?" in prompt for prompt in asked))
    assert len(answered) == 4, answered
    return answered


def _journal_ids(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return sorted(json.loads(line)["example"]["id"] for line in lines[1:])


@pytest.mark.parametrize("command", ["eval", "train", "compare"])
def test_sigterm_ends_the_command_against_a_provider_that_never_answers(tmp_path: Path, command: str) -> None:
    # eval / compare (closed_book, one call per test example): 4 examples are answered, then nothing is
    with OpenAICompatServer(hang_after=4 if command != "train" else None) as server:
        proc = subprocess.Popen(_cmd(command, tmp_path, server), env=_env(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        if command == "train":  # the first batch is committed, then the provider stops answering
            _wait(lambda: _versions(tmp_path / "mem") >= 1, proc, "the first memory version")
            server.hang_after = server.chat_requests
            hung = server.chat_requests + 1
        else:
            hung = 6  # both threads wait for an answer that never comes
        _wait(lambda: server.chat_requests >= hung, proc, "requests that hang")
        time.sleep(0.5)
        at_signal = server.chat_requests
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=120)
        seconds = time.monotonic() - sent
        after = server.chat_requests
    assert proc.returncode == 143, err[-3000:]
    assert seconds < 10, (seconds, err[-3000:])  # issue 23: within 10 s (1 s grace + at most the 5 s backstop)
    assert after == at_signal, "a request was sent after the signal"
    assert "cancelled by SIGTERM" in err and "Traceback" not in err, err[-3000:]
    if command == "eval":
        assert _journal_ids(tmp_path / "out" / "journal.jsonl") == _answered(server)
        saved = json.loads((tmp_path / "out" / "results.json").read_text())
        assert saved["complete"] is False and saved["n"] == 4
    elif command == "compare":
        journal = tmp_path / "cmp" / "closed_book" / "test" / "journal.jsonl"
        finished = _journal_ids(journal)
        assert len(finished) == 4
        with OpenAICompatServer() as server:  # the rerun tests only the 4 test examples that had not finished
            rerun = subprocess.run(_cmd("compare", tmp_path, server), env=_env(tmp_path), capture_output=True,
                                   text=True, timeout=600)  # fmt: skip
            asked = [call.prompt for call in server.engine.calls]
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert len(asked) == 4 and not any(f"item number {i[1:]}?" in " ".join(asked) for i in finished)
        tested = json.loads((tmp_path / "cmp" / "closed_book" / "test" / "results.json").read_text())
        assert tested["n"] == 8 and tested["resumed"] == 4 and not journal.exists()
    else:
        assert _versions(tmp_path / "mem") >= 1  # the committed batch is kept


def _start_eval(tmp_path: Path, server: OpenAICompatServer) -> subprocess.Popen:
    return subprocess.Popen(_cmd("eval", tmp_path, server), env=_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def _rerun_resumes(tmp_path: Path, finished: list[str]) -> None:
    with OpenAICompatServer() as server:
        rerun = subprocess.run(_cmd("eval", tmp_path, server), env=_env(tmp_path), capture_output=True, text=True,
                               timeout=600)  # fmt: skip
        asked = " ".join(call.prompt for call in server.engine.calls)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    final = json.loads((tmp_path / "out" / "results.json").read_text())
    assert final["complete"] is True and final["n"] == N and final["resumed"] == len(finished)
    for i in range(N):  # the finished examples were not asked again, the others were
        assert (f"item number {i}?" in asked) == (f"q{i}" not in finished), i
    assert not (tmp_path / "out" / "journal.jsonl").exists()  # complete: the journal's examples are in results.json
    trajectories = (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()
    assert len(trajectories) == N


def test_sigkill_of_eval_after_four_finished_examples_keeps_them(tmp_path: Path) -> None:
    with OpenAICompatServer(hang_after=4) as server:
        proc = _start_eval(tmp_path, server)
        _wait(lambda: server.chat_requests >= 6, proc, "requests that hang")
        journal = tmp_path / "out" / "journal.jsonl"
        _wait(lambda: journal.exists() and len(journal.read_text().splitlines()) == 5, proc, "4 journal lines")
        proc.kill()
        proc.communicate(timeout=60)
    assert not (tmp_path / "out" / "results.json").exists()  # nothing could be written at the end
    assert _journal_ids(journal) == _answered(server)
    _rerun_resumes(tmp_path, _answered(server))


def test_double_ctrl_c_keeps_the_finished_examples(tmp_path: Path) -> None:
    with OpenAICompatServer(hang_after=4) as server:
        proc = _start_eval(tmp_path, server)
        _wait(lambda: server.chat_requests >= 6, proc, "requests that hang")
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)  # the second Ctrl-C interrupts at once, before any results.json
        _, err = proc.communicate(timeout=60)
        at_exit = server.chat_requests
    assert proc.returncode == 130, err[-3000:]
    assert at_exit == 6
    assert _journal_ids(tmp_path / "out" / "journal.jsonl") == _answered(server)
    _rerun_resumes(tmp_path, _answered(server))
