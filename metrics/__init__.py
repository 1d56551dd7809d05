"""memento.metrics: DSPy metrics returning ``dspy.Prediction(score, feedback)``, LLM judges, statistics and
evaluation.

Its public names are imported on first use (:mod:`memento.utils.lazy_exports`): importing one module of the package does
not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memento.metrics.answer_match import AnswerMatch, exact_match, token_f1
    from memento.metrics.as_float import as_float
    from memento.metrics.behaviour import behaviour_of, summarize_behaviour
    from memento.metrics.coverage_judge import CoverageJudge
    from memento.metrics.distribution import DistributionMetric, kl_divergence, repair_distribution, total_variation
    from memento.metrics.eval_journal import EvalJournal
    from memento.metrics.evaluation import EvalResult, evaluate, write_results
    from memento.metrics.judge import JudgeError, LLMJudge, as_data
    from memento.metrics.stats import bootstrap_ci, judge_agreement, paired_bootstrap
    from memento.metrics.success import succeeded
    from memento.metrics.verdict_judge import VerdictJudge

_HOMES: dict[str, str] = {
    "AnswerMatch": "answer_match",
    "exact_match": "answer_match",
    "token_f1": "answer_match",
    "as_float": "as_float",
    "behaviour_of": "behaviour",
    "summarize_behaviour": "behaviour",
    "CoverageJudge": "coverage_judge",
    "DistributionMetric": "distribution",
    "kl_divergence": "distribution",
    "repair_distribution": "distribution",
    "total_variation": "distribution",
    "EvalJournal": "eval_journal",
    "EvalResult": "evaluation",
    "evaluate": "evaluation",
    "write_results": "evaluation",
    "JudgeError": "judge",
    "LLMJudge": "judge",
    "as_data": "judge",
    "bootstrap_ci": "stats",
    "judge_agreement": "stats",
    "paired_bootstrap": "stats",
    "succeeded": "success",
    "VerdictJudge": "verdict_judge",
}

__all__ = [
    "AnswerMatch",
    "CoverageJudge",
    "DistributionMetric",
    "EvalJournal",
    "EvalResult",
    "JudgeError",
    "LLMJudge",
    "VerdictJudge",
    "as_data",
    "as_float",
    "behaviour_of",
    "bootstrap_ci",
    "evaluate",
    "exact_match",
    "judge_agreement",
    "kl_divergence",
    "paired_bootstrap",
    "repair_distribution",
    "succeeded",
    "summarize_behaviour",
    "token_f1",
    "total_variation",
    "write_results",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
