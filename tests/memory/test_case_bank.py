"""CaseBank: storage, namespaces, persistence (identical retrievals after reload), index catch-up, HNSW, eviction,
softmax sampling frequencies, hooks and thread safety; the store tests run on each backend (``location``)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import numpy as np
import pytest

from memento.core.errors import ConfigError, MemoryFrozenError
from memento.execution.threads import run_parallel
from memento.memory.case_bank import CaseBank, CaseBankError, q_logits, sample_softmax
from memento.memory.embedder import HashingEmbedder

TOPICS = [
    "founder of the Acme corporation",
    "rainfall in Lima during 2019",
    "population of Reykjavik in 2020",
    "author of the novel Dune",
    "ceo of Initech software",
    "height of the Eiffel tower",
]


def _fill(bank: CaseBank, n: int = 30) -> list:
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        out.append(bank.add(f"{topic} question {i}", f"plan {i}: search {topic}", reward=float(i % 3 == 0)))
    return out


def _ids(hits):
    return [c.id for c, _ in hits]


def test_add_get_and_cosine_retrieval_include_failures(location):
    loc = location()
    bank = CaseBank(loc, HashingEmbedder(dim=128))
    ok = bank.add("Who founded the Acme corporation?", "1. search 'Acme founder'", reward=1.0)
    bad = bank.add("Acme corporation founder and year", "1. guess", reward=0.0)
    bank.add("Rainfall in Lima during 2019", "1. search weather archive", reward=1.0)
    assert len(bank) == 3 and bank.get(bad.id).reward == 0.0
    hits = bank.retrieve("founder of Acme corporation", k=2)
    assert set(_ids(hits)) == {ok.id, bad.id}  # failures are retrieved too
    assert hits[0][1] >= hits[1][1]
    assert _ids(bank.retrieve("founder of Acme corporation", k=2, exclude_ids=[ok.id]))[0] == bad.id
    with pytest.raises(CaseBankError, match="no case"):
        bank.get("case-missing")
    with pytest.raises(CaseBankError, match="unknown retrieval policy"):
        bank.retrieve("x", policy="random")  # type: ignore[arg-type]
    with pytest.raises(CaseBankError, match="invalid case"):
        bank.add("x", "y", reward=1.5)


def test_namespaces_with_shared_base(location):
    loc = location()
    emb = HashingEmbedder(dim=128)
    base = CaseBank(loc, emb, namespace="shared")
    shared = base.add("Eiffel tower height in metres", "search official site", reward=1.0)
    a = CaseBank(loc, emb, namespace="client-a", base_namespace="shared")
    b = CaseBank(loc, emb, namespace="client-b")
    own = a.add("Eiffel tower height with antenna", "search encyclopedia", reward=0.0)
    b.add("Eiffel tower height today", "search news", reward=1.0)
    assert set(_ids(a.retrieve("Eiffel tower height", k=5))) == {shared.id, own.id}
    assert shared.id not in _ids(b.retrieve("Eiffel tower height", k=5))
    assert a.count() == 1 and a.count("shared") == 1
    # a later write to the base namespace by another bank object is seen without reopening
    later = base.add("Eiffel tower height in feet", "convert units", reward=1.0)
    assert later.id in _ids(a.retrieve("Eiffel tower height feet", k=5))


def test_reload_gives_identical_retrievals_for_every_policy(location):
    loc = location()
    emb = HashingEmbedder(dim=128)
    bank = CaseBank(loc, emb, seed=3)
    _fill(bank, 40)
    for i, topic in enumerate(TOPICS):
        hits = bank.retrieve(topic, k=4)
        bank.record(topic, [c for c, _ in hits], rewards=[float((i + j) % 2) for j in range(len(hits))])
    queries = TOPICS + ["who wrote Dune", "Lima weather"]
    before = {
        p: [[(c.id, round(s, 6)) for c, s in bank.retrieve(q, k=4, policy=p, seed=7)] for q in queries]
        for p in ("cosine", "q", "softmax")
    }
    bank.close()
    again = CaseBank(loc, emb, seed=3)
    after = {
        p: [[(c.id, round(s, 6)) for c, s in again.retrieve(q, k=4, policy=p, seed=7)] for q in queries]
        for p in ("cosine", "q", "softmax")
    }
    assert after == before
    assert again.gate.updates == len(TOPICS)
    assert len(again.gate.replay) == sum(len(r) for r in before["cosine"][: len(TOPICS)])  # refilled from the log


def test_missing_corrupt_or_stale_index_is_rebuilt_or_caught_up(tmp_path):
    emb = HashingEmbedder(dim=64)
    bank = CaseBank(tmp_path, emb)
    _fill(bank, 20)
    bank.save()
    # a crash after more inserts: the DB has them, the saved index does not
    extra = bank.add("brand new topic about volcanoes", "search volcano", reward=1.0)
    expected = _ids(bank.retrieve("volcanoes topic", k=3))
    bank._store.db.close()  # no save: simulate the process dying
    reopened = CaseBank(tmp_path, emb)
    assert _ids(reopened.retrieve("volcanoes topic", k=3)) == expected and expected[0] == extra.id
    reopened.close()
    index_files = list((tmp_path / "index").glob("*.faiss"))
    assert len(index_files) == 1
    index_files[0].write_bytes(b"not a faiss index")
    assert _ids(CaseBank(tmp_path, emb).retrieve("volcanoes topic", k=3)) == expected
    for f in (tmp_path / "index").iterdir():
        f.unlink()
    assert _ids(CaseBank(tmp_path, emb).retrieve("volcanoes topic", k=3)) == expected


def test_hnsw_past_threshold_and_reload(tmp_path, monkeypatch):
    import memento.memory.namespace_index as namespace_index

    monkeypatch.setattr(namespace_index, "HOLD_OUT_STRIDE", 8)  # a few held-out cases in a small bank
    emb = HashingEmbedder(dim=64)
    bank = CaseBank(tmp_path, emb, hnsw_threshold=50)
    cases = _fill(bank, 80)
    held = bank._index("default").held_ids
    assert bank._index("default").hnsw and len(held) == 10
    # an exact stored text is its own nearest neighbour
    for case in cases[::9]:
        assert bank.retrieve(case.task_text, k=1)[0][0].id == case.id
    before = [_ids(bank.retrieve(t, k=4)) for t in TOPICS]
    bank.close()
    info = json.loads(next((tmp_path / "index").glob("*.json")).read_text())
    assert info["hnsw"] is True and info["count"] == 80 and info["recall"] >= 0.95
    again = CaseBank(tmp_path, emb, hnsw_threshold=50)
    assert [_ids(again.retrieve(t, k=4)) for t in TOPICS] == before
    assert info["held_out"] == sorted(held) and again._index("default").held_ids == held  # read back from the table
    assert again.index_info()["kind"] == "hnsw" and again.index_info()["ef_search"] == info["ef_search"]


def _clustered(n: int, dim: int, noise: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((max(4, n // 50), dim))
    x = centers[rng.integers(0, len(centers), n)] + noise * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_approximate_index_is_calibrated_to_the_recall_target_or_stays_exact():
    from memento.memory.namespace_index import NamespaceIndex

    ids = np.arange(3000, dtype=np.int64)
    topics = NamespaceIndex(32, hnsw=True, hnsw_m=8, ef_search=16, ef_construction=16)
    topics.add(ids, _clustered(3000, 32, noise=0.5))
    assert topics.calibrate(target=0.95, k=4) >= 0.95 and topics.recall >= 0.95  # smallest efSearch that reaches it
    noise = NamespaceIndex(32, hnsw=True, hnsw_m=4, ef_search=8, ef_construction=8)
    noise.add(ids, _clustered(3000, 32, noise=50.0))  # no neighbourhood structure at all
    assert noise.calibrate(target=0.999, k=4, grid=(8, 16)) < 0.999  # reported, for the owner to refuse it


def test_hnsw_calibrates_on_held_out_queries_and_finds_them_like_any_case(monkeypatch):
    """A vector in the graph is no fair calibration query (the search walks to its own node): one rowid in
    HOLD_OUT_STRIDE stays out of the graph, in an exact index searched beside it, and the calibrated recall is what
    those queries get."""
    import memento.memory.namespace_index as namespace_index

    monkeypatch.setattr(namespace_index, "HOLD_OUT_STRIDE", 16)
    vecs = _clustered(3000, 32, noise=0.5)
    ids = np.arange(1, 3001, dtype=np.int64)
    index = namespace_index.NamespaceIndex(32, hnsw=True, hnsw_m=8, ef_search=16, ef_construction=16)
    index.add(ids[:1000], vecs[:1000])
    index.add(ids[1000:], vecs[1000:])
    held = ids[ids % 16 == 0]
    assert index.held_ids == set(held.tolist()) and index.index.ntotal == 3000 - len(held) and index.live == 3000
    for rid in held[:20]:  # a held-out case is found like any other
        assert index.search(vecs[rid - 1], 1)[0][0] == rid
    recall = index.calibrate(target=0.95, k=4)
    hits = 0  # the recall of every held-out query (187 < the sample of 200) at the efSearch chosen, by brute force
    for rid in held:
        exact = vecs @ vecs[rid - 1]
        exact[rid - 1] = -np.inf
        kth = np.sort(exact)[-4]
        got = [s for i, s in index.search(vecs[rid - 1], 5) if i != rid][:4]
        hits += sum(s >= kth - 1e-5 for s in got)
    assert recall == pytest.approx(hits / (4 * len(held))) and index.recall == recall
    index.remove([int(held[0]), 5])  # the exact side deletes at once; the graph keeps a tombstone
    assert int(held[0]) not in index.held_ids and index.tombstones == {5} and index.live == 2998
    assert all(i not in (int(held[0]), 5) for i, _ in index.search(vecs[int(held[0]) - 1], 10))
    assert np.allclose(index.vectors([int(held[1]), 7]), vecs[[int(held[1]) - 1, 6]])
    all_ids, all_vecs = index.all_vectors()
    assert len(all_ids) == len(all_vecs) == 2998 and set(held[1:].tolist()) <= set(all_ids.tolist())


def test_a_bank_past_the_threshold_keeps_exact_search_when_hnsw_misses_the_target(tmp_path, caplog):
    class Fixed:
        name, dim = "fixed-32", 32

        def __init__(self) -> None:
            self.vectors = iter(_clustered(400, 32, noise=50.0, seed=1))

        def embed(self, texts):
            return np.stack([next(self.vectors) for _ in texts])

    bank = CaseBank(tmp_path, Fixed(), hnsw_threshold=200, recall_target=1.01)  # a target no graph can reach
    bank.add_many([{"task_text": f"task {i}", "plan": "p", "reward": 1.0} for i in range(300)])
    info = bank.index_info()
    assert info == {"kind": "exact", "live": 300, "ef_search": None, "recall@4": 1.0}
    assert "exact search kept" in caplog.text


def test_an_hnsw_index_is_calibrated_again_when_it_doubles(tmp_path, caplog):
    """A graph's recall at one efSearch falls as it grows: calibrated at the threshold, again once it doubled; when
    no efSearch reaches the target any more (here: a target raised past reach) it becomes exact."""

    class Fixed:
        name, dim = "fixed-32", 32

        def __init__(self) -> None:
            self.vectors = iter(_clustered(1010, 32, noise=0.5, seed=2))

        def embed(self, texts):
            return np.stack([next(self.vectors) for _ in texts])

    def add(bank: CaseBank, start: int, end: int) -> None:
        bank.add_many([{"task_text": f"task {i}", "plan": "p", "reward": 1.0} for i in range(start, end)])

    caplog.set_level("INFO", logger="memento.memory.case_index")
    bank = CaseBank(tmp_path, Fixed(), hnsw_threshold=200)
    add(bank, 0, 250)
    index = bank._index("default")
    assert index.hnsw and index.calibrated_at == 250 and index.recall >= 0.95
    add(bank, 250, 499)
    assert bank._index("default").calibrated_at == 250  # not yet doubled
    add(bank, 499, 500)
    index = bank._index("default")
    assert index.hnsw and index.calibrated_at == 500 and index.recall >= 0.95
    assert "HNSW at 500 cases recalibrated" in caplog.text
    bank.save()
    assert json.loads(next((tmp_path / "index").glob("*.json")).read_text())["calibrated_at"] == 500
    bank._indexes.recall_target = 1.01  # no graph reaches it: at the next doubling the index becomes exact
    add(bank, 500, 999)
    assert bank.index_info()["kind"] == "hnsw"
    add(bank, 999, 1000)
    assert bank.index_info() == {"kind": "exact", "live": 1000, "ef_search": None, "recall@4": 1.0}
    assert "exact search from now on" in caplog.text
    assert len(bank.retrieve("task 3", k=4)) == 4


def test_embedder_mismatch_and_frozen_are_typed_errors(location):
    loc = location()
    CaseBank(loc, HashingEmbedder(dim=64)).add("a task", "a plan", reward=1.0)
    with pytest.raises(CaseBankError, match="same embedder"):
        CaseBank(loc, HashingEmbedder(dim=32))
    frozen = CaseBank(loc, HashingEmbedder(dim=64), frozen=True)
    assert len(frozen.retrieve("a task", k=1)) == 1
    with pytest.raises(MemoryFrozenError):
        frozen.add("b", "c", reward=0.0)
    with pytest.raises(ConfigError, match="needs a capacity"):
        CaseBank(loc, HashingEmbedder(dim=64), eviction=True)


def test_eviction_least_useful_first_and_evicted_stay_in_db(location):
    loc = location()
    emb = HashingEmbedder(dim=64)
    bank = CaseBank(loc, emb, capacity=10, eviction=True, eviction_slack=0.0)
    cases = [bank.add(f"{TOPICS[i % 6]} item {i}", f"plan {i}", reward=(i % 4) / 3) for i in range(16)]
    assert len(bank) == 10
    survivors = {c.id for c in bank.cases()}
    # before the gate has learned, usefulness is the reward: every evicted case has a reward <= every survivor's
    evicted = [c for c in cases if c.id not in survivors]
    assert len(evicted) == 6
    assert max(c.reward for c in evicted) <= min(c.reward for c in cases if c.id in survivors)
    assert bank.get(evicted[0].id).id == evicted[0].id  # kept, marked
    assert len(bank.cases(include_evicted=True)) == 16
    for topic in TOPICS:
        assert not set(_ids(bank.retrieve(topic, k=10))) - survivors
    bank.close()
    assert {c.id for c, _ in CaseBank(loc, emb).retrieve(TOPICS[0], k=20)} <= survivors


def test_eviction_by_q_score_once_the_gate_has_learned(location):
    loc = location()
    emb = HashingEmbedder(dim=64)
    bank = CaseBank(loc, emb, capacity=12, eviction=True, eviction_slack=0.0, gate_options={"lr": 5e-3})
    good = [bank.add(f"good strategy official registry {i}", "search registry", reward=0.0) for i in range(6)]
    bad = [bank.add(f"bad strategy random blog {i}", "search blogs", reward=1.0) for i in range(6)]
    # experience says the registry cases help and the blog cases do not (opposite to their stored rewards)
    for step in range(30):
        query = f"company registration lookup {step % 5}"
        bank.record(query, good[:3] + bad[:3], rewards=[1, 1, 1, 0, 0, 0])
    scores = bank.usefulness()
    assert min(scores[c.id] for c in good) > max(scores[c.id] for c in bad)
    bank.add("another blog case", "search blogs", reward=1.0)
    bank.add("yet another blog case", "search blogs", reward=1.0)
    live = {c.id for c in bank.cases()}
    assert {c.id for c in good} <= live and len(live) == 12


def test_sample_softmax_frequencies_match_softmax():
    q = np.array([0.9, 0.7, 0.5, 0.3, 0.1])
    alpha = 0.25
    p = np.exp(q / alpha) / np.exp(q / alpha).sum()
    rng = np.random.default_rng(0)
    n = 40_000
    firsts = np.array([sample_softmax(q, 1, alpha=alpha, rng=rng)[0] for _ in range(n)])
    freq = np.bincount(firsts, minlength=len(q)) / n
    # tolerance: 4 standard errors of the largest cell (sqrt(p(1-p)/n) ~ 0.0025) -> 0.01 absolute
    assert np.max(np.abs(freq - p)) < 0.01
    chi2 = float((((freq - p) * n) ** 2 / (p * n)).sum())
    assert chi2 < 18.47  # chi-square 0.999 quantile, 4 degrees of freedom
    # without replacement: k distinct items, and the second pick follows softmax over the remaining ones
    picks = [tuple(sample_softmax(q, 2, alpha=alpha, rng=rng)) for _ in range(20_000)]
    assert all(a != b for a, b in picks)
    second_given_first0 = np.bincount([b for a, b in picks if a == 0], minlength=len(q))[1:]
    cond = p[1:] / p[1:].sum()
    assert np.max(np.abs(second_given_first0 / second_given_first0.sum() - cond)) < 0.02


def test_retrieve_softmax_follows_gate_q(location):
    loc = location()
    bank = CaseBank(loc, HashingEmbedder(dim=64), seed=0, gate_options={"lr": 1e-2})
    cases = [bank.add(f"{TOPICS[0]} variant {i}", f"plan {i}", reward=1.0) for i in range(4)]
    for _ in range(15):
        bank.record(TOPICS[0], cases, rewards=[1.0, 0.7, 0.3, 0.0])
    assert bank.gate_ready  # 60 logged pairs >= min_pairs (32)
    q = bank.q_scores(TOPICS[0], [c.id for c in cases])
    alpha = 0.5
    logits = q_logits(q)  # alpha is a temperature over the gate's logits
    p = np.exp(logits / alpha) / np.exp(logits / alpha).sum()
    rng = np.random.default_rng(1)
    n = 3000
    counts = {c.id: 0 for c in cases}
    for _ in range(n):
        ((case, score),) = bank.retrieve(TOPICS[0], k=1, policy="softmax", alpha=alpha, rng=rng)
        counts[case.id] += 1
    freq = np.array([counts[c.id] for c in cases]) / n
    assert np.max(np.abs(freq - p)) < 0.035  # ~4 standard errors at n=3000
    top = bank.retrieve(TOPICS[0], k=4, policy="q")
    assert [s for _, s in top] == sorted((s for _, s in top), reverse=True)
    assert top[0][0].id == cases[0].id


def test_forward_hook_sees_every_gate_score(location):
    loc = location()
    bank = CaseBank(loc, HashingEmbedder(dim=64), min_pairs=0)
    cases = _fill(bank, 12)
    bank.record(TOPICS[1], cases[:4], rewards=1.0)
    seen: list[np.ndarray] = []
    handle = bank.gate.gate.register_forward_hook(lambda mod, inputs, out: seen.append(out.detach().numpy().copy()))
    hits = bank.retrieve(TOPICS[1], k=3, policy="q", prefilter=8)
    handle.remove()
    assert len(seen) == 1 and seen[0].shape == (8,)
    assert [round(s, 5) for _, s in hits] == [round(float(x), 5) for x in np.sort(seen[0])[::-1][:3]]


def test_custom_gate_module_without_logits(location):
    loc = location()
    import torch

    class CosineOnly(torch.nn.Module):
        dim = 64

        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor(1.0))

        def forward(self, q, c):
            return torch.sigmoid(self.scale * (q * c).sum(-1))

    bank = CaseBank(loc, HashingEmbedder(dim=64), gate=CosineOnly())
    cases = _fill(bank, 6)
    loss = bank.record(TOPICS[0], cases[:2], rewards=[1.0, 0.0])
    assert loss is not None and np.isfinite(loss)
    assert isinstance(bank.gate.gate, CosineOnly)
    assert len(bank.retrieve(TOPICS[0], k=2, policy="q")) == 2


def test_deepcopy_shares_the_bank_and_threads_are_safe(location):
    loc = location()
    bank = CaseBank(loc, HashingEmbedder(dim=64))
    assert copy.deepcopy(bank) is bank

    def work(i: int) -> int:
        bank.add(f"{TOPICS[i % 6]} parallel {i}", f"plan {i}", reward=1.0)
        return len(bank.retrieve(TOPICS[i % 6], k=2))

    assert run_parallel(work, range(40), threads=4)[-1] == 2
    assert len(bank) == 40
    ids = bank._index("default").ids()
    assert len(ids) == len(set(ids.tolist())) == 40


def test_importing_case_bank_does_not_import_torch():
    code = "import memento.memory.case_bank, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_unchanged_index_is_not_rewritten_on_close(tmp_path):
    emb = HashingEmbedder(dim=32)
    bank = CaseBank(tmp_path, emb)
    _fill(bank, 10)
    bank.close()
    index_file = next((tmp_path / "index").glob("*.faiss"))
    stamp = index_file.stat().st_mtime_ns
    reader = CaseBank(tmp_path, emb)
    assert len(reader.retrieve(TOPICS[0], k=3)) == 3
    reader.close()
    assert index_file.stat().st_mtime_ns == stamp
    writer = CaseBank(tmp_path, emb)
    writer.add("one more case", "plan", reward=1.0)
    writer.close()
    assert index_file.stat().st_mtime_ns != stamp


def test_gate_ranks_only_after_min_pairs_logged_pairs(location):
    loc = location()
    bank = CaseBank(loc, HashingEmbedder(dim=64), seed=0, min_pairs=12, gate_options={"lr": 5e-2})
    query = TOPICS[0]
    # distinct cosine similarities (no ties), falling with i: cosine ranks 0, 1, 2, 3
    cases = [bank.add(query + "".join(f" extra{j}" for j in range(i)), f"plan {i}", reward=1.0) for i in range(6)]
    cosine = [(c.id, round(s, 6)) for c, s in bank.retrieve(query, k=4, policy="cosine")]
    # two tasks log 8 pairs: the gate has learned (and saved) but ranking stays cosine below min_pairs
    for _ in range(2):
        bank.record(query, cases[:4], rewards=[0.0, 0.0, 1.0, 1.0])
    assert bank.gate_trained and bank.pairs_logged() == 8 and not bank.gate_ready
    assert [(c.id, round(s, 6)) for c, s in bank.retrieve(query, k=4, policy="q")] == cosine
    seen: list[int] = []
    handle = bank.gate.gate.register_forward_hook(lambda mod, inputs, out: seen.append(len(out)))
    bank.retrieve(query, k=4, policy="softmax", alpha=0.5, seed=0)
    assert seen == []  # not even consulted for sampling
    bank.record(query, cases[:4], rewards=[0.0, 0.0, 1.0, 1.0])  # 12 pairs: the gate takes over
    assert bank.gate_ready
    ranked = bank.retrieve(query, k=4, policy="q")
    handle.remove()
    assert seen and [round(s, 6) for _, s in ranked] != [s for _, s in cosine]
    q = bank.q_scores(query, [c.id for c, _ in ranked])
    assert np.allclose([s for _, s in ranked], q) and list(q) == sorted(q, reverse=True)  # ranked by the gate's Q


def test_softmax_alpha_to_zero_is_greedy_and_large_alpha_is_uniform():
    rng = np.random.default_rng(0)
    q = np.array([0.2, 0.9, 0.55, 0.1, 0.7])
    logits = q_logits(q)
    greedy = list(np.argsort(-logits, kind="stable")[:3])
    for alpha in (1e-9, 1e-3):
        assert all(list(sample_softmax(logits, 3, alpha=alpha, rng=rng)) == greedy for _ in range(200))
    n = 20_000
    firsts = np.bincount([sample_softmax(logits, 1, alpha=1e4, rng=rng)[0] for _ in range(n)], minlength=5) / n
    assert np.max(np.abs(firsts - 0.2)) < 0.015  # uniform within ~4 standard errors
    # alpha is a temperature on the logits: at alpha=1 the first draw follows Q's odds, p_i ∝ Q_i / (1 - Q_i)
    odds = q / (1 - q)
    firsts = np.bincount([sample_softmax(logits, 1, alpha=1.0, rng=rng)[0] for _ in range(n)], minlength=5) / n
    assert np.max(np.abs(firsts - odds / odds.sum())) < 0.015


def test_bank_retrieve_softmax_at_tiny_alpha_equals_greedy_q(location):
    loc = location()
    bank = CaseBank(loc, HashingEmbedder(dim=64), seed=0, min_pairs=0, gate_options={"lr": 1e-2})
    cases = [bank.add(f"{TOPICS[0]} variant {i}", f"plan {i}", reward=1.0) for i in range(6)]
    for _ in range(5):
        bank.record(TOPICS[0], cases, rewards=[1.0, 0.8, 0.6, 0.4, 0.2, 0.0])
    greedy = [c.id for c, _ in bank.retrieve(TOPICS[0], k=4, policy="q")]
    for seed in range(20):
        assert [c.id for c, _ in bank.retrieve(TOPICS[0], k=4, policy="softmax", alpha=1e-8, seed=seed)] == greedy


def test_two_writers_on_one_memory_lose_no_gate_update_or_case(location, backend):
    loc = location()
    emb = HashingEmbedder(dim=64)
    a = CaseBank(loc, emb, seed=0, min_pairs=0)
    b = CaseBank(loc, emb, seed=0, min_pairs=0)  # a second writer (another process in real use)
    ca = a.add(TOPICS[0], "plan a", reward=1.0)
    cb = b.add(TOPICS[1], "plan b", reward=0.0)
    # each sees the other's case: the index catches up with the other's rows
    assert {c.id for c, _ in a.retrieve(TOPICS[1], k=4)} == {ca.id, cb.id}
    assert {c.id for c, _ in b.retrieve(TOPICS[0], k=4)} == {ca.id, cb.id}
    a.gate  # noqa: B018 - both gates loaded before either update
    b.gate  # noqa: B018
    a.record(TOPICS[0], [ca], 1.0)
    b.record(TOPICS[1], [cb], 0.0)  # b reloads a's saved gate first, then learns and saves on top of it
    a.record(TOPICS[2], [ca, cb], [1.0, 0.0])
    reopened = CaseBank(loc, emb, seed=0)
    assert reopened.gate.updates == 3 and reopened.gate.pairs_trained == a.gate.pairs_trained
    assert reopened.pairs_logged() == 4
    if backend == "sqlite":  # the gate updates took the directory's OS lock (PostgreSQL: an advisory lock)
        assert (loc / ".memento.lock").exists()


def test_a_bank_another_process_is_creating_opens_with_the_default_embedder(tmp_path, monkeypatch):
    """Three `run --method cbr` on one new memory: one process's SQLite file exists before its tables or its
    embedder record do. Another process opening the bank then must not call it unusable ("no such table: meta",
    seen once in CI): a writer brings the default embedder; a frozen reader still needs the record."""
    import sqlite3

    import memento.memory.case_bank as case_bank
    from memento.core.config import load_settings

    monkeypatch.setattr(case_bank, "default_embedder", lambda: HashingEmbedder(dim=16))
    settings = load_settings()
    empty, no_record = tmp_path / "empty" / "cbr", tmp_path / "no-record" / "cbr"
    for directory in (empty, no_record):
        directory.mkdir(parents=True)
        sqlite3.connect(directory / "cases.db").close()  # the file another process's connect just made
    with sqlite3.connect(no_record / "cases.db") as conn:  # its tables made, its embedder not yet recorded
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    for directory in (empty, no_record):
        with pytest.raises(CaseBankError, match="records no embedder"):
            case_bank.open_case_bank(directory, settings, frozen=True, missing="")
        bank = case_bank.open_case_bank(directory, settings, frozen=False, missing="")
        assert getattr(bank.embedder, "name", None) == HashingEmbedder(dim=16).name
        bank.add("Who wrote book number 2?", "search the catalogue", reward=1.0)
        assert len(bank) == 1
        bank.close()
        assert case_bank.open_case_bank(directory, settings, frozen=True, missing="").embedder.dim == 16
