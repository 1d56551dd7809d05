"""Pydantic records shared by every layer: evidence, tree nodes, tool calls, usage, trajectories, memory items.

All records are JSON-serialisable (``model_dump(mode="json")``) and human-readable.

Example:
    >>> from memento.core.types import Node
    >>> Node(id="n1", question="Who wrote Dune?").status
    'pending'
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any, Literal

from pydantic import Field, field_validator

from memento.core.evidence import (
    DatingRecord,
    Evidence,
    EvidenceRecord,
    ShownItem,
    SourcePage,
    SourceRun,
    source_matches,
)
from memento.core.memory_items import Case, CraftEntry, Fact, Rule, RuleStatus
from memento.core.record import _Record, new_id, utcnow

__all__ = [
    "Evidence",
    "SourcePage",
    "SourceRun",
    "EvidenceRecord",
    "ShownItem",
    "DatingRecord",
    "source_matches",
    "Node",
    "NodeStatus",
    "SearchHit",
    "SearchResults",
    "PageResult",
    "ToolError",
    "ToolResult",
    "ToolCall",
    "AgentStep",
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
    "text_sha256",
    "utcnow",
]


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


def _scrub_value(value: str) -> str:
    from memento.utils.scrub import scrub_data

    return scrub_data(value)


def _scrub_url_value(value: str) -> str:
    from memento.utils.scrub import scrub_url

    return scrub_url(value) if value else value


def text_sha256(text: str) -> str:
    """The content hash a page text is stored under (sha256 of its UTF-8 bytes, hex)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SearchHit(_Record):
    """One result of a web search as the engine returned it (the whole snippet; clipping happens at render time)."""

    url: str
    title: str = ""
    snippet: str = ""
    published: dt.date | None = None

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, value: str) -> str:
        return _scrub_url_value(value)

    @field_validator("title", "snippet")
    @classmethod
    def _scrubbed(cls, value: str) -> str:
        return _scrub_value(value)


class SearchResults(_Record):
    """What ``search_web`` returned: the query sent, every hit in engine order, and the date cutoff applied.

    Example:
        >>> SearchResults(query="dune author", hits=[SearchHit(url="corpus://dune", title="Dune")]).urls
        ['corpus://dune']
    """

    type: Literal["search"] = "search"
    query: str
    hits: list[SearchHit] = Field(default_factory=list)
    cutoff: dt.date | None = None

    @field_validator("query")
    @classmethod
    def _scrubbed(cls, value: str) -> str:
        return _scrub_value(value)

    @property
    def urls(self) -> list[str]:
        """The hits' URLs, in order."""
        return [hit.url for hit in self.hits]


class PageResult(_Record):
    """What ``scrape`` returned: the page as fetched, its full text, and where the text is stored.

    ``text`` is the whole (scrubbed) page text. It lives in memory only: it is excluded from every serialisation
    (results files, checkpoints, reports, the bank's trajectory records), which carry ``sha256`` and ``chars``
    instead. The trajectory bank stores the text once under its hash (a ``pages`` table beside the trajectories)
    and gives it back when it loads a trajectory (:meth:`memento.memory.trajectory_bank.TrajectoryBank.retrieve`).
    A page read back from JSON elsewhere has ``text == ""`` and ``text_loaded`` false.

    Example:
        >>> page = PageResult.of_text(url="corpus://dune", title="Dune", text="Dune is a 1965 novel.")
        >>> page.chars, len(page.sha256), "text" in page.model_dump()
        (21, 64, False)
    """

    type: Literal["page"] = "page"
    url: str  # the URL requested
    final_url: str = ""  # where the fetch ended (redirects); "" when the same
    title: str = ""
    published: dt.date | None = None
    cached: bool = False
    sha256: str = ""
    chars: int = 0
    text: str = Field(default="", exclude=True)

    @field_validator("url", "final_url")
    @classmethod
    def _no_credentials(cls, value: str) -> str:
        return _scrub_url_value(value)

    @field_validator("title")
    @classmethod
    def _scrubbed(cls, value: str) -> str:
        return _scrub_value(value)

    @classmethod
    def of_text(cls, *, text: str, **fields: Any) -> PageResult:
        """A page with its text scrubbed (secrets, URL passwords) and hashed."""
        from memento.utils.scrub import scrub

        clean = scrub(text or "")
        return cls(text=clean, sha256=text_sha256(clean), chars=len(clean), **fields)

    @property
    def address(self) -> str:
        """The URL the page was read from (the final URL after redirects, else the requested one)."""
        return self.final_url or self.url

    @property
    def text_loaded(self) -> bool:
        """Whether the full text is in memory (it always is for a page of zero characters)."""
        return len(self.text) == self.chars


