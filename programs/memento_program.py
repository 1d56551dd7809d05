"""Memento: the Adaptive Exploration Tree with MEMENTO's persistent memory attached (§3.3-3.5).

M1 craft knowledge and M2 decomposition rules feed ``Decompose`` and ``Reflect``; M3 web-action rules go into
the sub-question agent's ``web_action_rules`` input; M4 facts go into its ``known_facts`` input and are searched by
``search_memory``. Each call reads memory through :meth:`memento.memory.memento_memory.MementoMemory.view`
excluding its own ``task_id`` (a task never retrieves memory written from its own run) and records in the
trajectory's typed ``injected_memory`` field which items were injected, which the trainer credits in Phase C.

Exploration (MEMENTO Appendix D.1), within ``budgets.exploration`` steps per sample:

* **cold start**: when the M1 relevance check finds no applicable entry for the task (an empty M1 included), the
  exploration agent researches how to research this kind of task; its insights guide this call;
* **end of sample**: while training (memory not frozen), what is left of the budget is spent after a valid answer
  (a run that failed, or answered no sub-question, does not explore).

Exploration never writes memory during the forward pass (other runs of the batch read it): its insights are
recorded in the trajectory (``explorations``) and the trainer adds them to the batch's Phase A plan, committed
with the batch. At test time (frozen memory) exploration only reads.

The exploration agent and the relevance check are stages of the learning module
(:class:`~memento.programs.memento_learner.MementoLearner`), which is deliberately not an attribute of this
program: its predictors never appear in the program's traces, so the program's optimizers must not see them.

Example:
    >>> from memento.memory.memento_memory import MementoMemory
    >>> from memento.programs.memento_program import Memento
    >>> program = Memento("qa", memory=MementoMemory("mem"), web=factory)  # doctest: +SKIP
    >>> program(question="...", task_id="q17").trajectory.injected_memory["decomposition"]  # doctest: +SKIP
    ['r-3f2a9c1d0b7e']
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memento.core.error_policy import handle_error
from memento.core.errors import ConfigError, DataError
from memento.core.types import Exploration
from memento.memory.location import Location
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree, _TreeRun
from memento.programs.exploration_agent import ExplorationAgent
from memento.programs.registry import register_method
from memento.programs.research_program import ResearchCall

if TYPE_CHECKING:
    from memento.core.config import Settings
    from memento.llm.lm import Roles
    from memento.tasks.task import Task

__all__ = ["Memento", "LearningStages", "injected_items"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LearningStages:
    """The learning module's stages the research program calls, as plain callables (not predictors of it).

    ``relevance(task, entries) -> numbers | None`` and ``explore(task_kind=, web=, max_steps=, node_id=, record=,
    record_step=) -> Prediction`` (the last three put its tool calls and steps into the run's trajectory).
    """

    relevance: Callable[[str, list[str]], list[int] | None] | None = None
    explore: Callable[..., Any] | None = None
    #: the learning module these stages come from (the trainer's distillers), when there is one
    learner: Any = None

    @classmethod
    def of(cls, learner: Any) -> LearningStages:
        """The stages of a :class:`~memento.programs.memento_learner.MementoLearner`."""
        return cls(relevance=learner.relevance, explore=learner.explore, learner=learner)

    def __deepcopy__(self, memo: dict[int, Any]) -> LearningStages:
        return self


class Memento(AdaptiveExplorationTree):
    """The AET reading and (through :class:`memento.optimize.memento_trainer.MementoTrainer`) learning memory.

    Args:
        task: the task spec or its registered name.
        memory: the :class:`~memento.memory.memento_memory.MementoMemory` (any MemoryProvider works; exclusion
            and exploration need a MementoMemory).
        stages: the learning module's relevance check and exploration agent (:class:`LearningStages`, or a
            :class:`~memento.programs.memento_learner.MementoLearner`); default: a new learner under ``roles``.
        **kwargs: as :class:`~memento.programs.adaptive_exploration_tree.AdaptiveExplorationTree` (``web``,
            ``budgets``, ``threads``, ``roles``, ``on_event``); ``budgets.exploration`` is the exploration budget
            per sample (cold start plus end of sample).
    """

    method = "memento"
    _shared_attrs = (*AdaptiveExplorationTree._shared_attrs, "stages")

    def __init__(
        self, task: Task | str, *, memory: Any, stages: Any = None, training: bool | None = None, **kwargs: Any
    ) -> None:
        if memory is None:
            raise ConfigError("Memento needs a memory (MementoMemory(directory))")
        super().__init__(task, memory=memory, **kwargs)
        # training runs explore at the end of a sample; default: when the memory is writable (a Ray worker's
        # forward pass of a training batch reads it read-only and says training=True)
        self.training = training if training is not None else not getattr(memory, "frozen", True)
        if stages is None:
            from memento.programs.memento_learner import MementoLearner

            stages = MementoLearner(roles=self.roles, explore_steps=max(1, self.budgets.exploration))
        self.stages = stages if isinstance(stages, LearningStages) else LearningStages.of(stages)

    # -- exploration (Appendix D.1) -----------------------------------------------------------------------
    def _explore(
        self, call: ResearchCall, when: Literal["cold_start", "end_of_sample"], steps: int, extra: str = ""
    ) -> Exploration | None:
        if steps <= 0 or call.web is None or self.stages.explore is None:
            return None
        kind = ExplorationAgent.describe(self.task, [call.task_text])
        out = self.stages.explore(
            task_kind=f"{kind}\n{extra}".strip(),
            web=call.web,
            max_steps=steps,
            node_id=f"explore:{when}",  # its calls and steps join the trajectory (lossless), tagged as exploration
            record=call.add_tool_call,
            record_step=call.add_step,
        )
        record = Exploration(when=when, steps=int(out.steps), insights=list(out.insights))
        call.trajectory.explorations.append(record)
        call.note(f"{when.replace('_', ' ')} exploration: {record.steps} steps, {len(record.insights)} insights")
        return record

    def cold_start(self, call: ResearchCall, view: Any) -> Exploration | None:
        """Explore when the relevance check finds no applicable M1 entry (M1 read, budget left, M1 not masked)."""
        if self.budgets.exploration <= 0 or not hasattr(view, "relevant_craft") or not view.readable("craft"):
            return None
        if view.relevant_craft(call.retrieval_key or call.task_text):  # the text memory_text() retrieves with
            return None
        return self._explore(call, "cold_start", self.budgets.exploration)

    def end_of_sample(self, call: ResearchCall, view: Any, spent: int) -> Exploration | None:
        """While training, spend the rest of the exploration budget after the answer (never at test time)."""
        if not self.training or not hasattr(view, "readable") or not view.readable("craft"):
            return None
        unanswered = [n.question for n in call.trajectory.nodes if n.parent_id and n.status != "answered"]
        extra = "Questions this run could not answer:\n" + "\n".join(f"- {q}" for q in unanswered[:5])
        return self._explore(call, "end_of_sample", self.budgets.exploration - spent, extra if unanswered else "")

    # -- the call ----------------------------------------------------------------------------------------
    def research(self, call: ResearchCall) -> dict[str, Any]:
        # the view hides the task's own items and everything its cutoff forbids, and records what it shows
        view = self.memory_view(call, relevance=self.stages.relevance)
        call.trajectory.memory_version = getattr(self.memory, "version", None)
        first = self.cold_start(call, view)
        if first is not None and first.insights:
            guidance = "Research-strategy insights from exploration:\n" + "\n".join(f"- {i}" for i in first.insights)
            call.context = f"{call.context}\n\n{guidance}".strip()
        try:
            outputs = _TreeRun(self, call).execute()
        finally:
            injected = getattr(view, "injected", None)
            if injected is not None:
                call.trajectory.injected_memory = {k: list(v) for k, v in injected.items() if v}
            for store, (shown, total) in sorted((getattr(view, "cut", None) or {}).items()):
                call.note(f"paper profile: {store} cut to its {shown} heaviest of {total} items (model context)")
        if _valid_answer(call.trajectory, outputs):  # a failed run has nothing to explore beyond (Appendix D.1)
            try:
                self.end_of_sample(call, view, first.steps if first is not None else 0)
            except Exception as exc:  # noqa: BLE001 - a failed late exploration loses nothing of the run
                handle_error(exc, where="end-of-sample exploration", log=logger)
        elif not getattr(self.memory, "frozen", True):
            call.note("end-of-sample exploration skipped: the run produced no valid answer")
        return outputs


def _valid_answer(trajectory: Any, outputs: dict[str, Any]) -> bool:
    """A valid answer: some output has a value and at least one sub-question was answered (as the trainer's valid
    run, :meth:`~memento.optimize.memento_trainer.MementoTrainer._valid`)."""
    answered = any(n.parent_id is not None and n.status == "answered" for n in trajectory.nodes)
    return answered and any(v not in (None, "", [], {}) for v in outputs.values())


def injected_items(trajectory: Any) -> dict[str, list[str]]:
    """The memory items a Memento run injected (store -> ids), from the trajectory's typed field."""
    return {k: list(v) for k, v in (getattr(trajectory, "injected_memory", None) or {}).items()}


