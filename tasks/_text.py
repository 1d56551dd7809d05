"""Answer normalisation as in SQuAD/HotpotQA evaluation."""

from __future__ import annotations

import re
import string

__all__ = ["normalize_answer"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())
