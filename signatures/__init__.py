"""memento.signatures: one dspy.Signature class per stage; each docstring is that stage's prompt."""

from memento.signatures.assess_coverage import AssessCoverage
from memento.signatures.check_candidate import CheckCandidate
from memento.signatures.curate_memory import CurateMemory
from memento.signatures.curate_memory_blind import CurateMemoryBlind
from memento.signatures.decompose import Decompose
from memento.signatures.distill_craft_insights import DistillCraftInsights
from memento.signatures.distill_decomposition_rules import DistillDecompositionRules
from memento.signatures.distill_trajectory import DistillTrajectory
from memento.signatures.distill_web_rules import DistillWebRules
from memento.signatures.explore_research_craft import ExploreResearchCraft
from memento.signatures.extract_facts import ExtractFacts
from memento.signatures.final_answer import answer_signature
from memento.signatures.find_case_outcome import FindCaseOutcome
from memento.signatures.judge_coverage import JudgeCoverage
from memento.signatures.judge_relevance import JudgeRelevance
from memento.signatures.judge_success import JudgeSuccess
from memento.signatures.judge_task_reward import JudgeTaskReward
from memento.signatures.judge_verdict import JudgeVerdict
from memento.signatures.merge_canonical import MergeCanonical
from memento.signatures.plan_from_cases import PlanFromCases
from memento.signatures.reflect import Reflect
from memento.signatures.rerank_results import RerankResults
from memento.signatures.rewrite_query import RewriteQuery
from memento.signatures.solve_sub_question import SolveSubQuestion
from memento.signatures.summarize_run import SummarizeRun
from memento.signatures.synthesize_node import SynthesizeNode

__all__ = [
    "AssessCoverage",
    "CheckCandidate",
    "CurateMemory",
    "CurateMemoryBlind",
    "Decompose",
    "DistillCraftInsights",
    "DistillDecompositionRules",
    "DistillTrajectory",
    "DistillWebRules",
    "ExploreResearchCraft",
    "ExtractFacts",
    "FindCaseOutcome",
    "JudgeCoverage",
    "JudgeRelevance",
    "JudgeSuccess",
    "JudgeTaskReward",
    "JudgeVerdict",
    "MergeCanonical",
    "PlanFromCases",
    "Reflect",
    "RerankResults",
    "RewriteQuery",
    "SolveSubQuestion",
    "SummarizeRun",
    "SynthesizeNode",
    "answer_signature",
]
