"""memento: DSPy-native research agents that learn from the web across sessions without touching model weights.

Example:
    >>> import memento
    >>> settings = memento.load_settings(flags={"lm": "openai/gpt-4o-mini"})
    >>> roles = memento.configure(settings)  # doctest: +SKIP
"""

from __future__ import annotations

import os as _os

_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"

from memento import _moved  # noqa: E402

_moved.install()  # the old module paths, for one release (memento/_moved.py)

from memento.core.config import Settings, load_settings  # noqa: E402
from memento.core.errors import (  # noqa: E402
    ConfigError,
    DataError,
    LMNotConfiguredError,
    LMUnavailableError,
    MementoError,
)
from memento.llm.lm import Roles, configure  # noqa: E402
from memento.records.usage import UsageMeter  # noqa: E402

__all__ = [
    "__version__",
    "Settings",
    "load_settings",
    "configure",
    "Roles",
    "UsageMeter",
    "MementoError",
    "ConfigError",
    "DataError",
    "LMNotConfiguredError",
    "LMUnavailableError",
]
