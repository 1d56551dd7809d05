"""Checked paths for every entry point: files to read, directories and files to write.

A bad path is a one-line typed error naming the file, raised before any work, and nothing is created on the way
(a directory to write in is only checked here; the writer creates it when it writes).

Example:
    >>> from memento.core.paths import read_text
    >>> read_text("questions.jsonl", what="data file")  # doctest: +SKIP
    >>> read_text("/etc", what="data file")  # doctest: +SKIP
    Traceback (most recent call last):
    memento.core.errors.DataError: data file /etc is a directory, not a file
"""

from __future__ import annotations

import os
from pathlib import Path

from memento.core.errors import ConfigError, DataError, MementoError

__all__ = ["readable_file", "read_text", "writable_dir", "writable_file"]

_SNIFF = 8192


def readable_file(path: str | os.PathLike[str], *, what: str, error: type[MementoError] = DataError) -> Path:
    """``path`` as an existing regular file that can be opened for reading, else ``error`` (one line)."""
    target = Path(path).expanduser()
    try:
        if not target.exists():
            raise error(f"{what} not found: {target}")
        if target.is_dir():
            raise error(f"{what} {target} is a directory, not a file")
        with target.open("rb"):
            pass
    except OSError as exc:
        raise error(f"cannot read the {what} {target}: {exc.strerror or exc}") from None
    return target


def read_text(path: str | os.PathLike[str], *, what: str, error: type[MementoError] = DataError) -> str:
    """The UTF-8 text of a file (a leading BOM dropped), or ``error`` naming the file when it is missing, a
    directory, binary or not UTF-8."""
    target = readable_file(path, what=what, error=error)
    try:
        data = target.read_bytes()
    except OSError as exc:
        raise error(f"cannot read the {what} {target}: {exc.strerror or exc}") from None
    if b"\x00" in data[:_SNIFF]:
        raise error(f"{what} {target} is a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{what} {target} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); "
            "convert it with e.g. iconv -t utf-8"
        ) from None


def _first_existing(path: Path) -> Path:
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def writable_dir(path: str | os.PathLike[str], *, what: str, error: type[MementoError] = ConfigError) -> Path:
    """``path`` as a directory memento can create or write in (not created here), else ``error`` (one line
    starting with ``what``: a flag or a description).

    Refused: an existing file, a path under a file, a directory that is not writable.
    """
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise error(f"{what} {target} is a file, not a directory")
    base = _first_existing(target)
    if not base.is_dir():
        raise error(f"{what} {target} cannot be created: {base} is a file, not a directory")
    if not os.access(base, os.W_OK | os.X_OK):
        raise error(f"{what} {target} cannot be written: {base} is not writable")
    return target


def writable_file(path: str | os.PathLike[str], *, what: str, error: type[MementoError] = ConfigError) -> Path:
    """``path`` as a file memento can create or replace (its directory is not created here), else ``error``."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise error(f"{what} {target} is a directory, not a file")
    writable_dir(target.parent, what=what, error=error)
    if target.exists() and not os.access(target, os.W_OK):
        raise error(f"{what} {target} is not writable")
    return target
