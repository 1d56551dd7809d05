"""memento.tasks: task specs (loaders, output signatures, metric, cutoffs) and their registry."""

from memento.tasks.qa import AnswerQuestion, QATask
from memento.tasks.task import Task, get_task, register_task, task_names

__all__ = ["Task", "get_task", "register_task", "task_names", "QATask", "AnswerQuestion"]
