"""JitMemAgent: just-in-time memory around any research program (retrieve raw, curate at read time, judge, store).

One call (Figure 1 of the JitMem paper):

1. **Retrieve** the ``k`` past trajectories whose *task descriptions* are most BM25-similar to this task
   (:class:`memento.memory.trajectory_bank.TrajectoryBank`).
2. **Curate**: :class:`memento.programs.jitmem_curator.JitMemCurator` reads the task and the raw trajectories and
   writes a compact payload (relevant experiences, strategies that worked, guidance for this task).
3. **Execute**: the executor (any research program: ``ReActAgent``, ``AdaptiveExplorationTree``...) runs with the
   payload, under the heading "Curated notes from similar past tasks" and within the curator's token budget, as its
   ``context`` control argument. The payload is consumed once: it is never stored, only its size
   and the retrieved ids are noted in the trajectory.
4. **Judge and store**: ``JudgeSuccess`` (run by the ``judge_lm`` role when roles are given, else the executor's own
   LM, as in the paper) decides whether the new trajectory enters the bank. Ground truth never gates storage here.
   Inside a stream batch the write is buffered until the batch ends (see :mod:`memento.optimize.jitmem_stream`).

Registered as method ``jitmem`` (executor: the ``react`` baseline; bank under ``<memory_dir>/jitmem``).

Example:
    >>> from memento.memory.trajectory_bank import TrajectoryBank
    >>> from memento.programs.jitmem_agent import JitMemAgent
    >>> from memento.programs.jitmem_curator import JitMemCurator
    >>> agent = JitMemAgent(executor, TrajectoryBank("runs/bank"), JitMemCurator(), k=3)  # doctest: +SKIP
    >>> pred = agent(question="Who founded Lyon?")  # doctest: +SKIP
    >>> pred.answer, pred.jitmem["accepted"]  # doctest: +SKIP
    ('Lucius Munatius Plancus', True)
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import dspy

from memento.core.dating import DateFilter
from memento.core.error_policy import handle_error
from memento.core.errors import ConfigError
from memento.core.types import DatingRecord, JitMemDetails, Trajectory, Usage, new_id
from memento.core.untrusted import quote_data
from memento.memory.location import Location
from memento.memory.memory_guard import MemoryGuard, texts_read
from memento.memory.trajectory_bank import BankPolicy, TrajectoryBank
from memento.programs.jitmem_curator import (
    PAYLOAD_LABEL,
    JitMemCurator,
    TrajectoryDistiller,
    estimate_tokens,
    render_trajectory,
)
from memento.programs.registry import register_method
from memento.programs.research_program import CONTROL_ARGS, EmptyQuestionError
from memento.records.usage import NamedPredictors, UsageMeter
from memento.signatures.judge_success import JudgeSuccess
from memento.tasks.task import Task

if TYPE_CHECKING:
    from memento.core.config import Settings
    from memento.llm.lm import Roles

__all__ = ["JitMemAgent", "JudgeFn"]

logger = logging.getLogger(__name__)

#: A custom acceptance gate: ``fn(trajectory, prediction) -> bool``.
JudgeFn = Callable[[Trajectory, dspy.Prediction], bool]
_WEB_COUNTS = ("searches", "fetches", "fetch_cache_hits", "unique_urls", "repeated_urls")


class JitMemAgent(dspy.Module, metaclass=NamedPredictors):
    """Just-in-time memory: BM25-retrieve raw trajectories, curate a task-specific payload, run the executor.

    Args:
        executor: a research program taking the task's inputs plus the ``context`` control argument.
        bank: where accepted trajectories are kept and retrieved from.
        curator: the read-time curator (a default :class:`JitMemCurator` if ``None``).
        k: trajectories retrieved per task (3, as in the paper).
        judge: ``True`` runs ``JudgeSuccess``; ``False`` stores every trajectory as accepted (no gate); a callable
            ``fn(trajectory, prediction) -> bool`` is a custom gate.
        roles: LM roles; when given the curator runs on ``curator_lm`` and the judge on ``judge_lm``.
        task: the task spec (defaults to ``executor.task``).
        retrieval: ``False`` is the no-retrieval ablation (the curator always gets an empty set).
        distiller: write-time distillation ablation: store ``distiller(trajectory=t).trajectory`` instead of ``t``.
        store: ``False`` never writes to the bank (frozen memory at test time; required with a read-only bank).
        executor_lm: the LM the executor runs on (e.g. the ``lm`` role at JitMem's executor temperature and output
            budget; default: the ambient LM).
        curator_lm: the LM the curator runs on (default: the ``curator_lm`` role).

    Example:
        >>> agent = JitMemAgent(ReActAgent("qa", web=web), TrajectoryBank("bank"), JitMemCurator())  # doctest: +SKIP
    """

    def __init__(
        self,
        executor: dspy.Module,
        bank: TrajectoryBank,
        curator: JitMemCurator | None = None,
        *,
        k: int = 3,
        judge: bool | JudgeFn = True,
        roles: Roles | None = None,
        task: Task | None = None,
        retrieval: bool = True,
        distiller: TrajectoryDistiller | None = None,
        store: bool = True,
        executor_lm: Any = None,
        curator_lm: Any = None,
    ) -> None:
        super().__init__()
        if k < 0:
            raise ConfigError(f"k must be >= 0, got {k}")
        task = task if task is not None else getattr(executor, "task", None)
        if not isinstance(task, Task):
            raise ConfigError("JitMemAgent needs a task: pass task= or an executor with a .task attribute")
        self.task: Task = task
        if store and getattr(bank, "read_only", False):
            raise ConfigError("the trajectory bank is read-only (frozen): pass store=False to run without storing")
        self.executor = executor
        self.bank = bank
        self.curator = curator if curator is not None else JitMemCurator()
        self.k = k
        self.roles = roles
        self.retrieval = retrieval
        self.distiller = distiller
        self.store = store
        self.undated: str = getattr(executor, "undated", "keep")  # the one undated policy (build_program sets it)
        self.cutoff_filter = bool(getattr(executor, "cutoff_filter", True))
        self.executor_lm = executor_lm
        self.curator_lm = curator_lm
        self.judge_fn: JudgeFn | None = judge if callable(judge) else None
        self.use_judge = bool(judge) and self.judge_fn is None
        self.judge = dspy.Predict(JudgeSuccess) if self.use_judge else None
        self.guard = MemoryGuard()  # screens each payload (never stored, read once as guidance)
        if self.judge is not None:
            self.judge.usage_stage = "judge_success"

    # -- steps -----------------------------------------------------------------------------------------------
    def _lm(self, role: str) -> Any:
        return getattr(self.roles, role) if self.roles is not None else None

    def curate(self, task_text: str, hits: list[Any], *, curator: JitMemCurator | None = None) -> tuple[str, int]:
        """The payload for this task and the estimated size of the raw trajectories it replaces."""
        lm = self.curator_lm if self.curator_lm is not None else self._lm("curator_lm")
        with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
            pred = (curator or self.curator)(task=task_text, trajectories=hits, task_goal=self.task.task_goal())
        return pred.payload, int(pred.get("input_tokens", 0) or 0)

    def accept(self, trajectory: Trajectory, pred: dspy.Prediction) -> tuple[bool, str]:
        """The storage gate's verdict on a finished run and its reason."""
        if trajectory.error:
            return False, f"run failed: {trajectory.error}"
        if self.judge_fn is not None:
            return bool(self.judge_fn(trajectory, pred)), "custom gate"
        if self.judge is None:
            return True, "no gate"
        lm = self._lm("judge_lm")
        answer = "\n".join(f"{name}: {trajectory.prediction.get(name)}" for name in self.task.output_fields)
        with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
            verdict = self.judge(
                task=trajectory.task_text,
                task_goal=self.task.task_goal(),
                trajectory=quote_data(render_trajectory(trajectory, max_tokens=4000)),
                final_answer=quote_data(answer),
            )
        return bool(verdict.success), str(verdict.get("reasoning", "") or "")

    # -- the call --------------------------------------------------------------------------------------------
    def forward(self, **kwargs: Any) -> dspy.Prediction:
        """Retrieve, curate, execute with the payload as context, then judge-gate the trajectory into the bank.

        Returns the executor's prediction; its trajectory carries ``jitmem:`` notes (retrieved ids, payload size,
        verdict) and the usage of the whole call, and ``pred.jitmem`` summarises the same as a dict.
        """
        return self.run(kwargs, store=self.store)

    def run(
        self, kwargs: dict[str, Any], *, store: bool, curator: JitMemCurator | None = None, base: bool = False
    ) -> dspy.Prediction:
        """One JitMem call; ``store=False`` skips the judge and the bank write (used by optimizers and training).

        ``curator`` replaces the agent's own curator for this call (an optimizer's candidate); ``base=True`` runs the
        executor alone, without retrieval or curation (JitMem's training bank is built by the base executor).
        """
        inputs = {name: kwargs.get(name) for name in self.task.input_fields}
        missing = [n for n, v in inputs.items() if v is None or (isinstance(v, str) and not v.strip())]
        if missing:
            raise EmptyQuestionError(f"JitMemAgent needs a non-empty {missing[0]!r} (task {self.task.name!r})")
        task_text = self.task.task_text(inputs)
        key = self.task.retrieval_key(inputs)
        task_id = str(kwargs.get("task_id") or new_id("t-"))
        timings: dict[str, float] = {}
        notes: list[str] = []
        meter = UsageMeter(self.roles)
        dates = DateFilter.of(kwargs.get("cutoff"), self.undated, enabled=self.cutoff_filter)
        with meter:
            started = time.perf_counter()
            found = (  # only trajectories dated before the task's cutoff compete for the top k
                self.bank.search(key, self.k, exclude_task_id=kwargs.get("task_id"), dates=dates)
                if self.retrieval and self.k and not base
                else []
            )
            hits = [hit.as_tuple() for hit in found]
            timings["retrieve_s"] = round(time.perf_counter() - started, 6)
            payload, raw_tokens = "", 0
            if not base and (hits or not self.retrieval):
                started = time.perf_counter()
                try:
                    payload, raw_tokens = self.curate(task_text, hits, curator=curator)
                except Exception as exc:  # a curator parse failure must not lose the run: execute without memory
                    failure = handle_error(exc, where="jitmem: curator", log=logger)
                    notes.append(f"{failure}; ran without a payload")
                # the bank keeps pages verbatim: a payload line prescribing an answer, addressed to the model or
                # echoing an injection of a page the retrieved runs read is dropped before the executor sees it
                pages = [text for trajectory, *_ in hits for text in texts_read(trajectory)]
                payload, dropped = self.guard.screen(payload, pages=pages)
                if dropped:
                    notes.append(f"jitmem: memory guard dropped {len(dropped)} payload lines: {' | '.join(dropped)}")
                timings["curate_s"] = round(time.perf_counter() - started, 6)
            user_context = kwargs.get("context") or ""
            labelled = f"{PAYLOAD_LABEL}:\n{payload}" if payload else ""
            context = "\n\n".join(part for part in (user_context, labelled) if part)
            control = {name: kwargs[name] for name in CONTROL_ARGS if name in kwargs and name != "context"}
            control["task_id"] = task_id
            lm = self.executor_lm
            with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
                pred = self.executor(**inputs, **control, context=context)
            trajectory = pred.get("trajectory", None)
            if not isinstance(trajectory, Trajectory):  # a plain DSPy module as executor: record what it returned
                outputs = {name: pred.get(name, None) for name in self.task.output_fields}
                trajectory = Trajectory(
                    task_id=task_id,
                    task_text=task_text,
                    retrieval_key=key if key != task_text else "",
                    inputs=inputs,
                    method=type(self.executor).__name__,
                )
                trajectory.prediction = json.loads(json.dumps(outputs, default=str))
                pred.trajectory = trajectory
            executor_usage = trajectory.usage
            if trajectory.dating is None:
                trajectory.cutoff = trajectory.cutoff or dates.cutoff
                trajectory.dating = DatingRecord(cutoff=dates.cutoff, undated=dates.undated, filtered=dates.enabled)
            trajectory.dating.show("trajectories", [(hit.item_id, hit.dated) for hit in found])
            if dates.active:
                trajectory.dating.count_hidden("trajectories", *self.bank.hidden_counts(dates))
            retrieved = [t.task_id for t, _, _ in hits]
            notes.insert(
                0, f"jitmem: retrieved {len(hits)} trajectories {retrieved} (scores {[round(s, 3) for *_, s in hits]})"
            )
            notes.append(
                f"jitmem: payload {len(payload)} chars (~{estimate_tokens(payload)} tokens) "
                f"curated from ~{raw_tokens} tokens of raw trajectories"
            )
            trajectory.notes.extend(notes)
            trajectory.method = f"jitmem[{trajectory.method or type(self.executor).__name__}]"
            trajectory.timings.update(timings)
            details = trajectory.jitmem = JitMemDetails(
                retrieved=retrieved,
                scores=[round(float(s), 6) for *_, s in hits],
                payload_chars=len(payload),
                payload_tokens=estimate_tokens(payload),
                raw_tokens=raw_tokens,
            )
            if store:
                started = time.perf_counter()
                try:
                    accepted, reason = self.accept(trajectory, pred)
                except Exception as exc:  # an unparseable verdict counts as a rejection (never store unjudged)
                    accepted, reason = False, str(handle_error(exc, where="judge", log=logger))
                trajectory.timings["judge_s"] = round(time.perf_counter() - started, 6)
                details.accepted = accepted
                trajectory.notes.append(f"jitmem: judge {'accepted' if accepted else 'rejected'} ({reason[:200]})")
                trajectory.usage = _merge_usage(meter.usage(), executor_usage)
                to_store: Trajectory | None = trajectory
                if self.distiller is not None and (accepted or self.bank.policy == "all_with_labels"):
                    try:
                        to_store = self.distiller(trajectory=trajectory).trajectory
                    except Exception as exc:
                        failure = handle_error(exc, where="jitmem: distillation", log=logger)
                        to_store = None
                        trajectory.notes.append(f"{failure}; not stored")
                if to_store is not None:
                    details.stored = self.bank.add(to_store, accepted)
        trajectory.usage = _merge_usage(meter.usage(), executor_usage)
        pred.jitmem = {k: v for k, v in details.model_dump().items() if k != "scores"}
        return pred


