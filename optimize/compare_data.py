"""A comparison's data: stable example ids and the one seeded train/test split every method shares.

Example:
    >>> import dspy
    >>> from memento.optimize.compare_data import split_examples
    >>> rows = [dspy.Example(question=str(i)).with_inputs("question") for i in range(10)]
    >>> train, test = split_examples(rows, n_train=6, n_test=4, seed=42)
    >>> len(train), len(test)
    (6, 4)
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Sequence

import dspy

from memento.core.errors import ConfigError
from memento.tasks.task import Task

__all__ = ["example_id", "split_examples"]

logger = logging.getLogger(__name__)


def example_id(example: dspy.Example, task: Task) -> str:
    """A stable id of an example: its ``id`` field, else a hash of its model-visible inputs."""
    given = example.get("id") if hasattr(example, "get") else None
    if given not in (None, ""):
        return str(given)
    payload = json.dumps(task.inputs(example), sort_keys=True, default=str)
    return "h-" + hashlib.sha1(payload.encode()).hexdigest()[:12]


def split_examples(
    examples: Sequence[dspy.Example], *, n_train: int | None, n_test: int | None, seed: int
) -> tuple[list[dspy.Example], list[dspy.Example]]:
    """One seeded split: shuffle with ``seed``, the first ``n_test`` are the test set, the next ``n_train`` train.

    ``None`` sizes take the rest (``n_test=None`` alone: a 70/30 train/test split).

    Raises:
        ConfigError: the sizes exceed the data or leave a side empty.
    """
    items = list(examples)
    total = len(items)
    if n_test is None and n_train is None:
        n_test = max(1, round(total * 0.3))
    if n_test is None:
        n_test = total - (n_train or 0)
    if n_train is None:
        n_train = total - n_test
    if n_train < 1 or n_test < 1:
        raise ConfigError(f"a comparison needs at least one train and one test example (got {n_train}/{n_test})")
    if n_train + n_test > total:
        raise ConfigError(f"asked for {n_train} train + {n_test} test examples but the data has only {total}")
    order = list(range(total))
    random.Random(seed).shuffle(order)
    test = [items[i] for i in order[:n_test]]
    train = [items[i] for i in order[n_test : n_test + n_train]]
    return train, test
