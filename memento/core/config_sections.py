"""The sections of the settings, one model each: LM roles, budgets, web, memory, CBR, JitMem, trainer, baselines,
compare budgets, run, observe and the local model. :class:`memento.core.config.Settings` holds one of each.

Example:
    >>> from memento.core.config_sections import SECTIONS, Budgets
    >>> SECTIONS["budgets"] is Budgets
    True
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from memento.core.errors import ConfigError
from memento.memory.location import DirectoryLocation, MemoryLocation

# fmt: off
__all__ = [
    "SECTIONS", "ROLES", "LMRole", "Budgets", "WebSettings", "MemorySettings", "CBRSettings", "JitMemSettings",
    "TrainerSettings", "BaselineSettings", "BudgetPreset", "COMPARE_PRESETS", "CompareBudget", "RunSettings",
    "ObserveSettings", "LocalSettings",
]
# fmt: on


ROLES: tuple[str, ...] = ("lm", "judge_lm", "reflection_lm", "curator_lm", "planner_lm")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


_INHERITED = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "num_retries",
    "cache",
    "max_concurrency",
    "requests_per_minute",
    "structured_outputs",
    "deadline",
)


class LMRole(_Section):
    """One LM role. Unset fields of a role other than ``lm`` are taken from ``lm``.

    A role without a model is ``lm`` entirely. A role with its own model keeps its own endpoint, except that a
    role of the same provider as ``lm`` with no ``api_base`` of its own is served at ``lm``'s ``api_base`` with
    ``lm``'s key (``--lm openai/a --judge-lm openai/b --api-base URL``: both on that server).
    """

    model: str | None = None
    api_base: str | None = None
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    api_key_env: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)  # nucleus sampling
    top_k: int | None = Field(default=None, ge=1)  # sent only to servers that accept it (not OpenAI's own API)
    max_tokens: int | None = Field(default=None, ge=1)
    num_retries: int | None = Field(default=None, ge=0, le=20)
    cache: bool | None = None
    max_concurrency: int | None = Field(default=None, ge=1)  # LM requests of this role in flight, whole process
    requests_per_minute: float | None = Field(default=None, gt=0)  # optional rate limit of this role
    # how replies are structured (memento.llm.structured_adapter): auto (JSON adapter; the signature's JSON schema for
    # a model behind an api_base or a local one, the provider's word otherwise) | schema | json | off (ChatAdapter)
    structured_outputs: Literal["auto", "schema", "json", "off"] | None = None
    # the model's context window in tokens (own to a model, never inherited): tells the paper memory profile how
    # much fits (a quarter per store, [memory] paper_max_tokens when unset)
    context_tokens: int | None = Field(default=None, ge=256)
    # seconds one LM call of this role may take, retries included (None: 600); a local model's engine honours it too
    deadline: float | None = Field(default=None, gt=0)

    def secret(self) -> str | None:
        """The API key: the explicit one, else the variable named by ``api_key_env``; never logged."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env:
            return os.environ.get(self.api_key_env)
        return None


class Budgets(_Section):
    """Hard limits of one research session (MEMENTO Table 10 defaults)."""

    initial_questions: int = Field(default=5, ge=1)
    total_questions: int = Field(default=24, ge=1)
    steps_per_question: int = Field(default=10, ge=1)
    exploration: int = Field(default=0, ge=0)
    # reflection may stop before total_questions once every element the answer needs is sourced (off: MEMENTO
    # explores until the question budget is spent)
    stop_early: bool = False


class WebSettings(_Section):
    """Search backend and fetcher options."""

    backend: Literal["auto", "offline", "ddgs", "searxng"] = "auto"
    corpus: Path | None = None
    searxng_url: str | None = None
    max_concurrent_searches: int = Field(default=8, ge=1)
    max_concurrent_fetches: int = Field(default=4, ge=1)
    user_agent: str = "memento-dspy/0.1 (research agent; +https://pypi.org/project/memento-dspy/)"
    cache_dir: Path = Path("~/.cache/memento/web")
    timeout: float = Field(default=20.0, gt=0)
    max_bytes: int = Field(default=5_000_000, ge=1)
    # undated pages, search results and memory items under a cutoff: keep or drop (one policy for all); not set:
    # the task's declared default, else keep (memento.core.dating.resolve_undated; `memento config show` says which)
    undated: Literal["keep", "drop"] | None = None
    allow_private: bool = False  # fetch private/loopback targets (link-local, e.g. 169.254.169.254, only when listed)
    allowed_private_hosts: list[str] = Field(default_factory=list)  # only these private hosts/IPs (no other)
    offline: bool = False  # serve pages only from the URL cache (replay a run without network)
    bm25: Literal["bm25s", "rank_bm25"] = "bm25s"  # offline corpus scoring; rank_bm25: reference, small corpora


