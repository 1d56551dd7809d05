"""Atomic file writes: a reader, or a crash, never sees a half-written file.

Example:
    >>> from memento.utils.files import atomic_write_text
    >>> atomic_write_text("out/results.json", "{}")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "save_program", "scrubbed_json"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; on success it is flushed to disk and renamed over ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was. ``suffix`` lets writers that
    infer the format from the name (``program.save``, ``fig.savefig``) see the right extension.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (newlines written as given), secrets scrubbed
    (:func:`memento.utils.scrub.scrub`: registered API keys, key-shaped tokens, URL passwords)."""
    from memento.utils.scrub import scrub

    atomic_write_bytes(path, scrub(text).encode("utf-8"))


def scrubbed_json(data: Any, *, indent: int | None = None) -> str:
    """``data`` as JSON text with secrets scrubbed from every string and from the text itself (for appended lines,
    which :func:`atomic_write_text` does not write)."""
    import json

    from memento.utils.scrub import scrub, scrub_data

    return str(scrub(json.dumps(scrub_data(data), ensure_ascii=False, indent=indent, default=str)))


def save_program(program: Any, path: str | os.PathLike[str]) -> Path:
    """``program.save(path)`` (DSPy's JSON state), atomically and with secrets scrubbed from every string.

    Demos and instructions a program learned can carry what its inputs carried (an API key pasted into a task, a
    URL with a password); the saved file never does (:func:`memento.utils.scrub.scrub_data`). Returns the path.
    """
    import json

    from memento.utils.scrub import scrub_data

    target = Path(path)
    with atomic_path(target, suffix=".json") as tmp:
        program.save(str(tmp))
        state = json.loads(tmp.read_text(encoding="utf-8"))
        tmp.write_text(json.dumps(scrub_data(state), ensure_ascii=False, indent=2), encoding="utf-8")
    return target
