"""The optional LLM pass of party-name removal (the paper's procedure), on top of the deterministic replacement.

:class:`PartyNameScrubber` asks a model to remove whatever still identifies the case (nicknames, company
abbreviations, the case's popular name) from facts whose party names were already replaced by placeholders. Its
output is accepted only if it keeps most of the text and passes :func:`memento.tasks.pii.find_leaks`; otherwise
the deterministic version stands. The deterministic replacement runs again on the model's output as a safety net.

Example:
    >>> from memento.tasks.pii_scrub import PartyNameScrubber
    >>> scrubber = PartyNameScrubber()  # doctest: +SKIP
    >>> scrubber(facts=text, first_party="Peter Stanley", second_party="Illinois").facts  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from typing import Any

import dspy

from memento.core.error_policy import handle_error
from memento.tasks.pii import PartyAnonymizer, find_leaks

__all__ = ["ScrubPartyIdentity", "PartyNameScrubber"]

logger = logging.getLogger(__name__)


class ScrubPartyIdentity(dspy.Signature):
    """Rewrite the facts of a court case so that they no longer identify the parties or the case, while keeping
    every legally relevant fact. The parties are already called "the petitioner" and "the respondent": keep those
    placeholders. Replace any remaining name, nickname, abbreviation or acronym of the petitioner or the respondent
    with the matching placeholder, and remove the case's popular name if it appears. Keep the names of courts,
    statutes, government agencies that are not parties, places, and other people. Change nothing else: same
    facts, same order, same wording wherever possible, and do not add any information about how the case ended."""

    facts: str = dspy.InputField(desc="the case facts, party names already replaced")
    party_names: str = dspy.InputField(desc="the original names of the petitioner and the respondent, to remove")
    scrubbed_facts: str = dspy.OutputField(desc="the facts with nothing identifying the parties or the case")


class PartyNameScrubber(dspy.Module):
    """LLM scrub of case facts with deterministic safeguards.

    Args:
        min_ratio: the scrubbed text must keep at least this share of the input's length.
    """

    usage_stage = "scrub_party_names"

    def __init__(self, *, min_ratio: float = 0.6) -> None:
        super().__init__()
        self.min_ratio = min_ratio
        self.scrub = dspy.Predict(ScrubPartyIdentity)

    def forward(self, facts: str, first_party: str, second_party: str) -> dspy.Prediction:
        """Returns ``dspy.Prediction(facts=..., accepted=bool, note=str)``."""
        names = f"petitioner: {first_party}; respondent: {second_party}"
        try:
            reply: Any = self.scrub(facts=facts, party_names=names)
            candidate = str(reply.scrubbed_facts or "").strip()
        except Exception as exc:
            failure = handle_error(exc, where="scrub", log=logger)
            return dspy.Prediction(facts=facts, accepted=False, note=f"scrub failed: {failure.kind}")
        if len(candidate) < self.min_ratio * len(facts):
            return dspy.Prediction(facts=facts, accepted=False, note="scrub dropped too much text; kept the original")
        candidate = PartyAnonymizer(first_party, second_party).anonymize(candidate)
        if find_leaks(candidate, first_party, second_party):
            return dspy.Prediction(facts=facts, accepted=False, note="scrub output still names a party")
        return dspy.Prediction(facts=candidate, accepted=True, note="")
