"""The paper's case-memory baselines: the plain LLM (closed-book or few-shot) reading the case bank's top-K cases.

:class:`CaseMemoryBaseline` answers like :class:`memento.programs.baselines.ClosedBook` (one call of the task's
final-answer signature, no tools), with the ``k`` past cases most relevant to the task (task, answer, reward;
failures included, labelled) as context, and optionally the few-shot baseline's demonstrations. It isolates what case
memory alone adds to a model without planning or tools (Memento's "closed-book + case memory" and "few-shot + case
memory" rows). Cases are read from the CBR case bank (``<memory_dir>/cbr``, shared with the ``cbr`` method) by the
``[cbr]`` test policy; a task never reads a case written by a run with its own task id. :meth:`retain` stores a
finished call as a case with an externally computed reward (e.g. the metric) and credits the retrieved cases to the
Q-gate, as CBR does.

Registered as methods ``closed_book_cases`` and ``few_shot_cases``.

Example:
    >>> from memento.memory.case_bank import CaseBank
    >>> from memento.programs.case_memory import CaseMemoryBaseline
    >>> program = CaseMemoryBaseline("qa", bank=CaseBank("runs/mem/cbr"), k=4)  # doctest: +SKIP
    >>> pred = program(question="Who wrote Dune?")  # doctest: +SKIP
    >>> pred.cases["retrieved"]  # doctest: +SKIP
    ['case-3f2a...']
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, ClassVar

import dspy

from memento.core.dating import run_evidence
from memento.core.errors import ConfigError
from memento.core.types import Case
from memento.core.untrusted import quote_data
from memento.memory.case_bank import CaseBank, RetrievalPolicy, open_case_bank
from memento.memory.location import Location
from memento.memory.retrieval_policy import SoftmaxOver
from memento.metrics.success import DEFAULT_SUCCESS_THRESHOLD
from memento.programs.baselines import ClosedBook, FewShot
from memento.programs.case_based_agent import record_cases, render_cases
from memento.programs.registry import register_method
from memento.programs.research_program import ResearchCall, join_context

if TYPE_CHECKING:
    from memento.core.config import Settings
    from memento.llm.lm import Roles
    from memento.tasks.task import Task

__all__ = ["CaseMemoryBaseline", "CASES_LABEL"]

logger = logging.getLogger(__name__)

#: The heading of the retrieved cases in the model's context.
CASES_LABEL = "Past cases of similar tasks (task, answer given, reward; failures included)"


class CaseMemoryBaseline(ClosedBook):
    """Closed-book (or few-shot) answering with the case bank's top-K cases as context.

    Args:
        task: the task spec or its name.
        bank: the case bank read (and written by :meth:`retain`).
        k: cases shown (4, the paper's best).
        policy: retrieval policy (``q``: greedy by the Q-gate once it has enough pairs, cosine before).
        alpha: softmax temperature when ``policy="softmax"``.
        trainset: labelled examples: when given, ``demos`` of them are shown as demonstrations (few-shot).
        demos: number of demonstrations (with ``trainset``).
        seed: demonstration sampling seed.
        success_threshold: a case whose reward is strictly above it is labelled SUCCESS, else FAILURE
            (``trainer.success_threshold``, the rule the CBR planner and the MEMENTO trainer use).

    Example:
        >>> program = CaseMemoryBaseline("qa", bank=bank, trainset=train, demos=5)  # doctest: +SKIP
    """

    method = "closed_book_cases"
    _shared_attrs: ClassVar[tuple[str, ...]] = (*ClosedBook._shared_attrs, "bank", "_lock")

    def __init__(
        self,
        task: Task | str,
        *,
        bank: CaseBank,
        k: int = 4,
        policy: RetrievalPolicy = "q",
        alpha: float = 1.0,
        trainset: list[dspy.Example] | None = None,
        demos: int = 5,
        seed: int = 0,
        success_threshold: float = DEFAULT_SUCCESS_THRESHOLD,
        softmax_over: SoftmaxOver = "logit",
        **kwargs: Any,
    ) -> None:
        super().__init__(task, **kwargs)
        if k < 0:
            raise ConfigError(f"k must be >= 0, got {k}")
        self.bank = bank
        self.k = k
        self.policy = policy
        self.alpha = alpha
        self.success_threshold = success_threshold
        self.softmax_over = softmax_over
        if trainset is not None:
            self.method = "few_shot_cases"
            self.answer.demos = FewShot(self.task, trainset=trainset, k=demos, seed=seed).answer.demos
        self._lock = threading.Lock()
        self._retrieved: dict[str, list[str]] = {}

    def research(self, call: ResearchCall) -> dict[str, Any]:
        started = time.perf_counter()
        hits: list[tuple[Case, float]] = []
        if len(self.bank) and self.k:
            own = self.bank.case_ids_for_ref(call.task_id)
            key = call.retrieval_key or call.task_text
            hits = self.bank.retrieve(
                key,
                self.k,
                policy=self.policy,
                alpha=self.alpha,
                exclude_ids=own,
                dates=call.dates,
                softmax_over=self.softmax_over,
            )
            record_cases(call, "cases", self.bank, hits)
        call.trajectory.timings["retrieve_s"] = round(time.perf_counter() - started, 6)
        with self._lock:
            self._retrieved[call.task_id] = [c.id for c, _ in hits]
        call.note(f"cases: retrieved {len(hits)} cases by {self.policy} {[c.id for c, _ in hits]}")
        cases = render_cases(hits, threshold=self.success_threshold)
        block = f"{CASES_LABEL}:\n{quote_data(cases)}" if cases else ""
        context = "\n\n".join(p for p in (call.context.strip(), block) if p)
        started = time.perf_counter()
        pred = self.answer(context=join_context(context, self.memory_text(call)), **call.inputs)
        call.trajectory.timings["answer_s"] = round(time.perf_counter() - started, 6)
        return {name: pred.get(name) for name in self.task.output_fields}

    def forward(self, **kwargs: Any) -> dspy.Prediction:
        """Answer with retrieved cases; the prediction carries ``cases`` (``{"retrieved": [case ids]}``)."""
        pred = super().forward(**kwargs)
        with self._lock:
            retrieved = self._retrieved.pop(pred.trajectory.task_id, [])
        pred.cases = {"retrieved": retrieved}
        return pred

    def retain(self, pred: dspy.Prediction, reward: float) -> Case:
        """Store a finished call as a case (task, the answer given, ``reward`` in [0, 1]) and credit the cases it
        read to the Q-gate with the same reward."""
        if not 0.0 <= float(reward) <= 1.0:
            raise ConfigError(f"reward must be in [0, 1], got {reward}")
        trajectory = pred.trajectory
        answer = "\n".join(f"{name}: {trajectory.prediction.get(name)}" for name in self.task.output_fields)
        key = trajectory.retrieval_key or trajectory.task_text
        case = self.bank.add(
            key,
            f"Answer given:\n{answer}",
            float(reward),
            trajectory_ref=trajectory.task_id,
            evidence=run_evidence(trajectory),  # closed-book: no page, the run (its cutoff) dates it
        )
        retrieved = (pred.get("cases", None) or {}).get("retrieved") or []
        if retrieved:
            self.bank.record(key, retrieved, float(reward), task_id=trajectory.task_id)
        return case


def _build(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None,
    trainset: list[Any] | None,
    memory_dir: Location | None,
    frozen: bool,
    few_shot: bool,
    embedder: Any = None,
) -> CaseMemoryBaseline:
    if few_shot and not trainset:
        raise ConfigError("method few_shot_cases needs a training set for its demonstrations (`memento eval --train`)")
    cbr = settings.cbr
    bank = open_case_bank(
        (memory_dir or settings.memory.dir) / "cbr",
        settings,
        frozen=frozen,
        embedder=embedder,
        missing="train one first (`memento compare` or `memento run --method cbr`)",
    )
    return CaseMemoryBaseline(
        task,
        bank=bank,
        k=cbr.k,
        policy=cbr.policy,
        alpha=cbr.alpha,
        trainset=list(trainset) if few_shot and trainset else None,
        demos=settings.baselines.few_shot_demos,
        seed=settings.run.seed,
        success_threshold=settings.trainer.success_threshold,
        softmax_over=cbr.softmax_over,
        roles=roles,
        threads=settings.run.threads,
    )


@register_method("closed_book_cases", extras=("cbr",), reads="cbr")
def build_closed_book_cases(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
    frozen: bool = False,
    embedder: Any = None,
) -> CaseMemoryBaseline:
    """``closed_book_cases``: the closed-book LLM with ``cbr.k`` cases from ``<memory_dir>/cbr`` as context."""
    return _build(few_shot=False, **locals())


@register_method("few_shot_cases", extras=("cbr",), reads="cbr")
def build_few_shot_cases(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
    frozen: bool = False,
    embedder: Any = None,
) -> CaseMemoryBaseline:
    """``few_shot_cases``: the few-shot LLM (``baselines.few_shot_demos`` demonstrations) with ``cbr.k`` cases
    from ``<memory_dir>/cbr``."""
    return _build(few_shot=True, **locals())
