"""What the distillers read of one run, each text within its budget: the most detailed rendering that fits
(fewer search-result titles first), else an LLM summary (:class:`~memento.signatures.summarize_run.
SummarizeRun`, metered), a text longer than ``summary_input_chars`` summarised in parts, so no learning prompt
grows with the run; a failed summary keeps the record's head and tail.

Example:
    >>> digester = RunDigester(trainer)  # doctest: +SKIP
    >>> digester.digest(run).record_summarised  # doctest: +SKIP
    False
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from memento.core.error_policy import handle_error
from memento.execution.threads import run_parallel
from memento.optimize import run_digest
from memento.optimize.trainer_records import BatchCheckpoint, RunDigest, RunRecord, is_recorded
from memento.utils.text import one_line

if TYPE_CHECKING:
    from memento.optimize.memento_trainer import MementoTrainer


__all__ = ["RunDigester"]

logger = logging.getLogger(__name__)


class RunDigester:
    """The :class:`~memento.optimize.trainer_records.RunDigest` of each recorded run of a batch."""

    def __init__(self, trainer: MementoTrainer) -> None:
        self.trainer = trainer
        self._lock = threading.Lock()

    def summary(self, task: str, text: str, budget: int) -> str:
        """An LLM summary within ``budget``; a text longer than ``summary_input_chars`` is summarised in parts."""
        if len(text) <= self.trainer.summary_input_chars:
            return self.trainer.learner.summarize(task, text, budget)[:budget]
        parts, current = [], ""
        for block in text.split("\n"):
            if current and len(current) + len(block) + 1 > self.trainer.summary_input_chars:
                parts.append(current)
                current = ""
            current = f"{current}\n{block}" if current else block[: self.trainer.summary_input_chars]
        parts.append(current)
        share = max(100, budget // len(parts) - 1)
        return "\n".join(self.trainer.learner.summarize(task, part, share)[:share] for part in parts)[:budget]

    def fit(self, task: str, render: Callable[[int], str], budget: int, digest: RunDigest) -> tuple[str, bool]:
        """The most detailed rendering within ``budget`` (fewer result titles first), else an LLM summary."""
        text = ""
        for titles in run_digest.TITLE_LADDER:
            text = render(titles)
            if len(text) <= budget:
                return text, False
        text = render(run_digest.TITLE_LADDER[0])
        try:
            return self.summary(task, text, budget), True
        except Exception as exc:  # noqa: BLE001 - a failed summary falls back to the record's head and tail
            handle_error(exc, where="run summary (head and tail kept)", log=logger)
            with self._lock:
                digest.summary_failures += 1
            half = budget // 2 - 40
            return f"{text[:half]}\n[... {len(text) - 2 * half} characters not shown ...]\n{text[-half:]}", True

    def digest(self, run: RunRecord) -> RunDigest:
        traj = run.trajectory
        task = one_line(traj.task_text, 2000)
        digest = RunDigest()
        digest.record, digest.record_summarised = self.fit(
            task, lambda titles: run_digest.run_record(traj, titles=titles), self.trainer.record_chars, digest
        )
        digest.search_log, digest.search_log_summarised = self.fit(
            task, lambda titles: run_digest.search_log(traj, titles=titles), self.trainer.search_log_chars, digest
        )
        digest.tree, digest.tree_summarised = self.fit(
            task, lambda _titles: run_digest.judged_tree(traj), self.trainer.record_chars, digest
        )
        return digest

    def digests(self, state: BatchCheckpoint) -> dict[str, RunDigest]:
        missing = [r for r in state.runs if is_recorded(r) and r.id not in state.digests]
        made = run_parallel(self.digest, missing, threads=self.trainer.threads)
        for run, digest in zip(missing, made, strict=True):
            state.digests[run.id] = digest
        return state.digests
