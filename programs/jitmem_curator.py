"""JitMem's read-time curator: the current task plus k raw past trajectories in, a compact task-specific payload out.

The curator is where just-in-time memory decides what matters: the bank keeps trajectories raw, and only when a new
task arrives does :class:`JitMemCurator` read the retrieved ones (each rendered compactly, in order, and clipped to
a token budget by :func:`render_trajectory`) and write the guidance the executor will read once. Its only predictor
is ``CurateMemory``, so optimizers (GEPA, MIPROv2) can tune the curator's instructions alone.

Ablations: ``task_conditioning=False`` swaps in ``CurateMemoryBlind`` (the curator never sees the task);
:class:`TrajectoryDistiller` implements write-time distillation (summarise at storage time instead of curating at
read time).

Example:
    >>> from memento.programs.jitmem_curator import JitMemCurator
    >>> curator = JitMemCurator(max_tokens_per_trajectory=800)
    >>> pred = curator(task="Who founded Lyon?", trajectories=bank.retrieve("Who founded Lyon?"))  # doctest: +SKIP
    >>> pred.payload  # doctest: +SKIP
    'Relevant past experience: ...'
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import dspy

from memento.core.errors import ConfigError
from memento.core.types import AgentStep, ToolCall, Trajectory
from memento.core.untrusted import quote_data
from memento.memory.sqlite_store import estimate_tokens  # the estimate every memory budget uses (re-exported)
from memento.records.usage import NamedPredictors
from memento.signatures.curate_memory import CurateMemory
from memento.signatures.curate_memory_blind import CurateMemoryBlind
from memento.signatures.distill_trajectory import DistillTrajectory
from memento.utils.text import one_line
from memento.web.tool_output import call_line

__all__ = [
    "JitMemCurator",
    "TrajectoryDistiller",
    "render_trajectory",
    "render_trajectories",
    "estimate_tokens",
    "CHARS_PER_TOKEN",
    "NO_TRAJECTORIES",
    "PAYLOAD_LABEL",
    "clip_to_tokens",
]

logger = logging.getLogger(__name__)

#: Characters per token used for budgets (a common rule of thumb for English text with BPE tokenizers).
CHARS_PER_TOKEN = 4
#: What the curator reads when retrieval found nothing (or the no-retrieval ablation is on).
NO_TRAJECTORIES = "(no past trajectories)"
#: The heading the executor reads above the payload (the JitMem paper's "curated notes").
PAYLOAD_LABEL = "Curated notes from similar past tasks"
_RESULT_CHARS = 300
_DISTILLED_PREFIX = "Distilled at write time: "


def _step_lines(
    steps: list[AgentStep], calls: list[ToolCall], result_chars: int | None, *, indent: str = ""
) -> list[str]:
    """An agent's steps in order (thought, then the call it made, rendered from the typed result), then any call
    no step points at (records from before steps were kept)."""
    by_id = {call.id: call for call in calls}
    lines: list[str] = []
    shown: set[str] = set()
    for step in steps:
        if step.thought:
            lines.append(f"{indent}thought: {one_line(step.thought, 400)}")
        call = by_id.get(step.call_id or "")
        if call is not None:
            lines.append(indent + call_line(call, result_chars=result_chars))
            shown.add(call.id)
        elif step.tool_name != "finish":
            lines.append(f"{indent}- {step.tool_name} -> {one_line(step.observation, 160)}")
    lines.extend(indent + call_line(call, result_chars=result_chars) for call in calls if call.id not in shown)
    return lines


def render_trajectory(
    trajectory: Trajectory,
    *,
    label: bool | None = None,
    score: float | None = None,
    index: int = 1,
    max_tokens: int | None = 1500,
    result_chars: int | None = _RESULT_CHARS,
) -> str:
    """Render one trajectory compactly for the curator, keeping its order, clipped to ``max_tokens``.

    Layout: a header (task, method, label when given), the body in execution order (each tree node's question and
    answer followed by the tool calls it made; tool calls of flat agents; notes), and a footer (final prediction,
    error). Header and footer are always kept; when the budget is exceeded the body is cut at a line boundary and the
    number of clipped lines is stated, so nothing is silently reordered. The agent's steps are shown with their
    thoughts; each tool result is rendered from its typed record (every search hit, the page text: the bank keeps
    them whole) and cut here, at render time, to ``result_chars`` characters on one line (``None`` keeps results
    whole).
    """
    header = [f"### Past trajectory {index}" + (f" (retrieval score {score:.2f})" if score is not None else "")]
    header.append(f"Task: {one_line(trajectory.task_text, 1200)}")
    if label is not None:
        header.append(f"Outcome (judge): {'success' if label else 'failure'}")
    body: list[str] = []
    by_node: dict[str | None, list[ToolCall]] = {}
    for call in trajectory.tool_calls:
        by_node.setdefault(call.node_id, []).append(call)
    steps_by_node: dict[str | None, list[AgentStep]] = {}
    for step in trajectory.steps:
        steps_by_node.setdefault(step.node_id, []).append(step)
    node_ids = {node.id for node in trajectory.nodes}
    if trajectory.nodes:
        body.append("Steps:")
    for node in trajectory.nodes:
        answer = one_line(node.answer, 500) if node.answer else f"({node.status})"
        body.append(f"- Q{node.wave if node.wave >= 0 else ''} {one_line(node.question, 300)} => {answer}")
        if node.evidence:
            body.append("  sources: " + ", ".join(e.url for e in node.evidence[:5]))
        body.extend(_step_lines(steps_by_node.get(node.id, []), by_node.get(node.id, []), result_chars, indent="  "))
    loose = [call for call in trajectory.tool_calls if call.node_id is None or call.node_id not in node_ids]
    loose_steps = [step for step in trajectory.steps if step.node_id is None or step.node_id not in node_ids]
    if loose or loose_steps:
        body.append("Tool calls:")
        body.extend(_step_lines(loose_steps, loose, result_chars))
    for note in trajectory.notes:
        if note.startswith(_DISTILLED_PREFIX):
            body.append(note)
        elif not note.startswith("jitmem:"):
            body.append(f"Note: {one_line(note, 300)}")
    footer: list[str] = []
    if trajectory.prediction:
        pred = "; ".join(f"{k}: {one_line(v, 600)}" for k, v in trajectory.prediction.items())
        footer.append(f"Final answer: {pred}")
    if trajectory.error:
        footer.append(f"Error: {one_line(trajectory.error, 200)}")
    if max_tokens is None:
        return "\n".join(header + body + footer)
    budget = max_tokens * CHARS_PER_TOKEN - sum(len(line) + 1 for line in header + footer)
    kept: list[str] = []
    used = 0
    for i, line in enumerate(body):
        if used + len(line) + 1 > budget - 40:
            kept.append(f"[... {len(body) - i} more lines clipped to fit the budget]")
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(header + kept + footer)


def clip_to_tokens(text: str, max_tokens: int) -> str:
    """``text`` within ``max_tokens`` (estimated like every memory budget), cut at a line (else word) boundary, with a
    closing mark saying it was clipped; text already within budget is returned unchanged."""
    if estimate_tokens(text) <= max_tokens:
        return text
    mark = "\n[... curated notes clipped to the payload budget]"
    limit = max(0, max_tokens * CHARS_PER_TOKEN - len(mark))
    while limit > 0:
        head = text[:limit]
        cut = head.rfind("\n")
        if cut < limit // 2:
            cut = head.rfind(" ")
        head = head[: cut if cut > 0 else limit].rstrip()
        clipped = head + mark
        if estimate_tokens(clipped) <= max_tokens:
            return clipped
        limit -= max(1, limit // 10)
    return mark.strip()[: max_tokens * CHARS_PER_TOKEN]


def _normalise(items: Sequence[Any]) -> list[tuple[Trajectory, bool | None, float | None]]:
    out: list[tuple[Trajectory, bool | None, float | None]] = []
    for item in items:
        if isinstance(item, Trajectory):
            out.append((item, None, None))
        elif isinstance(item, tuple) and item and isinstance(item[0], Trajectory):
            label = item[1] if len(item) > 1 else None
            score = item[2] if len(item) > 2 else None
            out.append((item[0], label, score))
        else:
            raise ConfigError(
                f"the curator reads Trajectory records or (trajectory, label, score) tuples, got {type(item).__name__}"
            )
    return out


def render_trajectories(
    items: Sequence[Any], *, max_tokens_per_trajectory: int | None = 1500, result_chars: int | None = _RESULT_CHARS
) -> str:
    """Render retrieved trajectories (``Trajectory`` or ``(trajectory, label, score)``) best first, blank-separated."""
    rendered = [
        render_trajectory(
            t, label=label, score=score, index=i, max_tokens=max_tokens_per_trajectory, result_chars=result_chars
        )
        for i, (t, label, score) in enumerate(_normalise(items), start=1)
    ]
    return "\n\n".join(rendered) if rendered else NO_TRAJECTORIES


class JitMemCurator(dspy.Module, metaclass=NamedPredictors):
    """Write a task-conditioned payload from raw past trajectories (JitMem's curator).

    Args:
        max_tokens_per_trajectory: budget per rendered trajectory (estimated at 4 characters per token;
            ``jitmem.curator_trajectory_tokens``).
        result_chars: characters of each tool result the curator reads (``jitmem.curator_result_chars``).
        task_conditioning: when ``False`` (ablation) the curator does not see the task (``CurateMemoryBlind``).
        payload_tokens: the payload's budget (``jitmem.payload_tokens``, 2000: the paper reports about 1.9K added
            tokens); a longer payload is clipped at a line boundary and says so.

    Called as ``curator(task=..., trajectories=[...], task_goal=...)`` (``task_goal``: what the task asks for,
    :meth:`memento.tasks.task.Task.task_goal`); returns ``dspy.Prediction(payload=str, input_tokens=int,
    clipped=bool)`` where ``input_tokens`` estimates the raw trajectories' size as rendered for the curator.

    Example:
        >>> curator = JitMemCurator()
        >>> curator(task="Who founded Lyon?", trajectories=[]).payload  # doctest: +SKIP
        'No relevant past experience.'
    """

    usage_stage = "curate"

    def __init__(
        self,
        *,
        max_tokens_per_trajectory: int = 1500,
        task_conditioning: bool = True,
        payload_tokens: int = 2000,
        result_chars: int = _RESULT_CHARS,
    ) -> None:
        super().__init__()
        if max_tokens_per_trajectory < 64:
            raise ConfigError(f"max_tokens_per_trajectory must be >= 64, got {max_tokens_per_trajectory}")
        if payload_tokens < 1:
            raise ConfigError(f"payload_tokens must be >= 1, got {payload_tokens}")
        if result_chars < 0:
            raise ConfigError(f"result_chars must be >= 0, got {result_chars}")
        self.result_chars = result_chars
        self.max_tokens_per_trajectory = max_tokens_per_trajectory
        self.payload_tokens = payload_tokens
        self.task_conditioning = task_conditioning
        self.curate = dspy.Predict(CurateMemory if task_conditioning else CurateMemoryBlind)

    def render(self, trajectories: Sequence[Any]) -> str:
        """The text the curator reads for these trajectories."""
        return render_trajectories(
            trajectories,
            max_tokens_per_trajectory=self.max_tokens_per_trajectory,
            result_chars=getattr(self, "result_chars", _RESULT_CHARS),  # a curator saved before it was a setting
        )

    def forward(self, task: str, trajectories: Sequence[Any] = (), task_goal: str = "") -> dspy.Prediction:
        rendered = self.render(trajectories)
        quoted = quote_data(rendered)  # the bank keeps pages verbatim: the curator reads them as data
        if self.task_conditioning:
            pred = self.curate(task=task, task_goal=task_goal, past_trajectories=quoted)
        else:
            pred = self.curate(past_trajectories=quoted)
        written = (pred.payload or "").strip()
        payload = clip_to_tokens(written, self.payload_tokens)
        return dspy.Prediction(payload=payload, input_tokens=estimate_tokens(rendered), clipped=payload != written)


class TrajectoryDistiller(dspy.Module, metaclass=NamedPredictors):
    """Write-time distillation (ablation): summarise a trajectory when it is stored, before any task is known.

    ``distiller(trajectory=t)`` returns ``dspy.Prediction(distillate=str, trajectory=Trajectory)``, where the
    returned trajectory is what the bank stores instead of the raw one: same task id, text, inputs, method and
    prediction, with the distillate as its only content (no nodes, no tool calls).

    Example:
        >>> distiller = TrajectoryDistiller()
        >>> stored = distiller(trajectory=raw).trajectory  # doctest: +SKIP
    """

    usage_stage = "distill_trajectory"

    def __init__(self, *, max_tokens: int = 3000) -> None:
        super().__init__()
        self.max_tokens = max_tokens
        self.distill = dspy.Predict(DistillTrajectory)

    def forward(self, trajectory: Trajectory) -> dspy.Prediction:
        rendered = render_trajectory(trajectory, max_tokens=self.max_tokens)
        distillate = (self.distill(task=trajectory.task_text, trajectory=quote_data(rendered)).distillate or "").strip()
        stored = Trajectory(
            task_id=trajectory.task_id,
            task_text=trajectory.task_text,
            retrieval_key=trajectory.retrieval_key,
            inputs=trajectory.inputs,
            method=trajectory.method,
            prediction=trajectory.prediction,
            score=trajectory.score,
            error=trajectory.error,
            notes=[_DISTILLED_PREFIX + distillate],
            created_at=trajectory.created_at,
        )
        return dspy.Prediction(distillate=distillate, trajectory=stored)
