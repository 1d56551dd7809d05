"""An `eval` reading a memory while a trainer commits to it reads one version from start to end, and says which.

Issue 23: an eval reading a memory while `train` committed to it produced one results.json mixing memory versions 1
and 2, and results did not record the version. Here a writer half-applies a batch before the eval starts and commits
versions 2 and 3 while it runs; every example must read version 1 (the head when the eval opened the memory), the
results file must say so, and a later rerun into the same directory must not mix the new version in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from memento.memory.dir_lock import DirectoryLock
from memento.memory.memento_memory import MementoMemory
from memento.testing import OpenAICompatServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared helper
from cli_subprocess import CORPUS, cli_env  # noqa: E402

RULE_1 = "Version-one rule: search the exact title in quotes."
RULE_2 = "Version-two rule: prefer the register of births."
RULE_3 = "Version-three rule: open the archive of the town hall."
N = 4


def _data(tmp_path: Path) -> Path:
    rows = [{"id": f"q{i}", "question": f"Which river runs through town {i}?", "answers": ["Ouse"]} for i in range(N)]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _cmd(tmp_path: Path, server: OpenAICompatServer, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "memento.cli", "eval", "--task", "qa", "--data", str(_data(tmp_path)), "--method",
        "memento", "--memory", str(tmp_path / "mem"), "--profile", "paper", "--out", str(tmp_path / "out"),
        "--lm", "openai/x", "--api-base", server.api_base, "--threads", "1", "--corpus", str(CORPUS), *extra,
    ]  # fmt: skip


def _commit(memory: MementoMemory, batch: int, rule: str) -> None:
    with memory.transaction(batch=batch) as tx:
        memory.web_action.add(rule, batch=batch, tx=tx)
    memory.commit_version(batch=batch)


def test_eval_reads_one_memory_version_while_a_trainer_commits(tmp_path: Path) -> None:
    writer = MementoMemory(tmp_path / "mem")
    _commit(writer, 1, RULE_1)
    lock = DirectoryLock(tmp_path / "mem").acquire()  # the trainer holds the directory, as `memento train` does
    with writer.transaction(batch=2) as tx:  # batch 2 is half applied when the eval starts
        writer.web_action.add(RULE_2, batch=2, tx=tx)
    with OpenAICompatServer(latency=0.2) as server:
        proc = subprocess.Popen(_cmd(tmp_path, server), env=cli_env(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 300
        while server.chat_requests < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        writer.commit_version(batch=2)  # the trainer commits while the eval runs
        _commit(writer, 3, RULE_3)
        lock.release()
        at_commit = len(server.engine.calls)
        _, err = proc.communicate(timeout=600)
        prompts = [call.prompt for call in server.engine.calls]
    assert proc.returncode == 0, err[-3000:]
    assert len(prompts) > at_commit  # the eval went on after the commits
    assert any(RULE_1 in p for p in prompts)  # the memory reached the prompts
    assert not any(RULE_2 in p or RULE_3 in p for p in prompts)
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["memory"]["memento_memory"]["version"] == 1 and saved["n"] == N
    trajectories = [json.loads(line) for line in (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()]
    assert [t["memory_version"] for t in trajectories] == [1] * N

    # rerunning into the same directory would put version-3 examples next to version-1 ones: refused in one line
    with OpenAICompatServer() as server:
        again = subprocess.run(_cmd(tmp_path, server), env=cli_env(tmp_path), capture_output=True, text=True,
                               timeout=600)  # fmt: skip
        assert server.chat_requests == 0
    assert again.returncode == 1 and "another state of the memory" in again.stderr, again.stderr[-3000:]
    assert "version 1" in again.stderr and "version 3" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    with OpenAICompatServer() as server:
        fresh = subprocess.run(_cmd(tmp_path, server, "--fresh"), env=cli_env(tmp_path), capture_output=True,
                               text=True, timeout=600)  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert json.loads((tmp_path / "out" / "results.json").read_text())["memory"]["memento_memory"]["version"] == 3
    writer.close()
