"""JitMem's streaming protocol and training-bank construction.

:func:`stream` runs a :class:`memento.programs.jitmem_agent.JitMemAgent` over a sequence of tasks the way the JitMem
paper evaluates online learning (Appendix A): the order is shuffled with a seed, tasks are cut into batches of
``batch_size`` (10 by default) that share one bank state (they may run in parallel), and the judge-accepted
trajectories of a batch enter the bank only when the batch ends. Results are kept by the tasks' original positions,
each with its stream order and batch, so the cold-start curve (score against experience) can be plotted.

:func:`run_orderings` is the paper's test protocol: the test set as a stream, repeated over seeded orderings, each
from an empty bank (or a copy of a training bank), with mean ± std over orderings and the per-batch cold-start curve.

:func:`build_training_bank` is the one place where ground truth gates storage: it runs the agent on labelled
training examples and stores each trajectory with ``accepted = metric score > threshold`` (the one success rule,
:func:`memento.metrics.success.succeeded`).

Its records live in :mod:`~memento.optimize.stream_records` and its resumable journal in
:mod:`~memento.optimize.stream_journal`.

Example:
    >>> from memento.optimize.jitmem_stream import stream
    >>> result = stream(agent, examples, batch_size=10, seed=0, metric=task.metric)  # doctest: +SKIP
    >>> result.curve()  # mean score per batch, in stream order  # doctest: +SKIP
    [0.2, 0.35, 0.4]
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dspy

from memento.core.error_policy import handle_error
from memento.core.errors import ConfigError
from memento.core.types import Trajectory, new_id
from memento.execution.threads import run_parallel
from memento.metrics.behaviour import behaviour_of, summarize_behaviour
from memento.metrics.success import DEFAULT_SUCCESS_THRESHOLD, succeeded
from memento.optimize.stream_journal import append_batch, restore_batches, tasks_digest
from memento.optimize.stream_records import StreamItem, StreamResult

if TYPE_CHECKING:
    from memento.programs.jitmem_agent import JitMemAgent

__all__ = [
    "StreamItem",
    "StreamResult",
    "OrderingsResult",
    "stream",
    "stream_task",
    "remote_stream_task",
    "run_orderings",
    "build_training_bank",
    "describe_stream",
    "warm_sample",
]

logger = logging.getLogger(__name__)


def _task_inputs(agent: JitMemAgent, example: Any, position: int) -> dict[str, Any]:
    task = agent.task
    inputs = task.inputs(task.preprocess(example))
    cutoff = task.cutoff(example)
    if cutoff is not None:
        inputs["cutoff"] = cutoff
    get = example.get if hasattr(example, "get") else (lambda key, default=None: default)
    inputs["task_id"] = str(get("id", None) or get("task_id", None) or f"stream-{position}")
    return inputs


def _score(metric: Callable[..., Any], example: Any, pred: dspy.Prediction) -> tuple[float, str]:
    from memento.metrics.feedback_metric import feedback_metric

    result = feedback_metric(metric)(example, pred)
    return float(result.score), str(result.get("feedback", "") or "")


def stream_task(agent: Any, example: Any, item: StreamItem, metric: Callable[..., Any] | None) -> StreamItem:
    """One task of a stream batch: the agent on ``example`` (judging and offering its trajectory to the bank), then
    the metric; ``item`` (its position, order, batch and bank state filled in) gets the outcome."""
    position = item.position
    try:
        kwargs = _task_inputs(agent, example, position)
        item.task_id = kwargs["task_id"]
        pred = agent(**kwargs)
        item.prediction = pred
        info = pred.get("jitmem", None) or {}
        item.accepted, item.stored = info.get("accepted"), bool(info.get("stored"))
        trajectory = pred.get("trajectory", None)
        if trajectory is not None and trajectory.error:
            item.error = trajectory.error
        if metric is not None:
            item.score, item.feedback = _score(metric, example, pred)
            if trajectory is not None:
                trajectory.score = item.score
    except Exception as exc:
        item.error = handle_error(exc, where=f"stream task {position}", log=logger).reason
    return item


class _Offers:
    """A Ray worker's view of the stream's bank: reads go to the bank opened read-only at the batch's version,
    :meth:`add` keeps the agent's offers for the driver (which adds them to its bank's batch)."""

    read_only = False

    def __init__(self, bank: Any) -> None:
        self._bank = bank
        self.offered: list[tuple[Any, bool]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bank, name)

    def __len__(self) -> int:
        return len(self._bank)

    def add(self, trajectory: Any, accepted: bool) -> bool:
        self.offered.append((trajectory.model_copy(deep=True), accepted))
        return bool(accepted) or self._bank.policy != "success_only"


def remote_stream_task(built: Any, example: Any, item: StreamItem) -> tuple[StreamItem, list[Any]]:
    """:func:`stream_task` on a Ray worker (``ForwardWorker.call``): the worker's JitMem agent (built frozen, its
    bank read-only) judges its run as a writing agent would and returns what it offered the bank."""
    import copy

    agent = copy.copy(built.program)  # a shallow copy per task: its own offers, the same stages and bank
    offers = _Offers(built.program.bank)
    agent.bank, agent.store = offers, True
    item = stream_task(agent, example, item, built.metric)
    return item, offers.offered


def stream(
    agent: JitMemAgent,
    tasks: Sequence[Any],
    *,
    batch_size: int = 10,
    seed: int = 0,
    metric: Callable[..., Any] | None = None,
    threads: int = 1,
    on_batch: Callable[[int, list[StreamItem]], None] | None = None,
    checkpoint: str | Path | None = None,
    remote: Callable[[list[tuple[Any, StreamItem]], int], list[tuple[StreamItem, list[Any]]]] | None = None,
) -> StreamResult:
    """Run ``agent`` over ``tasks`` as a shuffled stream of batches; the bank is updated after each batch.

    Args:
        agent: the JitMem agent (its bank buffers writes during each batch).
        tasks: examples (``dspy.Example`` or dicts) with the task's input fields (and optional ``id``/``cutoff``).
        batch_size: tasks per batch; all of a batch see the same bank state.
        seed: shuffling seed (the same seed gives the same order).
        metric: optional ``metric(example, pred)`` returning a number or ``Prediction(score, feedback)``; it only
            scores results, it never decides what is stored.
        threads: tasks of a batch run in parallel with up to this many workers.
        on_batch: called as ``on_batch(batch_index, items)`` after each batch is applied (progress, checkpoints).
        checkpoint: a JSONL file where every finished batch is appended (its items: outputs, trajectory, score,
            and the trajectories the bank is about to store) just *before* the bank applies it, under a key the bank
            records with the batch. A rerun with the same file, tasks, seed and batch size restores the finished
            batches, re-applies a checkpointed batch the bank missed (a crash between the two steps) and continues
            with the next one: each batch's trajectories are stored exactly once.
        remote: runs a batch's ``(example, item)`` jobs elsewhere over the bank at the given version (the Ray
            executor: :func:`remote_stream_task` on the workers) and returns each finished item with the
            ``(trajectory, accepted)`` pairs its agent offered the bank, which are added here; ``None``: threads.

    Returns:
        A :class:`StreamResult` whose items are in the tasks' original order.

    Raises:
        LMUnavailableError: the LM cannot be reached (other per-task failures are recorded on the item).
        ConfigError: the checkpoint was written by a different stream (tasks, seed or batch size).
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    order = list(range(len(tasks)))
    random.Random(seed).shuffle(order)
    rank = {position: i for i, position in enumerate(order)}
    items: list[StreamItem | None] = [None] * len(tasks)
    bank = agent.bank
    header = {"tasks": len(tasks), "tasks_sha256": tasks_digest(agent, tasks), "seed": seed, "batch_size": batch_size}
    done_batches: set[int] = set()
    run_id = new_id("stream-")
    if checkpoint is not None:
        done_batches, restored_id = restore_batches(Path(checkpoint), header, items, bank)
        run_id = restored_id or run_id
    for batch_index, start in enumerate(range(0, len(order), batch_size)):
        if batch_index in done_batches:
            continue
        positions = order[start : start + batch_size]
        version, size = bank.version, len(bank)

        def run_one(position: int, *, _batch: int = batch_index, _version: int = version, _size: int = size) -> Any:
            item = StreamItem(position, rank[position], _batch, "", _version, _size)
            return stream_task(agent, tasks[position], item, metric)

        done: list[StreamItem] = []
        key = f"{run_id}:{batch_index}"

        def write_checkpoint(
            rows: list[dict[str, Any]],
            *,
            _batch: int = batch_index,
            _version: int = version,
            _done: list[StreamItem] = done,
        ) -> None:
            # written before the bank applies the batch: a crash in between is repaired from this line on restore
            assert checkpoint is not None
            meta = {**header, "run_id": run_id, "batch": _batch, "key": f"{run_id}:{_batch}", "bank_version": _version}
            append_batch(Path(checkpoint), meta, _done, rows)

        exactly_once: dict[str, Any] = {"key": key, "before_apply": write_checkpoint} if checkpoint is not None else {}
        with bank.batch(**exactly_once):
            if remote is None:
                done.extend(run_parallel(run_one, positions, threads=threads))
            else:  # the Ray executor: each task on the cluster over the bank as it is; its offers are added here
                jobs = [(tasks[p], StreamItem(p, rank[p], batch_index, "", version, size)) for p in positions]
                for item, offered in remote(jobs, version):
                    for trajectory, accepted in offered:
                        item.stored = bank.add(trajectory, accepted)
                    done.append(item)
        for item in done:
            items[item.position] = item
        logger.info("stream batch %d: %d tasks, bank %d -> %d trajectories", batch_index, len(done), size, len(bank))
        if on_batch is not None:
            on_batch(batch_index, done)
    return StreamResult(items=[item for item in items if item is not None])


