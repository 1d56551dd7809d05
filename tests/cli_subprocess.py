"""The environment of a ``memento`` CLI subprocess in the tests (imported as ``cli_subprocess``; tests/ is on the
path, as for ``memento_training_fixture``)."""

from __future__ import annotations

import os
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "multihop" / "corpus.jsonl"


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No inherited ``MEMENTO_*`` setting, LM cache off, DSPy's cache in ``tmp_path``, one-question research budgets
    (few LM calls per example), a wide terminal; ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMENTO_")}
    env.update(
        MEMENTO_LM_CACHE="false",
        MEMENTO_BUDGETS_INITIAL_QUESTIONS="1",
        MEMENTO_BUDGETS_TOTAL_QUESTIONS="1",
        MEMENTO_BUDGETS_STEPS_PER_QUESTION="2",
        DSPY_CACHEDIR=str(tmp_path / "dspy-cache"),
        COLUMNS="200",
    )
    env.update(extra)
    return env