def _every_store() -> list[Literal["M1", "M2", "M3", "M4"]]:
    return ["M1", "M2", "M3", "M4"]


class MemorySettings(_Section):
    """Where persistent memory lives and how MEMENTO's dual memory is injected.

    ``profile``: ``budgeted`` (each store injected within its token budget below) or ``paper`` (M1-M3 injected whole,
    as the paper does, within what fits the model's context: ``paper_max_tokens`` per store, a quarter of ``[lm]
    context_tokens`` when that is set; M4 by relevance). ``stores``: the stores that are read and written (MEMENTO
    Table 8 ablation: drop one to mask it).
    """

    # a directory (SQLite) or postgresql://[user@]host[:port]/db (memory/location.py; no password: PGPASSWORD)
    dir: MemoryLocation = DirectoryLocation(Path("memento_memory"))
    profile: Literal["budgeted", "paper"] = "budgeted"
    stores: list[Literal["M1", "M2", "M3", "M4"]] = Field(default_factory=_every_store)
    craft_tokens: int = Field(default=300, ge=0)
    decomposition_tokens: int = Field(default=300, ge=0)
    web_action_tokens: int = Field(default=300, ge=0)
    facts_tokens: int = Field(default=400, ge=0)
    craft_k: int = Field(default=5, ge=1)
    search_k: int = Field(default=5, ge=1)
    paper_max_tokens: int = Field(default=8000, ge=1)  # paper profile: most one store injects ([lm] context_tokens / 4)
    # a task sees only memory items dated strictly before its cutoff; false switches that filter off (to measure
    # leakage: the audit in results then counts what was shown after the cutoff)
    cutoff_filter: bool = True


class CBRSettings(_Section):
    """Memento case-based reasoning: retrieval from the case bank and the Q-gate.

    Training retrieval samples from softmax over the gate's scores (``softmax_over``: ``logit``, softmax(logit(Q) /
    alpha), alpha a temperature; ``q``, softmax(Q / alpha) as Memento's Eq. 7 writes it); test retrieval is greedy Q.
    The gate replaces cosine ranking only after ``min_pairs`` logged (query, case, reward) pairs. ``k = 0`` is the
    paper's "+Planning" rung (the planner reads no case); ``policy = "kernel"`` ranks by the kernel-based episodic Q of
    Eq. 9; ``prefilter = 0`` lets the gate score the whole bank. ``executor_bank`` adds the executor-level bank (tool
    use of past sub-tasks, ``executor_k`` shown per sub-task) and ``capacity`` caps the live cases, evicting the least
    useful.
    """

    k: int = Field(default=4, ge=0)
    policy: Literal["cosine", "q", "softmax", "kernel"] = "q"
    train_policy: Literal["cosine", "q", "softmax", "kernel"] = "softmax"
    alpha: float = Field(default=1.0, gt=0)
    softmax_over: Literal["logit", "q"] = "logit"  # q: softmax(Q/alpha), Memento's Eq. 7 (the paper gives no alpha)
    prefilter: int = Field(default=32, ge=0)  # 0: the whole bank
    min_pairs: int = Field(default=32, ge=0)
    qgate_hidden: int = Field(default=256, ge=1)
    qgate_lr: float = Field(default=1e-3, gt=0)
    max_cycles: int = Field(default=3, ge=1)  # planning cycles per task (plan, execute, replan...)
    passes: int = Field(default=1, ge=1)  # compare's CBR training: passes over the training set (iteration table)
    own_cases: bool = False  # multi-pass only: a task may read its own earlier case
    executor_bank: bool = False  # the executor-level bank (<memory>/cbr_executor): past sub-tasks' tool use
    executor_k: int = Field(default=2, ge=0)  # tool cases shown per sub-task
    capacity: int | None = Field(default=None, ge=1)  # live cases kept at most (least useful evicted); None: no cap