def _merge_usage(lm_usage: Usage, executor_usage: Usage) -> Usage:
    """The whole call's LM usage with the executor's web counts."""
    for key in _WEB_COUNTS:
        setattr(lm_usage, key, getattr(executor_usage, key))
    return lm_usage


@register_method("jitmem", memory=True, writes=True)
def build_jitmem(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
    executor: str | None = None,
    policy: BankPolicy | None = None,
    frozen: bool = False,
) -> JitMemAgent:
    """The ``jitmem`` method from the ``[jitmem]`` settings: its executor (``react``), a trajectory bank in
    ``<memory_dir>/jitmem`` (policy ``success_only``), ``k`` (3) trajectories, the payload budget (2000 tokens) and
    the judge gate.

    ``frozen=True`` (test time, ``memento eval``) opens an existing bank read-only and never judges or stores new
    trajectories; a missing bank (``<memory_dir>/jitmem/trajectories.sqlite3``) is a ``DataError``.
    """
    from memento.programs.registry import build_program

    jit = settings.jitmem
    name = executor or jit.executor
    if name == "jitmem":
        raise ConfigError("jitmem.executor cannot be jitmem itself")
    inner = build_program(name, task=task, settings=executor_settings(settings), roles=roles)
    if jit.executor_history is not None and hasattr(getattr(inner, "agent", None), "history_window"):
        inner.agent.history_window = jit.executor_history  # the ReAct executor sees its last N steps
    bank = TrajectoryBank(
        (memory_dir or settings.memory.dir) / "jitmem", policy=policy or jit.policy, read_only=frozen, bm25=jit.bm25
    )
    curator = JitMemCurator(
        payload_tokens=jit.payload_tokens,
        task_conditioning=jit.curator != "blind",
        max_tokens_per_trajectory=jit.curator_trajectory_tokens,
        result_chars=jit.curator_result_chars,
    )
    return JitMemAgent(
        inner,
        bank,
        curator,
        k=jit.k,
        judge=True,
        roles=roles,
        task=task,
        store=not frozen,
        retrieval=jit.retrieval,
        distiller=TrajectoryDistiller() if jit.distill else None,
        executor_lm=_lm_copy(roles, "lm", temperature=jit.executor_temperature, max_tokens=jit.executor_max_tokens),
        curator_lm=_curator_lm(roles, settings),
    )


