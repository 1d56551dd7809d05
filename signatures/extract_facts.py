"""Phase A, M4: domain facts extracted from a run's answered sub-questions and their evidence."""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field

from memento.signatures._fields import data_input, reads_data

__all__ = ["ExtractFacts", "FactCandidate"]


class FactCandidate(BaseModel):
    """A fact about one entity, with the URLs it rests on."""

    entity: str = Field(description="the entity the fact is about, by its full common name")
    fact: str = Field(description="one self-contained sentence stating the fact")
    sources: list[str] = Field(default_factory=list, description="URLs of the evidence")


@reads_data
class ExtractFacts(dspy.Signature):
    """You extract durable domain knowledge from a research run. From the answered sub-questions and the
    evidence they cite, list facts that are stated by the evidence and would help answer other questions about
    the same entities: one self-contained sentence per fact, keyed by the entity it is about, with the URLs that
    support it. Skip anything the evidence does not state, anything uncertain, and "not found" / "no data"
    answers."""

    task: str = dspy.InputField(desc="the task that was researched")
    findings: str = data_input("answered sub-questions with their evidence URLs and snippets")
    facts: list[FactCandidate] = dspy.OutputField(desc="facts supported by the evidence")
