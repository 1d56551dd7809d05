"""RerankResults: LLM reranking of web-search results (a ReAct baseline stage)."""

from __future__ import annotations

import dspy

from memento.signatures._fields import data_input, reads_data

__all__ = ["RerankResults"]


@reads_data
class RerankResults(dspy.Signature):
    """Order web-search results by how likely each page is to answer the query for this task.

    Judge from the title, URL, date and snippet: prefer pages about the exact entity asked for, primary and
    authoritative sources, and snippets that contain the fact sought. Return the result numbers, most useful
    first, leaving out results that are clearly irrelevant."""

    task: str = dspy.InputField(desc="the research task the search serves")
    query: str = dspy.InputField(desc="the search query")
    results: str = data_input("numbered search results: [n] title (date), URL, snippet")
    ranking: list[int] = dspy.OutputField(desc="result numbers, most useful first; irrelevant ones left out")
