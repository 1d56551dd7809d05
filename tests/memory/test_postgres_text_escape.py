"""PostgreSQL's TEXT cannot hold a NUL character: text travels escaped (memory/postgres_connection.py), and the
escape is a bijection, so every string reads back as written and distinct strings stay distinct."""

from __future__ import annotations

from itertools import product

from memento.memory.postgres_connection import escape_nul, unescape_nul


def test_every_short_string_over_the_escape_alphabet_round_trips_and_stays_distinct() -> None:
    alphabet = ["a", "\x00", "\uffff", "0", "1"]
    seen: dict[str, str] = {}
    for n in range(7):
        for chars in product(alphabet, repeat=n):
            text = "".join(chars)
            stored = escape_nul(text)
            assert "\x00" not in stored
            assert unescape_nul(stored) == text
            assert seen.setdefault(stored, text) == text  # no two strings are stored alike
    assert len(seen) == sum(5**n for n in range(7))


def test_plain_text_is_stored_as_is() -> None:
    text = "Lugdunum was founded in 43 BC. \u00e9\u4e2d"
    assert escape_nul(text) is text and unescape_nul(text) is text