class ToolError(_Record):
    """A tool call that failed: ``reason`` is the one-line recorded failure, ``message`` what the agent reads."""

    type: Literal["error"] = "error"
    reason: str
    message: str = ""

    @field_validator("reason", "message")
    @classmethod
    def _scrubbed(cls, value: str) -> str:
        return _scrub_value(value)


ToolResult = SearchResults | PageResult | ToolError


class ToolCall(_Record):
    """One tool invocation by an agent: what was asked, what came back (typed and whole), where it came from.

    ``search`` / ``page`` hold the typed result of ``search_web`` / ``scrape`` (every hit; the page's full text in
    memory, its hash and length when serialised); ``result`` holds a text result (``search_memory``) and, in
    records written before results were typed, the clipped observation (still readable: see
    :func:`memento.programs.tool_render.render_call`). ``id`` lets an :class:`AgentStep` point at its observation.
    """

    id: str = Field(default_factory=lambda: new_id("call-"))
    kind: str  # search_web | scrape | search_memory | ...
    args: dict[str, Any] = Field(default_factory=dict)
    search: SearchResults | None = None
    page: PageResult | None = None
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
        return _scrub_value(value)


class AgentStep(_Record):
    """One step of a ReAct agent: its thought, the tool it chose with the arguments, and what it observed.

    ``call_id`` names the :class:`ToolCall` that produced the observation (its text is re-rendered from the typed
    result); a step without a tool call (``finish``, an unknown tool) keeps its short ``observation`` text.
    """

    node_id: str | None = None
    index: int
    thought: str = ""
    tool_name: str = ""
    tool_args: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = None
    observation: str = ""

    @field_validator("thought", "tool_args", "observation")
    @classmethod
    def _scrubbed(cls, value: Any) -> Any:
        return _scrub_value(value)


class StageUsage(_Record):
    """LM usage of one stage (signature) or role."""

    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, those a provider's prompt cache served (not re-evaluated)
    cached_calls: int = 0


class Usage(_Record):
    """Counted resource use of a run."""

    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, those a provider's prompt cache served (not re-evaluated)
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
        _add_counts(out, other)
        for attr in ("by_stage", "by_role"):
            mine = getattr(out, attr)
            for key, val in getattr(other, attr).items():
                _add_counts(mine.setdefault(key, StageUsage()), val)
        return out


def _add_counts(into: _Record, other: _Record) -> None:
    """Add ``other``'s integer counts to ``into``'s (every ``int`` field of the model, so a new count is summed too)."""
    for name, field in type(into).model_fields.items():
        if field.annotation is int:
            setattr(into, name, getattr(into, name) + getattr(other, name))


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
    steps: list[AgentStep] = Field(default_factory=list)  # every ReAct step of every agent, in the order taken
    notes: list[str] = Field(default_factory=list)
    prediction: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None
    usage: Usage = Field(default_factory=Usage)
    timings: dict[str, float] = Field(default_factory=dict)
    memory_version: int | None = None
    cutoff: dt.date | None = None  # the task's date cutoff (nothing published on or after it may be shown)
    dating: DatingRecord | None = None  # memory shown with dates, items hidden by the cutoff (memento.records.leakage)
    injected_memory: dict[str, list[str]] = Field(default_factory=dict)  # store -> ids of the items injected
    cbr: CBRDetails | None = None  # a case-based run's retrieval, plan and reward
    jitmem: JitMemDetails | None = None  # a JitMem run's retrieval and payload
    explorations: list[Exploration] = Field(default_factory=list)  # MEMENTO Appendix D.1, in order
    error: str | None = None
    created_at: dt.datetime = Field(default_factory=utcnow)
    provenance: dict[str, Any] | None = None  # what produced it: settings, models, versions (records.provenance)

    def node(self, node_id: str) -> Node:
        """The node with this id (``KeyError`` when absent)."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def pages(self) -> list[PageResult]:
        """The typed pages of the scrape calls, in call order."""
        return [call.page for call in self.tool_calls if call.page is not None]

    def call(self, call_id: str) -> ToolCall:
        """The tool call with this id (``KeyError`` when absent)."""
        for c in self.tool_calls:
            if c.id == call_id:
                return c
        raise KeyError(call_id)

    def children(self, node_id: str | None) -> list[Node]:
        """The nodes whose parent is ``node_id``."""
        return [n for n in self.nodes if n.parent_id == node_id]
