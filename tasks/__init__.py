"""memento.tasks: task specs (loaders, output signatures, metric, cutoffs) and their registry.

Importing this package registers the built-in tasks: ``qa``, ``multihop``, ``legal``, ``opinion``, ``sales``.
"""

from memento.tasks.legal import LegalTask, PredictCaseOutcome
from memento.tasks.multihop import AnswerMultiHopQuestion, MultiHopTask
from memento.tasks.opinion import OpinionTask, PredictOpinionDistribution
from memento.tasks.qa import AnswerQuestion, QATask
from memento.tasks.sales import ProposeValuePropositions, SalesTask, ValueProposition
from memento.tasks.task import Task, get_task, register_task, task_names

__all__ = [
    "Task",
    "get_task",
    "register_task",
    "task_names",
    "QATask",
    "AnswerQuestion",
    "MultiHopTask",
    "AnswerMultiHopQuestion",
    "LegalTask",
    "PredictCaseOutcome",
    "OpinionTask",
    "PredictOpinionDistribution",
    "SalesTask",
    "ProposeValuePropositions",
    "ValueProposition",
]
