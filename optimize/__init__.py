"""memento.optimize: learning loops (MementoTrainer, JitMem streaming and curator optimisation) and the comparison
harness against GEPA, MIPROv2 and BootstrapFewShot.

``memento.optimize.compare(...)`` is the comparison function; its module stays importable as
``memento.optimize.compare`` for ``from ... import`` statements.
"""

from memento.optimize.batch_report import BatchReport
from memento.optimize.budgets import PRESETS, CompareBudget, resolve_budget
from memento.optimize.compare import compare
from memento.optimize.curator_optimizer import optimize_curator
from memento.optimize.jitmem_stream import build_training_bank, run_orderings, stream
from memento.optimize.memento_trainer import MementoTrainer
from memento.optimize.optimizers import optimize_program

__all__ = [
    "PRESETS",
    "BatchReport",
    "CompareBudget",
    "MementoTrainer",
    "build_training_bank",
    "compare",
    "optimize_curator",
    "optimize_program",
    "resolve_budget",
    "run_orderings",
    "stream",
]
