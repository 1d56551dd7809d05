"""RewriteQuery: LLM query rewriting before a web search (a ReAct baseline stage)."""

from __future__ import annotations

import dspy

__all__ = ["RewriteQuery"]


class RewriteQuery(dspy.Signature):
    """Rewrite a web-search query so that a search engine returns pages that answer it.

    Keep the entities and the fact sought; drop filler words and question phrasing; add the disambiguating terms
    the task implies (a full name, a year, a place, a field). Return one short keyword query, not a sentence and
    not several alternatives."""

    task: str = dspy.InputField(desc="the research task the search serves")
    query: str = dspy.InputField(desc="the query the agent wrote")
    rewritten_query: str = dspy.OutputField(desc="one short keyword query")
