"""memento.llm: the LM client: each role's ``dspy.LM`` built from the settings (lm), its rate limits (lm_limiter),
deadlines (lm_deadline), structured outputs (structured_adapter, output_schema, api_base), replay of a logged run
(lm_replay), the in-process local model (local_lm), and what a failed call means (lm_errors, lm_failures).

Its main names import from here, each on first use (no other module of the package is imported with it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import homes_by_module, lazy_exports

if TYPE_CHECKING:
    from memento.llm.lm import MementoLM, Roles, build_lm, configure
    from memento.llm.lm_deadline import call_with_deadline
    from memento.llm.lm_errors import explain_lm_error
    from memento.llm.lm_failures import LMFailureWatch
    from memento.llm.lm_limiter import LMLimiter, limiter_for
    from memento.llm.lm_replay import ReplayBook, ReplayMissError
    from memento.llm.local_lm import LocalEngine, local_model_path
    from memento.llm.structured_adapter import StructuredAdapter

_HOMES = homes_by_module(
    {
        "lm": ("MementoLM", "Roles", "configure", "build_lm"),
        "lm_errors": ("explain_lm_error",),
        "lm_limiter": ("LMLimiter", "limiter_for"),
        "lm_deadline": ("call_with_deadline",),
        "lm_failures": ("LMFailureWatch",),
        "lm_replay": ("ReplayBook", "ReplayMissError"),
        "structured_adapter": ("StructuredAdapter",),
        "local_lm": ("LocalEngine", "local_model_path"),
    }
)

# fmt: off
__all__ = [
    "LMFailureWatch", "LMLimiter", "LocalEngine", "MementoLM", "ReplayBook", "ReplayMissError", "Roles",
    "StructuredAdapter", "build_lm", "call_with_deadline", "configure", "explain_lm_error", "limiter_for",
    "local_model_path",
]
# fmt: on

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
