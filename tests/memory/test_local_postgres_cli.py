"""The README's command for a local PostgreSQL memory: `python -m memento.execution.local_postgres start DIR` starts a
server
and prints a location that `--memory` takes; `stop` and `destroy` end it and remove its files."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.memory.memento_memory import MementoMemory


def _module(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMENTO_")}
    return subprocess.run(
        [sys.executable, "-m", "memento.execution.local_postgres", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.usefixtures("postgres_server")  # skips without the server binaries (fails under CI=true)
def test_the_readme_command_starts_a_server_whose_location_a_memory_command_takes(tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="memento-pg-readme-", dir="/tmp")) / "server"  # outside pytest's 0700 folders
    source = tmp_path / "mem"
    memory = MementoMemory(source)
    memory.facts.add("Lyon", "Lyon was founded in 43 BC.")
    memory.commit_version(batch=1)
    memory.close()
    started = _module("start", str(root), "--database", "team")
    try:
        assert started.returncode == 0, started.stderr
        location = started.stdout.strip()
        assert location.startswith("postgresql://postgres@127.0.0.1:") and location.endswith("/team")  # no password
        runner = CliRunner()
        copied = runner.invoke(app, ["memory", "copy", str(source), location])
        assert copied.exit_code == 0 and "verified identical" in copied.output, copied.output
        same = runner.invoke(app, ["memory", "diff", "--memory", location, "--against", str(source)])
        assert same.exit_code == 0 and "same contents" in same.output, same.output
        assert MementoMemory(location, read_only=True).version == 1
    finally:
        stopped = _module("stop", str(root))
        destroyed = _module("destroy", str(root))
    assert stopped.returncode == 0 and destroyed.returncode == 0, stopped.stderr + destroyed.stderr
    assert not root.exists()
    root.parent.rmdir()
