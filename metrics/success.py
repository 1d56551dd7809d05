"""One success rule for every place that splits runs into successes and failures.

A run *succeeded* when its score (a metric score or a judge reward in [0, 1]) is strictly above the threshold
``trainer.success_threshold`` (0.5 by default: strictly above half credit). Every place that splits runs uses it, so
none disagrees with another about the same score: the MEMENTO trainer (which runs credit their decomposition rules),
the CBR planner (the SUCCESS/FAILURE label on each retrieved case), the executor-level bank (answered/failed tool
cases), JitMem's ground-truth gate (which training trajectories enter the bank) and ``memento memory qgate-stats``
(which logged pairs count as useful).

Example:
    >>> from memento.metrics.success import succeeded
    >>> succeeded(0.75), succeeded(0.5), succeeded(0.5, threshold=0.25)
    (True, False, True)
"""

from __future__ import annotations

__all__ = ["DEFAULT_SUCCESS_THRESHOLD", "succeeded"]

#: the default of ``trainer.success_threshold``: success means a score strictly above half credit
DEFAULT_SUCCESS_THRESHOLD = 0.5


def succeeded(score: float | None, *, threshold: float = DEFAULT_SUCCESS_THRESHOLD) -> bool:
    """Whether ``score`` counts as a success: strictly above ``threshold`` (``None`` and NaN never do)."""
    if score is None:
        return False
    value = float(score)
    return value == value and value > threshold