@register_method("memento", memory=True)
def _build_memento(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
    frozen: bool | Literal["forward"] = True,
    embedder: Any = None,
    web: Any = None,
) -> Memento:
    """The ``memento`` method from the ``[memory]``, ``[budgets]`` and ``[trainer]`` settings.

    ``frozen=True`` (the default: ``memento run``, ``memento eval --method memento --memory DIR``): the trained
    memory opened read-only; a missing memory is a DataError. ``frozen=False`` (``memento train``, ``compare``'s
    training phase): the memory opened writable (created when missing, with ``embedder`` for canonicalisation) and
    a :class:`~memento.programs.memento_learner.MementoLearner` as its learning stages (``program.stages.learner``,
    for :meth:`~memento.optimize.memento_trainer.MementoTrainer.for_program`), exploring ``[trainer] exploration``
    steps per sample. ``frozen="forward"``: the training form's forward pass over the memory opened read-only (a
    Ray worker running Phase A of a training batch; the driver writes what the runs teach). ``web`` replaces the
    settings' web-tools factory (e.g. a counting wrapper).
    """
    from memento.memory.memento_memory import open_memory
    from memento.memory.sqlite_store import memory_exists
    from memento.web.factory import web_tools_factory

    directory = memory_dir if memory_dir is not None else settings.memory.dir
    tools = web if web is not None else web_tools_factory(settings)
    if frozen is not True:
        from memento.programs.memento_learner import MementoLearner

        if frozen == "forward":  # the training form's ranking: the same embedder over the read-only memory
            store = open_memory(
                settings.memory, directory, read_only=True, embedder=embedder, context_tokens=_context(settings)
            )
        else:
            store = open_memory(settings.memory, directory, embedder=embedder, context_tokens=_context(settings))
        # training explores with [trainer] exploration steps per sample; [budgets] exploration is the test budget
        budgets = settings.budgets.model_copy(update={"exploration": settings.trainer.exploration})
        learner = MementoLearner(roles=roles, explore_steps=max(1, budgets.exploration))
        return Memento(
            task,
            memory=store,
            web=tools,
            budgets=budgets,
            threads=settings.run.threads,
            roles=roles,
            stages=learner,
            training=True,
        )
    if not memory_exists(directory):
        raise DataError(f"no trained memory at {directory}: run `memento train --memory {directory}` first")
    return Memento(
        task,
        memory=open_memory(settings.memory, directory, read_only=True, context_tokens=_context(settings)),
        web=tools,
        budgets=settings.budgets.model_copy(),
        threads=settings.run.threads,
        roles=roles,
    )


def _context(settings: Settings) -> int | None:
    """The agent model's context size (``[lm] context_tokens``), which bounds the paper profile's injection."""
    return settings.role("lm").context_tokens