def executor_settings(settings: Settings) -> Settings:
    """The settings JitMem's executor is built with: its step cap ``jitmem.executor_max_turns`` (when set), and no
    run preset of its own (JitMem's executor knobs are the ``[jitmem] executor_*`` settings)."""
    out = settings.model_copy(deep=True)
    out.run.preset = "none"
    if settings.jitmem.executor_max_turns is not None:
        out.budgets.steps_per_question = settings.jitmem.executor_max_turns
    return out


def _lm_copy(roles: Roles | None, role: str, **changes: Any) -> Any:
    """A copy of a role's LM with some sampling values changed (``None`` values left out); ``None`` when nothing
    changes or there are no roles (the ambient LM is then used as it is)."""
    changes = {key: value for key, value in changes.items() if value is not None}
    lm = getattr(roles, role, None) if roles is not None else None
    if lm is None or not changes:
        return None
    return lm.copy(**changes)


def _curator_lm(roles: Roles | None, settings: Settings) -> Any:
    """The curator's LM with the ``curator_lm`` role's sampling values as the settings give them now (a run preset
    may set them after the roles were built: JitMem's curator at temperature 0.6, top-p 0.95, top-k 20)."""
    from memento.llm.lm import top_k_kwargs

    role = settings.role("curator_lm")
    lm = getattr(roles, "curator_lm", None) if roles is not None else None
    if lm is None:
        return None
    changes: dict[str, Any] = {}
    for name in ("temperature", "top_p"):
        value = getattr(role, name)
        if value is not None and lm.kwargs.get(name) != value:
            changes[name] = value
    if role.top_k is not None and role.model:
        sent = top_k_kwargs(role.model, role.api_base, role.top_k, name="curator_lm")
        if sent and all(lm.kwargs.get(key) != value for key, value in sent.items()):
            changes.update(sent)
    return lm.copy(**changes) if changes else None
