"""FindCaseOutcome: the legal leakage filter's web agent (MEMENTO §4.1): can the web before the cutoff tell how a
Supreme Court case was decided?"""

from __future__ import annotations

from typing import Literal

import dspy

from memento.signatures._fields import reads_data

__all__ = ["FindCaseOutcome"]


@reads_data  # the pages and search results it reads arrive as quoted data (BoundReAct quotes every observation)
class FindCaseOutcome(dspy.Signature):
    """Find out whether the web already tells how a United States Supreme Court case was decided. You are given a
    neutral statement of the case's facts, with the parties' names replaced ("the petitioner" brought the case to
    the Supreme Court, "the respondent" is the other party), and web tools that show only pages published before
    the cutoff date.

    Search for this very case: its distinctive facts, the lower courts, the legal question, the likely names of the
    parties. Open the pages that look like reports of this case. Report the Supreme Court's decision only if a page
    you read states how the Supreme Court decided this case: copy the sentence that says so, word for word, and give
    that page's URL. A prediction, an argument, a lower court's ruling or a decision in another case is not the
    outcome. Do not answer from memory or by guessing: if no page you read states the Supreme Court's decision in
    this case, answer that it was not found."""

    facts: str = dspy.InputField(desc="the case facts, party names replaced by role placeholders")
    cutoff: str = dspy.InputField(desc="the date before which every page you can see was published")
    found: bool = dspy.OutputField(desc="true only if a page you read states the Supreme Court's decision in this case")
    winning_party: Literal["petitioner", "respondent", "unknown"] = dspy.OutputField(
        desc="the party the Supreme Court ruled for, as that page states it; unknown when not found"
    )
    disposition: str = dspy.OutputField(desc="what the Court did with the lower court's judgment, as the page says")
    quote: str = dspy.OutputField(desc="the page's sentence stating the decision, copied word for word; empty if none")
    source: str = dspy.OutputField(desc="the URL of the page the quote is from; empty if none")
