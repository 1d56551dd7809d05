"""Compare learning from the web (memory methods) with prompt optimisation (GEPA, MIPROv2, BootstrapFewShot).

One task, one metric, one seeded train/test split, the same LM roles for every method. Each method is a pluggable
:class:`MethodRunner` with two phases:

1. **train** on the training set, leaving a *frozen artefact* in ``DIR/<method>/``: a compiled program's JSON state
   (``program.json``, reloadable with ``program.load``) and/or a memory directory (``memory/``);
2. **test**: the program is rebuilt *from the artefact* (so what is scored is exactly what was saved, with memory
   frozen) and evaluated on the test set.

Each phase runs under a :class:`memento.usage.UsageMeter`, so its LM calls, tokens and judge calls are counted by
role, plus searches, fetches and wall time (:class:`memento.optimize.costs.PhaseCost`). The report
(:mod:`memento.optimize.report`) adds each method's bootstrap 95% CI and the paired-bootstrap difference against a
baseline method.

Methods: any registered program (``closed_book``, ``few_shot``, ``react``, ``aet`` ...: built, saved, tested),
``<optimiser>:<base>`` (``gepa:react``, ``miprov2:aet``, ``bootstrap:closed_book``), and the memory methods
``memento``, ``react_memory`` (ReAct reading MEMENTO memory), ``cbr``, ``jitmem`` and the case-memory baselines
``closed_book_cases`` / ``few_shot_cases`` (reading the bank ``cbr`` trains). Register your own with
:func:`register_runner`.

Resumable: a method whose ``DIR/<method>/done`` marker exists is not rerun; a method whose training finished
(``train.json``) is only tested again; a crash in one method is recorded (status ``error``) and the others go on.

Example:
    >>> from memento.optimize.compare import compare  # doctest: +SKIP
    >>> report = compare("multihop", ["closed_book", "aet", "gepa:react"], data=examples, n_train=12, n_test=8,
    ...                  budget="tiny", out_dir="runs/cmp", settings=settings)  # doctest: +SKIP
    >>> report.methods["gepa:react"].vs_baseline.diff  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import random
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import dspy

from memento.config import Settings
from memento.errors import Cancelled, ConfigError, LMUnavailableError, MementoError
from memento.files import atomic_write_text, save_program
from memento.lm import raise_if_fatal
from memento.optimize.budgets import CompareBudget, budget_from_settings, resolve_budget
from memento.optimize.costs import PhaseCost, role_models
from memento.optimize.optimizers import OPTIMIZERS, optimize_program, require_optimizer_extras
from memento.optimize.report import (
    BaselineDiff,
    CompareReport,
    MethodResult,
    write_report,
)
from memento.tasks.task import Task, get_task
from memento.text import error_line
from memento.types import Usage, utcnow
from memento.usage import UsageMeter

__all__ = [
    "MethodSpec",
    "CompareContext",
    "CompareObserver",
    "TrainOutcome",
    "MethodRunner",
    "ProgramRunner",
    "OptimizerRunner",
    "MementoRunner",
    "JitMemRunner",
    "CaseBankRunner",
    "compare",
    "parse_methods",
    "register_runner",
    "split_examples",
    "example_id",
    "WebTally",
    "Tallied",
    "CountingWeb",
]

logger = logging.getLogger(__name__)

PROGRAM_FILE = "program.json"
MEMORY_DIR = "memory"


# -- methods ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MethodSpec:
    """A method to compare: its name, kind (``program``, ``optimizer``, ``memory``), base program and optimiser."""

    name: str
    kind: str
    base: str
    optimizer: str | None = None

    @property
    def slug(self) -> str:
        """The method's directory name (``gepa:react`` -> ``gepa-react``)."""
        return self.name.replace(":", "-")


def _info(method: str) -> Any:
    """The registry's :class:`~memento.programs.registry.MethodInfo` of ``method`` (``None``: unknown)."""
    from memento.programs.registry import method_info

    return method_info(method)


def _is_memory(method: str) -> bool:
    info = _info(method)
    return bool(info is not None and info.memory)


def _reads(method: str) -> str | None:
    """The method whose trained memory ``method`` reads (run after it, reusing its artefact when it is done)."""
    info = _info(method)
    return info.reads if info is not None else None


def parse_methods(methods: str | Sequence[str]) -> list[MethodSpec]:
    """Parse ``"closed_book,aet,gepa:react"`` (or a list) into specs, in order, without duplicates.

    A method's kind comes from the method registry (:func:`memento.programs.registry.method_info`): a method that
    keeps memory is a ``memory`` method, any other registered one a ``program``.

    Raises:
        ConfigError: an empty list, an unknown optimiser, or an optimiser over a memory method.
        MissingExtraError: a method (``cbr``) or optimiser (``miprov2``) needs an extra that is not installed.
    """
    from memento.programs.registry import require_method_extras

    names = [m.strip() for m in (methods.split(",") if isinstance(methods, str) else methods)]
    names = [m for m in names if m]
    if not names:
        raise ConfigError("no methods to compare")
    specs: list[MethodSpec] = []
    seen: set[str] = set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        if ":" in name:
            optimizer, _, base = name.partition(":")
            if optimizer not in OPTIMIZERS:
                raise ConfigError(
                    f"unknown optimiser {optimizer!r} in {name!r}; expected one of {', '.join(OPTIMIZERS)}"
                )
            if not base or ":" in base:
                raise ConfigError(f"{name!r}: expected <optimiser>:<base method>, e.g. gepa:react")
            if _is_memory(base):
                raise ConfigError(
                    f"{name!r}: optimising a memory method's prompts is not supported; use a base program"
                )
            require_optimizer_extras(optimizer)
            require_method_extras(base)
            specs.append(MethodSpec(name, "optimizer", base, optimizer))
        elif _is_memory(name):
            require_method_extras(name)
            specs.append(MethodSpec(name, "memory", name))
        else:
            require_method_extras(name)
            specs.append(MethodSpec(name, "program", name))
    _check_known(specs)
    return specs


