"""Q-gate: learns what cosine cannot (held-out AUC), soft targets, replay, save/load, and ROC AUC itself."""

from __future__ import annotations

import numpy as np
import pytest

from memento.memory.case_bank import CaseBank
from memento.memory.q_gate import QGate, QGateLearner, roc_auc
from memento.memory.replay_buffer import ReplayBuffer
from memento.memory.retrieval_policy import RetrievalPolicy
from memento.testing import LookupEmbedder


def _hidden_feature_world(dim: int, seed: int):
    """Unit vectors whose usefulness depends on hidden signs along two orthogonal directions u (queries), v (cases):
    a case helps a query iff their signs agree. Because u is orthogonal to v, cosine carries no signal."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, 2)))
    u, v = basis[:, 0], basis[:, 1]

    def draw(n: int, direction: np.ndarray, amp: float = 0.3):
        g = rng.standard_normal((n, dim))
        g -= np.outer(g @ u, u) + np.outer(g @ v, v)
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        sign = rng.choice([-1.0, 1.0], size=n)
        x = g + amp * sign[:, None] * direction[None, :]
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), sign

    return rng, draw, u, v


def test_q_gate_learns_hidden_usefulness_through_the_bank(tmp_path):
    dim = 32
    rng, draw, u, v = _hidden_feature_world(dim, seed=0)
    emb = LookupEmbedder(dim)
    case_vecs, case_signs = draw(120, v)
    bank = CaseBank(tmp_path, emb, seed=0, gate_options={"lr": 3e-3})
    cases = []
    for j, (vec, sign) in enumerate(zip(case_vecs, case_signs, strict=True)):
        emb.table[f"case {j}"] = vec
        cases.append((bank.add(f"case {j}", f"plan {j}", reward=1.0), sign))
    sign_of = {c.id: s for c, s in cases}
    q_vecs, q_signs = draw(150, u)
    for t, (vec, sign) in enumerate(zip(q_vecs, q_signs, strict=True)):
        emb.table[f"query {t}"] = vec
        hits = bank.retrieve(f"query {t}", k=4, policy="softmax", alpha=0.2, prefilter=24, seed=t)
        rewards = [float(sign_of[c.id] == sign) for c, _ in hits]
        bank.record(f"query {t}", [c for c, _ in hits], rewards, task_id=f"t{t}")
    # held-out pairs: fresh queries and fresh cases the gate never saw
    hq, hqs = draw(400, u)
    hc, hcs = draw(400, v)
    labels = (hqs == hcs).astype(float)
    gate_auc = roc_auc(bank.gate.score(hq, hc), labels)
    cos_auc = roc_auc((hq * hc).sum(axis=1), labels)
    assert gate_auc >= 0.85, gate_auc
    assert abs(cos_auc - 0.5) < 0.08, cos_auc
    # retrieval by Q now prefers useful cases far more often than cosine does
    useful_q: list[float] = []
    useful_cos: list[float] = []
    runs: list[tuple[RetrievalPolicy, list[float]]] = [("q", useful_q), ("cosine", useful_cos)]
    for i in range(30):
        emb.table[f"probe {i}"] = hq[i]
        for policy, acc in runs:
            hits = bank.retrieve(f"probe {i}", k=4, policy=policy, prefilter=40)
            acc.extend(float(sign_of[c.id] == hqs[i]) for c, _ in hits)
    assert np.mean(useful_q) > np.mean(useful_cos) + 0.25
    # logged pairs carry the gate's pre-update (prequential) score and the cosine baseline
    pairs = bank.logged_pairs()
    assert len(pairs["reward"]) == 150 * 4
    assert np.isnan(pairs["q_score"][:4]).all() and not np.isnan(pairs["q_score"][-4:]).any()
    late = slice(300, None)
    assert roc_auc(pairs["q_score"][late], pairs["reward"][late]) > 0.8


def test_soft_targets_and_offline_fit_reach_the_target_probability():
    torch = pytest.importorskip("torch")
    learner = QGateLearner(QGate(dim=4, hidden=16), seed=0, lr=1e-2)
    q = np.tile(np.eye(4, dtype=np.float32)[0], (64, 1))
    c = np.tile(np.eye(4, dtype=np.float32)[1], (64, 1))
    report = learner.fit(q, c, np.full(64, 0.3), epochs=150, batch_size=64)
    assert report["pairs"] == 64 and report["final_loss"] < 0.7
    assert abs(float(learner.score(q[:1], c[:1])[0]) - 0.3) < 0.05  # BCE with a soft target converges to it
    assert torch.get_num_threads() >= 1


def test_online_update_uses_replay_and_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    learner = QGateLearner(dim=8, seed=0, replay_capacity=16, batch_size=8, steps_per_update=3)
    for _ in range(10):
        learner.update(rng.standard_normal(8), rng.standard_normal((4, 8)), rng.random(4))
    assert learner.updates == 10 and len(learner.replay) == 16 and learner.replay.seen == 40
    # each update trained on batch_size rows: the 4 new pairs + 4 replayed (none on the very first update)
    assert learner.pairs_trained == 3 * 4 + 9 * 3 * 8
    path = learner.save(tmp_path / "gate.pt")
    other = QGateLearner(dim=8, seed=99, replay_capacity=16)
    probe_q, probe_c = rng.standard_normal((5, 8)), rng.standard_normal((5, 8))
    assert not np.allclose(other.score(probe_q, probe_c), learner.score(probe_q, probe_c))
    other.load(path)
    np.testing.assert_allclose(other.score(probe_q, probe_c), learner.score(probe_q, probe_c), atol=1e-6)
    assert other.updates == 10 and len(other.replay) == 16
    with pytest.raises(ValueError, match="dim"):
        QGateLearner(dim=4).load(path)
    with pytest.raises(ValueError, match="3 queries"):
        learner.update(np.zeros((3, 8)), np.zeros((4, 8)), np.zeros(4))


def test_roc_auc_matches_pairwise_definition():
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 5, size=60).astype(float)  # many ties
    labels = rng.random(60)
    pos, neg = scores[labels >= 0.5], scores[labels < 0.5]
    pairwise = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert roc_auc(scores, labels) == pytest.approx(pairwise)
    assert np.isnan(roc_auc([0.1, 0.2], [1, 1]))


def test_roc_auc_is_identical_to_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")  # in the dev extra; memento itself does not need it
    rng = np.random.default_rng(7)
    for size, levels in ((40, 3), (200, 10), (500, None)):
        scores = rng.integers(0, levels, size=size).astype(float) if levels else rng.standard_normal(size)
        labels = rng.random(size)
        expected = metrics.roc_auc_score(labels >= 0.5, scores)
        assert roc_auc(scores, labels) == pytest.approx(expected, abs=1e-12)


def test_replay_buffer_reservoir_is_uniform():
    counts = np.zeros(100)
    for seed in range(200):
        buf = ReplayBuffer(10, 1, seed=seed)
        buf.add(np.arange(100, dtype=np.float32)[:, None], np.zeros((100, 1)), np.zeros(100))
        counts[buf.q[:, 0].astype(int)] += 1
    # every item kept with probability 10/100 -> 20 times in 200 runs on average
    assert counts[:50].sum() == pytest.approx(counts[50:].sum(), rel=0.2)
    assert buf.sample(4)[0].shape == (4, 1) and buf.sample(50)[0].shape == (10, 1)
