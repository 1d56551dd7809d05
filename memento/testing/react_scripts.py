"""Scripts of a ReAct agent's tool steps for a :class:`~memento.testing.scripted_engine.ScriptedEngine`: which step a
call is, search then scrape, search-read-finish over an offline corpus.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from memento.testing.scripted_engine import ScriptedCall, ScriptedEngine

__all__ = ["react_steps_done", "is_react_step", "script_search_then_scrape", "script_search_read_finish"]


def react_steps_done(call: ScriptedCall) -> int:
    """How many tool observations a ReAct call's trajectory holds (the adapter renders them as input fields)."""
    return sum(1 for key in call.inputs if key.startswith("observation_"))


def is_react_step(call: ScriptedCall, n: int | None = None) -> bool:
    """A ReAct tool-step call (optionally: the ``n``-th step of its agent, counted from 0)."""
    return "next_tool_name" in call.output_fields and (n is None or react_steps_done(call) == n)


def script_search_then_scrape(engine: ScriptedEngine, url: str) -> None:
    """Script every ReAct agent to search the web for its question, then scrape ``url`` (later steps: unscripted)."""
    engine.when(
        predicate=lambda c: is_react_step(c, 0),
        next_tool_name="search_web",
        next_tool_args=lambda c: {"query": c.inputs["question"]},
    )
    engine.when(predicate=lambda c: is_react_step(c, 1), next_tool_name="scrape", next_tool_args={"url": url})


_CORPUS_URL = re.compile(r"corpus://[\w-]+")


def script_search_read_finish(engine: ScriptedEngine, query: Callable[[ScriptedCall], str]) -> None:
    """Script every ReAct agent to search ``query(call)``, read the first offline-corpus result (``corpus://...``)
    when there is one, then finish; the rule takes precedence only over rules added after it.

    Example:
        >>> engine = ScriptedEngine()
        >>> script_search_read_finish(engine, lambda c: c.inputs.get("question", ""))
    """

    def step(call: ScriptedCall) -> str:
        if "observation_0" not in call.inputs:
            return "search_web"
        if "observation_1" not in call.inputs and _CORPUS_URL.search(call.inputs["observation_0"]):
            return "scrape"
        return "finish"

    def args(call: ScriptedCall) -> dict[str, Any]:
        name = step(call)
        if name == "search_web":
            return {"query": query(call)}
        match = _CORPUS_URL.search(call.inputs.get("observation_0", "")) if name == "scrape" else None
        return {"url": match.group(0)} if match else {}

    engine.when(predicate=is_react_step, next_tool_name=step, next_tool_args=args, next_thought="look it up")
