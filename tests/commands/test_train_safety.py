"""`memento train`: one writer per memory (a directory or PostgreSQL), and an LM that fails is not a batch that
succeeded."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from memento.memory.backends import writer_lock_holder
from memento.memory.dir_lock import DirectoryLock
from memento.memory.memento_memory import MementoMemory
from memento.testing import OpenAICompatServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from memento_training_fixture import make_engine, write_data  # noqa: E402

from commands.test_train_resume import _command, _env, _summary  # noqa: E402


def test_two_concurrent_trainers_apply_each_batch_once(tmp_path: Path, location) -> None:
    shared_memory = location("shared")  # a directory, or a PostgreSQL database (the advisory lock)
    corpus, data = write_data(tmp_path / "data")
    env = _env(tmp_path)
    engine = make_engine(delay=0.02)
    with OpenAICompatServer(engine) as server:
        ref = subprocess.run(
            _command(data, corpus, tmp_path / "ref", server), env=env, capture_output=True, text=True, timeout=300
        )
        assert ref.returncode == 0, ref.stderr[-2000:]
        calls = server.chat_requests
        # the first trainer holds the lock for ~calls x 0.25 s: far longer than the second takes to start and reach it
        engine.delay = 0.25
        cmd = _command(data, corpus, shared_memory, server)
        first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120  # the second starts once the first holds the lock (not after a guess)
        while not (writer_lock_holder(shared_memory) or "").startswith(f"pid {first.pid} "):
            assert first.poll() is None and time.monotonic() < deadline, "the first trainer never took the lock"
            time.sleep(0.05)
        second = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out1, err1 = first.communicate(timeout=300)
        out2, err2 = second.communicate(timeout=300)
    assert calls > 20  # (the reference run's LM calls: what the first trainer spends at 0.25 s each)
    assert first.returncode == 0 and second.returncode == 0, (err1[-2000:], err2[-2000:])
    assert "Traceback" not in err1 + err2
    assert "in use by pid" in err1 + err2  # the later writer said it waits, in one line
    shared, reference = _summary(shared_memory), _summary(tmp_path / "ref")
    assert shared["integrity"] == "ok"
    assert [v[:2] for v in shared["versions"]] == [(1, 1), (2, 2)]  # two batches, each applied once
    assert shared == reference


def test_no_wait_refuses_in_one_line_naming_the_holder(tmp_path: Path) -> None:
    corpus, data = write_data(tmp_path / "data")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time\nfrom memento.memory.dir_lock import DirectoryLock\n"
         "with DirectoryLock(sys.argv[1]):\n    print('locked', flush=True); time.sleep(60)", str(tmp_path / "mem")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with OpenAICompatServer(make_engine()) as server:
            cmd = [*_command(data, corpus, tmp_path / "mem", server), "--no-wait"]
            result = subprocess.run(cmd, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
            assert server.chat_requests == 0
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [lines[0]] and f"pid {holder.pid}" in lines[0] and "Traceback" not in result.stderr


def test_failing_lm_commits_nothing_and_a_rerun_retries_the_batch(tmp_path: Path) -> None:
    corpus, data = write_data(tmp_path / "data")
    env = {**_env(tmp_path), "MEMENTO_LM_NUM_RETRIES": "0"}
    memory = tmp_path / "mem"
    with OpenAICompatServer(make_engine(), always_status=500) as broken:
        failed = subprocess.run(
            _command(data, corpus, memory, broken), env=env, capture_output=True, text=True, timeout=300
        )
    assert failed.returncode == 1, failed.stderr[-2000:]
    assert "training stopped at batch 1" in failed.stderr and "nothing committed" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert MementoMemory(memory, read_only=True).version == 0
    with OpenAICompatServer(make_engine()) as healthy:
        again = subprocess.run(
            _command(data, corpus, memory, healthy), env=env, capture_output=True, text=True, timeout=300
        )
    assert again.returncode == 0, again.stderr[-2000:]
    mem = MementoMemory(memory, read_only=True)
    assert [(v["version"], v["batch"]) for v in mem.versions()] == [(1, 1), (2, 2)]


def test_the_lock_is_free_after_training(tmp_path: Path) -> None:
    corpus, data = write_data(tmp_path / "data")
    with OpenAICompatServer(make_engine()) as server:
        done = subprocess.run(
            _command(data, corpus, tmp_path / "mem", server), env=_env(tmp_path), capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    with DirectoryLock(tmp_path / "mem", wait=False) as lock:
        assert lock.held