class JitMemSettings(_Section):
    """JitMem: trajectory bank retrieval, the curator's payload and the test protocol.

    The executor's own knobs carry an ``executor_`` prefix (the ``lm`` role serves several methods in one
    comparison): ``executor_temperature`` and ``executor_max_tokens`` (its LM calls), ``executor_history`` (the
    steps of its own trajectory it sees at each step) and ``executor_max_turns`` (its step cap), each unset by
    default (the ``lm`` role's values, the whole trajectory, ``budgets.steps_per_question``). The curator reads
    ``curator_result_chars`` characters of each tool result and ``curator_trajectory_tokens`` tokens of each
    trajectory. Ablations (JitMem's Table 3): ``curator = "blind"`` (the curator never sees the task),
    ``retrieval = false`` (the curator gets no trajectory), ``distill = true`` (write-time distillation: each
    trajectory is summarised when stored). ``train_executor = "base"`` builds the training bank with the executor
    alone (no retrieval, no curator); ``warm_size`` starts each test ordering from a seeded sample of that many
    training trajectories (``warm``); ``staged_refresh`` rebuilds the training bank halfway through
    ``optimize-curator``'s budget with the current curator.
    """

    k: int = Field(default=3, ge=1)
    policy: Literal["success_only", "all_with_labels"] = "success_only"
    executor: str = "react"
    payload_tokens: int = Field(default=2000, ge=1)
    protocol: Literal["frozen", "stream"] = "frozen"
    stream_batch: int = Field(default=10, ge=1)
    orderings: int = Field(default=1, ge=1)
    warm: bool = False
    train_gate: Literal["judge", "ground_truth"] = "judge"  # what admits a training trajectory to the bank
    curator_optimizer: Literal["gepa", "miprov2"] = "gepa"  # `memento optimize-curator`: how the curator is tuned
    curator_budget: int = Field(default=40, ge=1)  # ... its GEPA metric calls / MIPROv2 trials
    bm25: Literal["bm25s", "rank_bm25"] = "bm25s"  # trajectory bank scoring; rank_bm25: reference, small banks
    curator: Literal["task", "blind"] = "task"  # blind: the task-blind curator ablation
    retrieval: bool = True  # False: the no-retrieval ablation (the curator gets no trajectory)
    distill: bool = False  # True: the write-time distiller ablation (stored trajectories are summaries)
    curator_result_chars: int = Field(default=300, ge=0)  # what the curator reads of each tool result
    curator_trajectory_tokens: int = Field(default=1500, ge=64)  # ... and of each trajectory
    train_executor: Literal["jitmem", "base"] = "jitmem"  # base: the training bank is the executor's alone
    warm_size: int | None = Field(default=None, ge=1)  # warm start: a seeded sample of this many trajectories
    staged_refresh: bool = False  # optimize-curator: rebuild the training bank after half the budget
    executor_temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    executor_max_tokens: int | None = Field(default=None, ge=1)
    executor_history: int | None = Field(default=None, ge=1)  # steps of its own trajectory the executor sees
    executor_max_turns: int | None = Field(default=None, ge=1)  # its step cap (default budgets.steps_per_question)


class TrainerSettings(_Section):
    """MEMENTO's training loop (batch size from MEMENTO §4.1; distiller budgets and exploration: docs/architecture.md).

    ``exploration``: exploration steps per training sample (cold start + end of sample, Appendix D.1); the
    test-time budget is ``[budgets] exploration``. ``record_chars`` / ``search_log_chars`` / ``evidence_chars``:
    per-run distiller budgets (a run over budget is summarised, never cut); ``rules_shown_tokens``: current rules
    shown to a rule distiller; ``retire_min_runs``: runs of one batch that must propose removing a rule.
    ``guard``: the memory guard (``memory/memory_guard.py``), on by default; the batch report lists what it rejected.
    """

    batch_size: int = Field(default=10, ge=1)
    # a run succeeded when its score is strictly above this, everywhere: trainer rule credit, CBR SUCCESS/FAILURE and
    # executor-bank labels, JitMem's ground-truth gate, qgate-stats' useful pairs
    success_threshold: float = Field(default=0.5, ge=0.0, lt=1.0)
    max_consecutive_lm_failures: int = Field(default=3, ge=1)
    exploration: int = Field(default=3, ge=0)
    record_chars: int = Field(default=16_000, ge=200)
    search_log_chars: int = Field(default=12_000, ge=200)
    evidence_chars: int = Field(default=6_000, ge=200)
    rules_shown_tokens: int = Field(default=1_500, ge=0)
    retire_min_runs: int = Field(default=2, ge=1)
    summary_input_chars: int = Field(default=48_000, ge=1_000)  # what SummarizeRun reads of an over-budget record
    # the memory guard: reject fixed-answer, meta-instruction and page-copied candidates before any LLM check
    guard: bool = True


