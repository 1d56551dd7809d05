"""The Adaptive Exploration Tree (AET): MEMENTO's within-session research program (§3.3).

One call answers one task instance:

1. **Decompose** (wave 0): the root task becomes at most ``budgets.initial_questions`` sub-questions.
2. **Solve**: the sub-questions of a wave run in parallel (``threads`` workers, DSPy context carried into them),
   each answered by a :class:`memento.programs.sub_question_agent.SubQuestionAgent` with at most
   ``budgets.steps_per_question`` tool steps. Every answer, with its evidence, enters the per-sample
   :class:`memento.programs.session_memory.SessionMemory`, which the agents' ``search_memory`` tool and reflection see.
3. **Reflect** between waves: the tree so far, the session memory and the earlier reflections lead to new
   sub-questions; one that hangs under an existing node turns that node into a decomposed node. Waves continue
   until ``budgets.total_questions`` sub-questions have been asked or reflection proposes none. Reflection's
   stopping rule follows ``budgets.stop_early``: off (the default, as in the paper) it keeps proposing uncovered
   or weakly sourced elements until the budget is spent; on, it stops once every element the answer needs is
   established with a source.
4. **Synthesize** bottom-up: every decomposed node is answered from its children, deepest first (a level's nodes in
   parallel); the root's synthesis feeds the task's final-answer predictor.

Memory inputs (M1 craft knowledge and M2 decomposition rules for Decompose/Reflect, M3 web-action rules and M4 known
facts for the agent) come from ``memory`` (a :class:`memento.core.protocols.MemoryProvider`) and are "" without one.
Stages carry ``usage_stage`` names (decompose, reflect, solve, synthesize, answer), so the trajectory's usage is
broken down per stage.

Example:
    >>> from memento.core.config import Budgets, load_settings
    >>> from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
    >>> from memento.web.factory import web_tools_factory
    >>> settings = load_settings(flags={"web": {"corpus": "examples/multihop/corpus.jsonl"}})
    >>> aet = AdaptiveExplorationTree("qa", web=web_tools_factory(settings), budgets=Budgets(), threads=4)
    >>> pred = aet(question="Which city was the director of Inception born in?")  # doctest: +SKIP
    >>> pred.answer, len(pred.trajectory.nodes)  # doctest: +SKIP
    ('London', 9)
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import dspy

from memento.core.error_policy import handle_error
from memento.core.types import Evidence, Node
from memento.core.untrusted import quote_data
from memento.execution.threads import run_parallel
from memento.programs.registry import register_method
from memento.programs.research_program import ResearchCall, ResearchProgram
from memento.programs.session_memory import SessionMemory
from memento.programs.sub_question_agent import SubQuestionAgent
from memento.signatures.decompose import Decompose
from memento.signatures.final_answer import answer_signature
from memento.signatures.reflect import EXPLORE_UNTIL_BUDGET, STOP_WHEN_ESTABLISHED, Reflect
from memento.signatures.synthesize_node import SynthesizeNode
from memento.utils.text import one_line

if TYPE_CHECKING:
    from memento.core.config import Settings
    from memento.llm.lm import Roles
    from memento.tasks.task import Task

__all__ = ["AdaptiveExplorationTree", "TreeEvent", "render_tree"]

logger = logging.getLogger(__name__)

ROOT_ID = "root"
_ANSWER_CHARS = 600


@dataclass
class TreeEvent:
    """What a tree hook sees as the research progresses (``--trace`` prints these).

    ``kind`` is ``decompose`` (wave 0 planned), ``wave`` (a wave solved), ``reflect`` (proposals made),
    ``synthesize`` (bottom-up synthesis done) or ``answer`` (final answer); ``nodes`` are the nodes concerned.
    """

    kind: Literal["decompose", "wave", "reflect", "synthesize", "answer"]
    wave: int
    nodes: list[Node] = field(default_factory=list)
    text: str = ""
    seconds: float = 0.0


def _norm_question(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def render_tree(nodes: list[Node], *, with_sources: bool = False) -> str:
    """The tree as indented prompt-ready text: ``id [wave, status] Q -> A`` per node, children under parents."""
    by_parent: dict[str | None, list[Node]] = {}
    for node in nodes:
        by_parent.setdefault(node.parent_id, []).append(node)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for node in by_parent.get(parent, []):
            if node.id == ROOT_ID:
                lines.append(f"{node.id}: TASK: {one_line(node.question, 400)}")
            else:
                answer = one_line(node.answer, _ANSWER_CHARS) if node.answer else "(no answer)"
                extra = f" error: {one_line(node.error, 160)}" if node.status == "failed" and node.error else ""
                lines.append(
                    f"{'  ' * depth}{node.id} [wave {node.wave}, {node.status}] Q: {node.question}\n"
                    f"{'  ' * depth}  A: {answer}{extra}"
                )
                if with_sources and node.evidence:
                    lines.append(f"{'  ' * depth}  Sources: {', '.join(e.url for e in node.evidence[:6])}")
            walk(node.id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)


class AdaptiveExplorationTree(ResearchProgram):
    """Decompose, solve in parallel waves, reflect, synthesize bottom-up, answer (MEMENTO §3.3).

    Args:
        task: the task spec or its registered name.
        web: factory of per-sample :class:`memento.web.web_tools.WebTools` (required).
        budgets: ``initial_questions``, ``total_questions``, ``steps_per_question`` (hard, counted limits).
        threads: sub-questions solved in parallel within a wave.
        memory: attached persistent memory (M1-M4) or ``None``.
        roles: LM roles for usage attribution.
        on_event: a hook called with a :class:`TreeEvent` after each phase (``memento run --trace`` uses it).

    Predictors (each with a distinct signature): ``decompose``, ``reflect``, ``solver.agent.react``,
    ``solver.agent.extract.predict``, ``synthesize`` and ``answer``.

    Example:
        >>> aet = AdaptiveExplorationTree("qa", web=factory, threads=4)  # doctest: +SKIP
        >>> pred = aet(question="...", cutoff="2020-01-01")  # doctest: +SKIP
        >>> [(n.id, n.status) for n in pred.trajectory.nodes]  # doctest: +SKIP
    """

    method = "aet"
    needs_web = True
    _shared_attrs = (*ResearchProgram._shared_attrs, "on_event")

    def __init__(self, task: Task | str, *, on_event: Callable[[TreeEvent], None] | None = None, **kwargs: Any):
        super().__init__(task, **kwargs)
        self.on_event = on_event
        self.decompose = dspy.Predict(Decompose)
        self.decompose.usage_stage = "decompose"
        self.reflect = dspy.Predict(Reflect)
        self.reflect.usage_stage = "reflect"
        self.solver = SubQuestionAgent(max_steps=self.budgets.steps_per_question)
        self.synthesize = dspy.Predict(SynthesizeNode)
        self.synthesize.usage_stage = "synthesize"
        self.answer = dspy.Predict(answer_signature(self.task, findings=True))
        self.answer.usage_stage = "answer"

    # -- the call ------------------------------------------------------------------------------------------------
    def research(self, call: ResearchCall) -> dict[str, Any]:
        run = _TreeRun(self, call)
        return run.execute()


class _TreeRun:
    """The state of one AET call (kept off the module so threads and calls never share it)."""

    def __init__(self, program: AdaptiveExplorationTree, call: ResearchCall) -> None:
        self.p = program
        self.call = call
        self.traj = call.trajectory
        self.budgets = program.budgets
        self.session = SessionMemory(dates=call.dates, dating=call.trajectory.dating)
        self.memory = program.memory_text(call)
        self.reflections: list[str] = []
        self.direct_answers: dict[str, tuple[str, list[Evidence]]] = {}
        self._seq = 0
        self._lock = threading.Lock()
        self.root = Node(id=ROOT_ID, parent_id=None, wave=-1, question=call.task_text, status="decomposed")
        self.traj.nodes.append(self.root)

    # -- helpers -------------------------------------------------------------------------------------------------
    @property
    def asked(self) -> int:
        return len(self.traj.nodes) - 1

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def emit(self, event: TreeEvent) -> None:
        if self.p.on_event is None:
            return
        try:
            self.p.on_event(event)
        except Exception as exc:  # a display hook must never break the research
            logger.warning("tree event hook failed: %s", exc)

    def timed(self, key: str, started: float) -> float:
        seconds = round(time.perf_counter() - started, 6)
        self.traj.timings[key] = round(self.traj.timings.get(key, 0.0) + seconds, 6)
        return seconds

    def _add_nodes(self, questions: list[tuple[str, str]], wave: int) -> list[Node]:
        """Add new sub-questions ``(question, parent_id)``, dropping repeats and anything over the budget."""
        known = {_norm_question(n.question) for n in self.traj.nodes}
        ids = {n.id for n in self.traj.nodes}
        added: list[Node] = []
        for question, parent_id in questions:
            question = " ".join(str(question or "").split())
            key = _norm_question(question)
            if not key:
                continue
            if key in known:
                self.call.note(f"wave {wave}: dropped a repeated sub-question: {question}")
                continue
            if self.asked >= self.budgets.total_questions:
                self.call.note(
                    f"wave {wave}: question budget ({self.budgets.total_questions}) spent; dropped: {question}"
                )
                continue
            parent = parent_id if parent_id in ids else ROOT_ID
            node = Node(id=f"q{self.asked + 1}", parent_id=parent, wave=wave, question=question)
            self.traj.nodes.append(node)
            known.add(key)
            ids.add(node.id)
            added.append(node)
            if parent != ROOT_ID:
                parent_node = self.traj.node(parent)
                if parent_node.status != "decomposed":
                    if parent_node.answer:
                        self.direct_answers[parent] = (parent_node.answer, list(parent_node.evidence))
                    parent_node.status = "decomposed"
                    parent_node.error = None
        return added

    # -- phases --------------------------------------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        wave = 0
        nodes = self.decompose()
        while nodes:
            started = time.perf_counter()
            run_parallel(self.solve, nodes, threads=self.p.threads)
            seconds = self.timed(f"wave_{wave}_s", started)
            self.emit(TreeEvent("wave", wave, list(nodes), seconds=seconds))
            if self.asked >= self.budgets.total_questions:
                self.call.note(f"question budget spent after wave {wave} ({self.asked} sub-questions)")
                break
            nodes = self.reflect_after(wave)
            wave += 1
        self.synthesize_all()
        return self.final_answer()

    def decompose(self) -> list[Node]:
        started = time.perf_counter()
        limit = min(self.budgets.initial_questions, self.budgets.total_questions)
        try:
            pred = self.p.decompose(
                task=self.call.task_text,
                task_goal=self.call.task_goal,
                context=self.call.context,
                craft_knowledge=self.memory["craft_knowledge"],
                decomposition_rules=self.memory["decomposition_rules"],
                max_questions=limit,
            )
            questions = [str(q) for q in (pred.sub_questions or []) if str(q).strip()]
        except Exception as exc:
            failure = handle_error(exc, where="decompose", log=logger)
            self.call.note(f"{failure}; researching the task as one question")
            questions = []
        if not questions:
            questions = [self.call.task_text]
        if len(questions) > limit:
            self.call.note(f"decompose proposed {len(questions)} sub-questions; kept the first {limit}")
        nodes = self._add_nodes([(q, ROOT_ID) for q in questions[:limit]], 0)
        if not nodes:  # every proposal repeated the task itself: research the task directly
            nodes = self._add_nodes([(self.call.task_text + " (direct)", ROOT_ID)], 0)
        seconds = self.timed("decompose_s", started)
        self.emit(TreeEvent("decompose", 0, list(nodes), seconds=seconds))
        return nodes

    def solve(self, node: Node) -> None:
        out = self.p.solver(
            question=node.question,
            task=self.call.task_text,
            task_goal=self.call.task_goal,
            web_action_rules=self.memory["web_action_rules"],
            known_facts=self.memory["known_facts"],
            context=self.call.context,
            web=self.call.web,
            session=self.session,
            memory=self.p.memory_view(self.call),
            node_id=node.id,
            record=self.call.add_tool_call,
            record_step=self.call.add_step,
        )
        node.steps = int(out.steps)
        node.answer = out.answer
        node.evidence = list(out.evidence)
        node.error = out.error
        for warning in out.warnings:
            self.call.note(f"{node.id}: {warning}")
        if out.status == "answered":
            node.status = "answered"
            node.answered_seq = self.next_seq()
            self.session.add(node.id, node.question, node.answer or "", node.evidence)
        else:
            node.status = "failed"

    def reflect_after(self, wave: int) -> list[Node]:
        started = time.perf_counter()
        remaining = self.budgets.total_questions - self.asked
        try:
            pred = self.p.reflect(
                task=self.call.task_text,
                task_goal=self.call.task_goal,
                context=self.call.context,
                craft_knowledge=self.memory["craft_knowledge"],
                decomposition_rules=self.memory["decomposition_rules"],
                research_tree=quote_data(render_tree(self.traj.nodes)),
                session_memory=quote_data(self.session.render()),
                previous_reflections=quote_data(
                    "\n\n".join(f"After wave {i}: {text}" for i, text in enumerate(self.reflections))
                ),
                remaining_budget=remaining,
                stopping_rule=STOP_WHEN_ESTABLISHED if self.budgets.stop_early else EXPLORE_UNTIL_BUDGET,
            )
        except Exception as exc:
            failure = handle_error(exc, where=f"reflection after wave {wave}", log=logger)
            self.call.note(f"{failure}; exploration stops")
            self.timed(f"reflect_{wave}_s", started)
            return []
        reflection = str(pred.reflection or "").strip()
        self.reflections.append(reflection)
        self.call.note(f"reflection after wave {wave}: {reflection}")
        proposals: list[tuple[str, str]] = []
        for item in pred.new_questions or []:
            if isinstance(item, dict):
                question, parent = item.get("question", ""), item.get("parent_id") or ROOT_ID
            elif isinstance(item, str):
                question, parent = item, ROOT_ID
            else:
                question, parent = getattr(item, "question", ""), getattr(item, "parent_id", None) or ROOT_ID
            proposals.append((str(question), str(parent).strip()))
        nodes = self._add_nodes(proposals, wave + 1)
        if not nodes and not self.budgets.stop_early:  # the explore-until-spent rule was not followed: say so
            self.call.note(
                f"reflection after wave {wave} proposed no new sub-question with {remaining} of the budget left "
                "(budgets.stop_early is off)"
            )
        seconds = self.timed(f"reflect_{wave}_s", started)
        self.emit(TreeEvent("reflect", wave, list(nodes), text=reflection, seconds=seconds))
        return nodes

    def _depth(self, node: Node) -> int:
        depth = 0
        while node.parent_id is not None:
            node = self.traj.node(node.parent_id)
            depth += 1
        return depth

    def synthesize_all(self) -> None:
        started = time.perf_counter()
        inner = [n for n in self.traj.nodes if n.status == "decomposed" and n.id != ROOT_ID]
        levels: dict[int, list[Node]] = {}
        for node in inner:
            levels.setdefault(self._depth(node), []).append(node)
        for depth in sorted(levels, reverse=True):
            run_parallel(self.synthesize_node, levels[depth], threads=self.p.threads)
        self.synthesize_node(self.root)
        seconds = self.timed("synthesize_s", started)
        self.emit(TreeEvent("synthesize", -1, [self.root, *inner], text=self.root.answer or "", seconds=seconds))

    def synthesize_node(self, node: Node) -> None:
        children = self.traj.children(node.id)
        lines: list[str] = []
        if node.id in self.direct_answers:
            answer, _ = self.direct_answers[node.id]
            lines.append(f"Earlier direct answer to this question: {one_line(answer, _ANSWER_CHARS)}")
        for child in children:
            sources = ", ".join(e.url for e in child.evidence[:6]) or "none"
            child_answer = one_line(child.answer, _ANSWER_CHARS) or "(no answer)"
            lines.append(
                f"- [{child.id}, {child.status}] Q: {child.question}\n  A: {child_answer}\n  Sources: {sources}"
            )
        evidence: dict[str, Evidence] = {}
        for ev in [*self.direct_answers.get(node.id, ("", []))[1], *(e for c in children for e in c.evidence)]:
            evidence.setdefault(ev.url, ev)
        try:
            pred = self.p.synthesize(
                task=self.call.task_text,
                task_goal=self.call.task_goal,
                question=node.question,
                findings=quote_data("\n".join(lines)) or "(no findings)",
            )
            answer = str(pred.answer or "").strip()
        except Exception as exc:
            failure = handle_error(exc, where="synthesis", log=logger)
            node.error = f"synthesis failed: {failure.reason}"
            if node.id != ROOT_ID:
                node.status = "failed"
            self.call.note(f"{node.id}: {node.error}")
            return
        node.answer = answer or None
        node.evidence = list(evidence.values())
        node.answered_seq = self.next_seq()

    def final_answer(self) -> dict[str, Any]:
        started = time.perf_counter()
        findings = []
        if self.root.answer:
            findings.append(f"Synthesis of the research: {self.root.answer}")
        findings.append("Research tree:\n" + render_tree(self.traj.nodes, with_sources=True))
        research_findings = quote_data("\n\n".join(findings))
        pred = self.p.answer(context=self.call.context, research_findings=research_findings, **self.call.inputs)
        reasoning = pred.get("reasoning") if "reasoning" not in self.p.task.output_fields else None
        if reasoning:  # the final predictor's own reasoning (short-answer tasks): kept in the trajectory
            self.call.note(f"answer reasoning: {reasoning}")
        seconds = self.timed("answer_s", started)
        outputs = {name: pred.get(name) for name in self.p.task.output_fields}
        self.emit(TreeEvent("answer", -1, [self.root], text=str(outputs), seconds=seconds))
        return outputs


# -- registry builder -------------------------------------------------------------------------------------------
@register_method("aet")
def _build_aet(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Path | None = None,
) -> AdaptiveExplorationTree:
    from memento.web.factory import web_tools_factory

    return AdaptiveExplorationTree(
        task,
        web=web_tools_factory(settings),
        budgets=settings.budgets.model_copy(),
        threads=settings.run.threads,
        roles=roles,
    )