def build_training_bank(
    agent: JitMemAgent,
    examples: Sequence[Any],
    metric: Callable[..., Any],
    *,
    threshold: float = DEFAULT_SUCCESS_THRESHOLD,
    threads: int = 1,
    base: bool = False,
    into: Any = None,
) -> StreamResult:
    """Fill ``agent.bank`` (or ``into``) from labelled examples, gating storage on the metric (the only ground-truth
    gate).

    Each example is run once through the agent without its judge (retrieval and curation still apply, against the
    bank as it was before this call; ``base=True`` runs the executor alone, as JitMem builds its training bank); its
    trajectory is stored with ``accepted = score > threshold`` (success as everywhere: strictly above ``[trainer]
    success_threshold``) in a single batch at the end, into ``into`` when given (a staged refresh rebuilds a bank
    while the agent still reads the old one). Returns the per-example results by position.
    """
    results: list[StreamItem] = []
    bank = into if into is not None else agent.bank
    version, size = bank.version, len(bank)

    def run_one(position: int) -> tuple[StreamItem, Any]:
        example = examples[position]
        item = StreamItem(position=position, order=position, batch=0, task_id="", bank_version=version, bank_size=size)
        try:
            kwargs = _task_inputs(agent, example, position)
            item.task_id = kwargs["task_id"]
            pred = agent.run(kwargs, store=False, base=base)
            item.prediction = pred
            item.score, item.feedback = _score(metric, example, pred)
            pred.trajectory.score = item.score
            item.accepted = succeeded(item.score, threshold=threshold) and not pred.trajectory.error
            return item, pred.trajectory
        except Exception as exc:
            item.error = handle_error(exc, where=f"stream task {position}", log=logger).reason
        return item, None

    done = run_parallel(run_one, list(range(len(examples))), threads=threads)
    with bank.batch():
        for item, trajectory in done:
            if trajectory is not None:
                item.stored = bank.add(trajectory, bool(item.accepted))
            results.append(item)
    return StreamResult(items=results)


