"""`memento train` end to end: SIGKILL mid-batch, rerun resumes with no batch applied twice; memory sub-commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.errors import DataError
from memento.memory.memento_memory import MementoMemory
from memento.testing import OpenAICompatServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from memento_training_fixture import make_engine, write_data  # noqa: E402


def _command(data: Path, corpus: Path, memory: object, server: OpenAICompatServer) -> list[str]:
    return [
        sys.executable, "-m", "memento.cli", "train",
        "--task", "multihop", "--data", str(data), "--memory", str(memory), "--batch-size", "3",
        "--corpus", str(corpus), "--threads", "2", "--embedder", "hashing",
        "--lm", "openai/scripted", "--api-base", server.api_base,
    ]  # fmt: skip


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMENTO_")}
    env.update(
        MEMENTO_LM_API_KEY="test-key",
        MEMENTO_LM_CACHE="false",
        MEMENTO_WEB_CACHE_DIR=str(tmp_path / "webcache"),
        MEMENTO_BUDGETS_INITIAL_QUESTIONS="2",
        MEMENTO_BUDGETS_TOTAL_QUESTIONS="3",
        MEMENTO_BUDGETS_STEPS_PER_QUESTION="3",
        DSPY_CACHEDIR=str(tmp_path / "dspy"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        COLUMNS="200",
    )
    return env


def _phase(memory: object, key: str) -> str | None:
    """The phase a trainer's checkpoint records, read the way a second process would (None: nothing yet)."""
    import json

    from memento.memory.backends import open_database
    from memento.memory.database import DatabaseError

    try:
        db = open_database(memory, "memory.db", read_only=True)  # type: ignore[arg-type]
    except (DataError, DatabaseError):
        return None
    try:
        rows = db.query("SELECT value FROM checkpoints WHERE key=?", (key,))
    except DatabaseError:  # the tables are not there yet
        return None
    finally:
        db.close()
    return json.loads(rows[0][0])["phase"] if rows else None


def _summary(memory_dir: Path) -> dict:
    mem = MementoMemory(memory_dir, read_only=True)
    s = mem.stats()
    return {
        "versions": [(v["version"], v["batch"], v["status"]) for v in mem.versions()],
        "m2": (
            s["decomposition"]["rules"],
            s["decomposition"]["total_support"],
            s["decomposition"]["total_contradiction"],
        ),
        "m3": (s["web_action"]["rules"], s["web_action"]["total_support"], s["web_action"]["total_contradiction"]),
        "facts": (s["facts"]["facts"], sum(f.support for f in mem.facts.all())),
        "craft": sorted((e.text, e.support) for e in mem.craft.all()),
        "batches_in_log": sorted({c["batch"] for c in mem.db.changes() if c["batch"] is not None}),
        "integrity": mem.db.integrity_check(),
    }


