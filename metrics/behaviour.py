"""How an agent behaved on a task: MEMENTO's Table 8/10 measures, from a trajectory.

The same figures serve the trainer's batch report (:mod:`memento.optimize.batch_report`) and every evaluation
(``results.json``'s ``behaviour``, ``memento eval``'s summary, ``memento compare``'s table):

* ``questions`` — sub-questions asked (tree nodes under the root; a flat agent asks none);
* ``steps`` — tool steps of the agents that answered them (for a flat agent: the steps of its one loop);
* ``searches``, ``unique_urls``, ``repeated_urls`` — web use (a result URL seen again is *repeated*);
* ``scratchpad_chars`` — the size of the per-sample scratchpad: the characters of every sub-question that was
  answered with its answer (what the session memory holds for reflection and ``search_memory``);
* ``memory_items`` — persistent memory items injected into the run (MEMENTO M1-M4: ``injected_memory``).

:func:`summarize_behaviour` aggregates per-run figures: means per sample, and steps per question pooled over every
question (as the paper counts it).

Example:
    >>> from memento.core.types import Node, Trajectory
    >>> t = Trajectory(task_text="t", nodes=[Node(id="root", parent_id=None, wave=-1, question="t"),
    ...     Node(id="q1", parent_id="root", wave=0, question="Who?", answer="Ann", status="answered", steps=3)])
    >>> behaviour_of(t)["steps"], behaviour_of(t)["scratchpad_chars"]
    (3.0, 7.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["BEHAVIOUR_KEYS", "behaviour_of", "summarize_behaviour", "describe_behaviour"]

#: the per-run figures, in display order
BEHAVIOUR_KEYS: tuple[str, ...] = (
    "questions",
    "steps",
    "searches",
    "unique_urls",
    "repeated_urls",
    "scratchpad_chars",
    "memory_items",
)


def behaviour_of(trajectory: Any) -> dict[str, float]:
    """The per-run figures of one trajectory (see the module docstring)."""
    nodes = list(getattr(trajectory, "nodes", None) or [])
    questions = [n for n in nodes if n.parent_id is not None]
    worked = questions or [n for n in nodes if n.steps]  # a flat agent works in its root node
    usage = getattr(trajectory, "usage", None)
    injected = getattr(trajectory, "injected_memory", None) or {}
    answered = [n for n in questions if n.status == "answered"]
    return {
        "questions": float(len(questions)),
        "steps": float(sum(n.steps for n in worked)),
        "searches": float(getattr(usage, "searches", 0) or 0),
        "unique_urls": float(getattr(usage, "unique_urls", 0) or 0),
        "repeated_urls": float(getattr(usage, "repeated_urls", 0) or 0),
        "scratchpad_chars": float(sum(len(n.question) + len(n.answer or "") for n in answered)),
        "memory_items": float(sum(len(ids) for ids in injected.values())),
    }


def summarize_behaviour(rows: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Per-sample means of per-run figures, plus ``steps_per_question`` pooled over every question (``0`` when no run
    asked one); empty when there is no run."""
    rows = [dict(r) for r in rows if r]
    if not rows:
        return {}
    n = len(rows)
    questions = sum(r.get("questions", 0.0) for r in rows)
    out = {
        "questions_per_sample": round(questions / n, 3),
        "steps_per_question": round(sum(r.get("steps", 0.0) for r in rows) / questions, 3) if questions else 0.0,
    }
    for key in BEHAVIOUR_KEYS:
        if key != "questions":
            out[f"{key}_per_sample"] = round(sum(r.get(key, 0.0) for r in rows) / n, 3)
    return out


_LABELS = {
    "questions_per_sample": "questions/sample",
    "steps_per_question": "steps/question",
    "steps_per_sample": "steps/sample",
    "searches_per_sample": "searches/sample",
    "unique_urls_per_sample": "unique URLs/sample",
    "repeated_urls_per_sample": "repeated URLs/sample",
    "scratchpad_chars_per_sample": "scratchpad chars/sample",
    "memory_items_per_sample": "memory items/sample",
}


def describe_behaviour(summary: Mapping[str, float]) -> str:
    """One line of a :func:`summarize_behaviour` summary (``questions/sample 3.0, steps/question 2.5, ...``)."""
    return ", ".join(f"{label} {summary[key]:g}" for key, label in _LABELS.items() if key in summary)