@dataclass
class OrderingsResult:
    """The test stream over several orderings: per-example scores (mean over orderings) and the summary."""

    scores: list[float]
    failed: int
    summary: dict[str, Any]
    searches: int = 0
    fetches: int = 0
    #: each task's runs, one per ordering (``runs[i][o]``: ``tasks[i]`` in ordering ``o``)
    runs: list[list[StreamItem]] = field(default_factory=list)
    seconds: float = 0.0

    def eval_result(self, tasks: Sequence[Any], *, task: Any, metric_name: str, seed: int) -> Any:
        """The :class:`~memento.metrics.evaluation.EvalResult` of the stream (``results.json`` like any evaluation):
        an example's score is its mean over the orderings, its usage the sum, its prediction and trajectory those of
        its last ordering, its error set only when every ordering failed; ``stream`` holds the summary."""
        from memento.core.types import Usage
        from memento.metrics.evaluation import ExampleResult, aggregate, prediction_fields
        from memento.records.leakage import LeakageAudit

        records = []
        for index, (example, runs) in enumerate(zip(tasks, self.runs, strict=True)):
            last = runs[-1]
            usage = Usage()
            audits = []  # every ordering's run is audited: each was shown its own bank
            for item in runs:
                used = getattr(getattr(item.prediction, "trajectory", None), "usage", None)
                usage = usage.add(used) if used is not None else usage
                traj = getattr(item.prediction, "trajectory", None)
                audits.append(
                    LeakageAudit.of(traj if isinstance(traj, Trajectory) else None, cutoff=task.cutoff(example))
                )
            summed, cut = LeakageAudit.total(audits), task.cutoff(example)
            leakage = summed.model_copy(  # one example, audited over all its orderings
                update={
                    "cutoff": cut,
                    "examples": 1,
                    "examples_with_cutoff": int(cut is not None),
                    "examples_leaking": int(summed.leaked > 0),
                }
            )
            errors = [item.error or "no score" for item in runs if item.error or item.score is None]
            trajectories = [getattr(item.prediction, "trajectory", None) for item in runs if item.prediction]
            per_run = [behaviour_of(t) for t in trajectories if t is not None]
            records.append(
                ExampleResult(
                    index=index,
                    id=last.task_id,
                    inputs=task.inputs(example),
                    prediction=prediction_fields(last.prediction),
                    score=self.scores[index],
                    feedback=last.feedback,
                    error=errors[-1] if len(errors) == len(runs) else None,
                    usage=usage,
                    # each figure's mean over the orderings
                    behaviour={k: sum(r[k] for r in per_run) / len(per_run) for k in per_run[0]} if per_run else {},
                    trajectory=getattr(last.prediction, "trajectory", None),
                    leakage=leakage,
                )
            )
        labels = {"task": task.name, "method": "jitmem", "seed": seed, "total": len(records)}
        result = aggregate(records, None, time.perf_counter() - self.seconds, metric_name=metric_name, **labels)
        return result.model_copy(update={"stream": self.summary})


