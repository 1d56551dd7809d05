"""A stand-in for the embedder a case bank was built with, to open the bank without loading a model.

Example:
    >>> import tempfile
    >>> from memento.memory.case_bank import CaseBank
    >>> from memento.memory.embedder import HashingEmbedder
    >>> d = tempfile.mkdtemp()
    >>> CaseBank(d, HashingEmbedder(dim=16)).close()
    >>> emb = StoredEmbedder.of(d)
    >>> emb.dim
    16
"""

from __future__ import annotations

import numpy as np

from memento.memory.case_store import CaseBankError, read_embedder_info
from memento.memory.location import LocationLike

__all__ = ["StoredEmbedder"]


class StoredEmbedder:
    """Stands in for the embedder a bank was built with, to open it without loading a model (statistics, export).

    ``embed`` raises: a bank opened this way can list cases, read logged pairs and score stored embeddings with the
    gate, but cannot embed new text.

    Example:
        >>> StoredEmbedder("hashing-16", 16).dim
        16
    """

    def __init__(self, name: str, dim: int) -> None:
        self.name = name
        self.dim = int(dim)

    @classmethod
    def of(cls, dir: LocationLike) -> StoredEmbedder:
        """The embedder identity recorded in the bank at ``dir`` (a directory or a PostgreSQL location)."""
        name, dim = read_embedder_info(dir)
        return cls(name, dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        raise CaseBankError(
            f"this case bank was opened without its embedder ({self.name}); open it with that embedder to embed text"
        )
