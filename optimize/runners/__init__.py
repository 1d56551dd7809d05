"""The comparison's method runners, one family per module, and the runner registry.

A runner's ``train`` leaves a frozen artefact in the method's directory and ``load`` rebuilds the test program
from it (:class:`~memento.optimize.compare_context.MethodRunner`). Programs run as they are
(:class:`ProgramRunner`), optimisers compile a base program (:class:`OptimizerRunner`), and each memory family
has its own runner; :func:`register_runner` plugs in another.
"""

from __future__ import annotations

from memento.core.errors import ConfigError
from memento.optimize.compare_context import MethodRunner
from memento.optimize.method_spec import MethodSpec
from memento.optimize.runners.case_bank_runner import CaseBankRunner
from memento.optimize.runners.case_memory_runner import CaseMemoryRunner
from memento.optimize.runners.jitmem_runner import JitMemRunner
from memento.optimize.runners.memento_runner import MementoRunner
from memento.optimize.runners.optimizer_runner import OptimizerRunner
from memento.optimize.runners.program_runner import ProgramRunner

__all__ = [
    "ProgramRunner",
    "OptimizerRunner",
    "MementoRunner",
    "JitMemRunner",
    "CaseBankRunner",
    "CaseMemoryRunner",
    "register_runner",
    "runner_for",
]

_RUNNERS: dict[str, MethodRunner] = {}
_KIND_RUNNERS: dict[str, MethodRunner] = {"program": ProgramRunner(), "optimizer": OptimizerRunner()}


def register_runner(method: str, runner: MethodRunner) -> None:
    """Use ``runner`` for the method named ``method`` (overrides the default runner of its kind)."""
    _RUNNERS[method] = runner


register_runner("memento", MementoRunner())
register_runner("react_memory", MementoRunner())
register_runner("closed_book_memory", MementoRunner())  # MEMENTO's "LLM + Memento"
register_runner("few_shot_memory", MementoRunner())  # ... and "5-shot + Memento"
register_runner("jitmem", JitMemRunner())
register_runner("cbr", CaseBankRunner())
register_runner("closed_book_cases", CaseMemoryRunner())
register_runner("few_shot_cases", CaseMemoryRunner())


def runner_for(spec: MethodSpec) -> MethodRunner:
    """The runner of a method: the one registered under its name, else its kind's."""
    if spec.name in _RUNNERS:
        return _RUNNERS[spec.name]
    if spec.kind in _KIND_RUNNERS:
        return _KIND_RUNNERS[spec.kind]
    raise ConfigError(f"no runner for method {spec.name!r} yet; register one with register_runner()")