def _web_counts(items: Sequence[StreamItem]) -> tuple[int, int]:
    searches = fetches = 0
    for item in items:
        usage = getattr(getattr(item.prediction, "trajectory", None), "usage", None) if item.prediction else None
        if usage is not None:
            searches += usage.searches
            fetches += usage.fetches
    return searches, fetches


def run_orderings(
    build_agent: Callable[[Path], JitMemAgent],
    tasks: Sequence[Any],
    *,
    orderings: int,
    batch_size: int = 10,
    seed: int = 0,
    metric: Callable[..., Any],
    threads: int = 1,
    out_dir: str | Path,
    warm_bank: str | Path | None = None,
    warm_size: int | None = None,
    remote_for: Callable[[Path], Any] | None = None,
) -> OrderingsResult:
    """JitMem's test protocol: stream ``tasks`` in ``orderings`` seeded orders (seeds ``seed``, ``seed + 1``...).

    Each ordering gets its own memory directory ``out_dir/ordering-<n>/memory`` holding an empty bank, or a copy of
    ``warm_bank`` (a trajectory bank directory: the training bank, never written); ``build_agent(memory_dir)`` builds
    a writable, judge-gated agent over it; with ``warm_size`` the bank starts from a seeded sample (``seed``: the same
    for every ordering) of that many of the warm bank's trajectories (JitMem: 100). The bank grows only between
    batches (:func:`stream`), and every ordering checkpoints to ``ordering-<n>/stream.jsonl``, so a crashed run
    resumes. ``out_dir/stream.json`` gets the summary:
    each ordering's mean, bank size at start and end and curve (score and bank size per batch), the mean and sample
    standard deviation of the ordering means, and the curve's mean and std per batch across orderings.

    An example's score is its mean over the orderings (a failed run scores 0). ``remote_for(memory_dir)`` gives
    :func:`stream`'s ``remote`` for an ordering's memory (the Ray executor); ``None``: threads.
    """
    import shutil
    import statistics

    from memento.utils.files import atomic_write_text

    if orderings < 1:
        raise ConfigError(f"orderings must be >= 1, got {orderings}")
    out = Path(out_dir)
    n = len(tasks)
    totals = [0.0] * n
    failed = searches = fetches = 0
    started = time.perf_counter()
    runs: list[list[StreamItem]] = [[] for _ in range(n)]
    per_ordering: list[dict[str, Any]] = []
    for ordering in range(orderings):
        run_dir = out / f"ordering-{ordering + 1}"
        bank_dir = run_dir / "memory" / "jitmem"
        if bank_dir.exists() and not (run_dir / "stream.jsonl").exists():
            shutil.rmtree(bank_dir)  # a half-built copy from a crash: start this ordering over
        if warm_bank is not None and not bank_dir.exists():
            if warm_size is None:
                shutil.copytree(Path(warm_bank), bank_dir)
            else:
                warm_sample(Path(warm_bank), bank_dir, warm_size, seed=seed)
        agent = build_agent(run_dir / "memory")
        result = stream(
            agent,
            tasks,
            batch_size=batch_size,
            seed=seed + ordering,
            metric=metric,
            threads=threads,
            checkpoint=run_dir / "stream.jsonl",
            remote=remote_for(run_dir / "memory") if remote_for is not None else None,
        )
        s, f = _web_counts(result.items)
        searches, fetches = searches + s, fetches + f
        scores = [item.score if item.score is not None else 0.0 for item in result.items]
        failed += sum(1 for item in result.items if item.error or item.score is None)
        totals = [t + x for t, x in zip(totals, scores, strict=True)]
        for item in result.items:
            runs[item.position].append(item)
        sizes = {item.batch: item.bank_size for item in result.items}
        per_ordering.append(
            {
                "ordering": ordering + 1,
                "seed": seed + ordering,
                "mean": sum(scores) / n if n else None,
                "bank_start": sizes.get(0, 0),  # what the first batch saw (also when resumed from a checkpoint)
                "bank_end": len(agent.bank),
                "curve": [
                    {"batch": b + 1, "score": score, "bank_size": sizes[b]} for b, score in enumerate(result.curve())
                ],
                "order": [item.task_id for item in result.in_stream_order()],
            }
        )
        agent.bank.close()
    means = [o["mean"] for o in per_ordering if o["mean"] is not None]
    curve = []
    for b in range(max((len(o["curve"]) for o in per_ordering), default=0)):
        points = [o["curve"][b] for o in per_ordering if b < len(o["curve"])]
        values = [p["score"] for p in points if p["score"] is not None]
        curve.append(
            {
                "batch": b + 1,
                "score": statistics.fmean(values) if values else None,
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "bank_size": [p["bank_size"] for p in points],
            }
        )
    summary = {
        "protocol": "stream",
        "warm": warm_bank is not None,
        "warm_size": warm_size if warm_bank is not None else None,
        "orderings": orderings,
        "stream_batch": batch_size,
        "mean": statistics.fmean(means) if means else None,
        "std": statistics.stdev(means) if len(means) > 1 else 0.0,
        "per_ordering": per_ordering,
        "curve": curve,
        # how the agent worked, per run over every ordering (MEMENTO Table 8/10 measures, metrics.behaviour)
        "behaviour": summarize_behaviour(
            behaviour_of(item.prediction.trajectory)
            for task_runs in runs
            for item in task_runs
            if item.prediction is not None and getattr(item.prediction, "trajectory", None) is not None
        ),
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "stream.json", json.dumps(summary, indent=2))
    return OrderingsResult(
        scores=[t / orderings for t in totals],
        failed=failed // orderings,
        summary=summary,
        searches=searches,
        fetches=fetches,
        runs=runs,
        seconds=time.perf_counter() - started,
    )


