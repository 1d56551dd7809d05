"""Memento: the Adaptive Exploration Tree with MEMENTO's persistent memory attached (§3.3-3.5).

M1 craft knowledge and M2 decomposition rules feed ``Decompose`` and ``Reflect``; M3 web-action rules go into
the sub-question agent's ``web_action_rules`` input; M4 facts go into its ``known_facts`` input and are searched by
``search_memory``. Each call reads memory through :meth:`memento.memory.memento_memory.MementoMemory.view`
excluding its own ``task_id`` (a task never retrieves memory written from its own run) and notes in the
trajectory which items were injected (``memory-injected: {...}``), which the trainer credits in Phase C.

Cold start: when M1 is empty and ``budgets.exploration > 0``, an :class:`~memento.programs.exploration_agent.
ExplorationAgent` researches how to research this kind of task and seeds M1 (once, under a lock). With a frozen
memory (test time) the insights only guide that call.

Example:
    >>> from memento.memory.memento_memory import MementoMemory
    >>> from memento.programs.memento_program import Memento
    >>> program = Memento("qa", memory=MementoMemory("mem"), web=factory)  # doctest: +SKIP
    >>> program(question="...", task_id="q17").trajectory.memory_version  # doctest: +SKIP
    3
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memento.errors import ConfigError, DataError
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree, _TreeRun
from memento.programs.exploration_agent import ExplorationAgent
from memento.programs.registry import register_method
from memento.programs.research_program import ResearchCall, ResearchProgram

if TYPE_CHECKING:
    from memento.config import Settings
    from memento.lm import Roles
    from memento.memory.memento_memory import MementoMemory
    from memento.tasks.task import Task

__all__ = ["Memento", "INJECTED_NOTE", "injected_items"]

logger = logging.getLogger(__name__)

INJECTED_NOTE = "memory-injected: "


class _WithView:
    """The program as one call sees it: every attribute from the program, memory replaced by a per-call view."""

    def __init__(self, program: Memento, view: Any) -> None:
        self._program = program
        self.memory = view

    def __getattr__(self, name: str) -> Any:
        return getattr(self._program, name)

    def memory_text(self, call: ResearchCall) -> dict[str, str]:
        return ResearchProgram.memory_text(self, call)  # type: ignore[arg-type]


class Memento(AdaptiveExplorationTree):
    """The AET reading and (through :class:`memento.optimize.memento_trainer.MementoTrainer`) learning memory.

    Args:
        task: the task spec or its registered name.
        memory: the :class:`~memento.memory.memento_memory.MementoMemory` (any MemoryProvider works; exclusion
            and cold start need a MementoMemory).
        **kwargs: as :class:`~memento.programs.adaptive_exploration_tree.AdaptiveExplorationTree` (``web``,
            ``budgets``, ``threads``, ``roles``, ``on_event``); ``budgets.exploration`` is the cold-start budget.
    """

    method = "memento"
    # copies share the memory, hence its cold-start lock
    _shared_attrs = (*AdaptiveExplorationTree._shared_attrs, "_explore_lock")

    def __init__(self, task: Task | str, *, memory: Any, **kwargs: Any) -> None:
        if memory is None:
            raise ConfigError("Memento needs a memory (MementoMemory(directory))")
        super().__init__(task, memory=memory, **kwargs)
        self.explorer = ExplorationAgent(max_steps=max(1, self.budgets.exploration))
        self._explore_lock = threading.Lock()
        self._explored: list[str] | None = None

    # -- cold start --------------------------------------------------------------------------------------
    def cold_start(self, call: ResearchCall) -> list[str]:
        """Explore when M1 is empty and the budget allows; seed M1 unless the memory is frozen.

        Returns the insights found (also when they were written), [] when nothing was explored.
        """
        craft = getattr(self.memory, "craft", None)
        if self.budgets.exploration <= 0 or craft is None or call.web is None:
            return []
        with self._explore_lock:
            if len(craft) > 0:
                return []
            if self._explored is not None:  # a frozen memory: explore once per program, reuse the insights
                return self._explored
            out = self.explorer(
                task_kind=ExplorationAgent.describe(self.task, [call.task_text]),
                web=call.web,
                max_steps=self.budgets.exploration,
            )
            insights = list(out.insights)
            call.note(f"cold start: explored {out.steps} steps, {len(insights)} craft insights")
            if self.memory.frozen:
                self._explored = insights
            elif insights:
                with self.memory.transaction(batch=self.memory.version + 1) as tx:
                    for text in insights:
                        craft.add(text, provenance=["exploration"], batch=self.memory.version + 1, tx=tx)
            return insights

    # -- the call ----------------------------------------------------------------------------------------
    def research(self, call: ResearchCall) -> dict[str, Any]:
        insights = self.cold_start(call)
        if insights and getattr(self.memory, "frozen", False):
            guidance = "Research-strategy insights from exploration:\n" + "\n".join(f"- {i}" for i in insights)
            call.context = f"{call.context}\n\n{guidance}".strip()
        make_view = getattr(self.memory, "view", None)
        view = make_view(exclude_task_id=call.task_id) if make_view is not None else self.memory
        call.trajectory.memory_version = getattr(self.memory, "version", None)
        try:
            return _TreeRun(_WithView(self, view), call).execute()  # type: ignore[arg-type]
        finally:
            injected = getattr(view, "injected", None)
            if injected is not None:
                call.note(INJECTED_NOTE + json.dumps(injected, sort_keys=True))


def injected_items(trajectory: Any) -> dict[str, list[str]]:
    """The memory items a Memento run injected (store -> ids), read back from its trajectory notes."""
    for note in reversed(getattr(trajectory, "notes", []) or []):
        if note.startswith(INJECTED_NOTE):
            try:
                return {k: list(v) for k, v in json.loads(note[len(INJECTED_NOTE) :]).items()}
            except (ValueError, AttributeError):
                return {}
    return {}


@register_method("memento")
def _build_memento(
    *, task: Task, settings: Settings, roles: Roles | None = None, trainset=None, memory_dir: Path | None = None
) -> Memento:
    """The test-time Memento: memory opened read-only and frozen (``memento eval --method memento --memory DIR``)."""
    from memento.memory.memento_memory import MementoMemory
    from memento.web.factory import web_tools_factory

    directory = Path(memory_dir) if memory_dir is not None else Path(settings.memory.dir)
    if not (directory / "memory.db").exists():
        raise DataError(f"no trained memory at {directory}: run `memento train --memory {directory}` first")
    memory: MementoMemory = MementoMemory(directory, read_only=True)
    return Memento(
        task,
        memory=memory,
        web=web_tools_factory(settings),
        budgets=settings.budgets.model_copy(),
        threads=settings.run.threads,
        roles=roles,
    )
