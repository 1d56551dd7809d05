"""What every distiller call of the trainer shares: its counts per distiller (runs seen, summarised, failed), a
failed call recorded without stopping the batch, the memory guard's context (the pages a run read, its task) and
rejections, and the stored rules a distiller is shown for a run (those its cutoff allows: the whole book under
``paper`` as far as the context allows, else the best within ``rules_shown_tokens``).

Example:
    >>> calls = DistillerCalls(trainer)  # doctest: +SKIP
    >>> out = calls.call(calls.stats(state, "facts"), False, "fact extraction", lambda: ...)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memento.core.dating import DateFilter
from memento.core.error_policy import handle_error
from memento.core.types import Trajectory
from memento.memory.canonicalizer import Candidate, CanonicalOp
from memento.memory.rule_book import RuleBook
from memento.memory.sqlite_store import estimate_tokens
from memento.optimize import run_digest
from memento.optimize.batch_report import DistillerStats, GuardRejection
from memento.optimize.trainer_records import BatchCheckpoint, RunRecord
from memento.utils.text import one_line

if TYPE_CHECKING:
    from memento.optimize.memento_trainer import MementoTrainer


__all__ = ["DistillerCalls"]

logger = logging.getLogger(__name__)


class DistillerCalls:
    """The trainer's distiller calls: counted, failure-tolerant, guarded."""

    def __init__(self, trainer: MementoTrainer) -> None:
        self.trainer = trainer
        self._lock = threading.Lock()

    def stats(self, state: BatchCheckpoint, name: str) -> DistillerStats:
        with self._lock:
            return state.distillers.setdefault(name, DistillerStats())

    def seen(self, stats: DistillerStats, summarised: bool) -> None:
        with self._lock:
            stats.runs += 1
            stats.seen += 1
            stats.summarised += int(summarised)

    def attempt(self, stats: DistillerStats, what: str, fn: Callable[[], Any]) -> Any:
        try:
            with self.trainer.learner.reflection():
                return fn()
        except Exception as exc:  # noqa: BLE001 - a failed distiller call is recorded, the batch goes on
            handle_error(exc, where=what, log=logger)
            with self._lock:
                stats.failed += 1
            return None

    def call(self, stats: DistillerStats, summarised: bool, what: str, fn: Callable[[], Any]) -> Any:
        self.seen(stats, summarised)
        return self.attempt(stats, what, fn)

    def guarded(self, run: RunRecord, candidates: list[Candidate]) -> list[Candidate]:
        """The candidates with what the memory guard compares them with: the run's reading and its task."""
        if self.trainer.guard is not None:
            pages = [*run_digest.read_texts(run.trajectory), *run.injections]
            for candidate in candidates:
                candidate.pages, candidate.task = pages, run.trajectory.task_text
        return candidates

    def note_guard(self, state: BatchCheckpoint, store: str, ops: list[CanonicalOp]) -> None:
        """Record the memory guard's rejections in the batch state (the report lists them) and the log."""
        for op in ops:
            if not op.guard:
                continue
            cand = op.candidate
            logger.warning("memory guard rejected a %s candidate (%s): %s", store, one_line(cand.text, 120), op.reason)
            with self._lock:
                state.guard_rejected.append(
                    GuardRejection(
                        store=store, text=one_line(cand.text, 500), entity=cand.entity, reasons=op.guard,
                        runs=sorted(set(cand.provenance)),
                    )
                )  # fmt: skip

    def dates(self, trajectory: Trajectory) -> DateFilter:
        """The date filter of a run's task (its cutoff, the program's undated policy and filter switch)."""
        return DateFilter.of(
            trajectory.cutoff,
            getattr(self.trainer.program, "undated", "keep"),
            enabled=bool(getattr(self.trainer.program, "cutoff_filter", True)),
        )

    def shown(self, book: RuleBook, trajectory: Trajectory) -> list[Any]:
        """The stored rules a distiller sees for a run, those its task may see (its cutoff): the whole book under
        ``paper`` (heaviest first, as far as the model's context allows), else the best within the budget."""
        dates = self.dates(trajectory)
        if getattr(self.trainer.memory, "profile", "budgeted") != "paper":
            return book.select(trajectory.task_text, budget_tokens=self.trainer.rules_shown_tokens, dates=dates)
        cap = self.trainer.memory.budgets.paper_max_tokens
        shown, used = [], 0
        for rule in book.live(dates=dates):
            used += estimate_tokens(book.render_rule(rule)) + 1
            if used > cap:
                break
            shown.append(rule)
        return shown