@pytest.mark.slow
def test_sigkill_mid_batch_then_rerun_equals_uninterrupted_run(tmp_path, location):
    victim_memory = location("victim")
    corpus, data = write_data(tmp_path / "data")
    env = _env(tmp_path)
    with OpenAICompatServer(make_engine(delay=0.02)) as server:
        # the reference: one uninterrupted run
        ref = subprocess.run(
            _command(data, corpus, tmp_path / "ref", server), env=env, capture_output=True, text=True, timeout=240
        )
        assert ref.returncode == 0, ref.stderr[-2000:]
        assert "MEMENTO training batches" in ref.stdout
        assert "A: M3 web rules: runs seen" in ref.stdout and "C: M2 rules: runs seen" in ref.stdout  # the audit

        # the victim: killed once batch 2's forward pass is checkpointed, before the batch is applied
        proc = subprocess.Popen(
            _command(data, corpus, victim_memory, server),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 240
        killed_at = None
        while time.monotonic() < deadline and proc.poll() is None:
            phase = _phase(victim_memory, "trainer/batch/00002")
            if phase in ("forward", "consolidated", "scored"):
                proc.send_signal(signal.SIGKILL)
                killed_at = phase
                break
            time.sleep(0.01)
        proc.wait(timeout=30)
        assert killed_at is not None, "the trainer finished before it could be killed"
        assert proc.returncode == -signal.SIGKILL
        mid = MementoMemory(victim_memory, read_only=True)
        assert mid.version == 1 and mid.db.integrity_check() == "ok"

        again = subprocess.run(
            _command(data, corpus, victim_memory, server), env=env, capture_output=True, text=True, timeout=240
        )
        assert again.returncode == 0, again.stderr[-2000:]

    victim, reference = _summary(victim_memory), _summary(tmp_path / "ref")
    assert victim["integrity"] == "ok"
    assert [v[:2] for v in victim["versions"]] == [(1, 1), (2, 2)]
    assert victim == reference


@pytest.mark.slow
@pytest.mark.parametrize("commit", [2, 5])
def test_crash_inside_a_commit_then_rerun_equals_uninterrupted_run(tmp_path, location, commit):
    """The process dies inside the n-th memory transaction (every write sent, COMMIT not: a test hook), then the same
    command resumes to the memory an uninterrupted run builds (compared by content across backends too)."""
    corpus, data = write_data(tmp_path / "data")
    env = _env(tmp_path)
    victim = location("crash")
    with OpenAICompatServer(make_engine()) as server:
        ref = subprocess.run(
            _command(data, corpus, tmp_path / "ref", server), env=env, capture_output=True, text=True, timeout=240
        )
        assert ref.returncode == 0, ref.stderr[-2000:]
        crashed = subprocess.run(
            _command(data, corpus, victim, server),
            env={**env, "MEMENTO_TEST_CRASH_AT_COMMIT": f"memory:{commit}"},
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert crashed.returncode == 70, crashed.stderr[-2000:]  # died inside the transaction, as planned
        assert MementoMemory(victim, read_only=True).db.integrity_check() == "ok"
        again = subprocess.run(_command(data, corpus, victim, server), env=env, capture_output=True, text=True)
        assert again.returncode == 0, again.stderr[-2000:]
    assert _summary(victim) == _summary(tmp_path / "ref")
    same = CliRunner().invoke(app, ["memory", "diff", "--memory", str(victim), "--against", str(tmp_path / "ref")])
    assert same.exit_code == 0 and "same contents" in same.output, same.output


def test_memory_commands(tmp_path):
    mem = MementoMemory(tmp_path / "mem")
    with mem.transaction(batch=1) as tx:
        mem.web_action.add("Search the exact title in quotes.", batch=1, tx=tx)
        mem.facts.add("Dune", "Dune was written by Frank Herbert.", batch=1, tx=tx)
    mem.commit_version(batch=1, note="first")
    with mem.transaction(batch=2) as tx:
        mem.craft.add("Read the primary source first.", batch=2, tx=tx)
    mem.commit_version(batch=2, note="second")
    runner = CliRunner()
    d = ["--memory", str(tmp_path / "mem")]

    out = runner.invoke(app, ["memory", "stats", *d])
    assert out.exit_code == 0, out.output
    assert "M3 web-action" in out.output and "second" in out.output

    out = runner.invoke(app, ["memory", "show", *d, "--store", "web_action"])
    assert out.exit_code == 0 and "[active] Search the exact title" in out.output and "Frank Herbert" not in out.output

    out = runner.invoke(app, ["memory", "diff", "1", "2", *d])
    assert out.exit_code == 0 and "+ craft" in out.output and "primary source" in out.output

    out = runner.invoke(app, ["memory", "export", str(tmp_path / "exp"), *d, "--version", "1"])
    assert out.exit_code == 0 and (tmp_path / "exp" / "facts.md").read_text().count("Frank Herbert") == 1

    out = runner.invoke(app, ["memory", "rollback", "1", *d])
    assert out.exit_code == 0 and "version 2 -> version 1" in out.output
    assert MementoMemory(tmp_path / "mem").version == 1 and len(MementoMemory(tmp_path / "mem").craft) == 0

    out = runner.invoke(app, ["memory", "rollback", "7", *d])
    assert out.exit_code == 1 and "unknown memory version 7" in out.output

    out = runner.invoke(app, ["memory", "stats", "--memory", str(tmp_path / "nowhere")])
    assert out.exit_code == 1 and "no memory at" in out.output
