"""The records of MEMENTO's training loop: one forward run, what the distillers read of it, the votes and plans
of a batch, and the batch's resumable checkpoint (:class:`BatchCheckpoint`, written with each phase's memory
changes). Also the forward run itself (:func:`forward_run`, shared with the Ray workers) and the tests of a run
(:func:`is_valid`: it answered; :func:`is_recorded`: it left a record to distil).

Example:
    >>> from memento.optimize.trainer_records import RuleVote
    >>> RuleVote(rule_id="r1", run_id="ex-1", op="reinforce").auto
    False
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Literal

from pydantic import BaseModel, Field

from memento.core.dating import run_evidence
from memento.core.error_policy import handle_error
from memento.core.types import EvidenceRecord, Trajectory
from memento.memory.canonicalizer import CanonicalOp
from memento.optimize import run_digest
from memento.optimize.batch_report import BatchReport, DistillerStats, GuardRejection
from memento.programs.memento_program import injected_items

__all__ = [
    "PHASES",
    "phase_index",
    "RunRecord",
    "RunDigest",
    "RuleVote",
    "ConsolidationPlan",
    "ReflectionPlan",
    "BatchCheckpoint",
    "forward_run",
    "example_id",
    "is_valid",
    "is_recorded",
    "run_backing",
    "injected_per_run",
]

logger = logging.getLogger(__name__)


PHASES: tuple[str, ...] = ("forward", "consolidated", "scored", "done")


def phase_index(phase: str | None) -> int:
    return PHASES.index(phase) if phase in PHASES else -1


def forward_run(program: Any, inputs: dict[str, Any], cutoff: Any, task_id: str) -> RunRecord:
    """One forward run of Phase A: ``program`` on one example's inputs; a crash is a failed run, not a failed batch."""
    try:
        pred = program(**inputs, cutoff=cutoff, task_id=task_id)
    except Exception as exc:  # noqa: BLE001 - one broken example is a failed run, not a failed batch
        failure = handle_error(exc, where=f"forward pass on {task_id}", log=logger)
        trajectory = Trajectory(task_text=str(inputs), task_id=task_id, error=failure.reason)
        return RunRecord(id=task_id, trajectory=trajectory, crashed=True)
    prediction = {k: v for k, v in pred.items() if k != "trajectory"}
    return RunRecord(id=task_id, prediction=json.loads(json.dumps(prediction, default=str)), trajectory=pred.trajectory)


def example_id(example: Any, index: int) -> str:
    """A stable id for a training example: its ``id`` field, else a hash of its inputs (index as tiebreak)."""
    value = example.get("id") if hasattr(example, "get") else None
    if value not in (None, ""):
        return str(value)
    inputs = example.inputs().toDict() if hasattr(example, "inputs") else dict(example)
    digest = hashlib.sha1(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"ex-{digest}-{index}"


def is_valid(run: RunRecord) -> bool:
    trajectory = run.trajectory
    if run.crashed or trajectory.error:
        return False
    answered = [n for n in trajectory.nodes if n.parent_id is not None and n.status == "answered"]
    values = [v for v in run.prediction.values() if v not in (None, "", [], {})]
    return bool(values) and (bool(answered) or not trajectory.nodes)


def is_recorded(run: RunRecord) -> bool:
    return not run.crashed and run_digest.has_record(run.trajectory)


def run_backing(run: RunRecord) -> EvidenceRecord:
    """What an item a run proposes or votes on rests on: the pages the run opened and the run (its cutoff)."""
    return run_evidence(run.trajectory.model_copy(update={"task_id": run.id}))


def injected_per_run(trajectories: list[Trajectory]) -> dict[str, float]:
    """Mean memory items injected per run, by paper store name (M1-M4), from the runs' ``injected_memory``."""
    if not trajectories:
        return {}
    names = {"craft": "M1", "decomposition": "M2", "web_action": "M3", "facts": "M4"}
    totals = dict.fromkeys(names.values(), 0)
    for trajectory in trajectories:
        for store, ids in injected_items(trajectory).items():
            if store in names:
                totals[names[store]] += len(ids)
    return {name: round(total / len(trajectories), 3) for name, total in totals.items()}


class RunRecord(BaseModel):
    """One forward run of a batch: its prediction and trajectory, then its score and the judge's feedback.

    ``crashed``: the program raised before producing a trajectory (counted apart in the report).
    """

    id: str
    prediction: dict[str, Any] = Field(default_factory=dict)
    trajectory: Trajectory
    crashed: bool = False
    score: float | None = None
    feedback: str = ""
    # instruction-like passages of the pages the run read (memory guard), kept here because a checkpointed
    # trajectory keeps no page text
    injections: list[str] = Field(default_factory=list)


class RunDigest(BaseModel):
    """What the distillers read of one run, each text within its budget (summarised when it was over)."""

    record: str = ""
    record_summarised: bool = False
    search_log: str = ""
    search_log_summarised: bool = False
    tree: str = ""
    tree_summarised: bool = False
    summary_failures: int = 0


class RuleVote(BaseModel):
    """One run's verdict on one stored rule (``auto``: M2 outcome credit of an injected rule)."""

    rule_id: str
    run_id: str
    op: Literal["reinforce", "contradict", "remove"]
    auto: bool = False


class ConsolidationPlan(BaseModel):
    """Phase A's planned memory changes (applied in one transaction)."""

    craft: list[CanonicalOp] = Field(default_factory=list)
    craft_votes: list[RuleVote] = Field(default_factory=list)  # runs proposing to retire an M1 entry they were given
    web_votes: list[RuleVote] = Field(default_factory=list)
    web_adds: list[CanonicalOp] = Field(default_factory=list)
    facts: list[CanonicalOp] = Field(default_factory=list)


class ReflectionPlan(BaseModel):
    """Phase C's planned M2 changes (applied in one transaction)."""

    votes: list[RuleVote] = Field(default_factory=list)
    adds: list[CanonicalOp] = Field(default_factory=list)


class BatchCheckpoint(BaseModel):
    """The resumable state of one batch, written atomically with each phase's memory changes."""

    fingerprint: str
    phase: str
    base_version: int
    runs: list[RunRecord]
    seconds: dict[str, float] = Field(default_factory=dict)
    train_lm_calls: int = 0
    train_stages: dict[str, int] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    digests: dict[str, RunDigest] = Field(default_factory=dict)
    distillers: dict[str, DistillerStats] = Field(default_factory=dict)
    guard_rejected: list[GuardRejection] = Field(default_factory=list)
    report: BatchReport | None = None
