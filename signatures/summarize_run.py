"""Learning: shorten one run's record to fit a distiller's budget, keeping what the distillers learn from."""

from __future__ import annotations

import dspy

from memento.llm.output_schema import limit
from memento.signatures._fields import data_input, reads_data

__all__ = ["SummarizeRun"]


@reads_data
class SummarizeRun(dspy.Signature):
    """You compress the record of one research run so that a memory distiller can read it within its budget.
    Keep, for every sub-question, the question, the answer found (or that none was found), the exact search
    queries issued and which pages were scraped and whether they were used as evidence; merge repeated or
    failed attempts into one line each. Never invent queries, pages or answers, and never drop a sub-question.
    Stay under `max_chars` characters."""

    task: str = dspy.InputField(desc="the task that was researched")
    run_record: str = data_input("the full record of the run, one block per sub-question")
    max_chars: int = dspy.InputField(desc="the maximum length of the summary in characters")
    summary: str = limit(
        dspy.OutputField(desc="the compressed record, one block per sub-question"), max_chars_from="max_chars"
    )
