"""A registered program compared as it is: built by its method's builder, its state saved as ``program.json`` and
reloaded for the test phase (``few_shot`` keeps the demonstrations it drew).

Example:
    >>> outcome = ProgramRunner().train(ctx, parse_methods("closed_book")[0], out / "closed_book")  # doctest: +SKIP
    >>> outcome.artefacts  # doctest: +SKIP
    {'program': 'program.json'}
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import dspy

from memento.optimize.compare_context import PROGRAM_FILE, CompareContext, TrainOutcome, saved_program_fields
from memento.optimize.method_spec import MethodSpec
from memento.utils.files import save_program

__all__ = ["ProgramRunner"]

logger = logging.getLogger(__name__)


class ProgramRunner:
    """A registered program as is (``closed_book``, ``few_shot``, ``react``, ``aet`` ...): nothing to learn beyond
    what its builder takes from the training set (FewShot's demos); its state is saved and reloaded."""

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        program = ctx.build(spec.base)
        save_program(program, method_dir / PROGRAM_FILE)
        return TrainOutcome(artefacts={"program": PROGRAM_FILE})

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        program = ctx.build(spec.base)
        program.load(str(method_dir / PROGRAM_FILE))
        return program

    def remote(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dict[str, Any]:
        return saved_program_fields(spec, method_dir)
