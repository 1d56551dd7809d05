"""A provider that echoes the API key in its errors: the key never appears in a printed line or a written file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memento.testing import OpenAICompatServer

KEY = "k3y-NOT-provider-shaped-4242abcd"  # found only because memento registers its roles' keys


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    rows = [{"question": f"Which river runs through town {i}?", "answers": ["the Ouse"]} for i in range(3)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _memento(args: list[str], *, cwd: Path, api_base: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMENTO_")}
    env.update(
        MEMENTO_LM="openai/x",
        MEMENTO_LM_API_BASE=api_base,
        MEMENTO_LM_API_KEY=KEY,
        MEMENTO_LM_NUM_RETRIES="0",
        HOME=str(cwd / "home"),
        COLUMNS="60",  # narrow: a wrapped line must not split the key past the scrubber
    )
    return subprocess.run(
        [sys.executable, "-c", "from memento.cli import main; main()", "-vv", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("status", [401, 400])
def test_eval_never_prints_or_saves_an_echoed_key(tmp_path, status, leaked_in):
    data = _data(tmp_path)
    with OpenAICompatServer(echo_key_status=status) as server:
        proc = _memento(
            ["eval", "--task", "multihop", "--data", str(data), "--method", "closed_book", "--out", "out"],
            cwd=tmp_path,
            api_base=server.api_base,
        )
        assert server.requests, "the provider was never asked"
    printed = proc.stdout + proc.stderr
    assert "Incorrect API key" in printed or (tmp_path / "out").exists(), printed[-2000:]
    assert KEY not in printed, printed[-2000:]
    assert leaked_in(tmp_path, [KEY]) == []


def test_run_never_prints_or_saves_an_echoed_key(tmp_path, leaked_in):
    with OpenAICompatServer(echo_key_status=400) as server:
        proc = _memento(
            ["run", "--method", "closed_book", "--out", "runs", "Which river runs through York?"],
            cwd=tmp_path,
            api_base=server.api_base,
        )
    printed = proc.stdout + proc.stderr
    assert KEY not in printed, printed[-2000:]
    assert leaked_in(tmp_path, [KEY]) == []


def test_memory_items_never_hold_a_registered_secret_or_url_password(tmp_path, leaked_in):
    from memento.memory.memento_memory import MementoMemory
    from memento.utils.scrub import register_secret

    register_secret(KEY)
    memory = MementoMemory(tmp_path / "mem")
    memory.craft.add(f"Use the key {KEY} at http://u:Pw-in-url-77@10.0.0.1/api when searching.")
    memory.facts.add("Acme", f"Acme's token is {KEY}.", sources=["http://u:Pw-in-url-77@acme.test/"])
    memory.db.close()
    assert leaked_in(tmp_path / "mem", [KEY, "Pw-in-url-77"]) == []
