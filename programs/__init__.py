"""memento.programs: the research programs (dspy.Modules) — AET, its sub-question agent, baselines, Memento,
the case-based agent and JitMem — the method registry, and the legal protocol's leakage agent.

Its public names are imported on first use (:mod:`memento.utils.lazy_exports`): importing one module of the package does
not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
    from memento.programs.baselines import ClosedBook, FewShot
    from memento.programs.case_based_agent import CaseBasedAgent
    from memento.programs.jitmem_agent import JitMemAgent
    from memento.programs.jitmem_curator import JitMemCurator
    from memento.programs.leakage_probe import LeakageProbe
    from memento.programs.memento_learner import MementoLearner
    from memento.programs.memento_program import Memento
    from memento.programs.react_agent import ReActAgent
    from memento.programs.registry import build_program, method_names, register_method
    from memento.programs.research_program import ResearchProgram
    from memento.programs.sub_question_agent import SubQuestionAgent

_HOMES: dict[str, str] = {
    "AdaptiveExplorationTree": "adaptive_exploration_tree",
    "ClosedBook": "baselines",
    "FewShot": "baselines",
    "CaseBasedAgent": "case_based_agent",
    "JitMemAgent": "jitmem_agent",
    "JitMemCurator": "jitmem_curator",
    "LeakageProbe": "leakage_probe",
    "MementoLearner": "memento_learner",
    "Memento": "memento_program",
    "ReActAgent": "react_agent",
    "build_program": "registry",
    "method_names": "registry",
    "register_method": "registry",
    "ResearchProgram": "research_program",
    "SubQuestionAgent": "sub_question_agent",
}

__all__ = [
    "AdaptiveExplorationTree",
    "CaseBasedAgent",
    "ClosedBook",
    "FewShot",
    "JitMemAgent",
    "JitMemCurator",
    "LeakageProbe",
    "Memento",
    "MementoLearner",
    "ReActAgent",
    "ResearchProgram",
    "SubQuestionAgent",
    "build_program",
    "method_names",
    "register_method",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
