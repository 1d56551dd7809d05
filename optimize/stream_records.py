"""What a JitMem stream records: one task as it ran (:class:`StreamItem`: its position in the input and in the
stream, its batch, the bank state it saw, its prediction, score and verdict) and the whole stream
(:class:`StreamResult`: items, scores, the learning curve, behaviour).

Example:
    >>> from memento.optimize.stream_records import StreamItem
    >>> StreamItem(position=0, order=0, batch=0, task_id="t0", bank_version=0, bank_size=0).stored
    False
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dspy

__all__ = ["StreamItem", "StreamResult"]


@dataclass
class StreamItem:
    """One task of a stream: where it was in the input, when it ran, what it produced."""

    position: int
    order: int
    batch: int
    task_id: str
    bank_version: int
    bank_size: int
    prediction: dspy.Prediction | None = None
    score: float | None = None
    feedback: str = ""
    accepted: bool | None = None
    stored: bool = False
    error: str | None = None


@dataclass
class StreamResult:
    """The items of a stream by original position (``items[i]`` is ``tasks[i]``)."""

    items: list[StreamItem] = field(default_factory=list)

    @property
    def scores(self) -> list[float | None]:
        """Scores by original position (``None`` without a metric or when the task failed)."""
        return [item.score for item in self.items]

    def mean(self) -> float | None:
        """Mean score over scored tasks."""
        scored = [s for s in self.scores if s is not None]
        return sum(scored) / len(scored) if scored else None

    def in_stream_order(self) -> list[StreamItem]:
        """Items in the order they were run."""
        return sorted(self.items, key=lambda item: item.order)

    def curve(self) -> list[float | None]:
        """The cold-start curve: mean score of each batch, in stream order."""
        batches: dict[int, list[float]] = {}
        for item in self.items:
            batches.setdefault(item.batch, [])
            if item.score is not None:
                batches[item.batch].append(item.score)
        return [sum(v) / len(v) if v else None for _, v in sorted(batches.items())]
