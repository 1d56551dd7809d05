"""The items the memory stores hold: MEMENTO's rules (M2, M3), facts (M4) and craft entries (M1), Memento's cases.

Example:
    >>> from memento.core.memory_items import Fact
    >>> Fact(entity="Dune", text="Dune was published in 1965.").support
    1
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field

from memento.core.evidence import (
    EvidenceRecord,
)
from memento.core.record import _Record, new_id, utcnow

__all__ = ["RuleStatus", "Rule", "Fact", "CraftEntry", "Case"]


RuleStatus = Literal["active", "downweighted", "retired"]


class Rule(_Record):
    """A procedural rule (M2 decomposition or M3 web-action) with its evidence counts."""

    id: str = Field(default_factory=lambda: new_id("r-"))
    store: Literal["decomposition", "web_action"]
    text: str
    support: int = 0
    contradiction: int = 0
    status: RuleStatus = "active"
    created_batch: int = 0
    updated_batch: int = 0
    provenance: list[str] = Field(default_factory=list)
    evidence: EvidenceRecord = Field(default_factory=EvidenceRecord)  # pages and runs behind it; its date


class Fact(_Record):
    """A declarative fact (M4) about an entity, with its sources."""

    id: str = Field(default_factory=lambda: new_id("f-"))
    entity: str
    text: str
    sources: list[str] = Field(default_factory=list)
    batch: int = 0
    superseded_by: str | None = None
    support: int = 1  # how many extractions were merged into this fact (canonicalisation sums them)
    provenance: list[str] = Field(default_factory=list)  # task ids whose runs produced it
    evidence: EvidenceRecord = Field(default_factory=EvidenceRecord)  # the source pages the runs read; its date


class CraftEntry(_Record):
    """A free-text research-strategy insight (M1) with provenance."""

    id: str = Field(default_factory=lambda: new_id("c-"))
    text: str
    provenance: list[str] = Field(default_factory=list)
    batch: int = 0
    support: int = 1  # how many insights were merged into this entry (canonicalisation sums them)
    evidence: EvidenceRecord = Field(default_factory=EvidenceRecord)  # pages and runs behind it; its date


class Case(_Record):
    """A case of the CBR case bank: a task, the plan tried, and the reward it earned (failures included)."""

    id: str = Field(default_factory=lambda: new_id("case-"))
    task_text: str
    plan: str
    reward: float = Field(ge=0.0, le=1.0)
    namespace: str = "default"
    created_at: dt.datetime = Field(default_factory=utcnow)
    trajectory_ref: str | None = None
    evidence: EvidenceRecord = Field(default_factory=EvidenceRecord)  # pages the run read, the run; its date
