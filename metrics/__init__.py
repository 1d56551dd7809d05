"""memento.metrics: DSPy metrics returning ``dspy.Prediction(score, feedback)``, LLM judges, statistics and
evaluation."""

from memento.metrics.answer_match import AnswerMatch, exact_match, token_f1
from memento.metrics.as_float import as_float
from memento.metrics.coverage_judge import CoverageJudge
from memento.metrics.distribution import DistributionMetric, kl_divergence, repair_distribution, total_variation
from memento.metrics.evaluation import EvalResult, evaluate, write_results
from memento.metrics.judge import JudgeError, LLMJudge, as_data
from memento.metrics.stats import bootstrap_ci, judge_agreement, paired_bootstrap
from memento.metrics.success import succeeded
from memento.metrics.verdict_judge import VerdictJudge

__all__ = [
    "AnswerMatch",
    "CoverageJudge",
    "DistributionMetric",
    "EvalResult",
    "JudgeError",
    "LLMJudge",
    "VerdictJudge",
    "as_data",
    "as_float",
    "bootstrap_ci",
    "evaluate",
    "exact_match",
    "judge_agreement",
    "kl_divergence",
    "paired_bootstrap",
    "repair_distribution",
    "succeeded",
    "token_f1",
    "total_variation",
    "write_results",
]
