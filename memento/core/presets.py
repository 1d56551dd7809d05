"""Run presets: each method's setup as its paper describes it, in one setting (``[run] preset``, ``--preset``).

``preset = "none"`` (the default) changes nothing. ``preset = "paper"`` gives each method the values its paper
reports, for every setting not given explicitly (a flag, a ``MEMENTO_...`` variable or the TOML file: explicit values
win). What a preset sets depends on the method and, for MEMENTO's test-time exploration, on the task, so it is applied
where both are known: :func:`apply_preset` (the registry's :func:`~memento.programs.registry.build_program`, each
command once it knows the method, and ``memento compare`` per method). ``memento config show --preset paper --method M
--task T`` prints the result with each value the preset set marked ``preset paper``. The run preset is apart from
``memento compare``'s budget preset (``--budget``: how much each learner may spend) and from ``[memory] profile``
(which the MEMENTO paper preset sets to ``paper``).

The values (each with where the paper says it: :data:`PAPER`):

* MEMENTO (2605.29795; methods ``memento``, ``aet``, the ReAct family, ``closed_book``, ``few_shot`` and their memory
  variants): 5 initial and 24 total sub-questions of at most 10 steps, the ``paper`` injection profile, training
  batches of 10, test-time exploration 0 for sales and 3 for legal (read-only: test memory is frozen).
* Memento (2508.16153; ``cbr``, ``closed_book_cases``, ``few_shot_cases``): K = 4 cases, sampled from softmax(Q/α)
  as Eq. 7 writes it. The paper gives no α: the default (1.0) is kept.
* JitMem (2609.27334, Appendix A; ``jitmem``): the stream protocol, batches of 10, k = 3, 3 orderings, warm start
  from a seeded sample of 100 training trajectories, the training bank built by the executor alone and gated by
  ground truth, executor temperature 1.0 with at most 4,096 output tokens, a history window of 3 and 30 turns, the
  curator at temperature 0.6 with top-p 0.95 and top-k 20 (the open-weights curator; top-k is sent only to servers
  that accept it).

Example:
    >>> from memento.core.config import load_settings
    >>> settings = apply_preset(load_settings(flags={"run": {"preset": "paper"}}), "jitmem", "multihop")
    >>> settings.jitmem.orderings, settings.source_of("jitmem.orderings")
    (3, 'preset paper')
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["Preset", "PRESETS", "PAPER", "family", "preset_values", "apply_preset"]

Preset = Literal["none", "paper"]
PRESETS: tuple[str, ...] = ("none", "paper")

#: the method families of the three papers
_FAMILIES: dict[str, tuple[str, ...]] = {
    "memento_paper": (
        "memento",
        "aet",
        "react",
        "react_memory",
        "react_rewrite",
        "react_rerank",
        "react_rewrite_rerank",
        "closed_book",
        "few_shot",
        "closed_book_memory",
        "few_shot_memory",
    ),
    "memento_cbr": ("cbr", "closed_book_cases", "few_shot_cases"),
    "jitmem": ("jitmem",),
}

_MEMENTO = "MEMENTO (2605.29795)"
_CBR = "Memento (2508.16153)"
_JITMEM = "JitMem (2609.27334), Appendix A"

#: family -> setting -> (value, where the paper says it); the test-time exploration is per task (:func:`preset_values`)
PAPER: dict[str, dict[str, tuple[Any, str]]] = {
    "memento_paper": {
        "budgets.initial_questions": (5, f"{_MEMENTO}: 5 initial sub-questions"),
        "budgets.total_questions": (24, f"{_MEMENTO}: 24 sub-questions in all (about 22-25 observed, Table 8)"),
        "budgets.steps_per_question": (10, f"{_MEMENTO}: 10 steps per sub-question agent (Table 10, run b)"),
        "memory.profile": ("paper", f"{_MEMENTO} §3.4: M1-M3 injected whole, M4 by relevance"),
        "trainer.batch_size": (10, f"{_MEMENTO} §4.1, Tables 15-16: batches of 10 (60 samples, 6 batches)"),
    },
    "memento_cbr": {
        "cbr.k": (4, f"{_CBR}, Table 3: K = 4 retrieved cases"),
        "cbr.softmax_over": ("q", f"{_CBR}, Eq. 7: cases sampled from softmax(Q/alpha) (no alpha given)"),
    },
    "jitmem": {
        "jitmem.protocol": ("stream", f"{_JITMEM}: the test set as a stream, memory grown between batches"),
        "jitmem.stream_batch": (10, f"{_JITMEM}: stream batches of 10 tasks"),
        "jitmem.k": (3, f"{_JITMEM}: k = 3 trajectories retrieved by BM25"),
        "jitmem.orderings": (3, f"{_JITMEM}: mean and std over 3 orderings"),
        "jitmem.warm": (True, f"{_JITMEM}: warm start from training trajectories"),
        "jitmem.warm_size": (100, f"{_JITMEM}: warm start of 100 training trajectories (seeded sample)"),
        "jitmem.train_executor": ("base", f"{_JITMEM}: the training bank built by the base executor (no curator)"),
        "jitmem.train_gate": ("ground_truth", f"{_JITMEM}: training trajectories gated by ground truth"),
        "jitmem.executor_temperature": (1.0, f"{_JITMEM}: executor temperature 1.0"),
        "jitmem.executor_max_tokens": (4096, f"{_JITMEM}: executor maximum output 4,096 tokens"),
        "jitmem.executor_history": (3, f"{_JITMEM}: executor history window 3"),
        "jitmem.executor_max_turns": (30, f"{_JITMEM}: executor 30 turns"),
        "curator_lm.temperature": (0.6, f"{_JITMEM}: curator temperature 0.6 (open-weights curator)"),
        "curator_lm.top_p": (0.95, f"{_JITMEM}: curator top-p 0.95"),
        "curator_lm.top_k": (20, f"{_JITMEM}: curator top-k 20 (sent only to servers that accept it)"),
    },
}

#: MEMENTO's test-time exploration, per task (the paper sets it for these two only)
_EXPLORATION: dict[str, tuple[int, str]] = {
    "sales": (0, f"{_MEMENTO}, task notes: no test-time exploration on sales"),
    "legal": (3, f"{_MEMENTO}, task notes: 3 test-time exploration steps on legal, no write-back"),
}


def family(method: str) -> str | None:
    """The paper family of a method (``gepa:aet`` counts as ``aet``), or ``None`` for a method no paper describes."""
    base = method.split(":", 1)[1] if ":" in method else method
    return next((name for name, methods in _FAMILIES.items() if base in methods), None)


def preset_values(preset: str, method: str, task: str | None = None) -> dict[str, tuple[Any, str]]:
    """What ``preset`` sets for ``method`` on ``task``: ``{dotted setting: (value, where the paper says it)}``."""
    if preset not in PRESETS:
        from memento.core.errors import ConfigError

        raise ConfigError(f"unknown run preset {preset!r}; expected one of {', '.join(PRESETS)}")
    name = family(method)
    if preset == "none" or name is None:
        return {}
    values = dict(PAPER[name])
    if name == "memento_paper" and task in _EXPLORATION:
        values["budgets.exploration"] = _EXPLORATION[task]
    return values


def apply_preset(settings: Any, method: str, task: str | None = None) -> Any:
    """``settings`` with the run preset's values for ``method`` (and ``task``) in every setting not given explicitly;
    the same object when the preset sets nothing. The values it set report ``preset <name>`` as their source
    (:meth:`memento.core.config.Settings.source_of`). Applying it twice changes nothing more."""
    preset = settings.run.preset
    values = {
        key: value
        for key, (value, _where) in preset_values(preset, method, task).items()
        if settings.source_of(key) == "default"
    }
    if not values:
        return settings
    out = settings.model_copy(deep=True)
    sources = dict(settings._sources)
    for key, value in values.items():
        section, field = key.split(".", 1)
        setattr(getattr(out, section), field, value)
        sources[key] = f"preset {preset}"
    out._sources = sources
    return out
