"""memento.llm: the LM client: each role's dspy.LM built from the settings (lm), its rate limits (lm_limiter),
deadlines (lm_deadline), structured outputs (structured_adapter, output_schema), replay of a logged run (lm_replay),
the in-process local model (local_lm), and what a failed call means (lm_errors, lm_failures).

Its public names are imported on first use (:mod:`memento.utils.lazy_exports`): importing one module of
the package does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memento.llm.lm import MementoLM, Roles, build_lm, configure, dspy_defaults, explain_lm_error, role_lm
    from memento.llm.lm_deadline import (
        DEFAULT_DEADLINE,
        call_deadline,
        call_with_deadline,
        calling_thread,
        check_deadline,
        in_flight,
        wait_before_retry,
    )
    from memento.llm.lm_failures import LMFailureWatch
    from memento.llm.lm_limiter import LMLimiter, limiter_for, set_limiter_source, set_role_limits
    from memento.llm.lm_replay import ReplayBook, ReplayedCall, ReplayEngine, ReplayMissError, call_key
    from memento.llm.local_lm import (
        BUNDLED_MODEL,
        SMOKE_TEST_NOTE,
        LocalEngine,
        bundled_model_path,
        is_local_model,
        local_model_path,
    )
    from memento.llm.output_schema import SCHEMA_KEY, OpenSchemaError, limit, tool_args_schema
    from memento.llm.structured_adapter import (
        STRUCTURED_MODES,
        StructuredAdapter,
        StructuredMode,
        is_self_hosted,
        structured_mode,
    )

_HOMES: dict[str, str] = {
    "MementoLM": "lm",
    "Roles": "lm",
    "build_lm": "lm",
    "configure": "lm",
    "dspy_defaults": "lm",
    "explain_lm_error": "lm",
    "role_lm": "lm",
    "DEFAULT_DEADLINE": "lm_deadline",
    "call_deadline": "lm_deadline",
    "call_with_deadline": "lm_deadline",
    "calling_thread": "lm_deadline",
    "check_deadline": "lm_deadline",
    "in_flight": "lm_deadline",
    "wait_before_retry": "lm_deadline",
    "LMFailureWatch": "lm_failures",
    "LMLimiter": "lm_limiter",
    "limiter_for": "lm_limiter",
    "set_limiter_source": "lm_limiter",
    "set_role_limits": "lm_limiter",
    "ReplayBook": "lm_replay",
    "ReplayEngine": "lm_replay",
    "ReplayMissError": "lm_replay",
    "ReplayedCall": "lm_replay",
    "call_key": "lm_replay",
    "BUNDLED_MODEL": "local_lm",
    "LocalEngine": "local_lm",
    "SMOKE_TEST_NOTE": "local_lm",
    "bundled_model_path": "local_lm",
    "is_local_model": "local_lm",
    "local_model_path": "local_lm",
    "OpenSchemaError": "output_schema",
    "SCHEMA_KEY": "output_schema",
    "limit": "output_schema",
    "tool_args_schema": "output_schema",
    "STRUCTURED_MODES": "structured_adapter",
    "StructuredAdapter": "structured_adapter",
    "StructuredMode": "structured_adapter",
    "is_self_hosted": "structured_adapter",
    "structured_mode": "structured_adapter",
}

__all__ = [
    "MementoLM",
    "Roles",
    "build_lm",
    "configure",
    "dspy_defaults",
    "explain_lm_error",
    "role_lm",
    "DEFAULT_DEADLINE",
    "call_deadline",
    "call_with_deadline",
    "calling_thread",
    "check_deadline",
    "in_flight",
    "wait_before_retry",
    "LMFailureWatch",
    "LMLimiter",
    "limiter_for",
    "set_limiter_source",
    "set_role_limits",
    "ReplayBook",
    "ReplayEngine",
    "ReplayMissError",
    "ReplayedCall",
    "call_key",
    "BUNDLED_MODEL",
    "LocalEngine",
    "SMOKE_TEST_NOTE",
    "bundled_model_path",
    "is_local_model",
    "local_model_path",
    "OpenSchemaError",
    "SCHEMA_KEY",
    "limit",
    "tool_args_schema",
    "STRUCTURED_MODES",
    "StructuredAdapter",
    "StructuredMode",
    "is_self_hosted",
    "structured_mode",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