def warm_sample(source: Path, target: Path, size: int, *, seed: int) -> int:
    """Start the bank at ``target`` from a seeded sample of ``size`` of the trajectories of the bank at ``source``
    (read only), labels kept; returns how many were stored."""
    from memento.memory.sqlite_connect import connect_sqlite
    from memento.memory.trajectory_bank import BankPolicy, TrajectoryBank

    conn = connect_sqlite(source / "trajectories.sqlite3", read_only=True)
    try:  # the policy the bank was created with (a read-only open must name it)
        row = conn.execute("SELECT value FROM meta WHERE key='policy'").fetchone()
    finally:
        conn.close()
    policy: BankPolicy = "all_with_labels" if row and row[0] == "all_with_labels" else "success_only"
    reader = TrajectoryBank(source, policy=policy, read_only=True)
    try:
        entries = list(reader.iter_all())
    finally:
        reader.close()
    chosen = sorted(random.Random(seed).sample(range(len(entries)), min(size, len(entries))))
    bank = TrajectoryBank(target, policy=policy)
    try:
        with bank.batch():
            stored = sum(bank.add(entries[i][0], entries[i][1]) for i in chosen)
    finally:
        bank.close()
    logger.info("warm start: %d of the %d trajectories of %s (seed %d)", stored, len(entries), source, seed)
    return stored


def describe_stream(summary: dict[str, Any]) -> list[str]:
    """Lines for a terminal: the mean ± std over orderings and the cold-start curve (score per stream batch, mean
    over orderings, with the bank size each batch saw) of a :func:`run_orderings` summary."""
    mean = "n/a" if summary.get("mean") is None else f"{summary['mean']:.3f} ± {summary['std']:.3f}"
    start = "the training bank" if summary.get("warm") else "an empty bank"
    lines = [
        f"mean {mean} over {summary['orderings']} orderings from {start}, batches of {summary['stream_batch']}",
        "score per stream batch (mean over orderings; bank size seen): "
        + ", ".join(
            f"{p['batch']}: {'–' if p['score'] is None else format(p['score'], '.2f')} ({min(p['bank_size'])})"
            for p in summary.get("curve", [])
        ),
    ]
    return lines
