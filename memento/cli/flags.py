"""The flags that set a setting, each defined once: its option (name, type, help) and the ``section.field`` it sets.

:data:`FLAGS` (by parameter name) and :data:`GROUPS` (flags that travel together) are read by the commands
(:func:`memento.cli.commands._options.with_flags`) and by :func:`memento.core.config.load_settings`, which takes a
flag's name for the setting it sets (``load_settings(flags={"corpus": ...})``).

Example:
    >>> from memento.cli.flags import FLAGS
    >>> FLAGS["corpus"].target
    'web.corpus'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from memento.core.config_sections import SECTIONS

__all__ = ["ConfigOpt", "CorpusOpt", "Flag", "FLAGS", "GROUPS"]


# -- two options the flags below use --------------------------------------------------------------------------------
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML settings file (default: ./memento.toml).")]


CorpusOpt = Annotated[
    Path | None, typer.Option("--corpus", help="Offline corpus: an index directory or a JSONL source (the local web).")
]


def _default(section: str, field: str) -> Any:
    """A setting's default value, for a flag's help (the help stays true when the default changes)."""
    return SECTIONS[section].model_fields[field].default


def _stores(value: str) -> list[str]:
    return [name.strip().upper() for name in value.split(",") if name.strip()]


# -- flags that set a setting ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Flag:
    """One CLI option and the setting it sets.

    Attributes:
        name: the command parameter's name.
        annotation: ``Annotated[type, typer.Option(...)]``.
        target: ``section.field`` it sets (``None``: read by :meth:`Flags.settings` itself, ``--config``).
        default: the parameter's default (``None``: unset, the lower layers hold).
        convert: turns the flag's value into the setting's (``--stores M1,M3`` -> ``["M1", "M3"]``).
    """

    name: str
    annotation: Any
    target: str | None = None
    default: Any = None
    convert: Callable[[Any], Any] | None = None

    def option_names(self) -> list[str]:
        """The option's names (``["--warm", "--cold"]``); in ``Annotated``, typer keeps them in ``default``."""
        option = self.annotation.__metadata__[0]
        decls = [option.default, *option.param_decls] if isinstance(option.default, str) else option.param_decls
        return [name for decl in decls for name in str(decl).split("/")]


def _flag(
    name: str, kind: Any, target: str, help: str, *, decl: str | None = None, convert: Any = None, **opts: Any
) -> Flag:
    """A :class:`Flag` setting ``target``: an option of type ``kind | None`` (unset: ``None``) named ``decl``
    (default ``--<name with dashes>``)."""
    option = typer.Option(decl or "--" + name.replace("_", "-"), help=help, **opts)
    return Flag(name, Annotated[kind | None, option], target, convert=convert)


_POLICIES = Literal["cosine", "q", "softmax", "kernel"]


