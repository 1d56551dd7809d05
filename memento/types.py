"""Pydantic records shared by every layer: evidence, tree nodes, tool calls, usage, trajectories, memory items.

All records are JSON-serialisable (``model_dump(mode="json")``) and human-readable.

Example:
    >>> from memento.types import Node
    >>> Node(id="n1", question="Who wrote Dune?").status
    'pending'
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "Evidence",
    "Node",
    "NodeStatus",
    "ToolCall",
    "StageUsage",
    "Usage",
    "Trajectory",
    "CBRDetails",
    "Plan",
    "PlanStep",
    "JitMemDetails",
    "Exploration",
    "Rule",
    "RuleStatus",
    "Fact",
    "CraftEntry",
    "Case",
    "new_id",
    "utcnow",
]


def new_id(prefix: str = "") -> str:
    """A short random identifier, optionally prefixed (``"n-3f2a9c1d"``)."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Evidence(_Record):
    """A source an answer rests on."""

    url: str
    title: str = ""
    snippet: str = ""
    published: dt.date | None = None


NodeStatus = Literal["pending", "answered", "decomposed", "failed"]


class Node(_Record):
    """One sub-question of an Adaptive Exploration Tree (the root has ``parent_id=None`` and ``wave=-1``)."""

    id: str
    parent_id: str | None = None
    wave: int = 0
    question: str
    answer: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    status: NodeStatus = "pending"
    steps: int = 0
    error: str | None = None
    answered_seq: int | None = None  # monotone order in which answers were produced (synthesis order checks)


class ToolCall(_Record):
    """One tool invocation by an agent: what was asked, what came back, whether it was served from cache."""

    kind: str  # search_web | scrape | search_memory | ...
    args: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    result_urls: list[str] = Field(default_factory=list)
    cached: bool = False
    ms: float = 0.0
    error: str | None = None
    node_id: str | None = None

    @field_validator("args", "result", "result_urls", "error")
    @classmethod
    def _scrubbed(cls, value: Any) -> Any:
        """Secrets and URL passwords never enter a tool record (so never a trajectory or a prompt built from it)."""
        from memento.scrub import scrub_data

        return scrub_data(value)


class StageUsage(_Record):
    """LM usage of one stage (signature) or role."""

    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_calls: int = 0


class Usage(_Record):
    """Counted resource use of a run."""

    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_lm_calls: int = 0
    judge_calls: int = 0
    searches: int = 0
    fetches: int = 0
    fetch_cache_hits: int = 0
    unique_urls: int = 0
    repeated_urls: int = 0
    by_stage: dict[str, StageUsage] = Field(default_factory=dict)
    by_role: dict[str, StageUsage] = Field(default_factory=dict)

    def add(self, other: Usage) -> Usage:
        """Return the sum of two usages (counts and per-stage/per-role maps)."""
        out = self.model_copy(deep=True)
        for name in (
            "lm_calls",
            "prompt_tokens",
            "completion_tokens",
            "cached_lm_calls",
            "judge_calls",
            "searches",
            "fetches",
            "fetch_cache_hits",
            "unique_urls",
            "repeated_urls",
        ):
            setattr(out, name, getattr(out, name) + getattr(other, name))
        for attr in ("by_stage", "by_role"):
            mine = getattr(out, attr)
            for key, val in getattr(other, attr).items():
                cur = mine.setdefault(key, StageUsage())
                cur.lm_calls += val.lm_calls
                cur.prompt_tokens += val.prompt_tokens
                cur.completion_tokens += val.completion_tokens
                cur.cached_calls += val.cached_calls
        return out


class Exploration(_Record):
    """One exploration of a run (MEMENTO Appendix D.1): when it ran, the steps spent and the insights found.

    ``when``: ``cold_start`` (the relevance check found no applicable M1 entry) or ``end_of_sample`` (the rest
    of the exploration budget, after the answer). The trainer turns the insights into M1 candidates of the batch.
    """

    when: Literal["cold_start", "end_of_sample"]
    steps: int = 0
    insights: list[str] = Field(default_factory=list)


