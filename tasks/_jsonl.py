"""Reading task data files: JSONL rows with file:line errors."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memento.errors import DataError

__all__ = ["jsonl_rows"]


def jsonl_rows(path: str | Path, *, kind: str, required: Sequence[str] = ()) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(where, row)`` for every non-blank line of a JSONL file (``where`` is ``"file:line"``).

    Raises:
        DataError: the file is missing, or a line is not a JSON object with the ``required`` keys (the message
            names the file and line and says it is not a ``kind`` row).
    """
    try:
        handle = Path(path).open(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"data file not found: {path}") from None
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    with handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: not {article} {kind} row (JSONDecodeError: {exc})") from None
            if not isinstance(row, dict):
                raise DataError(f"{where}: not {article} {kind} row (a JSON {type(row).__name__}, not an object)")
            missing = [key for key in required if key not in row]
            if missing:
                raise DataError(f"{where}: not {article} {kind} row (KeyError: missing {', '.join(missing)})")
            yield where, row