_FLAGS: tuple[Flag, ...] = (
    Flag("config", ConfigOpt),
    _flag("lm", str, "lm.model", "Agent model, e.g. openai/gpt-4o-mini (env MEMENTO_LM)."),
    _flag("api_base", str, "lm.api_base", "API base of the agent model (any OpenAI-compatible server)."),
    _flag("judge_lm", str, "judge_lm.model", "Judge model (default: the agent model)."),
    _flag(
        "structured_outputs",
        Literal["auto", "schema", "json", "off"],
        "lm.structured_outputs",
        "Replies as JSON: auto (the signature's JSON schema for a model behind --api-base or a local one), schema, "
        "json (JSON mode), off (DSPy's ChatAdapter). Every role inherits it.",
    ),
    _flag(
        "preset",
        Literal["none", "paper"],
        "run.preset",
        "Each method's setup as its paper describes it (paper) for every setting not given explicitly (run.preset).",
    ),
    Flag("corpus", CorpusOpt, "web.corpus"),
    _flag("threads", int, "run.threads", "Parallel work: examples evaluated at once (sub-questions for run).", min=1),
    _flag("seed", int, "run.seed", "Split, optimiser and bootstrap seed (run.seed)."),
    _flag(
        "executor",
        Literal["threads", "ray"],
        "run.executor",
        "Where forward passes run: threads (this process) or ray (a Ray cluster; --threads examples per node).",
    ),
    _flag(
        "ray_address",
        str,
        "run.ray_address",
        "--executor ray: an existing cluster (host:port, auto, ray://host:10001); unset: a local one for the command.",
    ),
    _flag("initial_questions", int, "budgets.initial_questions", "Wave-0 budget.", min=1),
    _flag("total_questions", int, "budgets.total_questions", "Sub-question budget.", min=1),
    _flag("steps_per_question", int, "budgets.steps_per_question", "Tool steps per sub-question agent.", min=1),
    _flag(
        "test_exploration",
        int,
        "budgets.exploration",
        f"memento at test time: exploration steps per task, nothing written back (budgets.exploration, "
        f"{_default('budgets', 'exploration')}; the paper's legal setting: 3).",
        min=0,
    ),
    _flag("profile", str, "memory.profile", "MEMENTO memory injection: budgeted (token caps) or paper (M1-M3 whole)."),
    _flag(
        "stores",
        str,
        "memory.stores",
        "MEMENTO stores read and written, e.g. M1,M3,M4 (Table 8 ablation; default all).",
        convert=_stores,
    ),
    _flag(
        "log_lm", Path, "observe.log_lm", "Append one JSON line per LM call (prompt, completion, tokens...) to FILE."
    ),
    _flag(
        "replay_lm",
        Path,
        "observe.replay_lm",
        "Serve every LM call from FILE, the --log-lm file of an earlier run: the same command re-runs offline, "
        "exactly; a call that is not in FILE stops the run.",
    ),
    _flag(
        "mlflow", str, "observe.mlflow", "Track in MLflow at this URI (file:/dir, sqlite:///x.db, http://host:5000)."
    ),
    _flag(
        "batch_size",
        int,
        "trainer.batch_size",
        f"Examples per batch, one version each (trainer.batch_size, {_default('trainer', 'batch_size')}).",
        min=1,
    ),
    _flag(
        "exploration",
        int,
        "trainer.exploration",
        "Exploration steps per training sample: cold start when no M1 entry applies, the rest at the end of the "
        f"sample (trainer.exploration, {_default('trainer', 'exploration')}; at test time: --test-exploration).",
        min=0,
    ),
    _flag(
        "guard",
        bool,
        "trainer.guard",
        "Memory guard: reject fixed-answer, meta-instruction and page-copied candidates before any LLM check "
        f"(trainer.guard, {'on' if _default('trainer', 'guard') else 'off'} by default).",
        decl="--guard/--no-guard",
    ),
    _flag("cbr_k", int, "cbr.k", "CBR: cases retrieved per task (cbr.k, 4; 0: the +Planning rung, no case).", min=0),
    _flag(
        "cbr_policy",
        _POLICIES,
        "cbr.policy",
        "CBR test-time retrieval: cosine, q (greedy Q-gate, default), softmax or kernel (episodic Q, Eq. 9).",
    ),
    _flag(
        "cbr_train_policy",
        _POLICIES,
        "cbr.train_policy",
        "CBR training retrieval (default softmax over the gate's logits).",
    ),
    _flag("cbr_alpha", float, "cbr.alpha", "CBR softmax temperature over the gate's logits.", min=1e-9),
    _flag("cbr_min_pairs", int, "cbr.min_pairs", "CBR: logged pairs before the gate replaces cosine (32).", min=0),
    _flag(
        "cbr_softmax_over",
        Literal["logit", "q"],
        "cbr.softmax_over",
        "CBR softmax sampling over logit(Q)/alpha (default) or Q/alpha (Memento's Eq. 7).",
    ),
    _flag(
        "cbr_prefilter",
        int,
        "cbr.prefilter",
        "CBR: cosine candidates the Q-gate re-ranks (cbr.prefilter, 32; 0: the whole bank).",
        min=0,
    ),
    _flag(
        "cbr_executor_bank",
        bool,
        "cbr.executor_bank",
        "CBR: the executor-level bank (tool use of similar past sub-tasks, in <memory>/cbr_executor).",
        decl="--cbr-executor-bank/--no-cbr-executor-bank",
    ),
    _flag("cbr_executor_k", int, "cbr.executor_k", "CBR: tool cases shown per sub-task (cbr.executor_k, 2).", min=0),
    _flag("cbr_capacity", int, "cbr.capacity", "CBR: keep at most N live cases, evicting the least useful.", min=1),
    _flag("cbr_passes", int, "cbr.passes", "CBR training passes over the same task set, the bank growing (1).", min=1),
    _flag(
        "cbr_own_cases",
        bool,
        "cbr.own_cases",
        "Multi-pass only: a task may read its own earlier case.",
        decl="--cbr-own-cases/--no-cbr-own-cases",
    ),
    _flag(
        "jitmem_protocol",
        Literal["frozen", "stream"],
        "jitmem.protocol",
        "JitMem test protocol: frozen (bank built on train, read-only at test) or stream (bank grows over the test "
        "stream in judge-gated batches).",
    ),
    _flag("orderings", int, "jitmem.orderings", "JitMem stream: seeded orderings of the test stream (1).", min=1),
    _flag(
        "warm",
        bool,
        "jitmem.warm",
        "JitMem stream: start from the training bank (--warm) or empty (--cold).",
        decl="--warm/--cold",
    ),
    _flag(
        "stream_batch", int, "jitmem.stream_batch", "JitMem stream: tasks per batch (jitmem.stream_batch, 10).", min=1
    ),
    _flag("payload_tokens", int, "jitmem.payload_tokens", "JitMem: curator payload budget in tokens (2000).", min=1),
    _flag(
        "jitmem_train_gate",
        Literal["judge", "ground_truth"],
        "jitmem.train_gate",
        "JitMem training bank gate: judge (default) or ground_truth (metric).",
    ),
    _flag(
        "curator_optimizer",
        Literal["gepa", "miprov2"],
        "jitmem.curator_optimizer",
        "optimize-curator: gepa (reflective) or miprov2 (proposals).",
        decl="--optimizer",
    ),
    _flag(
        "curator_budget",
        int,
        "jitmem.curator_budget",
        "optimize-curator: GEPA metric calls / MIPROv2 trials, each running the executor (40).",
        decl="--budget",
        min=1,
    ),
    _flag(
        "staged_refresh",
        bool,
        "jitmem.staged_refresh",
        "optimize-curator: after half the budget, rebuild the training bank with the current curator (into "
        "OUT/memory), hold it fixed and continue.",
        decl="--staged-refresh/--no-staged-refresh",
    ),
    _flag(
        "jitmem_curator",
        Literal["task", "blind"],
        "jitmem.curator",
        "JitMem curator: task (task-conditioned, default) or blind (the task-blind ablation).",
    ),
    _flag(
        "jitmem_retrieval",
        bool,
        "jitmem.retrieval",
        "JitMem: retrieve past trajectories (default) or not (the no-retrieval ablation).",
        decl="--jitmem-retrieval/--no-jitmem-retrieval",
    ),
    _flag(
        "jitmem_distill",
        bool,
        "jitmem.distill",
        "JitMem: summarise each trajectory when it is stored (the write-time distiller ablation).",
        decl="--jitmem-distill/--no-jitmem-distill",
    ),
    _flag(
        "jitmem_train_executor",
        Literal["jitmem", "base"],
        "jitmem.train_executor",
        "JitMem training bank: built by the JitMem agent (default) or the executor alone (base; the metric gates).",
    ),
    _flag("warm_size", int, "jitmem.warm_size", "JitMem --warm: a seeded sample of N training trajectories.", min=1),
    _flag(
        "budget",
        str,
        "compare.preset",
        f"Budget preset of every optimiser and memory method: tiny|light|medium (compare.preset, "
        f"{_default('compare', 'preset')}).",
    ),
    _flag("gepa_max_metric_calls", int, "compare.gepa_max_metric_calls", "GEPA's metric-call budget.", min=1),
    _flag("mipro_num_candidates", int, "compare.mipro_num_candidates", "MIPROv2's candidates.", min=1),
    _flag("mipro_num_trials", int, "compare.mipro_num_trials", "MIPROv2's trials.", min=1),
    _flag("mipro_minibatch_size", int, "compare.mipro_minibatch_size", "MIPROv2's minibatch (<= valset).", min=1),
    _flag(
        "bootstrap_max_demos",
        int,
        "compare.bootstrap_max_bootstrapped_demos",
        "BootstrapFewShot's bootstrapped demos.",
        min=0,
    ),
    _flag("memory_batch_size", int, "compare.memory_batch_size", "The memory methods' training batch size.", min=1),
    _flag(
        "memory_train_limit", int, "compare.memory_train_limit", "The memory methods' training examples at most.", min=1
    ),
)


