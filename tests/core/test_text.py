"""memento.utils.text: the one shared helper for folding, clipping and naming errors (no private copies left)."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import memento.utils.text
from memento.utils.text import clip, error_line, one_line

ROOT = Path(__file__).resolve().parents[2]


def test_doctests() -> None:
    assert doctest.testmod(memento.utils.text).failed == 0


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [("abc", 3, "abc"), ("abcd", 3, "ab…"), ("", 3, ""), (None, 3, ""), ("ab\ncd", 4, "ab\n…"), ("abc", 0, "…")],
)
def test_clip(text: str | None, limit: int, expected: str) -> None:
    assert clip(text, limit) == expected
    assert len(clip(text, limit)) <= max(limit, 1)


def test_one_line_folds_every_kind_of_white_space_and_keeps_falsy_values() -> None:
    assert one_line(" a\t\tb \n\n c\r\n") == "a b c"
    assert one_line(0) == "0" and one_line(False) == "False" and one_line(None) == ""
    assert one_line("word " * 50, 20) == "word word word word…"
    assert len(one_line("x" * 500, 160)) == 160


def test_error_line_forms() -> None:
    assert error_line(ValueError("first\nsecond")) == "ValueError: first"
    assert error_line(ValueError("\n  padded  message \n")) == "ValueError: padded message"
    assert error_line(RuntimeError()) == "RuntimeError"
    assert error_line(OSError("a\n b"), with_type=False) == "a b"
    assert error_line(OSError(), with_type=False) == "OSError"
    assert (
        error_line(ValueError("x" * 400), limit=50).endswith("…")
        and len(error_line(ValueError("x" * 400), limit=50)) == 50
    )


def test_no_private_copies_of_the_text_helpers_remain() -> None:
    pattern = re.compile(r"^def _(clip|short|one_line|first_line)\(", re.M)
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("memento", "programs", "memory", "metrics", "optimize", "web", "tasks", "signatures")
        for path in (ROOT / folder).rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
