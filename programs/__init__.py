"""memento.programs: the research programs (dspy.Modules) — AET, its sub-question agent, baselines, Memento,
the case-based agent and JitMem — and the method registry."""

from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.programs.baselines import ClosedBook, FewShot
from memento.programs.case_based_agent import CaseBasedAgent
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator
from memento.programs.memento_learner import MementoLearner
from memento.programs.memento_program import Memento
from memento.programs.react_agent import ReActAgent
from memento.programs.registry import build_program, method_names, register_method
from memento.programs.research_program import ResearchProgram
from memento.programs.sub_question_agent import SubQuestionAgent

__all__ = [
    "AdaptiveExplorationTree",
    "CaseBasedAgent",
    "ClosedBook",
    "FewShot",
    "JitMemAgent",
    "JitMemCurator",
    "Memento",
    "MementoLearner",
    "ReActAgent",
    "ResearchProgram",
    "SubQuestionAgent",
    "build_program",
    "method_names",
    "register_method",
]