class PlanStep(_Record):
    """One executed sub-task of a case-based plan: its planning cycle (1-based), the sub-task and its outcome."""

    cycle: int = Field(ge=1)
    sub_task: str
    outcome: Literal["answered", "failed"]


class Plan(_Record):
    """A case-based plan as executed: the sub-tasks of every planning cycle, in order, with their outcomes.

    ``render()`` is the text a case stores and a planner reads (one numbered line per step).

    Example:
        >>> Plan(steps=[PlanStep(cycle=1, sub_task="Who wrote Dune?", outcome="answered")]).render()
        '1. [cycle 1] Who wrote Dune? (answered)'
    """

    steps: list[PlanStep] = Field(default_factory=list)

    def render(self) -> str:
        """One line per step: ``n. [cycle c] sub-task (outcome)``."""
        return "\n".join(
            f"{i}. [cycle {step.cycle}] {step.sub_task} ({step.outcome})" for i, step in enumerate(self.steps, 1)
        )


class CBRDetails(_Record):
    """What a case-based run did: the cases it retrieved, its plan, its reward and the case it stored."""

    retrieved: list[str] = Field(default_factory=list)  # case ids, in rank order
    retrieved_rewards: list[float] = Field(default_factory=list)
    policy: str = ""
    plan: str = ""  # the rendered plan (what the stored case holds): Plan.render() of plan_steps
    plan_steps: list[PlanStep] = Field(default_factory=list)  # the typed plan (empty in results written before it)
    reward: float | None = None
    reward_source: str | None = None  # metric | judge | retain()
    stored_case: str | None = None
    gate_loss: float | None = None


class JitMemDetails(_Record):
    """What a JitMem run did: the trajectories it retrieved, the payload it curated, the judge's verdict."""

    retrieved: list[str] = Field(default_factory=list)  # task ids of the retrieved trajectories, in rank order
    scores: list[float] = Field(default_factory=list)
    payload_chars: int = 0
    payload_tokens: int = 0
    raw_tokens: int = 0
    accepted: bool | None = None
    stored: bool = False


class Trajectory(_Record):
    """The complete record of one task run: tree, tool calls, notes, prediction, usage, timings."""

    task_id: str = Field(default_factory=lambda: new_id("t-"))
    task_text: str
    retrieval_key: str = ""  # what memory retrieval matches for this task (Task.retrieval_key); "" means task_text
    inputs: dict[str, Any] = Field(default_factory=dict)
    method: str = ""
    nodes: list[Node] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    prediction: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None
    usage: Usage = Field(default_factory=Usage)
    timings: dict[str, float] = Field(default_factory=dict)
    memory_version: int | None = None
    injected_memory: dict[str, list[str]] = Field(default_factory=dict)  # store -> ids of the items injected
    cbr: CBRDetails | None = None  # a case-based run's retrieval, plan and reward
    jitmem: JitMemDetails | None = None  # a JitMem run's retrieval and payload
    explorations: list[Exploration] = Field(default_factory=list)  # MEMENTO Appendix D.1, in order
    error: str | None = None
    created_at: dt.datetime = Field(default_factory=utcnow)
    provenance: dict[str, Any] | None = None  # what produced it: settings, models, versions (memento.provenance)

    def node(self, node_id: str) -> Node:
        """The node with this id (``KeyError`` when absent)."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def children(self, node_id: str | None) -> list[Node]:
        """The nodes whose parent is ``node_id``."""
        return [n for n in self.nodes if n.parent_id == node_id]


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


class CraftEntry(_Record):
    """A free-text research-strategy insight (M1) with provenance."""

    id: str = Field(default_factory=lambda: new_id("c-"))
    text: str
    provenance: list[str] = Field(default_factory=list)
    batch: int = 0
    support: int = 1  # how many insights were merged into this entry (canonicalisation sums them)


class Case(_Record):
    """A case of the CBR case bank: a task, the plan tried, and the reward it earned (failures included)."""

    id: str = Field(default_factory=lambda: new_id("case-"))
    task_text: str
    plan: str
    reward: float = Field(ge=0.0, le=1.0)
    namespace: str = "default"
    created_at: dt.datetime = Field(default_factory=utcnow)
    trajectory_ref: str | None = None