#: Every flag that sets a setting, by parameter name.
FLAGS: dict[str, Flag] = {flag.name: flag for flag in _FLAGS}


#: Flags that travel together, by group name (a group name may be given to :func:`with_flags`).
GROUPS: dict[str, tuple[str, ...]] = {
    "lm": ("config", "lm", "api_base", "judge_lm", "structured_outputs"),
    "research": ("initial_questions", "total_questions", "steps_per_question"),
    "memory": ("profile", "stores"),
    "observe": ("log_lm", "replay_lm", "mlflow"),
    "executor": ("executor", "ray_address"),
    "trainer": ("batch_size", "exploration", "guard"),
    "cbr": (
        "cbr_k",
        "cbr_policy",
        "cbr_train_policy",
        "cbr_alpha",
        "cbr_softmax_over",
        "cbr_min_pairs",
        "cbr_prefilter",
        "cbr_executor_bank",
        "cbr_executor_k",
        "cbr_capacity",
    ),
    "cbr_training": ("cbr_passes", "cbr_own_cases"),
    "jitmem": (
        "jitmem_protocol",
        "orderings",
        "warm",
        "warm_size",
        "stream_batch",
        "payload_tokens",
        "jitmem_curator",
        "jitmem_retrieval",
        "jitmem_distill",
    ),
    "compare": (
        "budget",
        "gepa_max_metric_calls",
        "mipro_num_candidates",
        "mipro_num_trials",
        "mipro_minibatch_size",
        "bootstrap_max_demos",
        "memory_batch_size",
        "memory_train_limit",
    ),
}
