"""MEMENTO's learning stages as one ``dspy.Module``: distillers, canonicaliser, M1 relevance check, exploration.

Every LM stage of the learning loop (MEMENTO §3.4-3.5, Appendix D) is a predictor of :class:`MementoLearner`, so
``named_predictors()`` lists them and an optimizer can tune them. The learner is deliberately *not* an attribute of
the research program (:class:`~memento.programs.memento_program.Memento`): optimizers of the program see only the
predictors that appear in its traces. The stores never build predictors; they receive the learner's stages as
plain callables (``memory/`` does not import ``programs/``):

* :meth:`MementoLearner.check` and :meth:`MementoLearner.merge` for the
  :class:`~memento.memory.canonicalizer.Canonicalizer`,
* :meth:`MementoLearner.relevance` for the M1 relevance check of
  :class:`~memento.memory.memento_memory.MemoryView` (run under the agent ``lm``),
* :meth:`MementoLearner.explore` for cold-start and end-of-sample exploration.

Distillation stages run under ``roles.reflection_lm`` (the configured LM when there is none).

Example:
    >>> from memento.programs.memento_learner import MementoLearner
    >>> learner = MementoLearner()
    >>> sorted({name.split(".")[0] for name, _ in learner.named_predictors()})[:3]
    ['assess_coverage', 'check_candidate', 'distill_decomposition']
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import dspy

from memento.core.error_policy import handle_error
from memento.core.untrusted import quote_data, strip_marking
from memento.programs.exploration_agent import ExplorationAgent
from memento.records.usage import NamedPredictors
from memento.signatures.assess_coverage import AssessCoverage
from memento.signatures.check_candidate import CheckCandidate
from memento.signatures.distill_craft_insights import DistillCraftInsights
from memento.signatures.distill_decomposition_rules import DistillDecompositionRules
from memento.signatures.distill_web_rules import DistillWebRules
from memento.signatures.extract_facts import ExtractFacts
from memento.signatures.judge_relevance import JudgeRelevance
from memento.signatures.merge_canonical import MergeCanonical
from memento.signatures.summarize_run import SummarizeRun

__all__ = ["MementoLearner", "LEARNING_STAGES"]

logger = logging.getLogger(__name__)

#: attribute name -> usage stage name of every learning predictor (the exploration agent is ``explore``)
LEARNING_STAGES: dict[str, str] = {
    "distill_insights": "distill_craft",
    "distill_web_rules": "distill_web_rules",
    "extract_facts": "extract_facts",
    "assess_coverage": "assess_coverage",
    "distill_decomposition": "distill_decomposition",
    "summarize_run": "summarize_run",
    "check_candidate": "canonical_check",
    "merge_canonical": "canonical_merge",
    "judge_relevance": "craft_relevance",
}


class MementoLearner(dspy.Module, metaclass=NamedPredictors):
    """The learning stages of MEMENTO as named predictors, with the LM role each one runs under.

    Args:
        roles: LM roles (:class:`memento.llm.lm.Roles`); distillers and canonicaliser use ``reflection_lm``, the
            relevance check and the exploration agent use ``lm``. ``None`` uses the configured LM.
        explore_steps: the exploration agent's hard cap on steps per call.
        max_insights: insights kept per exploration.
    """

    def __init__(self, *, roles: Any = None, explore_steps: int = 3, max_insights: int = 5) -> None:
        super().__init__()
        self.roles = roles
        self.distill_insights = dspy.Predict(DistillCraftInsights)
        self.distill_web_rules = dspy.Predict(DistillWebRules)
        self.extract_facts = dspy.Predict(ExtractFacts)
        self.assess_coverage = dspy.Predict(AssessCoverage)
        self.distill_decomposition = dspy.Predict(DistillDecompositionRules)
        self.summarize_run = dspy.Predict(SummarizeRun)
        self.check_candidate = dspy.Predict(CheckCandidate)
        self.merge_canonical = dspy.Predict(MergeCanonical)
        self.judge_relevance = dspy.Predict(JudgeRelevance)
        for attr, stage in LEARNING_STAGES.items():
            getattr(self, attr).usage_stage = stage
        self.explorer = ExplorationAgent(max_steps=explore_steps, max_insights=max_insights)

    # -- LM roles ----------------------------------------------------------------------------------------
    def _lm(self, role: str) -> Any:
        return getattr(self.roles, role, None) if self.roles is not None else None

    @contextlib.contextmanager
    def reflection(self) -> Iterator[None]:
        """Run the enclosed calls under ``reflection_lm`` (unchanged when no such role is configured)."""
        lm = self._lm("reflection_lm")
        if lm is not None:
            with dspy.context(lm=lm):
                yield
        else:
            yield

    @contextlib.contextmanager
    def agent(self) -> Iterator[None]:
        """Run the enclosed calls under the agent ``lm`` (unchanged when no roles are configured)."""
        lm = self._lm("lm")
        if lm is not None:
            with dspy.context(lm=lm):
                yield
        else:
            yield

    def forward(self, **kwargs: Any) -> dspy.Prediction:
        """Not a pipeline: the trainer and the stores call the stages one by one (see the module docstring)."""
        raise TypeError("MementoLearner is a set of learning stages; call its stages (check, merge, ...) directly")

    # -- stages handed to the stores as callables -----------------------------------------------------------
    def check(self, kind: str, candidate: str, evidence: str) -> tuple[bool, str]:
        """The canonicaliser's correctness/sufficiency check: (accepted, reason); a failing check rejects nothing."""
        try:
            with self.reflection():
                out = self.check_candidate(kind=kind, candidate=quote_data(candidate), evidence=quote_data(evidence))
        except Exception as exc:  # noqa: BLE001 - an unusable check keeps the candidate
            handle_error(exc, where="candidate check (kept)", log=logger)
            return True, "check failed"
        return bool(out.accept), str(out.reason or "")

    def merge(self, kind: str, stored: str, candidate: str) -> tuple[str, str]:
        """The canonicaliser's merge judgement: (``same`` | ``contradicts`` | ``distinct``, merged text)."""
        try:
            with self.reflection():
                out = self.merge_canonical(kind=kind, stored=quote_data(stored), candidate=quote_data(candidate))
        except Exception as exc:  # noqa: BLE001 - an unusable judgement keeps both items
            handle_error(exc, where="canonical merge (kept both)", log=logger)
            return "distinct", ""
        return str(out.verdict), strip_marking(out.merged)

    def relevance(self, task: str, entries: list[str]) -> list[int] | None:
        """The M1 relevance check (agent ``lm``): 1-based numbers of the entries that apply; None when unusable."""
        numbered = "\n".join(f"{i}. {text}" for i, text in enumerate(entries, 1))
        try:
            with self.agent():
                verdict = self.judge_relevance(task=task, entries=quote_data(numbered))
            return [int(i) for i in (verdict.relevant or [])]
        except Exception as exc:  # noqa: BLE001 - a bad judgement keeps the prefilter's choice
            handle_error(exc, where="craft relevance check (prefilter order kept)", log=logger)
            return None

    def explore(self, *, task_kind: str, web: Any, max_steps: int, **recording: Any) -> dspy.Prediction:
        """Exploration (agent ``lm``): ``Prediction(insights, steps)``; never raises except for a fatal LM error.

        ``recording`` (``node_id``, ``record``, ``record_step``) routes its tool calls and steps into the run's
        trajectory (see :meth:`memento.programs.exploration_agent.ExplorationAgent.forward`).
        """
        with self.agent():
            return self.explorer(task_kind=task_kind, web=web, max_steps=max_steps, **recording)

    def summarize(self, task: str, record: str, max_chars: int) -> str:
        """Shorten a run record to ``max_chars`` (reflection LM); raises on failure (the caller records it)."""
        with self.reflection():
            out = self.summarize_run(task=task, run_record=quote_data(record), max_chars=max_chars)
        text = strip_marking(out.summary)
        if not text:
            raise ValueError("empty summary")
        return text
