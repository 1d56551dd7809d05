"""Small fixes found in review: a tool that raises inside BoundReAct, the CBR root answer text."""

from __future__ import annotations

import dspy

from memento.programs.bound_react import BoundReAct, tool_spec
from memento.testing import ScriptedEngine, scripted_lm, seq


def test_bound_react_turns_a_raising_tool_into_an_observation() -> None:
    engine = ScriptedEngine(
        overrides={"next_tool_name": seq("boom", "finish"), "next_tool_args": {"query": "x"}, "answer": "done"}
    )

    def boom(query: str) -> str:
        """Always fails."""
        raise ValueError("tool exploded")

    class Ask(dspy.Signature):
        """Answer."""

        question: str = dspy.InputField()
        answer: str = dspy.OutputField()

    react = BoundReAct(Ask, [tool_spec("boom", "Always fails.", {"query": "string"})], max_iters=3)
    with dspy.context(lm=scripted_lm(engine)):
        out = react(question="q", tools={"boom": boom})
    assert out.answer == "done"
    observation = next(v for k, v in out.trajectory.items() if k.startswith("observation_"))
    assert "Execution error in boom" in observation and "tool exploded" in observation


def test_cbr_root_answer_is_readable_text() -> None:
    from memento.programs.case_rendering import render_outputs as _render_outputs

    assert _render_outputs({"answer": "Paris"}) == "Paris"
    assert _render_outputs({"winning_party": "petitioner", "disposition": "reversed"}) == (
        "winning_party: petitioner\ndisposition: reversed"
    )
