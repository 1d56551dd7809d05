"""``<optimiser>:<base>``: the base program, built by its method's builder, compiled with GEPA, MIPROv2 or
BootstrapFewShot under the comparison's budget (``[compare]``); searches and fetches of every program run counted.

Example:
    >>> spec = parse_methods("gepa:react")[0]  # doctest: +SKIP
    >>> OptimizerRunner().train(ctx, spec, out / spec.slug).budget["max_metric_calls"]  # doctest: +SKIP
    24
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import dspy

from memento.optimize.compare_context import PROGRAM_FILE, CompareContext, TrainOutcome, saved_program_fields
from memento.optimize.method_spec import MethodSpec
from memento.optimize.web_tally import Tallied, WebTally
from memento.utils.files import save_program

__all__ = ["OptimizerRunner"]

logger = logging.getLogger(__name__)


class OptimizerRunner:
    """``<optimiser>:<base>``: compile the base program with GEPA, MIPROv2 or BootstrapFewShot under the budget."""

    def train(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> TrainOutcome:
        assert spec.optimizer is not None
        tally = WebTally()
        student = Tallied(ctx.build(spec.base), tally)
        result = ctx.compile(spec.optimizer, student, method_dir / "optimizer")
        compiled = result.program.program if isinstance(result.program, Tallied) else result.program
        save_program(compiled, method_dir / PROGRAM_FILE)
        info = dict(result.info)
        info["program_runs"] = tally.runs
        return TrainOutcome(
            budget=result.budget,
            info=info,
            searches=tally.searches,
            fetches=tally.fetches,
            artefacts={"program": PROGRAM_FILE},
        )

    def load(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dspy.Module:
        program = ctx.build(spec.base)
        program.load(str(method_dir / PROGRAM_FILE))
        return program

    def remote(self, ctx: CompareContext, spec: MethodSpec, method_dir: Path) -> dict[str, Any]:
        return saved_program_fields(spec, method_dir)
