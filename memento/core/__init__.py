"""memento.core: what every layer stands on: the settings (config, config_sections), the error hierarchy (errors)
and the one policy that applies it (error_policy), the records a run produces (types, evidence, memory_items,
record), the cutoff filter of dated memory (dating), the marking of untrusted text (untrusted), each paper's setup
(presets), cancellation, checked paths and the plug points' protocols.

Its key names are served from here on first use: importing one module does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memento.utils.lazy_exports import homes_by_module, lazy_exports

if TYPE_CHECKING:
    from memento.core.cancel import cancel_requested, check_cancelled
    from memento.core.config import Settings, load_settings
    from memento.core.config_sections import SECTIONS, LMRole
    from memento.core.dating import DateFilter
    from memento.core.error_policy import handle_error, is_fatal
    from memento.core.errors import Cancelled, ConfigError, DataError, FatalError, MementoError, RecoverableError
    from memento.core.evidence import EvidenceRecord
    from memento.core.memory_items import Case, CraftEntry, Fact, Rule
    from memento.core.presets import apply_preset
    from memento.core.protocols import MemoryProvider
    from memento.core.types import Node, ToolCall, Trajectory, Usage
    from memento.core.untrusted import quote_data

_HOMES = homes_by_module(
    {
        "config": ("Settings", "load_settings"),
        "config_sections": ("LMRole", "SECTIONS"),
        "errors": ("MementoError", "FatalError", "RecoverableError", "ConfigError", "DataError", "Cancelled"),
        "error_policy": ("handle_error", "is_fatal"),
        "types": ("Node", "ToolCall", "Trajectory", "Usage"),
        "evidence": ("EvidenceRecord",),
        "memory_items": ("Rule", "Fact", "CraftEntry", "Case"),
        "dating": ("DateFilter",),
        "untrusted": ("quote_data",),
        "presets": ("apply_preset",),
        "cancel": ("check_cancelled", "cancel_requested"),
        "protocols": ("MemoryProvider",),
    }
)

# fmt: off
__all__ = [
    "Cancelled", "Case", "ConfigError", "CraftEntry", "DataError", "DateFilter", "EvidenceRecord", "Fact",
    "FatalError", "LMRole", "MementoError", "MemoryProvider", "Node", "RecoverableError", "Rule", "SECTIONS",
    "Settings", "ToolCall", "Trajectory", "Usage", "apply_preset", "cancel_requested", "check_cancelled",
    "handle_error", "is_fatal", "load_settings", "quote_data",
]
# fmt: on

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
