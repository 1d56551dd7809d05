"""Reading task data files: JSONL rows with file:line errors."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memento.core.errors import DataError

__all__ = ["jsonl_rows", "answer_list"]


def jsonl_rows(path: str | Path, *, kind: str, required: Sequence[str] = ()) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(where, row)`` for every non-blank line of a JSONL file (``where`` is ``"file:line"``).

    A required key must hold a value: ``null`` or a blank string is refused (a model would be sent ``"None"`` or
    nothing). Two rows with the same ``id`` are refused too: results, resumes and splits are keyed by it.

    Raises:
        DataError: the file is missing, a line is not a JSON object with the ``required`` keys (the message
            names the file and line and says it is not a ``kind`` row), a required key is null or blank, or an
            ``id`` repeats an earlier row's.
    """
    from memento.core.paths import read_text

    text = read_text(path, what="data file")  # missing, directory, binary, not UTF-8: one line naming the file
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    ids: dict[str, int] = {}  # id -> the line that first gave it
    for lineno, line in enumerate(text.split("\n"), 1):  # not splitlines(): U+2028 may sit inside a JSON string
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
        empty = [key for key in required if row[key] is None or (isinstance(row[key], str) and not row[key].strip())]
        if empty:
            what = " and ".join(f"{key!r} is {'null' if row[key] is None else 'blank'}" for key in empty)
            raise DataError(f"{where}: not {article} {kind} row ({what}: a required field needs a value)")
        given = "" if row.get("id") is None else str(row["id"])
        if given:
            first = ids.setdefault(given, lineno)
            if first != lineno:
                raise DataError(f"{where}: duplicate id {given!r} (also on line {first}): give every row its own id")
        yield where, row


def answer_list(value: Any, *, where: str, required: bool = True) -> list[str]:
    """The accepted answers of a row as strings: a string is one answer; ``null`` entries are not answers (never
    the string ``"None"``); numbers are written as text.

    Raises:
        DataError: not a string or a list, or (``required``) no usable answer.
    """
    if value is None and not required:
        return []
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise DataError(f"{where}: answers must be a list of strings, not a JSON {type(value).__name__}")
    bad = [a for a in value if a is not None and not (isinstance(a, str | int | float) and not isinstance(a, bool))]
    if bad:
        raise DataError(f"{where}: answers must be strings, not {json.dumps(bad[0])}")
    answers = [str(a).strip() for a in value if a is not None and str(a).strip()]
    if required and not answers:
        raise DataError(f"{where}: a row needs a non-empty answers list (null and blank answers do not count)")
    return answers
