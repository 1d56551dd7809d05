"""memento.optimize: learning loops (MementoTrainer, JitMem streaming and curator optimisation), the comparison
harness against GEPA, MIPROv2 and BootstrapFewShot, and MEMENTO's legal data protocol (``legal_protocol``).

``memento.optimize.compare(...)`` is the comparison function; its module stays importable as
``memento.optimize.compare`` for ``from ... import`` statements. The comparison is split into the harness
(``compare``), the method specs (``method_spec``), the split (``compare_data``), what runners share
(``compare_context``), one runner per family (``runners``) and the training web tally (``web_tally``); every public
name of the harness is exported here too.
"""

from memento.optimize.batch_report import BatchReport
from memento.optimize.budgets import PRESETS, CompareBudget, budget_from_settings, resolve_budget
from memento.optimize.compare import (
    CaseBankRunner,
    CaseMemoryRunner,
    CompareContext,
    CompareObserver,
    CountingWeb,
    JitMemRunner,
    MementoRunner,
    MethodRunner,
    MethodSpec,
    OptimizerRunner,
    ProgramRunner,
    Tallied,
    TrainOutcome,
    WebTally,
    compare,
    example_id,
    method_cache,
    parse_methods,
    register_runner,
    split_examples,
)
from memento.optimize.curator_optimizer import optimize_curator
from memento.optimize.jitmem_stream import build_training_bank, run_orderings, stream
from memento.optimize.legal_protocol import LegalProtocol, LegalProtocolReport
from memento.optimize.memento_trainer import MementoTrainer
from memento.optimize.optimizers import optimize_program

__all__ = [
    "BatchReport",
    "budget_from_settings",
    "build_training_bank",
    "CaseBankRunner",
    "CaseMemoryRunner",
    "compare",
    "CompareBudget",
    "CompareContext",
    "CompareObserver",
    "CountingWeb",
    "example_id",
    "JitMemRunner",
    "LegalProtocol",
    "LegalProtocolReport",
    "MementoRunner",
    "MementoTrainer",
    "method_cache",
    "MethodRunner",
    "MethodSpec",
    "optimize_curator",
    "optimize_program",
    "OptimizerRunner",
    "parse_methods",
    "PRESETS",
    "ProgramRunner",
    "register_runner",
    "resolve_budget",
    "run_orderings",
    "split_examples",
    "stream",
    "Tallied",
    "TrainOutcome",
    "WebTally",
]
