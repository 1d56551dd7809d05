"""DirectoryLock: one writer per memory directory across processes, re-entrant inside one."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memento.core.cancel import request_cancel, reset_cancel
from memento.core.errors import Cancelled, MemoryLockedError
from memento.memory.dir_lock import LOCK_FILE_NAME, DirectoryLock, lock_holder

HOLDER = """
import sys, time
from memento.memory.dir_lock import DirectoryLock
with DirectoryLock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _hold(path: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_no_wait_names_the_holder_in_one_line(tmp_path: Path) -> None:
    proc = _hold(tmp_path / "mem", 30)
    try:
        with pytest.raises(MemoryLockedError) as err, DirectoryLock(tmp_path / "mem", wait=False):
            pass
        message = str(err.value)
        assert f"pid {proc.pid}" in message and "--no-wait" in message and "\n" not in message
        assert (lock_holder(tmp_path / "mem") or "").startswith(f"pid {proc.pid}")
    finally:
        proc.kill()
        proc.wait()


def test_waiting_writer_reports_once_and_gets_the_lock_when_the_holder_ends(tmp_path: Path) -> None:
    proc = _hold(tmp_path / "mem", 1.0)
    messages: list[str] = []
    try:
        start = time.monotonic()
        with DirectoryLock(tmp_path / "mem", on_wait=messages.append) as lock:
            assert lock.held
            assert (lock_holder(tmp_path / "mem") or "").startswith(f"pid {os.getpid()}")
        assert time.monotonic() - start > 0.3
        assert len(messages) == 1 and f"pid {proc.pid}" in messages[0] and "waiting" in messages[0]
    finally:
        proc.wait()
    # released: the lock file is emptied and another process can take it at once
    assert lock_holder(tmp_path / "mem") is None
    _hold(tmp_path / "mem", 0).wait()


def test_a_crashed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    proc = _hold(tmp_path / "mem", 30)
    proc.kill()
    proc.wait()
    with DirectoryLock(tmp_path / "mem", wait=False) as lock:
        assert lock.held


def test_reentrant_inside_the_process_from_any_thread(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with DirectoryLock(tmp_path, wait=False):
                pass
        except BaseException as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    with DirectoryLock(tmp_path) as outer:
        with DirectoryLock(tmp_path, wait=False):
            assert outer.held
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outer.held
    assert errors == []
    assert not DirectoryLock(tmp_path).held
    assert (tmp_path / LOCK_FILE_NAME).exists()


def test_cancel_stops_a_waiting_writer(tmp_path: Path) -> None:
    proc = _hold(tmp_path / "mem", 30)
    timer = threading.Timer(0.3, request_cancel)
    try:
        timer.start()
        with pytest.raises(Cancelled), DirectoryLock(tmp_path / "mem", on_wait=lambda m: None):
            pass
    finally:
        timer.cancel()
        reset_cancel()
        proc.kill()
        proc.wait()