class BaselineSettings(_Section):
    """Knobs of the baseline methods: ``few_shot_demos`` labelled demonstrations of ``few_shot`` and
    ``few_shot_cases``, drawn from the training set by ``[run] seed`` (the ReAct family's step cap is
    ``[budgets] steps_per_question``)."""

    few_shot_demos: int = Field(default=5, ge=1)


BudgetPreset = Literal["tiny", "light", "medium"]


#: Budget presets of a comparison (``[compare] preset``): values that differ from the field defaults (``light``).
COMPARE_PRESETS: dict[str, dict[str, Any]] = {
    # A smoke run: minutes on a scripted LM, a handful of real LM calls per example.
    "tiny": {
        "val_fraction": 0.34,
        "gepa_max_metric_calls": 24,
        "gepa_reflection_minibatch_size": 2,
        "mipro_num_candidates": 2,
        "mipro_num_trials": 2,
        "mipro_minibatch_size": 4,
        "mipro_max_bootstrapped_demos": 1,
        "mipro_max_labeled_demos": 1,
        "bootstrap_max_bootstrapped_demos": 1,
        "bootstrap_max_labeled_demos": 2,
        "memory_batch_size": 4,
        "memory_train_limit": 12,
    },
    # Comparable to MIPROv2's and GEPA's own "light" settings on a small set.
    "light": {},
    # The paper's training scale for memory (60 samples in batches of 10) and a larger optimiser budget.
    "medium": {
        "val_fraction": 0.3,
        "gepa_max_metric_calls": 600,
        "gepa_reflection_minibatch_size": 3,
        "mipro_num_candidates": 12,
        "mipro_num_trials": 25,
        "mipro_minibatch_size": 35,
        "mipro_max_bootstrapped_demos": 4,
        "mipro_max_labeled_demos": 4,
        "bootstrap_max_bootstrapped_demos": 4,
        "bootstrap_max_labeled_demos": 16,
        "memory_batch_size": 10,
        "memory_train_limit": 60,
    },
}