def _check_known(specs: list[MethodSpec]) -> None:
    """Refuse unknown methods (and unknown bases of optimisers) before any method runs."""
    from memento.programs.registry import method_names

    known = set(method_names())
    unknown = [s.name for s in specs if s.base not in known]
    if unknown:
        raise ConfigError(
            f"unknown method{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"available: {', '.join(sorted(known))} (and <optimiser>:<method> with {', '.join(OPTIMIZERS)})"
        )


# -- data ---------------------------------------------------------------------------------------------------------
def example_id(example: dspy.Example, task: Task) -> str:
    """A stable id of an example: its ``id`` field, else a hash of its model-visible inputs."""
    given = example.get("id") if hasattr(example, "get") else None
    if given not in (None, ""):
        return str(given)
    payload = json.dumps(task.inputs(example), sort_keys=True, default=str)
    return "h-" + hashlib.sha1(payload.encode()).hexdigest()[:12]


def split_examples(
    examples: Sequence[dspy.Example], *, n_train: int | None, n_test: int | None, seed: int
) -> tuple[list[dspy.Example], list[dspy.Example]]:
    """One seeded split: shuffle with ``seed``, the first ``n_test`` are the test set, the next ``n_train`` train.

    ``None`` sizes take the rest (``n_test=None`` alone: a 70/30 train/test split).

    Raises:
        ConfigError: the sizes exceed the data or leave a side empty.
    """
    items = list(examples)
    total = len(items)
    if n_test is None and n_train is None:
        n_test = max(1, round(total * 0.3))
    if n_test is None:
        n_test = total - (n_train or 0)
    if n_train is None:
        n_train = total - n_test
    if n_train < 1 or n_test < 1:
        raise ConfigError(f"a comparison needs at least one train and one test example (got {n_train}/{n_test})")
    if n_train + n_test > total:
        raise ConfigError(f"asked for {n_train} train + {n_test} test examples but the data has only {total}")
    order = list(range(total))
    random.Random(seed).shuffle(order)
    test = [items[i] for i in order[:n_test]]
    train = [items[i] for i in order[n_test : n_test + n_train]]
    return train, test


