"""``dspy.ReAct`` with tools bound per call: stable predictors for optimizers, thread-safe per-sample tools.

``dspy.ReAct`` keeps its tools in ``self.tools``, so one module shared by threads cannot give each call its own
tools (each sample has its own web cutoff, session memory and call log). :class:`BoundReAct` builds the ReAct
predictors once, from tool *specifications* (name, description, arguments) that fix the prompt, and takes the
functions implementing those tools as an argument of each call. Nothing shared is mutated per call, so many
threads may run one module at once, and GEPA/MIPROv2 see the same two predictors (``react``, ``extract``) as in
``dspy.ReAct``; ``save``/``load`` work unchanged.

Every observation a bound tool returns (its text, or the error it raised) enters the trajectory as quoted data
(:func:`memento.core.untrusted.quote_data`), and the agent's instructions end with the shared data rule, so a page that
says "ignore your instructions" or carries ``[[ ## completed ## ]]`` is read as data: it can neither instruct the
agent nor open a field of its prompt.

Example:
    >>> import dspy
    >>> from memento.programs.bound_react import BoundReAct, tool_spec
    >>> agent = BoundReAct("question -> answer", [tool_spec("lookup", "Look a word up.", {"word": "string"})], 5)
    >>> pred = agent(question="...", tools={"lookup": lambda word: "..."})  # doctest: +SKIP
    >>> pred.steps, pred.finished  # doctest: +SKIP
    (1, True)
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import dspy
from dspy.adapters.types.tool import Tool
from dspy.utils.exceptions import ContextWindowExceededError, format_error_for_lm

from memento.core.error_policy import handle_error
from memento.core.untrusted import DATA_RULE, has_rule, quote_data, with_rule
from memento.llm.output_schema import SCHEMA_KEY, tool_args_schema

__all__ = ["BoundReAct", "tool_spec", "window", "FINISH", "StepHook"]

logger = logging.getLogger(__name__)

FINISH = "finish"

#: ``f(index, thought, tool_name, tool_args, observation)``, called after every step (e.g. ``Toolbox.step``)
StepHook = Callable[[int, str, str, dict[str, Any], str], None]


def _unbound(name: str) -> Callable[..., str]:
    def call(**kwargs: Any) -> str:
        raise RuntimeError(f"tool {name!r} is not bound for this call")

    return call


def tool_spec(name: str, desc: str, args: dict[str, str]) -> Tool:
    """A tool specification: name, description and JSON types of its arguments (``{"query": "string"}``)."""
    return Tool(
        func=_unbound(name),
        name=name,
        desc=" ".join(desc.split()),
        args={arg: {"type": kind} for arg, kind in args.items()},
        arg_types={arg: str if kind == "string" else Any for arg, kind in args.items()},
    )


@functools.lru_cache(maxsize=512)
def _trajectory_signature(keys: tuple[str, ...]) -> type[dspy.Signature]:
    """The throw-away signature ReAct formats a trajectory with, built once per key layout (pydantic class
    creation costs milliseconds, and ``dspy.ReAct`` rebuilds it at every step)."""
    signature: type[dspy.Signature] = dspy.Signature(f"{', '.join(keys)} -> x")
    return signature


def window(trajectory: dict[str, Any], steps: int | None) -> dict[str, Any]:
    """The last ``steps`` steps of a ReAct trajectory (thought, tool, arguments, observation of each), after a line
    saying how many earlier steps are not shown; the whole trajectory when ``steps`` is None or covers it."""
    indices = sorted({int(key.rsplit("_", 1)[1]) for key in trajectory if key.rsplit("_", 1)[-1].isdigit()})
    if steps is None or len(indices) <= steps:
        return trajectory
    first = indices[-steps]
    kept = {
        k: v for k, v in trajectory.items() if not k.rsplit("_", 1)[-1].isdigit() or int(k.rsplit("_", 1)[1]) >= first
    }
    return {"earlier_steps": f"{len(indices) - steps} earlier steps are not shown (history window {steps})", **kept}


class BoundReAct(dspy.ReAct):
    """A ReAct agent whose tool functions are passed per call (``tools={name: fn}``).

    Args:
        signature: the agent's signature (inputs -> outputs; the docstring is the agent's instructions).
        specs: tool specifications (see :func:`tool_spec`) that fix the tool list in the prompt.
        max_iters: the hard cap on tool steps per call (``finish`` included, as in ``dspy.ReAct``).
        history_window: the steps of its own trajectory the agent sees at each step (``None``: all); earlier ones
            are replaced by one line saying how many are not shown (JitMem's executor history window).

    A call returns the signature's outputs plus ``trajectory`` (the ReAct steps), ``steps`` (tools executed,
    ``finish`` excluded), ``finished`` (whether the agent called ``finish`` within the cap) and ``actions``
    (``(tool, args)`` per step). ``on_step`` (a :data:`StepHook`) is told each step as it completes, so the steps
    of a call that fails later are recorded too. A step the LM answers unparseably raises ``AdapterParseError``
    (the caller decides whether that fails the sub-question).
    """

    def __init__(self, signature: Any, specs: list[Tool], max_iters: int, *, history_window: int | None = None) -> None:
        signature = dspy.ensure_signature(signature)
        name = signature.__name__  # before a derived signature (with_instructions) loses it
        if not has_rule(signature.instructions, DATA_RULE):  # tool observations are quoted data: the agent is told
            signature = signature.with_instructions(with_rule(signature.instructions, DATA_RULE))
        super().__init__(signature, tools=list(specs), max_iters=max_iters)
        self.tool_names: tuple[str, ...] = tuple(name for name in self.tools if name != FINISH)
        # ``next_tool_args`` is typed dict[str, Any]; a schema sent to the model closes it to the tools' arguments
        schema = {SCHEMA_KEY: tool_args_schema(self.tools.values())}
        self.react.signature = self.react.signature.with_updated_fields("next_tool_args", **schema)
        # dspy.ReAct derives both signatures anonymously (``StringSignature``): the step and the extraction are
        # named after the agent's signature, so logs, usage and reports tell them apart
        self.predictor_name = name
        self.react.predictor_name = f"{name}.react"
        self.extract.predict.predictor_name = f"{name}.extract"
        # steps of its own trajectory the agent sees (None: all; JitMem's window is 3); not ``history``, which
        # dspy.Module keeps for its LM call records
        self.history_window = history_window

    def _format_trajectory(self, trajectory: dict[str, Any]) -> str:
        adapter = dspy.settings.adapter or dspy.ChatAdapter()
        shown = window(trajectory, self.history_window)
        text: str = adapter.format_user_message_content(_trajectory_signature(tuple(shown)), shown)
        return text

    def forward(
        self,
        *,
        tools: dict[str, Callable[..., str]],
        max_iters: int | None = None,
        on_step: StepHook | None = None,
        **input_args: Any,
    ) -> dspy.Prediction:
        missing = [name for name in self.tool_names if name not in tools]
        if missing:
            raise ValueError(f"no function bound for tools {missing}")
        limit = self.max_iters if max_iters is None else min(max_iters, self.max_iters)
        trajectory: dict[str, Any] = {}
        actions: list[tuple[str, dict[str, Any]]] = []
        steps = 0
        finished = False
        for idx in range(limit):
            try:
                pred = self._call_with_potential_trajectory_truncation(self.react, trajectory, **input_args)
            except ContextWindowExceededError as err:
                logger.warning("ending the trajectory: %s", format_error_for_lm(err, traceback_frames=1))
                break
            name = pred.next_tool_name
            args = pred.next_tool_args if isinstance(pred.next_tool_args, dict) else {}
            trajectory[f"thought_{idx}"] = pred.next_thought
            trajectory[f"tool_name_{idx}"] = name
            trajectory[f"tool_args_{idx}"] = args
            actions.append((name, args))
            if name == FINISH:
                trajectory[f"observation_{idx}"] = "Completed."
                finished = True
                if on_step is not None:
                    on_step(idx, pred.next_thought, name, args, "Completed.")
                break
            steps += 1
            func = tools.get(name)
            if func is None:
                observation = f"Unknown tool {name!r}; use one of {list(self.tools)}."
                trajectory[f"observation_{idx}"] = observation
            else:
                try:
                    observation = str(func(**args))
                except TypeError as err:
                    observation = f"Execution error in {name}: bad arguments {args}: {err}"
                except Exception as err:  # the agent reads a tool's failure and goes on; a fatal error stops the run
                    handle_error(err, where=f"tool {name}", log=logger)
                    observation = f"Execution error in {name}: {format_error_for_lm(err, traceback_frames=1)}"
                trajectory[f"observation_{idx}"] = quote_data(observation) or "(empty result)"
            if on_step is not None:
                on_step(idx, pred.next_thought, name, args, observation)
        extract = self._call_with_potential_trajectory_truncation(self.extract, trajectory, **input_args)
        return dspy.Prediction(trajectory=trajectory, steps=steps, finished=finished, actions=actions, **extract)
