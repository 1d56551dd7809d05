"""The legal protocol's leakage filter (MEMENTO §4.1): a web agent given a case's facts under its search cutoff.

:class:`LeakageProbe` runs :class:`~memento.signatures.find_case_outcome.FindCaseOutcome` as a tool-using agent
(``search_web``, ``scrape``; no memory) over web tools that show only pages published before the case's cutoff, the
same anonymised facts and cutoff a method sees. It returns what the agent claims (found, the winning party, the
disposition, a quote and its source) and the evidence behind the claim: the page or search result, among those the
agent was actually shown, whose text holds the quote (:func:`quote_support`). :func:`outcome_leaked` applies the
protocol's rule: the exact outcome was retrieved when the agent says it found the decision, names the party that
won, and a page it read holds the quoted sentence. A claim without such a page (an answer from memory, a guess) is
not a retrieval.

Example:
    >>> from memento.programs.leakage_probe import LeakageProbe, outcome_leaked
    >>> probe = LeakageProbe(web=web_tools_factory(settings), max_steps=10)  # doctest: +SKIP
    >>> pred = probe(facts=example.facts, cutoff=example.cutoff)  # doctest: +SKIP
    >>> outcome_leaked(pred, example.winning_party), pred.support  # doctest: +SKIP
    (True, Evidence(url='https://...', published=datetime.date(2012, 3, 1), ...))
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable
from typing import Any

import dspy

from memento.core.errors import ConfigError
from memento.core.types import Evidence, ToolCall
from memento.programs.bound_react import BoundReAct
from memento.programs.toolbox import SCRAPE, SEARCH_WEB, Toolbox, clean_url
from memento.signatures.find_case_outcome import FindCaseOutcome

__all__ = ["LeakageProbe", "outcome_leaked", "quote_support"]

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+")
MIN_QUOTE_WORDS = 4  # a shorter "quote" ("Reversed.") cannot tie a page to this case
QUOTE_MATCH = 0.8  # share of the quote's words that must appear in one unbroken run of the page's words


def _words(text: str) -> list[str]:
    return _WORD.findall(str(text or "").lower())


def _holds(quote: list[str], text: str) -> bool:
    """Whether ``text`` holds the quote: its words in order, allowing small copying slips (a dropped, added or
    changed word): at least :data:`QUOTE_MATCH` of the quote's words match, in order, within one passage of the
    quote's length around the longest run they share."""
    words = _words(text)
    if not words:
        return False
    if f" {' '.join(quote)} " in f" {' '.join(words)} ":
        return True
    anchor = difflib.SequenceMatcher(None, quote, words, autojunk=False).find_longest_match()
    if anchor.size == 0:
        return False
    start = max(0, anchor.b - anchor.a - 3)
    passage = words[start : anchor.b - anchor.a + len(quote) + 3]
    blocks = difflib.SequenceMatcher(None, quote, passage, autojunk=False).get_matching_blocks()
    return sum(block.size for block in blocks) >= QUOTE_MATCH * len(quote)


def quote_support(quote: str, calls: list[ToolCall]) -> Evidence | None:
    """The page (or search result) among ``calls`` whose text holds ``quote``, as evidence; ``None`` when none does
    or the quote is shorter than :data:`MIN_QUOTE_WORDS` words. Pages are checked before snippets.

    Example:
        >>> from memento.core.types import PageResult
        >>> page = PageResult.of_text(url="corpus://d1", title="T", text="The Court reversed the judgment below.")
        >>> quote_support("the Court reversed the judgment", [ToolCall(kind="scrape", page=page)]).url
        'corpus://d1'
    """
    words = _words(quote)
    if len(words) < MIN_QUOTE_WORDS:
        return None
    for call in calls:
        page = call.page
        if page is not None and _holds(words, page.text):
            snippet = _excerpt(page.text, words)
            return Evidence(url=page.address, title=page.title, snippet=snippet, published=page.published)
    for call in calls:
        for hit in call.search.hits if call.search is not None else []:
            if _holds(words, f"{hit.title} {hit.snippet}"):
                return Evidence(url=hit.url, title=hit.title, snippet=hit.snippet[:400], published=hit.published)
    return None


def _excerpt(text: str, quote: list[str], width: int = 400) -> str:
    """The part of ``text`` around the quote's first word run (for the evidence record)."""
    flat = " ".join(str(text).split())
    head = re.search(r"\W+".join(re.escape(w) for w in quote[:3]), flat, re.IGNORECASE)
    start = max(0, head.start() - 100) if head else 0
    return flat[start : start + width]


def outcome_leaked(pred: Any, label: str) -> bool:
    """The protocol's rule: the agent found the decision, it names the party that won (``label``), and a page it
    read holds the quoted sentence (``pred.support``)."""
    return bool(pred.found) and pred.winning_party == label and pred.support is not None


class LeakageProbe(dspy.Module):
    """A web agent asked how a Supreme Court case was decided, shown only pages published before the case's cutoff.

    Args:
        web: a factory ``f(cutoff, undated) -> WebTools`` (:func:`memento.web.factory.web_tools_factory`); the
            undated policy is the settings' (``web.undated``).
        max_steps: tool steps per case (``budgets.steps_per_question`` by default in the CLI).

    A call (``facts=``, ``cutoff=``) returns ``found``, ``winning_party`` (``petitioner``/``respondent``/
    ``unknown``), ``disposition``, ``quote``, ``source`` (what the agent claims), ``support`` (the
    :class:`~memento.core.types.Evidence` whose text holds the quote, or ``None``), ``tool_calls`` and ``steps``.

    Example:
        >>> probe = LeakageProbe(web=web_tools_factory(settings))  # doctest: +SKIP
        >>> probe(facts="The petitioner, a state prisoner, ...", cutoff="2007-01-01").found  # doctest: +SKIP
        False
    """

    def __init__(self, *, web: Callable[..., Any], max_steps: int = 10) -> None:
        super().__init__()
        if max_steps < 1:
            raise ConfigError(f"the leakage agent needs at least one step (max_steps={max_steps})")
        self.web = web
        self.max_steps = max_steps
        self.agent = BoundReAct(FindCaseOutcome, [SEARCH_WEB, SCRAPE], max_iters=max_steps)
        self.agent.usage_stage = "leakage"

    def forward(self, *, facts: str, cutoff: str) -> dspy.Prediction:
        box = Toolbox(self.web(cutoff, None), node_id="leakage")
        pred = self.agent(tools=box.functions(with_memory=False), on_step=box.step, facts=facts, cutoff=cutoff)
        party = str(pred.get("winning_party") or "unknown").strip().lower()
        quote = str(pred.get("quote") or "").strip()
        return dspy.Prediction(
            found=bool(pred.get("found")),
            winning_party=party if party in ("petitioner", "respondent") else "unknown",
            disposition=str(pred.get("disposition") or "").strip(),
            quote=quote,
            source=clean_url(str(pred.get("source") or "")),
            support=quote_support(quote, box.calls),
            tool_calls=list(box.calls),
            steps=int(pred.steps),
            finished=bool(pred.finished),
        )