# -- web counts during training ------------------------------------------------------------------------------------
class WebTally:
    """Thread-safe totals of the web use found in the trajectories of programs run during a training phase.

    Shared by reference when copied (optimisers deep-copy programs dozens of times; the tally must not fork).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs = 0
        self.searches = 0
        self.fetches = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> WebTally:
        return self

    def add(self, usage: Usage | None) -> None:
        with self._lock:
            self.runs += 1
            if usage is not None:
                self.searches += usage.searches
                self.fetches += usage.fetches


class Tallied(dspy.Module):
    """Wraps a program so every run's searches and fetches (from its trajectory) reach a :class:`WebTally`.

    The wrapped program is ``self.program``; save that (not the wrapper) so the state loads into the bare program.
    """

    def __init__(self, program: dspy.Module, tally: WebTally) -> None:
        super().__init__()
        self.program = program
        self.tally = tally

    def forward(self, **kwargs: Any) -> dspy.Prediction:
        pred = self.program(**kwargs)
        trajectory = pred.get("trajectory") if hasattr(pred, "get") else None
        self.tally.add(getattr(trajectory, "usage", None))
        return pred


class CountingWeb:
    """Wraps a web-tools factory ``f(cutoff, undated) -> WebTools`` and totals the searches and fetches of every
    :class:`memento.web.web_tools.WebTools` it made (for programs a runner builds itself)."""

    def __init__(self, factory: Callable[..., Any]) -> None:
        self.factory = factory
        self._lock = threading.Lock()
        self._tools: list[Any] = []

    def __deepcopy__(self, memo: dict[int, Any]) -> CountingWeb:
        return self

    def __call__(self, cutoff: Any = None, undated: Any = None) -> Any:
        tools = self.factory(cutoff, undated)
        with self._lock:
            self._tools.append(tools)
        return tools

    def totals(self) -> tuple[int, int]:
        """``(searches, fetches)`` so far."""
        with self._lock:
            counts = [tools.counts() for tools in self._tools]
        return sum(int(c.get("searches", 0)) for c in counts), sum(int(c.get("fetches", 0)) for c in counts)


# -- runners ------------------------------------------------------------------------------------------------------
class CompareObserver(Protocol):
    """Follows a comparison as it runs (the CLI's progress bars, MLflow tracking). Called from worker threads."""

    def phase(self, method: str, phase: str, total: int | None) -> None:
        """A method's ``train`` or ``test`` phase starts (``total``: its examples, ``None`` when unknown)."""

    def example(self, method: str, phase: str, score: float, error: bool) -> None:
        """One example of a phase finished."""

    def method_done(self, result: MethodResult, method_dir: Path) -> None:
        """A method finished (``result.status`` says how); its files are in ``method_dir``."""


@dataclass
class CompareContext:
    """What every runner shares: the task, its metric, the split, the settings and LM roles, the budget."""

    task: Task
    settings: Settings
    roles: Any
    metric: Callable[..., Any]
    trainset: list[dspy.Example]
    testset: list[dspy.Example]
    budget: CompareBudget
    threads: int
    seed: int
    out_dir: Path
    embedder: Any = None
    observer: CompareObserver | None = None

    def memory_trainset(self) -> list[dspy.Example]:
        """The training examples a memory method learns from (at most ``budget.memory_train_limit``)."""
        limit = self.budget.memory_train_limit
        return list(self.trainset[:limit] if limit is not None else self.trainset)

    def memory_outcome(self, trainset: list[dspy.Example], info: dict[str, Any], **fields: Any) -> TrainOutcome:
        """A memory method's :class:`TrainOutcome`: the memory budget, ``trainset``'s size, ``info`` and ``fields``
        (``curve``, ``growth``, ``searches``, ``fetches``; ``k`` joins the budget), the artefact in ``memory/``."""
        budget = self.budget.for_method("memory") | {"train_examples": len(trainset)}
        if "k" in fields:
            budget["k"] = fields.pop("k")
        return TrainOutcome(budget=budget, info=info, artefacts={"memory": MEMORY_DIR}, **fields)

    def fresh_bank(self, method_dir: Path) -> None:
        """Remove a case bank a crashed training left in ``method_dir`` (cases are not batch-versioned: training
        starts over)."""
        import shutil

        bank_dir = method_dir / MEMORY_DIR / "cbr"
        if bank_dir.exists():
            shutil.rmtree(bank_dir)

    def compile(self, optimizer: str, program: dspy.Module, log_dir: Path) -> Any:
        """Compile ``program`` with ``optimizer`` on this comparison's training set, metric, roles, budget, threads
        and seed (:func:`memento.optimize.optimizers.optimize_program`)."""
        shared = {"trainset": self.trainset, "metric": self.metric, "roles": self.roles, "budget": self.budget}
        return optimize_program(optimizer, program, threads=self.threads, seed=self.seed, log_dir=log_dir, **shared)

    def build(
        self, method: str, *, memory_dir: Path | None = None, frozen: bool | None = None, **injected: Any
    ) -> dspy.Module:
        """Build a method with its registered builder (:func:`memento.programs.registry.build_program`) for this
        comparison's task, settings, roles, training set and embedder (``frozen``: test time; ``False``: the
        training form; ``injected``: ``web``, ``reward_fn``). Every runner builds its programs here."""
        from memento.programs.registry import build_program

        return build_program(
            method,
            task=self.task,
            settings=self.settings,
            roles=self.roles,
            trainset=self.trainset,
            memory_dir=memory_dir,
            frozen=frozen,
            embedder=self.embedder,
            **injected,
        )


@dataclass
class TrainOutcome:
    """What a training phase produced besides its artefacts.

    Attributes:
        budget: the budget as applied (after clamping), reported per method.
        info: anything worth reporting (optimiser scores, candidates, memory version).
        curve: per-batch learning curve, ``[{"batch": 1, "score": 0.4, ...}, ...]`` (memory methods).
        growth: per-batch memory size, ``[{"batch": 1, "size": 12, "unit": "rules+facts"}, ...]``.
        searches: web searches made while training.
        fetches: page fetches made while training.
        artefacts: artefact paths relative to the method directory (``{"program": "program.json"}``).
    """

    budget: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    curve: list[dict[str, Any]] = field(default_factory=list)
    growth: list[dict[str, Any]] = field(default_factory=list)
    searches: int = 0
    fetches: int = 0
    artefacts: dict[str, str] = field(default_factory=dict)


class MethodRunner(Protocol):
    """A compared method: ``train`` leaves a frozen artefact in ``method_dir``; ``load`` rebuilds the test program.

    A runner with its own test protocol may also define ``test(ctx, spec, method_dir, models)`` returning
    ``(scores, failed, measures, PhaseCost, info)`` (or ``None`` to be evaluated the usual way); JitMem's test stream
    does.
    """

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome: ...

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module: ...


def _reused(source: str) -> TrainOutcome:
    """The training outcome of a method that reads the memory ``source`` trained in the same comparison."""
    return TrainOutcome(
        info={"memory_from": source, "note": f"reads the memory trained by `{source}` (its cost)"},
        artefacts={"memory": f"../{source}/{MEMORY_DIR}"},
    )


def _save_program(program: dspy.Module, path: Path) -> None:
    """``program.save`` (JSON state) atomically and scrubbed (:func:`memento.files.save_program`)."""
    save_program(program, path)


class ProgramRunner:
    """A registered program as is (``closed_book``, ``few_shot``, ``react``, ``aet`` ...): nothing to learn beyond
    what its builder takes from the training set (FewShot's demos); its state is saved and reloaded."""

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        program = ctx.build(spec.base)
        _save_program(program, method_dir / PROGRAM_FILE)
        return TrainOutcome(artefacts={"program": PROGRAM_FILE})

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        program = ctx.build(spec.base)
        program.load(str(method_dir / PROGRAM_FILE))
        return program


class OptimizerRunner:
    """``<optimiser>:<base>``: compile the base program with GEPA, MIPROv2 or BootstrapFewShot under the budget."""

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        assert spec.optimizer is not None
        tally = WebTally()
        student = Tallied(ctx.build(spec.base), tally)
        result = ctx.compile(spec.optimizer, student, method_dir / "optimizer")
        compiled = result.program.program if isinstance(result.program, Tallied) else result.program
        _save_program(compiled, method_dir / PROGRAM_FILE)
        info = dict(result.info)
        info["program_runs"] = tally.runs
        return TrainOutcome(
            budget=result.budget,
            info=info,
            searches=tally.searches,
            fetches=tally.fetches,
            artefacts={"program": PROGRAM_FILE},
        )

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        program = ctx.build(spec.base)
        program.load(str(method_dir / PROGRAM_FILE))
        return program


class MementoRunner:
    """MEMENTO: train M1-M4 with :class:`memento.optimize.memento_trainer.MementoTrainer` in batches, then test
    with the memory frozen. ``react_memory`` tests a ReAct agent reading the memory ``memento`` trained in the same
    comparison (or trains its own when ``memento`` is not compared)."""

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        source = _reads(spec.name)
        if source is not None:
            shared = ctx.out_dir / source
            if (shared / "done").exists() and (shared / MEMORY_DIR).is_dir():
                return _reused(source)
        from memento.optimize.memento_trainer import MementoTrainer
        from memento.web.factory import web_tools_factory

        web = CountingWeb(web_tools_factory(ctx.settings))
        # the memento builder's training form: writable memory, the learner, [trainer] exploration per sample
        program = ctx.build("memento", memory_dir=method_dir / MEMORY_DIR, frozen=False, web=web)
        store = program.memory
        trainset = ctx.memory_trainset()
        trainer = MementoTrainer.for_program(
            program, ctx.metric, ctx.settings, batch_size=ctx.budget.memory_batch_size, threads=ctx.threads
        )
        reports = trainer.fit(trainset)  # resumes a half-finished batch after a crash; never applies one twice
        searches, fetches = web.totals()
        curve, growth = [], []
        for rep in reports:
            curve.append({"batch": rep.batch, "score": rep.mean_score, "n": rep.examples, "valid": rep.valid_runs})
            rules = sum(counts.rules for counts in rep.rules.values())
            growth.append(
                {
                    "batch": rep.batch,
                    "size": rules + rep.facts + rep.craft_entries,
                    "unit": "rules + facts + craft entries",
                    "rules": rules,
                    "facts": rep.facts,
                    "craft_entries": rep.craft_entries,
                    "chars": sum(c.after for c in rep.chars.values()),
                }
            )
        return ctx.memory_outcome(
            trainset,
            info={"batches": len(reports), "memory_version": store.version},
            curve=curve,
            growth=growth,
            searches=searches,
            fetches=fetches,
        )

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        memory_dir = method_dir / MEMORY_DIR
        source = _reads(spec.name)
        if source is not None and not memory_dir.is_dir():
            memory_dir = ctx.out_dir / source / MEMORY_DIR
        return ctx.build(spec.name, memory_dir=memory_dir, frozen=True)


class JitMemRunner:
    """JitMem under one of the paper's protocols (``[jitmem] protocol``, ``--jitmem-protocol``).

    * ``frozen``: the training set runs as a seeded stream of batches
      (:func:`memento.optimize.jitmem_stream.stream`) and the judge gates which trajectories enter the bank after each
      batch (``train_gate = "ground_truth"``: the metric gates instead, :func:`build_training_bank`); at test time
      the bank is read-only.
    * ``stream`` (the paper's test protocol): the test set itself is the stream. Each of ``orderings`` seeded
      orderings starts from an empty bank (``warm``: a copy of the training bank built as above), runs the test tasks
      in batches of ``stream_batch`` that share one bank state, and lets the judge-accepted trajectories of a batch
      in only when it ends. An example's score is its mean over the orderings; ``info["stream"]`` holds each
      ordering's mean, their mean and standard deviation, and the cold-start curve (score per stream batch, mean and
      std over orderings, with the bank size each batch saw).
    """

    @staticmethod
    def _protocol(ctx: CompareContext) -> str:
        return ctx.settings.jitmem.protocol

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        jit = ctx.settings.jitmem
        if jit.protocol == "stream" and not jit.warm:
            return TrainOutcome(
                info={"protocol": "stream", "warm": False, "note": "cold start: the test stream starts empty"},
                budget={"stream_batch": jit.stream_batch, "orderings": jit.orderings},
            )
        from memento.optimize.jitmem_stream import _web_counts, build_training_bank, stream

        agent = ctx.build(spec.name, memory_dir=method_dir / MEMORY_DIR, frozen=False)
        trainset = ctx.memory_trainset()
        if jit.train_gate == "ground_truth":
            threshold = ctx.settings.trainer.success_threshold
            result = build_training_bank(agent, trainset, ctx.metric, threshold=threshold, threads=ctx.threads)
        else:
            result = stream(
                agent,
                trainset,
                batch_size=ctx.budget.memory_batch_size,
                seed=ctx.seed,
                metric=ctx.metric,
                threads=ctx.threads,
                checkpoint=method_dir / "stream.jsonl",  # a crashed stream resumes after its last applied batch
            )
        # bank size after each batch: what the next batch saw, and the final size after the last one
        before = {item.batch: item.bank_size for item in result.items}
        batches = sorted(before)
        growth = [{"batch": b + 1, "size": before.get(b + 1, len(agent.bank)), "unit": "trajectories"} for b in batches]
        curve = [{"batch": i + 1, "score": s} for i, s in enumerate(result.curve())]
        searches, fetches = _web_counts(result.items)
        stored = sum(1 for item in result.items if item.stored)
        info = {
            "stored": stored,
            "bank_size": len(agent.bank),
            "train_mean": result.mean(),
            "protocol": jit.protocol,
            "train_gate": jit.train_gate,
        }
        if jit.protocol == "stream":
            info["warm"] = True
        return ctx.memory_outcome(trainset, info, curve=curve, growth=growth, searches=searches, fetches=fetches)

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        # frozen: the bank is opened read-only; test runs read it and never judge or write
        return ctx.build(spec.name, memory_dir=method_dir / MEMORY_DIR, frozen=True)

    def test(
        self, ctx: CompareContext, spec: MethodSpec, method_dir: Path, models: dict[str, str]
    ) -> tuple[list[float], int, dict[str, float], PhaseCost, dict[str, Any]] | None:
        """The stream protocol's test phase (``None`` under ``frozen``: the harness evaluates the loaded program)."""
        if self._protocol(ctx) != "stream":
            return None
        from memento.optimize.jitmem_stream import run_orderings

        jit = ctx.settings.jitmem
        with _metered(ctx.roles) as (meter, clock):
            result = run_orderings(
                lambda memory_dir: ctx.build(spec.name, memory_dir=memory_dir),
                ctx.testset,
                orderings=jit.orderings,
                batch_size=jit.stream_batch,
                seed=ctx.seed,
                metric=ctx.metric,
                threads=ctx.threads,
                out_dir=method_dir / "test",
                warm_bank=method_dir / MEMORY_DIR / "jitmem" if jit.warm else None,
            )
        cost = PhaseCost.from_usage(
            meter.usage(), wall_seconds=clock[1], searches=result.searches, fetches=result.fetches, models=models
        )
        return result.scores, result.failed, {}, cost, result.summary


class CaseBankRunner:
    """Memento CBR: the agent built by the ``cbr`` method's builder (the ``[cbr]`` settings) trains with
    :func:`memento.programs.case_based_agent.fit_cases` (the one CBR training loop) over the training set in batches,
    retaining (task, plan, reward) with the metric's score as reward and updating its Q-gate online. Training
    retrieval follows ``cbr.train_policy`` (softmax over the gate's logits: exploration), testing ``cbr.policy``
    (greedy Q); the gate ranks after ``cbr.min_pairs`` logged pairs. ``cbr.passes > 1`` runs the training set again
    with the bank growing (Memento's iteration table; ``cbr.own_cases`` lets a task read its own earlier case), the
    score of every pass in ``info["passes"]``. At test time the bank is frozen and nothing is retained. A crashed
    training phase starts over from an empty bank (cases are not batch-versioned)."""

    def _agent(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path, *, train: bool) -> tuple[Any, Any]:
        from memento.web.factory import web_tools_factory

        web = CountingWeb(web_tools_factory(ctx.settings))
        reward = ctx.metric if train else None
        agent = ctx.build(spec.name, memory_dir=method_dir / MEMORY_DIR, frozen=not train, reward_fn=reward, web=web)
        return agent, web

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        from memento.programs.case_based_agent import fit_cases

        ctx.fresh_bank(method_dir)
        agent, web = self._agent(ctx, spec, method_dir, train=True)
        trainset = ctx.memory_trainset()
        cbr = ctx.settings.cbr
        passes = fit_cases(
            agent,
            list(trainset),
            batch_size=ctx.budget.memory_batch_size,
            threads=ctx.threads,
            passes=cbr.passes,
            own_cases=cbr.own_cases,
            task_id=lambda ex: example_id(ex, ctx.task),
        )
        curve: list[dict[str, Any]] = []
        growth: list[dict[str, Any]] = []
        for result in passes:
            for row in result.batches:
                batch = len(curve) + 1
                curve.append({"batch": batch, "score": row["score"], "n": row["n"], "pass": result.index})
                growth.append({"batch": batch, "size": row["cases"], "unit": "cases"})
        info = {
            "cases": agent.bank.count(),
            "gate_trained": bool(agent.bank.gate_trained),
            "gate_ready": bool(agent.bank.gate_ready),
            "pairs_logged": agent.bank.pairs_logged(),
            "policy": agent.policy,
            "test_policy": cbr.policy,
            "alpha": agent.alpha,
            "passes": [{"pass": r.index, "score": r.score, "n": len(r.rewards)} for r in passes],
            "train_retrievals": {
                p: sum(r.policies.get(p, 0) for r in passes) for p in {p for r in passes for p in r.policies}
            },
            "own_cases": cbr.own_cases,
        }
        agent.bank.close()
        searches, fetches = web.totals()
        return ctx.memory_outcome(
            trainset, info, curve=curve, growth=growth, searches=searches, fetches=fetches, k=agent.k
        )

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        agent, _ = self._agent(ctx, spec, method_dir, train=False)
        return agent


class CaseMemoryRunner:
    """The case-memory baselines (``closed_book_cases``, ``few_shot_cases``): the plain LLM reading the case bank's
    top-K cases. They read the bank ``cbr`` trained in the same comparison when it is done (no training of their
    own); otherwise they fill their own bank by answering the training set in batches, each answer stored as a case
    with the metric's score as reward. At test time the bank is frozen."""

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        source = _reads(spec.name) or "cbr"
        shared = ctx.out_dir / source
        if (shared / "done").exists() and (shared / MEMORY_DIR / "cbr").is_dir():
            return _reused(source)
        from memento.threads import run_parallel

        ctx.fresh_bank(method_dir)
        program = ctx.build(spec.name, memory_dir=method_dir / MEMORY_DIR, frozen=False)
        trainset = ctx.memory_trainset()
        size = ctx.budget.memory_batch_size
        curve: list[dict[str, Any]] = []
        growth: list[dict[str, Any]] = []

        def run_one(example: dspy.Example) -> float:
            from memento.metrics.as_float import score_of

            inputs = {**ctx.task.inputs(example), "task_id": example_id(example, ctx.task)}
            pred = program(**inputs)
            reward = min(1.0, max(0.0, float(score_of(ctx.metric(example, pred)))))
            program.retain(pred, reward)
            return reward

        for batch, start in enumerate(range(0, len(trainset), size), 1):
            rewards = run_parallel(run_one, trainset[start : start + size], threads=ctx.threads)
            curve.append({"batch": batch, "score": sum(rewards) / len(rewards), "n": len(rewards)})
            growth.append({"batch": batch, "size": program.bank.count(), "unit": "cases"})
        info = {"cases": program.bank.count(), "policy": program.policy}
        program.bank.close()
        return ctx.memory_outcome(trainset, info, curve=curve, growth=growth, k=program.k)

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        memory_dir = method_dir / MEMORY_DIR
        if not (memory_dir / "cbr").is_dir():
            memory_dir = ctx.out_dir / (_reads(spec.name) or "cbr") / MEMORY_DIR
        return ctx.build(spec.name, memory_dir=memory_dir, frozen=True)


_RUNNERS: dict[str, MethodRunner] = {}
_KIND_RUNNERS: dict[str, MethodRunner] = {"program": ProgramRunner(), "optimizer": OptimizerRunner()}


def register_runner(method: str, runner: MethodRunner) -> None:
    """Use ``runner`` for the method named ``method`` (overrides the default runner of its kind)."""
    _RUNNERS[method] = runner


register_runner("memento", MementoRunner())
register_runner("react_memory", MementoRunner())
register_runner("jitmem", JitMemRunner())
register_runner("cbr", CaseBankRunner())
register_runner("closed_book_cases", CaseMemoryRunner())
register_runner("few_shot_cases", CaseMemoryRunner())


def _runner_for(spec: MethodSpec) -> MethodRunner:
    if spec.name in _RUNNERS:
        return _RUNNERS[spec.name]
    if spec.kind in _KIND_RUNNERS:
        return _KIND_RUNNERS[spec.kind]
    raise ConfigError(f"no runner for method {spec.name!r} yet; register one with register_runner()")


# -- phases -------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def method_cache(directory: Path) -> Iterator[None]:
    """Give the enclosed method its own DSPy response cache (memory and disk, in ``directory``).

    DSPy's cache is process-wide and ignores rollout ids at temperature 0: with one cache, a later method would be
    served the earlier methods' identical calls and report 0 LM calls. Each method starts empty (and a resumed
    comparison finds its own cache again); whether caching is on at all follows the current cache.
    """
    previous = dspy.cache
    dspy.configure_cache(
        enable_disk_cache=bool(getattr(previous, "enable_disk_cache", True)),
        enable_memory_cache=bool(getattr(previous, "enable_memory_cache", True)),
        disk_cache_dir=str(directory),
    )
    try:
        yield
    finally:
        with dspy._cache_lock:
            dspy.cache = previous


@contextlib.contextmanager
def _metered(roles: Any) -> Iterator[tuple[UsageMeter, list[float]]]:
    meter = UsageMeter(roles)
    clock = [time.perf_counter(), 0.0]
    with meter:
        try:
            yield meter, clock
        finally:
            clock[1] = time.perf_counter() - clock[0]


def _eval_command(ctx: CompareContext, spec: MethodSpec, method_dir: Path, artefacts: dict[str, str]) -> str:
    """The ``memento eval`` command line that reloads this method's frozen artefact."""
    method = spec.base if spec.kind == "optimizer" else spec.name
    parts = ["memento eval", "--task", ctx.task.name, "--data", "TEST_DATA", "--method", method]
    if "program" in artefacts:
        parts += ["--program", str((method_dir / artefacts["program"]).resolve())]
    if "memory" in artefacts:
        parts += ["--memory", str((method_dir / artefacts["memory"]).resolve())]
    if ctx.settings.web.corpus is not None:
        parts += ["--corpus", str(ctx.settings.web.corpus)]
    jit = ctx.settings.jitmem
    if spec.name == "jitmem" and jit.protocol == "stream":
        parts += ["--jitmem-protocol", "stream", "--orderings", str(jit.orderings), "--stream-batch"]
        parts += [str(jit.stream_batch), "--warm" if jit.warm else "--cold"]
    return " ".join(parts)


def _test_phase(
    ctx: CompareContext, spec: MethodSpec, program: dspy.Module, method_dir: Path, models: dict[str, str]
) -> tuple[list[float], int, dict[str, float], PhaseCost]:
    """Evaluate the reloaded program on the test set; per-example records go to ``method_dir/test/``."""
    from memento.metrics.evaluation import evaluate, write_results

    observer = ctx.observer
    with _metered(ctx.roles) as (meter, clock):
        result = evaluate(
            program,
            ctx.testset,
            ctx.metric,
            threads=ctx.threads,
            roles=ctx.roles,
            task=ctx.task.name,
            method=spec.name,
            seed=ctx.seed,
            progress=None
            if observer is None
            else lambda r: observer.example(spec.name, "test", r.score, bool(r.error)),
        )
    write_results(result, method_dir / "test")
    searches = sum(row.usage.searches for row in result.examples)
    fetches = sum(row.usage.fetches for row in result.examples)
    cost = PhaseCost.from_usage(meter.usage(), wall_seconds=clock[1], searches=searches, fetches=fetches, models=models)
    measures = {k: float(v) for k, v in result.measures.items()}
    return [float(row.score) for row in result.examples], result.errors, measures, cost


def _run_method(
    ctx: CompareContext, spec: MethodSpec, models: dict[str, str], log: Callable[[str], None]
) -> MethodResult:
    method_dir = ctx.out_dir / spec.slug
    done, result_file, train_file = method_dir / "done", method_dir / "result.json", method_dir / "train.json"
    if done.exists() and result_file.exists():
        log(f"{spec.name}: already done, not rerun")
        finished = MethodResult.model_validate_json(result_file.read_text(encoding="utf-8"))
        if ctx.observer is not None:
            ctx.observer.method_done(finished, method_dir)
        return finished
    method_dir.mkdir(parents=True, exist_ok=True)
    runner = _runner_for(spec)
    record = MethodResult(method=spec.name, kind=spec.kind, base=spec.base, started_at=utcnow())
    record.budgets = ctx.budget.for_method(spec.optimizer or ("memory" if spec.kind == "memory" else ""))
    record.example_ids = [example_id(ex, ctx.task) for ex in ctx.testset]
    phase = "train"
    try:
        if train_file.exists():
            trained = MethodResult.model_validate_json(train_file.read_text(encoding="utf-8"))
            record.costs.train, record.budgets, record.info = trained.costs.train, trained.budgets, trained.info
            record.curve, record.growth, record.artefacts = trained.curve, trained.growth, trained.artefacts
            log(f"{spec.name}: training already finished, testing the saved artefact")
        else:
            log(f"{spec.name}: training")
            if ctx.observer is not None:
                ctx.observer.phase(spec.name, "train", None)
            try:
                with _metered(ctx.roles) as (meter, clock):
                    outcome = runner.train(ctx, spec, method_dir)
            finally:  # a crashed training phase still reports what it spent
                record.costs.train = PhaseCost.from_usage(meter.usage(), wall_seconds=clock[1], models=models)
            record.costs.train.searches, record.costs.train.fetches = outcome.searches, outcome.fetches
            if outcome.budget:  # the budget as applied (after clamping) replaces the nominal one
                record.budgets = dict(outcome.budget)
            record.info, record.curve, record.growth = outcome.info, outcome.curve, outcome.growth
            record.artefacts = dict(outcome.artefacts)
            record.artefacts["eval"] = _eval_command(ctx, spec, method_dir, outcome.artefacts)
            atomic_write_text(train_file, record.model_dump_json(indent=2))  # lets a rerun skip training
        phase = "test"
        log(f"{spec.name}: testing on {len(ctx.testset)} examples")
        if ctx.observer is not None:
            ctx.observer.phase(spec.name, "test", len(ctx.testset))
        custom = getattr(runner, "test", None)
        streamed = custom(ctx, spec, method_dir, models) if custom is not None else None
        if streamed is not None:  # a runner with its own test protocol (JitMem's test stream)
            record.scores, record.failed_examples, record.measures, record.costs.test, stream_info = streamed
            record.info = {**record.info, "stream": stream_info}
        else:
            program = runner.load(ctx, spec, method_dir)
            tested = _test_phase(ctx, spec, program, method_dir, models)
            record.scores, record.failed_examples, record.measures, record.costs.test = tested
        record.artefacts["predictions"] = "test/"
        record.status = "done"
        if record.scores and record.failed_examples >= len(record.scores):  # failure is not a score of 0
            record.status = "error"
            record.error = f"test: every example failed ({record.failed_examples} of {len(record.scores)})"
    except (LMUnavailableError, KeyboardInterrupt, Cancelled):
        raise
    except Exception as exc:  # one method's crash is recorded; the comparison goes on
        raise_if_fatal(exc)
        if isinstance(exc, MementoError):
            logger.warning("%s failed in its %s phase: %s", spec.name, phase, exc)
        else:
            logger.exception("%s failed in its %s phase", spec.name, phase)
        record.status = "error"
        record.error = f"{phase}: {error_line(exc)}"
        atomic_write_text(method_dir / "error.txt", "".join(traceback.format_exception(exc)))
    record.finished_at = utcnow()
    atomic_write_text(result_file, record.model_dump_json(indent=2))
    if record.status == "done":
        atomic_write_text(done, record.finished_at.isoformat() + "\n")
    log(f"{spec.name}: {record.status}" + (f" ({record.error})" if record.error else ""))
    if ctx.observer is not None:
        ctx.observer.method_done(record, method_dir)
    return record


# -- aggregation --------------------------------------------------------------------------------------------------
def _summarise(report: CompareReport, seed: int) -> None:
    from memento.metrics.stats import bootstrap_ci, paired_bootstrap

    base = report.methods.get(report.baseline)
    base_scores = dict(zip(base.example_ids, base.scores, strict=False)) if base and base.status == "done" else {}
    totals = report.preprocess.model_copy()
    for name, res in report.methods.items():
        totals = totals.plus(res.costs.total)
        if res.status != "done" or not res.scores:
            res.mean = res.ci_low = res.ci_high = None
            res.vs_baseline = None
            continue
        mean, lo, hi = bootstrap_ci(res.scores, n=1000, seed=seed)
        res.mean, res.ci_low, res.ci_high = float(mean), float(lo), float(hi)
        res.vs_baseline = None
        if base_scores and name != report.baseline:
            pairs = [(s, base_scores[i]) for i, s in zip(res.example_ids, res.scores, strict=False) if i in base_scores]
            if pairs:
                diff, dlo, dhi = paired_bootstrap([a for a, _ in pairs], [b for _, b in pairs], n=1000, seed=seed)
                res.vs_baseline = BaselineDiff(
                    baseline=report.baseline, diff=float(diff), ci_low=float(dlo), ci_high=float(dhi), n=len(pairs)
                )
    report.totals = totals


def _resolve_metric(task: Task, metric: str | Callable[..., Any] | None, roles: Any) -> Callable[..., Any]:
    """The metric to use; a named kind (``None``: the task's default) is a new instance at every call, so each
    method gets its own (a memoising judge shared across methods would make later methods' judge costs smaller)."""
    if callable(metric):
        return metric
    kind = "default" if metric is None else metric
    make = getattr(task, "make_metric", None)
    if make is None:
        if kind == "default":
            return task.metric
        raise ConfigError(f"task {task.name!r} offers no metric {kind!r} (only its default metric)")
    return make(kind, roles=roles)


def _check_overlap(
    trainset: Sequence[dspy.Example], testset: Sequence[dspy.Example], task: Task, log: Callable[[str], None]
) -> None:
    """Refuse a test set that lies wholly inside the training set; warn when they share some examples."""
    train_ids = {example_id(ex, task) for ex in trainset}
    shared = [i for i in (example_id(ex, task) for ex in testset) if i in train_ids]
    if shared and len(shared) == len(testset):
        raise ConfigError(
            f"every test example is also a training example ({len(shared)} of {len(testset)}): the scores would "
            "measure memorisation; give a separate test file or split one file with --data"
        )
    if shared:
        message = f"warning: {len(shared)} of {len(testset)} test examples are also training examples"
        logger.warning("%s", message)
        log(message)


def _check_split(out_dir: Path, split: dict[str, Any]) -> None:
    """Refuse to resume a directory that holds a comparison with another split, task, metric, LM roles or budget
    (finished methods would be reported next to ones run under different conditions)."""
    path = out_dir / "split.json"
    if path.exists():
        previous = json.loads(path.read_text(encoding="utf-8"))
        keys = ("task", "seed", "train_ids", "test_ids", "lm_roles", "metric", "budget")
        changed = [k for k in keys if previous.get(k) != split.get(k)]
        if "method_settings" in previous and previous["method_settings"] != split.get("method_settings"):
            changed.append("[cbr]/[jitmem] settings")
        if changed:
            raise ConfigError(
                f"{out_dir} holds a comparison with a different {', '.join(changed)}; "
                "use another --out directory (or remove it) to start a new comparison"
            )
        return
    atomic_write_text(path, json.dumps(split, indent=2))


def compare(
    task: Task | str,
    methods: str | Sequence[str],
    *,
    out_dir: str | Path,
    settings: Settings | None = None,
    roles: Any = None,
    data: Sequence[dspy.Example] | None = None,
    trainset: Sequence[dspy.Example] | None = None,
    testset: Sequence[dspy.Example] | None = None,
    n_train: int | None = None,
    n_test: int | None = None,
    budget: CompareBudget | str | None = None,
    budget_overrides: dict[str, Any] | None = None,
    baseline: str = "closed_book",
    threads: int | None = None,
    seed: int | None = None,
    metric: str | Callable[..., Any] | None = None,
    progress: Callable[[str], None] | None = None,
    embedder: Any = None,
    observer: CompareObserver | None = None,
    provenance: dict[str, Any] | None = None,
) -> CompareReport:
    """Train and test every method on one split with one metric and write ``results.json``/``results.md``/plots.

    Args:
        task: the task (or its registered name); its metric scores every method unless ``metric`` is given.
        methods: ``"closed_book,aet,gepa:react"`` or a list. The baseline is added when missing.
        out_dir: the comparison directory (created; an existing one is resumed).
        settings: effective settings (LM roles, web, budgets of a research session, threads, seed).
        roles: the LM roles; built from ``settings`` with :func:`memento.lm.configure` when ``None``.
        data: examples to split with ``seed`` into ``n_train``/``n_test``; or give ``trainset`` and ``testset``.
        budget: ``None`` (the ``[compare]`` settings section: its preset and explicit values), a preset name
            (``tiny``/``light``/``medium``: replaces the section's preset) or a :class:`CompareBudget`.
        budget_overrides: explicit budget values applied over the preset (``{"gepa_max_metric_calls": 40}``).
        baseline: the method every other is compared with (paired bootstrap over the test examples).
        threads: evaluation threads (default ``settings.run.threads``).
        seed: split/optimiser/bootstrap seed (default ``settings.run.seed``).
        metric: the metric every method is trained and tested with: ``None`` (the task's), a kind the task offers
            through ``make_metric`` (``"judge"``: an LLM verdict judge under the ``judge_lm`` role; ``"em"``...),
            or a callable ``(example, pred, trace=None, pred_name=None, pred_trace=None) -> Prediction(score,
            feedback)``.
        progress: called with one line per step (the CLI prints them).
        embedder: the text embedder of the memory methods' stores (default: theirs, MiniLM when available).
        observer: follows phases, examples and finished methods (progress bars, MLflow tracking).
        provenance: what produced the comparison (:func:`memento.provenance.provenance`); stored in the report,
            its ``ended_at`` updated when the comparison ends.

    Returns:
        The :class:`CompareReport` that was written to ``out_dir``.

    Raises:
        ConfigError: bad methods, sizes or budget, or a directory holding another comparison.
        LMUnavailableError: the LM cannot be reached (the comparison stops; finished methods stay recorded).
    """
    from memento.lm import configure

    log = progress or (lambda line: logger.info("%s", line))
    settings = settings or Settings()
    seed = settings.run.seed if seed is None else seed
    threads = settings.run.threads if threads is None else threads
    if budget is None or isinstance(budget, str):
        budget = budget_from_settings(settings, budget, budget_overrides)
    elif budget_overrides:
        budget = resolve_budget(budget.preset, {**budget.model_dump(exclude={"preset"}), **budget_overrides})
    specs = parse_methods(methods)
    if baseline not in {s.name for s in specs}:
        specs = [*parse_methods([baseline]), *specs]
    # memento before react_memory, cbr before the case-memory baselines: they read the memory those train
    specs.sort(key=lambda s: 1 if _reads(s.name) else 0)

    if trainset is None or testset is None:
        if data is None:
            raise ConfigError("give either data (to split) or both trainset and testset")
        trainset, testset = split_examples(data, n_train=n_train, n_test=n_test, seed=seed)
    if not trainset or not testset:
        raise ConfigError("the train and test sets must both be non-empty")
    roles = roles if roles is not None else configure(settings, set_default=False)
    # a task named here takes its options in its constructor; a task object passed in keeps its own
    task_obj = get_task(task, roles=roles, threads=threads) if isinstance(task, str) else task
    _check_overlap(trainset, testset, task_obj, log)
    models = role_models(roles)
    # preprocessing (e.g. an LLM PII scrub) happens once, before any method sees an example; its cost is reported
    with dspy.context(lm=getattr(roles, "lm", None) or dspy.settings.lm), _metered(roles) as (meter, clock):
        train = [task_obj.preprocess(ex) for ex in trainset]
        test = [task_obj.preprocess(ex) for ex in testset]
    preprocess_cost = PhaseCost.from_usage(meter.usage(), wall_seconds=clock[1], models=models)
    metric_name = "default" if metric is None else metric if isinstance(metric, str) else ""
    metric_fn = _resolve_metric(task_obj, metric, roles)
    metric_name = f"{task_obj.name}:{metric_name or getattr(metric_fn, '__name__', type(metric_fn).__name__)}"
    from memento.paths import writable_dir

    out = writable_dir(out_dir, what="comparison directory")
    out.mkdir(parents=True, exist_ok=True)
    split = {
        "task": task_obj.name,
        "seed": seed,
        "n_train": len(train),
        "n_test": len(test),
        "train_ids": [example_id(ex, task_obj) for ex in train],
        "test_ids": [example_id(ex, task_obj) for ex in test],
        "lm_roles": models,
        "metric": metric_name,
        "budget": budget.model_dump(),
        "method_settings": {"cbr": settings.cbr.model_dump(), "jitmem": settings.jitmem.model_dump()},
    }
    _check_split(out, split)
    ctx = CompareContext(
        task=task_obj,
        settings=settings,
        roles=roles,
        metric=metric_fn,
        trainset=train,
        testset=test,
        budget=budget,
        threads=threads,
        seed=seed,
        out_dir=out,
        embedder=embedder,
        observer=observer,
    )
    report = CompareReport(
        task=task_obj.name,
        metric=metric_name,
        higher_is_better=task_obj.higher_is_better,
        baseline=baseline,
        seed=seed,
        split={k: split[k] for k in ("n_train", "n_test", "train_ids", "test_ids")},
        lm_roles=models,
        budget=budget.model_dump(),
        preprocess=preprocess_cost,
        provenance=provenance,
    )
    with dspy.context(lm=getattr(roles, "lm", None) or dspy.settings.lm):
        for spec in specs:
            # each method gets its own metric instance: judge memos never carry one method's verdicts to another
            method_ctx = (
                ctx if callable(metric) else dataclasses.replace(ctx, metric=_resolve_metric(task_obj, metric, roles))
            )
            with method_cache(out / spec.slug / "lm-cache"):
                report.methods[spec.name] = _run_method(method_ctx, spec, models, log)
            _summarise(report, seed)
            write_report(report, out, plots=False)  # after every method: a crash later keeps what is done
    report.created_at = dt.datetime.now(dt.UTC)
    if report.provenance is not None:
        report.provenance = {**report.provenance, "ended_at": report.created_at.isoformat()}
    _summarise(report, seed)
    write_report(report, out)
    return report
