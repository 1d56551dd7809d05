"""Shared fixture for the MEMENTO trainer tests: a tiny corpus, six multi-hop questions and a scripted LM.

The questions and paragraphs are from HotpotQA (CC BY-SA 4.0), as in ``shared/data/multihop``; the tests build
their own tiny corpus from them. ``make_engine()`` scripts every stage deterministically (outputs depend only on
the prompt), so two runs of the same training produce the same memory counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memento.core.untrusted import strip_marking
from memento.memory.canonicalizer import text_overlap
from memento.testing import ScriptedEngine

DOCS = [
    {
        "doc_id": "paul-clyne",
        "title": "Paul Clyne",
        "text": "Paul Clyne is the District Attorney of Albany County, New York.",
    },
    {
        "doc_id": "david-soares",
        "title": "David Soares",
        "text": "David Soares was District Attorney of Albany County in New York.",
    },
    {"doc_id": "albany", "title": "Albany County", "text": "Albany County is a county in the state of New York."},
    {
        "doc_id": "adam-clayton",
        "title": "Adam Clayton Powell",
        "text": "Adam Clayton Powell was a politician from Harlem, New York.",
    },
    {
        "doc_id": "arthur-penn",
        "title": "Arthur Penn",
        "text": "Arthur Penn was an American director born in Philadelphia.",
    },
    {
        "doc_id": "ed-wood",
        "title": "Ed Wood",
        "text": "Ed Wood was an American filmmaker born in Poughkeepsie, New York.",
    },
]

QUESTIONS = [
    {"id": "q1", "question": "What city does Paul Clyne and David Soares have in common?", "answers": ["New York"]},
    {"id": "q2", "question": "Which state is Albany County in?", "answers": ["New York"]},
    {"id": "q3", "question": "Where was Arthur Penn born?", "answers": ["Philadelphia"]},
    {"id": "q4", "question": "Which city was Adam Clayton Powell from?", "answers": ["New York"]},
    {"id": "q5", "question": "Where was the filmmaker Ed Wood born?", "answers": ["Poughkeepsie"]},
    {"id": "q6", "question": "Are Paul Clyne and David Soares both district attorneys?", "answers": ["yes"]},
]


def write_data(directory: Path) -> tuple[Path, Path]:
    """Write ``corpus.jsonl`` and ``questions.jsonl`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    corpus = directory / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    questions = directory / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return corpus, questions


def _react_step(call: Any) -> str:
    text = call.prompt
    if "observation_0" not in text:
        return "search_web"
    if "observation_1" not in text:
        return "scrape"
    return "finish"


def _react_args(call: Any) -> dict[str, Any]:
    step = _react_step(call)
    if step == "search_web":
        return {"query": call.inputs.get("question", "")[:60]}
    if step == "scrape":
        return {"url": "corpus://albany"}
    return {}


def make_engine(delay: float = 0.0, *, first: list[dict[str, Any]] | None = None) -> ScriptedEngine:
    """A deterministic scripted LM for the whole Memento + trainer pipeline.

    ``first``: extra :meth:`ScriptedEngine.when` keyword sets that take precedence over the defaults.
    """
    engine = ScriptedEngine(delay=delay)
    for rule in first or []:
        engine.when(**rule)
    engine.when(  # the cold-start exploration agent searches until its budget is spent
        predicate=lambda c: "task_kind" in c.inputs and "next_tool_name" in c.output_fields,
        next_tool_name="search_web",
        next_tool_args={"query": "how to research multi-hop questions"},
    )
    engine.when(
        predicate=lambda c: "next_tool_name" in c.output_fields,
        next_tool_name=_react_step,
        next_tool_args=_react_args,
        next_thought="look it up",
    )
    engine.when(
        predicate=lambda c: "sub_questions" in c.output_fields,
        sub_questions=lambda c: [
            "Which U.S. state is the place named in the question in?",
            "Where was the person in the question born?",
        ],
    )
    engine.when(predicate=lambda c: "new_questions" in c.output_fields, new_questions=[], reflection="enough")
    engine.when(
        predicate=lambda c: "answer" in c.output_fields and "research_findings" in c.inputs,
        answer=lambda c: "New York" if ("Albany" in c.inputs.get("question", "") or "Clyne" in c.prompt) else "Paris",
    )
    engine.when(
        predicate=lambda c: "insights" in c.output_fields,
        retire=[],  # the run shows no earlier insight wrong (the scripted default [1] would retire entry 1)
        insights=[
            "Search each named person separately before comparing them.",
            "Open the encyclopedia page of the entity rather than trusting snippets.",
        ],
    )
    engine.when(
        predicate=lambda c: "entries" in c.output_fields and "new_insights" in c.inputs,
        entries=[
            "Search each named person separately before comparing them.",
            "Open the encyclopedia page of the entity rather than trusting snippets.",
        ],
    )
    engine.when(
        predicate=lambda c: "operations" in c.output_fields and "search_log" in c.inputs,
        operations=[
            {"op": "add", "text": "Search the full name of a person in quotes.", "reason": "worked"},
            {"op": "reinforce", "rule": 1, "reason": "worked again"},
        ],
    )
    engine.when(
        predicate=lambda c: "operations" in c.output_fields and "judged_run" in c.inputs,
        operations=[
            {
                "op": "add",
                "text": "When two people are compared, add a sub-question for each person's office.",
                "reason": "missed",
            },
            {"op": "reinforce", "rule": 1, "reason": "helped"},
        ],
    )
    engine.when(
        predicate=lambda c: "facts" in c.output_fields,
        facts=lambda c: [
            {
                "entity": "Albany County",
                "fact": "Albany County is a county in the state of New York.",
                "sources": ["corpus://albany"],
            },
        ],
    )
    engine.when(  # a scripted merge judge: the same item when the two texts share most of their words
        predicate=lambda c: "verdict" in c.output_fields,
        verdict=lambda c: (
            "same"
            if text_overlap(strip_marking(c.inputs["stored"]), strip_marking(c.inputs["candidate"])) >= 0.3
            else "distinct"
        ),
        merged=lambda c: strip_marking(c.inputs["stored"]),
    )
    engine.when(predicate=lambda c: "accept" in c.output_fields, accept=True, reason="supported")
    engine.when(predicate=lambda c: "relevant" in c.output_fields, relevant=[1, 2])
    return engine
