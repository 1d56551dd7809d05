"""Where a training batch stands: its checkpoint rows and what happens when they are stale or unreadable.

Each phase's result is written in the same transaction as its memory changes (:class:`~memento.optimize.
trainer_records.BatchCheckpoint` under ``trainer/batch/<n>``), and each finished forward run under
``trainer/batch/<n>/run/<i>`` until the batch's own checkpoint holds every run. Every write is conditional on
the checkpoint being the one this run last saw (:meth:`TrainerCheckpoints.guard`): a batch another writer
advanced raises :class:`StaleBatch`, so no batch is applied twice. A truncated or corrupt row
(:class:`CorruptCheckpoint`) is recovered in one warning line (:meth:`TrainerCheckpoints.recover`).

Example:
    >>> from memento.optimize.trainer_checkpoints import BATCH_KEY
    >>> BATCH_KEY.format(3)
    'trainer/batch/00003'
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from memento.optimize.batch_report import BatchReport
from memento.optimize.trainer_records import BatchCheckpoint, RunRecord
from memento.utils.text import one_line

if TYPE_CHECKING:
    from memento.optimize.memento_trainer import MementoTrainer


__all__ = ["BATCH_KEY", "RUN_KEY", "StaleBatch", "CorruptCheckpoint", "TrainerCheckpoints"]

logger = logging.getLogger(__name__)


BATCH_KEY = "trainer/batch/{:05d}"
RUN_KEY = "{}/run/{}"  # a forward run that finished, until the batch's own checkpoint holds every run


class StaleBatch(Exception):
    """The batch's checkpoint changed under this run (another writer): its write is abandoned."""


class CorruptCheckpoint(Exception):
    """A batch's checkpoint row cannot be read back (truncated JSON, a record of the wrong shape)."""


class TrainerCheckpoints:
    """The checkpoint rows of a trainer's memory: read, validated, guarded and recovered."""

    def __init__(self, trainer: MementoTrainer) -> None:
        self.trainer = trainer

    @staticmethod
    def guard(tx: Any, key: str, phase: str | None) -> None:
        """Go on only if the batch's stored phase is still ``phase`` (what this run last wrote or read)."""
        if (tx.checkpoint(key) or {}).get("phase") != phase:
            raise StaleBatch

    def saved(self, key: str) -> dict[str, Any] | None:
        """The stored checkpoint, validated; a truncated or corrupt row raises :class:`CorruptCheckpoint`."""
        try:
            saved: dict[str, Any] | None = self.trainer.memory.db.checkpoint(key)
            if saved is not None:
                BatchCheckpoint.model_validate(saved)
        except ValueError as exc:  # json.JSONDecodeError and pydantic's ValidationError are ValueErrors
            raise CorruptCheckpoint(one_line(f"{type(exc).__name__}: {exc}", 160)) from None
        return saved

    def recover(self, batch: int, key: str, fingerprint: str, reason: str) -> BatchReport | None:
        """After a corrupt checkpoint, one warning line, then: a batch committed as a version is not run again (a
        second run would count its evidence twice): its checkpoint is rewritten as done, with a report that has
        only the batch and version (the figures were in the lost row); any other batch returns ``None`` once its
        uncommitted changes are undone and its checkpoint dropped, so it starts afresh."""
        committed = [v for v in self.trainer.memory.db.versions() if v["batch"] == batch and v["status"] == "committed"]
        where = f"batch {batch}: the checkpoint in {self.trainer.memory.directory} is unreadable ({reason})"
        if committed:
            info = committed[-1]
            version = int(info["version"])
            logger.warning("%s; the batch was committed as version %d, so it is not run again", where, version)
            report = BatchReport(batch=batch, version=version)
            state = BatchCheckpoint(
                fingerprint=fingerprint, phase="done", base_version=int(info["parent"] or 0), runs=[], report=report
            )
            with self.trainer.memory.transaction(batch=batch) as tx:
                tx.set_checkpoint(key, state.model_dump(mode="json"), version=version)
            self.trainer._emit(
                batch, "done", f"committed as version {version}; its figures were lost with the checkpoint"
            )
            return report
        undone = self.trainer.memory.rollback(self.trainer.memory.version)  # also drops every uncommitted checkpoint
        logger.warning("%s; starting the batch afresh (%d uncommitted changes undone)", where, undone)
        return None

    def finished_runs(self, key: str, fingerprint: str) -> dict[int, RunRecord]:
        """Forward runs of this batch that finished before an interruption (their own checkpoints), by index."""
        finished: dict[int, RunRecord] = {}
        try:
            saved_runs = self.trainer.memory.db.checkpoints(RUN_KEY.format(key, ""))
        except ValueError:  # a damaged row: every run of the pass is done again
            logger.warning("the forward run checkpoints of %s are unreadable; the forward pass is done again", key)
            return finished
        for run_key, saved in saved_runs.items():
            try:
                if saved.get("fingerprint") == fingerprint:
                    finished[int(run_key.rsplit("/", 1)[1])] = RunRecord.model_validate(saved["run"])
            except (ValueError, KeyError, TypeError, AttributeError):  # a damaged row: that run is simply redone
                logger.warning("forward run checkpoint %s is unreadable; the run is done again", run_key)
        return finished