class CompareBudget(_Section):
    """The ``[compare]`` section: every learner's budget in one comparison (all reported in ``results.json``).

    ``preset`` (``tiny``, ``light``, ``medium``: :data:`COMPARE_PRESETS`) gives every value not set explicitly (by
    a flag, ``MEMENTO_COMPARE_<FIELD>`` or the TOML file's ``[compare]`` table); explicit values win.

    Attributes:
        preset: the preset the values started from.
        val_fraction: share of the training set the optimisers hold out as their validation set (GEPA's Pareto
            set, MIPROv2's valset); at least one example stays on each side.
        gepa_max_metric_calls: GEPA's total budget of metric calls (program runs scored).
        gepa_reflection_minibatch_size: examples GEPA reflects on per proposal.
        mipro_num_candidates: instruction and few-shot candidates MIPROv2 proposes.
        mipro_num_trials: Bayesian-optimisation trials of MIPROv2.
        mipro_minibatch_size: MIPROv2's minibatch (never larger than its valset; clamped at run time).
        mipro_max_bootstrapped_demos: bootstrapped demos per predictor MIPROv2 may use.
        mipro_max_labeled_demos: labelled demos per predictor MIPROv2 may use.
        bootstrap_max_bootstrapped_demos: BootstrapFewShot's bootstrapped demos per predictor.
        bootstrap_max_labeled_demos: BootstrapFewShot's labelled demos per predictor.
        bootstrap_max_rounds: BootstrapFewShot's rounds of bootstrapping.
        memory_batch_size: training batch size of the memory methods (MEMENTO batches, JitMem stream batches,
            case-bank batches).
        memory_train_limit: at most this many training examples for the memory methods (``None``: all).
    """

    preset: BudgetPreset = "light"
    val_fraction: float = Field(default=0.33, gt=0.0, lt=1.0)
    gepa_max_metric_calls: int = Field(default=150, ge=1)
    gepa_reflection_minibatch_size: int = Field(default=3, ge=1)
    mipro_num_candidates: int = Field(default=6, ge=1)
    mipro_num_trials: int = Field(default=10, ge=1)
    mipro_minibatch_size: int = Field(default=25, ge=1)
    mipro_max_bootstrapped_demos: int = Field(default=2, ge=0)
    mipro_max_labeled_demos: int = Field(default=2, ge=0)
    bootstrap_max_bootstrapped_demos: int = Field(default=4, ge=0)
    bootstrap_max_labeled_demos: int = Field(default=8, ge=0)
    bootstrap_max_rounds: int = Field(default=1, ge=1)
    memory_batch_size: int = Field(default=10, ge=1)
    memory_train_limit: int | None = Field(default=30, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _from_preset(cls, data: Any) -> Any:
        """Values not given explicitly come from the preset."""
        if isinstance(data, dict):
            preset = data.get("preset", "light")
            if preset not in COMPARE_PRESETS:
                raise ValueError(f"unknown budget preset {preset!r}; expected one of {', '.join(COMPARE_PRESETS)}")
            data = {**COMPARE_PRESETS[preset], **data}
        return data

    def split_sizes(self, n_train: int) -> tuple[int, int]:
        """``(optimiser train size, optimiser validation size)`` for a training set of ``n_train`` examples."""
        if n_train < 2:
            raise ConfigError(f"an optimiser needs at least 2 training examples (got {n_train})")
        n_val = min(n_train - 1, max(1, math.ceil(n_train * self.val_fraction)))
        return n_train - n_val, n_val

    def for_method(self, kind: str) -> dict[str, Any]:
        """The budget values that apply to one kind of learner (``gepa``, ``miprov2``, ``bootstrap``, ``memory``)."""
        prefix = {"gepa": "gepa_", "miprov2": "mipro_", "bootstrap": "bootstrap_", "memory": "memory_"}.get(kind)
        if prefix is None:
            return {}
        values = {k: v for k, v in self.model_dump().items() if k.startswith(prefix)}
        if kind in ("gepa", "miprov2"):
            values["val_fraction"] = self.val_fraction
        return values


class RunSettings(_Section):
    """Parallelism, seed, output location and the run preset.

    ``preset``: ``none``, or ``paper``: each method's setup as its paper describes it, for every setting not given
    explicitly (:mod:`memento.core.presets`; ``memento config show --preset paper --method M --task T`` marks its
    values).
    """

    preset: Literal["none", "paper"] = "none"
    threads: int = Field(default=4, ge=1, le=256)  # examples in flight (per node under the Ray executor)
    seed: int = 42
    output_dir: Path = Path("runs")
    # where forward passes run: "threads" (this process) or "ray" (Ray tasks over a cluster; pip install
    # memento-dspy[ray]). ray_address: None starts a local cluster for the command; else an existing cluster
    # ("host:port", "auto", "ray://host:10001"). ray_cpus: logical CPUs of that local cluster.
    executor: Literal["threads", "ray"] = "threads"
    ray_address: str | None = None
    ray_cpus: int = Field(default=8, ge=1, le=1024)
    # seconds LM calls in flight may still finish after Ctrl-C / SIGTERM before the run stops waiting for them
    cancel_grace: float = Field(default=3.0, ge=0, le=60)


class ObserveSettings(_Section):
    """What a run leaves for inspection: the LM call log and MLflow tracking (off by default)."""

    log_lm: Path | None = None  # append one JSON line per LM call to this file (--log-lm)
    replay_lm: Path | None = None  # serve every LM call from this --log-lm file of an earlier run (--replay-lm)
    mlflow: str | None = None  # MLflow tracking URI (--mlflow): file:/path, sqlite:///x.db, http://host:5000
    mlflow_experiment: str = "memento"


class LocalSettings(_Section):
    """Models run in process (``--lm local/<path.gguf>``, ``--lm local``: memento.llm.local_lm, the ``[local]`` extra).

    ``threads``: llama.cpp threads (``None``: half the cores; 1 on a busy machine); ``context``: the context window
    in tokens (0: the model's trained context).
    """

    threads: int | None = Field(default=None, ge=1)
    context: int = Field(default=0, ge=0)


#: each settings section other than the LM roles: its name (TOML table, ``MEMENTO_<SECTION>_`` prefix, field of
#: :class:`memento.core.config.Settings`) and its model
SECTIONS: dict[str, type[_Section]] = {
    "budgets": Budgets,
    "web": WebSettings,
    "memory": MemorySettings,
    "cbr": CBRSettings,
    "jitmem": JitMemSettings,
    "trainer": TrainerSettings,
    "baselines": BaselineSettings,
    "compare": CompareBudget,
    "run": RunSettings,
    "observe": ObserveSettings,
    "local": LocalSettings,
}
