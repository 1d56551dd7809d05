"""CaseBasedAgent: Memento's planner-executor over a case bank (case-based reasoning, no weight updates).

One call:

1. **Read**: retrieve ``k`` past cases (task, plan, reward; failures included) for this task from a
   :class:`memento.memory.case_bank.CaseBank` by ``policy`` (``cosine``, the learned Q-gate ``q``, or ``softmax``
   sampling from ``softmax(logit(Q)/alpha)``). A task never retrieves a case written by a run with its own
   ``task_id`` (unless the multi-pass runner's ``own_cases`` switch is on).
2. **Plan**: the planner (:class:`memento.signatures.plan_from_cases.PlanFromCases`) reads the cases, successes and
   failures labelled with their rewards, and writes sub-tasks.
3. **Execute**: the executor (:class:`memento.programs.sub_question_agent.SubQuestionAgent` by default) solves the
   sub-tasks in parallel (``threads``); each becomes a node of the trajectory.
4. **Replan** with the results, up to ``max_cycles`` planning cycles, until the planner says it is done (question
   budget: ``budgets.initial_questions`` per cycle, ``budgets.total_questions`` in all).
5. **Answer** with the task's own signature (``<TaskSignature>FromCasePlan``) over the findings.
6. **Retain** (``retain=True``): store (task, plan, reward) as a new case. The reward comes from ``reward_fn`` (a
   metric, when training: it is given the call's keyword arguments, labels included, as a ``dspy.Example``) or,
   when deployed without labels, from the :class:`memento.signatures.judge_task_reward.JudgeTaskReward` judge
   (run on the ``judge_lm`` role when ``roles`` are given). The same reward updates the Q-gate online with the
   (task, retrieved case) pairs. With ``retain=False`` call :meth:`CaseBasedAgent.retain` yourself.

Beyond the paper, ``executor_bank`` adds an executor-level case bank: before each sub-task the executor is shown the
tool-call sequences of the most similar past sub-tasks (with their outcome), and each finished sub-task is stored.

:func:`fit_cases` is the one training loop (batches, passes over the same task set, per-pass scores); ``memento
compare`` trains ``cbr`` with it. Registered as method ``cbr`` (bank under ``<memory_dir>/cbr``, options from the
``[cbr]`` settings).

Its prompt texts live in :mod:`~memento.programs.case_rendering` and its training loop (:func:`fit_cases`) in
:mod:`~memento.programs.case_training`.

Example:
    >>> from memento.memory.case_bank import CaseBank
    >>> from memento.programs.case_based_agent import CaseBasedAgent
    >>> agent = CaseBasedAgent("multihop", bank=CaseBank("runs/cbr"), web=web_factory, k=4)  # doctest: +SKIP
    >>> pred = agent(question="Who directed the film that won Best Picture in 1998?")  # doctest: +SKIP
    >>> pred.answer, pred.cbr["reward"], pred.cbr["retrieved"]  # doctest: +SKIP
    ('James Cameron', 1.0, ['case-3f2a...', ...])
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import dspy

from memento.core.dating import DateFilter, read_pages, run_evidence
from memento.core.error_policy import handle_error
from memento.core.errors import ConfigError, MemoryFrozenError
from memento.core.types import Case, CBRDetails, EvidenceRecord, Node, Trajectory, new_id
from memento.core.untrusted import quote_data
from memento.execution.threads import run_parallel
from memento.memory.case_bank import CaseBank, RetrievalPolicy, open_case_bank
from memento.memory.location import Location
from memento.memory.retrieval_policy import POLICIES, SoftmaxOver
from memento.metrics.success import DEFAULT_SUCCESS_THRESHOLD, succeeded
from memento.programs.case_rendering import (
    executed_plan,
    render_cases,
    render_findings,
    render_outputs,
    render_tool_plan,
)
from memento.programs.case_training import PassResult, fit_cases
from memento.programs.registry import register_method
from memento.programs.research_program import ResearchCall, ResearchProgram
from memento.programs.sub_question_agent import SubQuestionAgent
from memento.signatures.final_answer import answer_signature
from memento.signatures.judge_task_reward import JudgeTaskReward
from memento.signatures.plan_from_cases import PlanFromCases
from memento.tasks.task import Task
from memento.utils.text import one_line

if TYPE_CHECKING:
    from memento.core.config import Settings
    from memento.llm.lm import Roles

__all__ = [
    "CaseBasedAgent",
    "PassResult",
    "RewardFn",
    "fit_cases",
    "record_cases",
    "render_cases",
    "render_tool_plan",
]

logger = logging.getLogger(__name__)

#: A training-time reward: ``fn(example, prediction) -> float | Prediction(score=...)`` (a task metric).
RewardFn = Callable[[dspy.Example, dspy.Prediction], Any]

ROOT_ID = "root"


def record_cases(call: ResearchCall, store: str, bank: CaseBank, hits: list[tuple[Case, float]]) -> None:
    """Record the cases shown to a call (with their dates) and how many its date filter hid, in its dating record."""
    dating = call.trajectory.dating
    if dating is None:
        return
    with call._lock:
        dating.show(store, [(case.id, case.evidence.dated) for case, _ in hits])
        if call.dates.active and store not in dating.hidden and store not in dating.undated_dropped:
            dating.count_hidden(store, *bank.hidden_counts(call.dates))


def _retrieve_not_own(
    bank: CaseBank, query: str, k: int, *, ref: str, dates: DateFilter | None = None
) -> list[tuple[Case, float]]:
    """``bank.retrieve`` without the cases the run ``ref`` wrote: a task never reads its own tool cases.

    Sub-tasks of one run execute in parallel and each stores its tool case when it ends, so a case of this run can
    appear between listing the run's cases and retrieving: the run's cases are listed again after retrieving, and
    the retrieval is repeated (then filtered) when one slipped in.
    """
    own: set[str] = set()
    hits: list[tuple[Case, float]] = []
    for _ in range(3):
        own |= set(bank.case_ids_for_ref(ref))
        hits = bank.retrieve(query, k, exclude_ids=own, dates=dates)
        fresh = set(bank.case_ids_for_ref(ref))
        if not any(case.id in fresh for case, _ in hits):
            return hits
        own |= fresh
    return [(case, score) for case, score in hits if case.id not in own]


class CaseBasedAgent(ResearchProgram):
    """Memento's case-based planner-executor: plan from K past cases, execute sub-tasks, replan, answer, retain.

    Args:
        task: The task spec or its registered name.
        bank: The case bank read (and, with ``retain``, written).
        executor: Sub-task solver; default ``SubQuestionAgent(max_steps=budgets.steps_per_question)``. It is called
            like the SubQuestionAgent (``question``, ``task``, ``task_goal``, ``context``, ``web``, ``node_id``,
            ``record``, ``record_step``).
        web: Web-tools factory ``f(cutoff, undated) -> WebTools``.
        budgets: Question and step budgets (sub-tasks per cycle / in all, executor steps).
        threads: Sub-tasks executed in parallel.
        k: Cases retrieved (4, the paper's best; 0 is the "+Planning" rung: the planner reads no case).
        policy: ``cosine``, ``q``, ``softmax`` or ``kernel`` (the episodic Q of Eq. 9) retrieval.
        alpha: Softmax temperature for ``policy="softmax"``.
        softmax_over: ``logit`` (softmax(logit(Q)/alpha)) or ``q`` (softmax(Q/alpha), Memento's Eq. 7).
        max_cycles: Planning cycles (plan, execute, replan...).
        retain: Store (task, plan, reward) after each call and update the Q-gate.
        reward_fn: Training reward (a metric ``fn(example, pred)``); without it a judge gives the reward.
        learn: Update the Q-gate online when retaining.
        executor_bank: Optional executor-level case bank (sub-task, tool-call sequence, outcome).
        executor_k: Tool cases shown per sub-task.
        success_threshold: a case whose reward is strictly above it is labelled SUCCESS for the planner, else
            FAILURE (``trainer.success_threshold``, shared with the MEMENTO trainer).
        roles: LM roles (the planner on ``planner_lm``, which defaults to ``lm``; the executor on ``lm``; the reward
            judge on ``judge_lm``).
        memory: Optional MEMENTO memory provider (its text joins the planner's context).

    Example:
        >>> agent = CaseBasedAgent("multihop", bank=bank, web=web, retain=True)  # doctest: +SKIP
        >>> agent(question="...").cbr["stored_case"]  # doctest: +SKIP
        'case-1c9e...'
    """

    method = "cbr"
    needs_web = True
    _shared_attrs: ClassVar[tuple[str, ...]] = (
        *ResearchProgram._shared_attrs,
        "bank",
        "executor_bank",
        "reward_fn",
        "_seq_lock",
    )

    def __init__(
        self,
        task: Task | str,
        *,
        bank: CaseBank,
        executor: dspy.Module | None = None,
        k: int = 4,
        policy: RetrievalPolicy = "cosine",
        alpha: float = 1.0,
        max_cycles: int = 3,
        retain: bool = True,
        reward_fn: RewardFn | None = None,
        learn: bool = True,
        executor_bank: CaseBank | None = None,
        executor_k: int = 2,
        success_threshold: float = DEFAULT_SUCCESS_THRESHOLD,
        softmax_over: SoftmaxOver = "logit",
        **kwargs: Any,
    ) -> None:
        super().__init__(task, **kwargs)
        if k < 0:
            raise ConfigError(f"k must be >= 0, got {k}")
        if max_cycles < 1:
            raise ConfigError(f"max_cycles must be >= 1, got {max_cycles}")
        if policy not in POLICIES:
            raise ConfigError(f"unknown retrieval policy {policy!r}: use cosine, q, softmax or kernel")
        if retain and (bank.frozen or (executor_bank is not None and executor_bank.frozen)):
            raise ConfigError("the case bank is frozen (read-only): pass retain=False to run without writing cases")
        self.bank = bank
        self.k = k
        self.policy = policy
        self.alpha = alpha
        self.max_cycles = max_cycles
        self.retain_cases = retain
        self.reward_fn = reward_fn
        self.learn = learn
        self.executor_bank = executor_bank
        self.executor_k = executor_k
        self.success_threshold = success_threshold
        self.softmax_over = softmax_over
        self.own_cases = False  # the multi-pass runner's switch: may a task read its own earlier case?
        self.planner = dspy.Predict(PlanFromCases)
        self.planner.usage_stage = "plan"
        self.executor = (
            executor if executor is not None else SubQuestionAgent(max_steps=self.budgets.steps_per_question)
        )
        self.answer = dspy.Predict(answer_signature(self.task, findings=True, suffix="FromCasePlan"))
        self.answer.usage_stage = "answer"
        self.judge = dspy.Predict(JudgeTaskReward)
        self.judge.usage_stage = "judge_reward"
        self._seq_lock = threading.Lock()

    # -- the call ------------------------------------------------------------------------------------------------
    def forward(self, **kwargs: Any) -> dspy.Prediction:
        """Run one task; the prediction carries ``cbr`` (retrieved ids, plan, reward and its source, stored case)."""
        pred = super().forward(**kwargs)
        details = pred.trajectory.cbr or CBRDetails(policy=self.policy)
        pred.cbr = details.model_dump(exclude_unset=True)  # the keys of what this call did
        return pred

    def research(self, call: ResearchCall) -> dict[str, Any]:
        traj = call.trajectory
        info = traj.cbr = CBRDetails(policy=self.policy)
        started = time.perf_counter()
        hits = self._retrieve(call)
        traj.timings["retrieve_s"] = round(time.perf_counter() - started, 6)
        info.retrieved = [c.id for c, _ in hits]
        info.retrieved_rewards = [c.reward for c, _ in hits]
        call.note(
            f"cbr: retrieved {len(hits)} cases by {self.policy} "
            f"{[(c.id, round(c.reward, 2), round(s, 3)) for c, s in hits]}"
        )
        memory = self.memory_text(call)
        context = "\n\n".join(
            part
            for part in (
                call.context.strip(),
                memory["craft_knowledge"].strip(),
                memory["decomposition_rules"].strip(),
            )
            if part
        )
        root = Node(id=ROOT_ID, parent_id=None, wave=-1, question=call.task_text, status="decomposed")
        traj.nodes.append(root)
        executed: list[Node] = []
        cases_text = render_cases(hits, threshold=self.success_threshold)
        for cycle in range(self.max_cycles):
            remaining = self.budgets.total_questions - len(executed)
            if remaining <= 0:
                call.note(f"cbr: question budget ({self.budgets.total_questions}) spent before cycle {cycle + 1}")
                break
            limit = min(self.budgets.initial_questions, remaining)
            started = time.perf_counter()
            planner_lm = getattr(self.roles, "planner_lm", None) if self.roles is not None else None
            try:
                with dspy.context(lm=planner_lm) if planner_lm is not None else contextlib.nullcontext():
                    plan = self.planner(
                        task=call.task_text,
                        task_goal=call.task_goal,
                        context=context,
                        past_cases=quote_data(cases_text),
                        progress=quote_data(render_findings(executed)),
                        max_sub_tasks=limit,
                    )
                sub_tasks = [" ".join(str(s).split()) for s in (plan.sub_tasks or []) if str(s).strip()]
                done = bool(plan.done)
            except Exception as exc:
                call.note(f"{handle_error(exc, where='cbr: planner', log=logger)} in cycle {cycle + 1}")
                sub_tasks, done = ([call.task_text] if not executed else []), True
            traj.timings[f"plan_{cycle}_s"] = round(time.perf_counter() - started, 6)
            seen = {n.question.lower() for n in executed if n.status == "answered"}
            fresh = [s for s in dict.fromkeys(sub_tasks) if s.lower() not in seen]
            if len(fresh) > limit:
                call.note(f"cbr: cycle {cycle + 1} planned {len(fresh)} sub-tasks; kept the first {limit}")
                fresh = fresh[:limit]
            nodes = [
                Node(id=f"s{len(executed) + i + 1}", parent_id=ROOT_ID, wave=cycle, question=q)
                for i, q in enumerate(fresh)
            ]
            traj.nodes.extend(nodes)
            call.note(f"cbr: cycle {cycle + 1}: {len(nodes)} sub-tasks, done={done}")
            if nodes:
                started = time.perf_counter()
                run_parallel(lambda node: self._execute(call, node), nodes, threads=self.threads)
                traj.timings[f"execute_{cycle}_s"] = round(time.perf_counter() - started, 6)
                executed.extend(nodes)
            if done or not nodes:
                break
        plan_record = executed_plan(executed)
        info.plan_steps, info.plan = plan_record.steps, plan_record.render()
        started = time.perf_counter()
        findings = render_findings(executed) or "(no sub-task was executed)"
        pred = self.answer(context=context, research_findings=quote_data(findings), **call.inputs)
        traj.timings["answer_s"] = round(time.perf_counter() - started, 6)
        outputs = {name: pred.get(name) for name in self.task.output_fields}
        root.answer = one_line(render_outputs(outputs), 2000)
        if self.retain_cases:
            self._retain(call, info, hits, executed, outputs, findings)
        return outputs

    # -- steps ---------------------------------------------------------------------------------------------------
    def _retrieve(self, call: ResearchCall) -> list[tuple[Case, float]]:
        if self.k == 0 or len(self.bank) == 0 and self.bank.base_namespace is None:
            return []
        own = [] if self.own_cases else self.bank.case_ids_for_ref(call.task_id)
        key = call.retrieval_key or call.task_text
        hits = self.bank.retrieve(
            key,
            self.k,
            policy=self.policy,
            alpha=self.alpha,
            exclude_ids=own,
            dates=call.dates,
            softmax_over=self.softmax_over,
        )  # only cases dated before the task's cutoff compete (the Q-gate's prefilter included)
        record_cases(call, "cases", self.bank, hits)
        return hits

    def _execute(self, call: ResearchCall, node: Node) -> None:
        context = call.context.strip()
        if self.executor_bank is not None and self.executor_k > 0 and len(self.executor_bank):
            tool_cases = _retrieve_not_own(
                self.executor_bank, node.question, self.executor_k, ref=call.task_id, dates=call.dates
            )
            record_cases(call, "tool_cases", self.executor_bank, tool_cases)
            if tool_cases:
                lines = [
                    f"Sub-task: {c.task_text}\n"
                    f"Outcome: {'answered' if succeeded(c.reward, threshold=self.success_threshold) else 'failed'}\n"
                    f"Tool calls:\n{c.plan}"
                    for c, _ in tool_cases
                ]
                context = "\n\n".join(
                    p for p in (context, "Tool use on similar past sub-tasks:\n" + "\n\n".join(lines)) if p
                )
        started = time.perf_counter()
        try:
            out = self.executor(
                question=node.question,
                task=call.task_text,
                task_goal=call.task_goal,
                context=context,
                web=call.web,
                node_id=node.id,
                record=call.add_tool_call,
                record_step=call.add_step,
            )
        except Exception as exc:  # a custom executor's crash fails this sub-task, not the run
            node.status, node.error = "failed", handle_error(exc, where=f"{node.id}: executor", log=logger).reason
            return
        node.steps = int(out.get("steps", 0) or 0)
        node.answer = out.get("answer")
        node.evidence = list(out.get("evidence", None) or [])
        node.error = out.get("error", None)
        node.status = "answered" if out.get("status", None) == "answered" and node.answer else "failed"
        if node.status == "answered":
            with self._seq_lock:
                node.answered_seq = 1 + max((n.answered_seq or 0) for n in call.trajectory.nodes)
        if self.executor_bank is not None and self.retain_cases:
            tool_calls = list(out.get("tool_calls", None) or [])
            try:
                self.executor_bank.add(
                    node.question,
                    render_tool_plan(tool_calls) or "(no tool call)",
                    reward=1.0 if node.status == "answered" else 0.0,
                    trajectory_ref=call.task_id,
                    meta={"seconds": round(time.perf_counter() - started, 3)},
                    evidence=run_evidence(call.trajectory, pages=read_pages(tool_calls)),
                )
            except MemoryFrozenError as exc:  # a frozen executor bank is read-only by design
                call.note(f"cbr: executor case not stored ({exc})")

    def _reward(self, call: ResearchCall, info: CBRDetails, outputs: dict[str, Any], findings: str) -> float:
        kwargs = {**call.inputs, **call.extra}
        if self.reward_fn is not None:
            from memento.metrics.as_float import score_of

            example = dspy.Example(**{k: v for k, v in kwargs.items() if k not in ("cutoff", "context")})
            info.reward_source = "metric"
            return float(score_of(self.reward_fn(example, dspy.Prediction(**outputs))))
        info.reward_source = "judge"
        lm = getattr(self.roles, "judge_lm", None) if self.roles is not None else None
        answer = "\n".join(f"{name}: {outputs.get(name)}" for name in self.task.output_fields)
        with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
            verdict = self.judge(
                task=call.task_text,
                task_goal=call.task_goal,
                plan=quote_data(info.plan),
                findings=quote_data(findings),
                final_answer=quote_data(answer),
            )
        return float(verdict.reward)

    def _retain(
        self,
        call: ResearchCall,
        info: CBRDetails,
        hits: list[tuple[Case, float]],
        executed: list[Node],
        outputs: dict[str, Any],
        findings: str,
    ) -> None:
        started = time.perf_counter()
        try:
            reward = self._reward(call, info, outputs, findings)
        except Exception as exc:  # an unparseable grade: keep the run, store nothing rather than a made-up reward
            failure = handle_error(exc, where="cbr: reward", log=logger)
            call.note(f"{failure}; case not stored")
            info.reward, info.stored_case = None, None
            return
        reward = min(1.0, max(0.0, reward)) if reward == reward else 0.0  # NaN -> 0
        info.reward = reward
        key = call.retrieval_key or call.task_text
        case, loss = self._write(key, info.plan, reward, hits, call.task_id, run_evidence(call.trajectory))
        info.stored_case, info.gate_loss = (case.id if case else None), loss
        call.trajectory.timings["retain_s"] = round(time.perf_counter() - started, 6)
        call.trajectory.score = reward
        call.note(f"cbr: reward {reward:.2f} ({info.reward_source}); stored case {info.stored_case}")

    def _write(
        self,
        task_text: str,
        plan: str,
        reward: float,
        hits: list[tuple[Case, float]],
        task_id: str,
        evidence: EvidenceRecord | None = None,
    ) -> tuple[Case, float | None]:
        plan = plan or "(no sub-task was executed)"
        case = self.bank.add(task_text, plan, reward, trajectory_ref=task_id, evidence=evidence)
        loss = None
        if hits:
            loss = self.bank.record(task_text, [c for c, _ in hits], reward, task_id=task_id, learn=self.learn)
        return case, loss

    def retain(self, example: dspy.Example | dict[str, Any], pred: dspy.Prediction, reward: float) -> Case:
        """Store the case of a finished call with an externally computed reward (e.g. a metric after evaluation).

        Use with ``retain=False``; ``pred`` must come from this agent (it carries ``pred.cbr``). Also updates the
        Q-gate with the pairs of the cases that call retrieved.
        """
        info = pred.get("cbr", None) if isinstance(pred, dspy.Prediction) else None
        if not info:
            raise ConfigError("retain() needs a prediction returned by CaseBasedAgent (it carries pred.cbr)")
        if not 0.0 <= float(reward) <= 1.0:
            raise ConfigError(f"reward must be in [0, 1], got {reward}")
        data = dict(example) if not isinstance(example, dspy.Example) else dict(example.items())
        inputs = {name: data.get(name) for name in self.task.input_fields}
        task_text = self.task.retrieval_key(inputs)
        hits = [(self.bank.get(cid), 0.0) for cid in info.get("retrieved", [])]
        trajectory = pred.get("trajectory", None)
        task_id = trajectory.task_id if isinstance(trajectory, Trajectory) else new_id("t-")
        evidence = run_evidence(trajectory) if isinstance(trajectory, Trajectory) else None
        case, loss = self._write(task_text, info.get("plan", ""), float(reward), hits, task_id, evidence)
        info.update(reward=float(reward), reward_source="retain()", stored_case=case.id, gate_loss=loss)
        if isinstance(trajectory, Trajectory):
            trajectory.cbr = CBRDetails.model_validate(info)
        return case


@register_method("cbr", extras=("cbr",), memory=True, writes=True)
def build_cbr(
    *,
    task: Task,
    settings: Settings,
    roles: Roles | None = None,
    trainset: list[Any] | None = None,
    memory_dir: Location | None = None,
    policy: RetrievalPolicy | None = None,
    frozen: bool = False,
    embedder: Any = None,
    reward_fn: RewardFn | None = None,
    web: Any = None,
) -> CaseBasedAgent:
    """The ``cbr`` method from the ``[cbr]`` settings: a case bank in ``<memory_dir>/cbr``, ``cbr.k`` cases,
    ``cbr.max_cycles`` planning cycles; with ``cbr.executor_bank`` the executor-level bank in
    ``<memory_dir>/cbr_executor`` (``cbr.executor_k`` tool cases per sub-task); ``cbr.capacity`` caps both banks.

    Retrieval: a writing (training) agent samples with ``cbr.train_policy`` (default ``softmax`` over the gate's
    logits at temperature ``cbr.alpha``: exploration, so the gate also learns about cases it ranks low); a frozen
    (test) agent uses ``cbr.policy`` (default ``q``: greedy by the gate). The gate ranks only after ``cbr.min_pairs``
    logged pairs (cosine before). ``policy`` overrides both. Rewards come from ``reward_fn`` (a metric, with labels)
    or else the judge. An existing bank is opened with the embedder it was built with (or ``embedder``);
    ``frozen=True`` (test time, ``memento eval``) opens it read-only and retains no cases, and a missing bank is then
    a DataError (nothing is created). ``web`` replaces the settings' web-tools factory (e.g. a counting wrapper).
    """
    from memento.web.factory import web_tools_factory

    cbr = settings.cbr
    root = memory_dir or settings.memory.dir
    bank = open_case_bank(
        root / "cbr",
        settings,
        frozen=frozen,
        embedder=embedder,
        missing=f"fill one first (`memento run --method cbr --memory {root}` retains cases)",
    )
    executor_bank = None
    if cbr.executor_bank:
        executor_bank = open_case_bank(
            root / "cbr_executor",
            settings,
            frozen=frozen,
            embedder=embedder if embedder is not None else bank.embedder,
            missing=f"train with --cbr-executor-bank first (`memento run --method cbr --cbr-executor-bank --memory "
            f"{root}`)",
        )
    return CaseBasedAgent(
        task,
        bank=bank,
        web=web if web is not None else web_tools_factory(settings),
        budgets=settings.budgets.model_copy(),
        threads=settings.run.threads,
        roles=roles,
        k=cbr.k,
        policy=policy or (cbr.policy if frozen else cbr.train_policy),
        alpha=cbr.alpha,
        max_cycles=cbr.max_cycles,
        retain=not frozen,
        success_threshold=settings.trainer.success_threshold,
        reward_fn=reward_fn,
        executor_bank=executor_bank,
        executor_k=cbr.executor_k,
        softmax_over=cbr.softmax_over,
    )
