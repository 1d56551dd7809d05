"""One writer per memory directory: an OS-level lock (``fcntl.flock``) on a lock file inside the directory.

The lock separates processes: a second ``memento train`` on the same memory waits (or, with ``wait=False``,
fails with one line naming the holder). Inside one process the lock is re-entrant from any thread: the
command takes it once around its writes, and the stores it calls may take it again; threads of one process
coordinate through the stores' own locks. The lock file records the holder's pid and command line, so the
message can say who holds it. The OS releases the lock when the holder dies, so a crash never leaves a stale
lock behind.

Example:
    >>> import tempfile
    >>> from memento.memory.dir_lock import DirectoryLock
    >>> with tempfile.TemporaryDirectory() as d, DirectoryLock(d) as lock:
    ...     lock.held
    True
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memento.core.errors import ConfigError, MemoryLockedError
from memento.core.paths import writable_dir
from memento.utils.scrub import scrub

__all__ = ["DirectoryLock", "LOCK_FILE_NAME", "lock_holder", "writer_active"]

logger = logging.getLogger(__name__)

LOCK_FILE_NAME = ".memento.lock"
_POLL_SECONDS = 0.1


class _Held:
    """This process's hold on one directory: the open lock file and how many entries share it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.count = 0


_registry: dict[str, _Held] = {}
_registry_lock = threading.Lock()
_path_locks: dict[str, threading.Lock] = {}


def _path_lock(key: str) -> threading.Lock:
    with _registry_lock:
        return _path_locks.setdefault(key, threading.Lock())


def writer_active(path: str | Path) -> bool:
    """Whether a writer holds the lock of directory ``path`` now (this process or another), found without taking the
    lock or creating anything (a reader's question: is a batch being written?)."""
    directory = Path(path)
    with _registry_lock:
        if str(directory.resolve()) in _registry:
            return True
    try:
        fd = os.open(directory / LOCK_FILE_NAME, os.O_RDONLY)
    except OSError:  # no lock file: no writer ever locked the directory
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing the descriptor also drops the shared lock it may hold
    return False


def lock_holder(path: str | Path) -> str | None:
    """Who holds the lock of ``path`` as recorded in its lock file (``"pid 123 (memento train ...)"``), or None."""
    try:
        text = (Path(path) / LOCK_FILE_NAME).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text:
        return None
    pid, _, command = text.partition("\n")
    return f"pid {pid.strip()} ({command.strip()})" if command.strip() else f"pid {pid.strip()}"


def _command_line() -> str:
    argv = [Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]]
    return scrub(" ".join(argv))[:300].replace("\n", " ")


class DirectoryLock:
    """An exclusive, process-level write lock on a directory, used as a context manager.

    Args:
        path: the directory to lock (created if missing); the lock file is ``path/.memento.lock``.
        wait: wait for the holder to finish (default) or raise :class:`~memento.core.errors.MemoryLockedError`.
        on_wait: called once with a one-line message when the lock is busy and the caller waits
            (the CLI prints it); by default the message is logged.

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> with DirectoryLock(d):
        ...     with DirectoryLock(d, wait=False):  # re-entrant inside the process
        ...         pass
    """

    def __init__(self, path: str | Path, *, wait: bool = True, on_wait: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.wait = wait
        self.on_wait = on_wait
        self._entered = False

    @property
    def held(self) -> bool:
        """Whether this process holds the lock on the directory now."""
        with _registry_lock:
            return self._key() in _registry

    def _key(self) -> str:
        return str(self.path.resolve())

    def acquire(self) -> DirectoryLock:
        """Take the lock (see the class docstring); returns self.

        Raises:
            MemoryLockedError: the lock is held by another process and ``wait`` is false.
            ConfigError: the path is a file, or under one, or not writable (one line).
        """
        writable_dir(self.path, what="memory directory")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"memory directory {self.path} cannot be created: {exc.strerror or exc}") from None
        key = self._key()
        with _path_lock(key):
            with _registry_lock:
                held = _registry.get(key)
                if held is not None:
                    held.count += 1
                    self._entered = True
                    return self
            fd = os.open(self.path / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                self._flock(fd)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n{_command_line()}\n".encode(), 0)
            except BaseException:
                os.close(fd)
                raise
            held = _Held(fd)
            held.count = 1
            with _registry_lock:
                _registry[key] = held
            self._entered = True
            return self

    def _flock(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        holder = lock_holder(self.path) or "another process"
        if not self.wait:
            raise MemoryLockedError(
                f"memory directory {self.path} is in use by {holder}; wait for it to finish or run without --no-wait"
            )
        message = f"memory directory {self.path} is in use by {holder}; waiting for it to finish"
        (self.on_wait or logger.warning)(message)
        from memento.core.cancel import check_cancelled

        while True:  # poll rather than block, so a cancel (Ctrl-C) still stops a waiting writer
            check_cancelled()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(_POLL_SECONDS)

    def release(self) -> None:
        """Leave the lock; the last exit of this process unlocks the directory."""
        if not self._entered:
            return
        self._entered = False
        key = self._key()
        with _registry_lock:
            held = _registry.get(key)
            if held is None:
                return
            held.count -= 1
            if held.count > 0:
                return
            del _registry[key]
        try:
            os.ftruncate(held.fd, 0)
            fcntl.flock(held.fd, fcntl.LOCK_UN)
        finally:
            os.close(held.fd)

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
