"""Web use during a comparison's training phase: :class:`WebTally` (totals shared by reference through the
optimisers' deep copies), :class:`Tallied` (a program wrapper feeding it) and :class:`CountingWeb` (a web-tools
factory wrapper for programs a runner builds itself).

Example:
    >>> from memento.optimize.web_tally import WebTally
    >>> tally = WebTally(); tally.add(None); tally.runs
    1
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import dspy

from memento.core.types import Usage

__all__ = ["WebTally", "Tallied", "CountingWeb"]

logger = logging.getLogger(__name__)


class WebTally:
    """Thread-safe totals of the web use found in the trajectories of programs run during a training phase.

    Shared by reference when copied (optimisers deep-copy programs dozens of times; the tally must not fork).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs = 0
        self.searches = 0
        self.fetches = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> WebTally:
        return self

    def add(self, usage: Usage | None) -> None:
        with self._lock:
            self.runs += 1
            if usage is not None:
                self.searches += usage.searches
                self.fetches += usage.fetches


class Tallied(dspy.Module):
    """Wraps a program so every run's searches and fetches (from its trajectory) reach a :class:`WebTally`.

    The wrapped program is ``self.program``; save that (not the wrapper) so the state loads into the bare program.
    """

    def __init__(self, program: dspy.Module, tally: WebTally) -> None:
        super().__init__()
        self.program = program
        self.tally = tally

    def forward(self, **kwargs: Any) -> dspy.Prediction:
        pred = self.program(**kwargs)
        trajectory = pred.get("trajectory") if hasattr(pred, "get") else None
        self.tally.add(getattr(trajectory, "usage", None))
        return pred


class CountingWeb:
    """Wraps a web-tools factory ``f(cutoff, undated) -> WebTools`` and totals the searches and fetches of every
    :class:`memento.web.web_tools.WebTools` it made (for programs a runner builds itself)."""

    def __init__(self, factory: Callable[..., Any]) -> None:
        self.factory = factory
        self._lock = threading.Lock()
        self._tools: list[Any] = []

    def __deepcopy__(self, memo: dict[int, Any]) -> CountingWeb:
        return self

    def __call__(self, cutoff: Any = None, undated: Any = None) -> Any:
        tools = self.factory(cutoff, undated)
        with self._lock:
            self._tools.append(tools)
        return tools

    def totals(self) -> tuple[int, int]:
        """``(searches, fetches)`` so far."""
        with self._lock:
            counts = [tools.counts() for tools in self._tools]
        return sum(int(c.get("searches", 0)) for c in counts), sum(int(c.get("fetches", 0)) for c in counts)
