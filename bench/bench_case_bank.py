"""Benchmark of the CBR case bank and its learned Q-gate (issue 7). Prints markdown tables.

Sections (each measured in this run, on this machine):

1. Q-gate vs cosine on synthetic (query, case, reward) data whose usefulness depends on a hidden feature that
   embedding similarity does not capture: held-out AUC of both after online training, online training throughput
   (the gate update alone and the whole ``bank.record()`` with its SQLite log and ``qgate.pt`` write), and the
   useful share of the top-4 retrieved by ``q`` vs ``cosine``.
2. Scale: N cases (default 100,000, dim 384): insert throughput (batched and single), ``retrieve(k=4)`` latency
   p50/p95 for ``cosine``/``q``/``softmax`` with the exact index and with HNSW, HNSW recall@4 vs exact, namespace +
   base namespace search, memory footprint (RSS, files), reload time.
3. Softmax sampling: empirical first-draw frequencies vs ``softmax(Q/alpha)`` (max abs deviation, chi-square).
4. Eviction (capacity cap, least-useful-first by Q) vs a FIFO cap, on data where some cases are never useful.
5. Executor-level case bank: per-sub-task overhead (retrieve + add) at 1,000 tool cases.
8. Online learning on hidden-usefulness data: the gate trained on greedy-Q retrievals vs on softmax(logit(Q)/alpha)
   samples vs cosine; precision of useful cases in the top 4 (held-out queries, greedy) after N tasks.

Usage:
    python bench/bench_case_bank.py            # full run (100k cases; ~10 min on 2 cores)
    python bench/bench_case_bank.py --quick    # 10k cases, smaller synthetic sets
    python bench/bench_case_bank.py --only online [--alpha 1.0 --min-pairs 32]   # default: the [cbr] settings
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from memento.memory.retrieval_policy import RetrievalPolicy
from memento.testing import LookupEmbedder

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def pct(values, q) -> float:
    return float(np.percentile(np.asarray(values) * 1e3, q))


class HiddenWorld:
    """Unit vectors with hidden signs along orthogonal directions u (queries) and v (cases): a case helps a query
    iff the signs agree (and, with ``bad_share``, iff the case is not one of the never-useful ones, marked along a
    third hidden direction w). Cosine similarity carries no signal about usefulness."""

    def __init__(self, dim: int, seed: int, amp: float = 0.3) -> None:
        self.rng = np.random.default_rng(seed)
        basis, _ = np.linalg.qr(self.rng.standard_normal((dim, 3)))
        self.u, self.v, self.w = basis.T
        self.dim, self.amp = dim, amp

    def _base(self, n: int) -> np.ndarray:
        g = self.rng.standard_normal((n, self.dim))
        for d in (self.u, self.v, self.w):
            g -= np.outer(g @ d, d)
        return g / np.linalg.norm(g, axis=1, keepdims=True)

    def queries(self, n: int):
        sign = self.rng.choice([-1.0, 1.0], size=n)
        x = self._base(n) + self.amp * sign[:, None] * self.u
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), sign

    def cases(self, n: int, bad_share: float = 0.0):
        sign = self.rng.choice([-1.0, 1.0], size=n)
        bad = self.rng.random(n) < bad_share
        x = self._base(n) + self.amp * sign[:, None] * self.v + self.amp * np.where(bad, 1.0, -1.0)[:, None] * self.w
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), sign, bad


# -- 1. Q-gate vs cosine ----------------------------------------------------------------------------------------
def bench_gate(tmp: Path, *, dim: int, tasks: int, n_cases: int, alpha: float, min_pairs: int) -> list[str]:
    from memento.memory.case_bank import CaseBank
    from memento.memory.q_gate import roc_auc

    world = HiddenWorld(dim, seed=0, amp=0.2)
    emb = LookupEmbedder(dim)
    bank = CaseBank(tmp / "gate", emb, seed=0, min_pairs=min_pairs, gate_options={"lr": 2e-3})
    noise = np.random.default_rng(5)
    vecs, signs, _ = world.cases(n_cases)
    for j, vec in enumerate(vecs):
        emb.table[f"case {j}"] = vec
    cases = bank.add_many([{"task_text": f"case {j}", "plan": f"plan {j}", "reward": 1.0} for j in range(n_cases)])
    sign_of = {c.id: s for c, s in zip(cases, signs, strict=True)}
    qv, qs = world.queries(tasks)
    t_record = 0.0
    pairs = 0
    replayed = []
    for t in range(tasks):
        emb.table[f"q {t}"] = qv[t]
        hits = bank.retrieve(f"q {t}", k=4, policy="softmax", alpha=alpha, prefilter=32, seed=t)
        rewards = [float((sign_of[c.id] == qs[t]) != (noise.random() < 0.1)) for c, _ in hits]  # 10% flipped
        started = time.perf_counter()
        # the product path: log the pairs (SQLite), update the gate online, write qgate.pt
        bank.record(f"q {t}", [c for c, _ in hits], rewards)
        t_record += time.perf_counter() - started
        replayed.append((qv[t], bank.embeddings([c.id for c, _ in hits]), np.asarray(rewards, dtype=np.float32)))
        pairs += len(hits)
    # the gate update alone, replayed on a fresh learner over the same pairs
    from memento.memory.q_gate import QGate, QGateLearner

    alone = QGateLearner(QGate(dim), dim=dim, seed=0, lr=2e-3)
    started = time.perf_counter()
    for q_vec, c_vecs, rs in replayed:
        alone.update(q_vec, c_vecs, rs)
    t_update = time.perf_counter() - started
    hq, hqs = world.queries(2000)
    hc, hcs, _ = world.cases(2000)
    labels = (hqs == hcs).astype(float)
    gate_auc = roc_auc(bank.gate.score(hq, hc), labels)
    cos_auc = roc_auc((hq * hc).sum(1), labels)
    # retrieval: share of useful cases in the top 4 by q vs cosine, on held-out queries
    useful: dict[RetrievalPolicy, list[float]] = {"q": [], "cosine": []}
    for i in range(200):
        emb.table[f"probe {i}"] = hq[i]
        for policy in useful:
            hits = bank.retrieve(f"probe {i}", k=4, policy=policy, prefilter=32)
            useful[policy].extend(float(sign_of[c.id] == hqs[i]) for c, _ in hits)
    # offline fit throughput on the same number of pairs
    fresh = QGateLearner(QGate(dim), dim=dim, seed=1)
    fq, fqs = world.queries(pairs)
    fc, fcs, _ = world.cases(pairs)
    started = time.perf_counter()
    fresh.fit(fq, fc, (fqs == fcs).astype(float), epochs=5)
    fit_rate = 5 * pairs / (time.perf_counter() - started)
    return [
        f"dim {dim}, {n_cases} cases, {tasks} online tasks x 4 retrieved cases = {pairs} training pairs "
        f"(softmax exploration over logit(Q), alpha {alpha}, min_pairs {min_pairs}; 10% of training rewards flipped); "
        "held-out: 2,000 fresh (query, case) "
        f"pairs labelled with their true usefulness",
        "",
        "| measure | Q-gate | cosine |",
        "|---|---|---|",
        f"| held-out AUC | {gate_auc:.3f} | {cos_auc:.3f} |",
        f"| useful share of top-4 retrieved (200 held-out queries) | {np.mean(useful['q']):.3f} | "
        f"{np.mean(useful['cosine']):.3f} |",
        f"| online training throughput, gate update alone (new pairs/s; 2 Adam steps of 64 rows per task) | "
        f"{pairs / t_update:,.0f} | - |",
        f"| online training throughput, `bank.record()` (pairs/s: log pairs + gate update + write qgate.pt; "
        f"{1000 * t_record / tasks:.1f} ms per task) | {pairs / t_record:,.0f} | - |",
        f"| offline fit throughput (pairs/s, batch 128) | {fit_rate:,.0f} | - |",
    ]


# -- 2. scale ---------------------------------------------------------------------------------------------------
def _scale_run(tmp: Path, *, n: int, dim: int, queries: int, hnsw: bool) -> dict:
    from memento.memory.case_bank import CaseBank
    from memento.memory.embedder import HashingEmbedder
    from memento.memory.namespace_index import NamespaceIndex

    words = [f"w{i}" for i in range(5000)]
    rng = np.random.default_rng(0)

    def text(i: int) -> str:
        return f"task {i}: " + " ".join(rng.choice(words, size=12))

    import faiss  # noqa: F401 - loaded before the RSS baseline: only the bank's own memory is counted
    import torch  # noqa: F401

    emb = HashingEmbedder(dim=dim)
    path = tmp / f"scale-{'hnsw' if hnsw else 'flat'}"
    rss0 = rss_mb()
    bank = CaseBank(path, emb, seed=0, hnsw_threshold=n // 2 if hnsw else 10 * n)
    batch = 1000
    started = time.perf_counter()
    for start in range(0, n - 2000, batch):
        rows = [
            {"task_text": text(i), "plan": f"plan {i}", "reward": float(i % 2)} for i in range(start, start + batch)
        ]
        bank.add_many(rows)
    t_batch = time.perf_counter() - started
    n_batch = (n - 2000) // batch * batch
    single = []
    for i in range(n_batch, n):
        s = time.perf_counter()
        bank.add(text(i), f"plan {i}", reward=float(i % 2))
        single.append(time.perf_counter() - s)
    index = bank._index("default")
    assert index.hnsw == hnsw and index.live == n, (index.hnsw, index.live)
    # train the gate a little so q/softmax use it
    qtexts = [text(10**7 + i) for i in range(queries)]
    for qt in qtexts[:50]:
        hits = bank.retrieve(qt, k=4)
        bank.record(qt, [c for c, _ in hits], rewards=[float(c.reward) for c, _ in hits])
    lat: dict[RetrievalPolicy, list[float]] = {"cosine": [], "q": [], "softmax": []}
    for qt in qtexts:
        for policy in lat:
            s = time.perf_counter()
            bank.retrieve(qt, k=4, policy=policy, prefilter=32)
            lat[policy].append(time.perf_counter() - s)
    rss_built = rss_mb()
    recall = float("nan")
    if hnsw:  # recall@4 of the HNSW index against exact search over the same vectors
        ids, vecs = index.all_vectors()
        flat = NamespaceIndex(dim, hnsw=False, hnsw_m=32, ef_search=64, ef_construction=64)
        flat.add(ids, vecs)
        found: list[float] = []
        for q in emb.embed(qtexts):
            exact = {i for i, _ in flat.search(q, 4)}
            found.append(len(exact & {i for i, _ in index.search(q, 4)}) / 4)
        recall = float(np.mean(found))
        del flat
    # namespace + shared base namespace
    client = CaseBank(
        path, emb, namespace="client", base_namespace="default", seed=0, hnsw_threshold=bank.hnsw_threshold
    )
    client.add_many([{"task_text": text(2 * 10**7 + i), "plan": "p", "reward": 1.0} for i in range(1000)])
    ns_lat = []
    for qt in qtexts:
        s = time.perf_counter()
        client.retrieve(qt, k=4)
        ns_lat.append(time.perf_counter() - s)
    bank.close()
    client.close()
    files = {p.name: p.stat().st_size / 2**20 for p in path.rglob("*") if p.is_file()}
    started = time.perf_counter()
    again = CaseBank(path, emb, seed=0, hnsw_threshold=bank.hnsw_threshold)
    again.retrieve(qtexts[0], k=4, policy="q")
    reload_s = time.perf_counter() - started
    again.close()

    def p(values):
        return f"{pct(values, 50):.2f} / {pct(values, 95):.2f} ms"

    return {
        "insert throughput, add_many batches of 1000 (embed + SQLite + index)": f"{n_batch / t_batch:,.0f} cases/s",
        f"insert latency, single add() p50 / p95 (at ~{n // 1000}k cases)": p(single),
        "retrieve(k=4, cosine) p50 / p95": p(lat["cosine"]),
        "retrieve(k=4, q) p50 / p95 (prefilter 32 + gate)": p(lat["q"]),
        "retrieve(k=4, softmax) p50 / p95": p(lat["softmax"]),
        "recall@4 vs exact search": "1 (exact)" if not hnsw else f"{recall:.3f}",
        f"retrieve(k=4) in a 1k-case namespace + the {n // 1000}k base namespace p50 / p95": p(ns_lat),
        "process RSS growth (bank + index + gate, after queries)": f"{rss_built - rss0:,.0f} MB",
        "on disk: cases.db (with embeddings) / FAISS index / qgate.pt": (
            f"{sum(v for k, v in files.items() if k.startswith('cases.db')):,.0f} / "
            f"{sum(v for k, v in files.items() if k.endswith('.faiss')):,.0f} / {files.get('qgate.pt', 0):.1f} MB"
        ),
        "reopen from disk + first q retrieval": f"{reload_s:.2f} s",
    }


def bench_scale(tmp: Path, *, n: int, dim: int, queries: int) -> list[str]:
    flat = _scale_run(tmp, n=n, dim=dim, queries=queries, hnsw=False)
    hnsw = _scale_run(tmp, n=n, dim=dim, queries=queries, hnsw=True)
    lines = [
        f"{n:,} cases, dim {dim}, {queries} queries. Texts are 12 random words from a 5,000-word vocabulary embedded "
        "with the hashing embedder, so model time is excluded (MiniLM costs are in section 6) and the vectors have no "
        "neighbourhood structure: the worst case for HNSW. Exact = the bank's default below 200k cases "
        "(IndexFlatIP); HNSW = M 32, efConstruction 64, efSearch 128 (forced here with a low threshold).",
        "",
        "| measure | exact (IndexFlatIP) | HNSW |",
        "|---|---|---|",
    ]
    for key in flat:
        lines.append(f"| {key} | {flat[key]} | {hnsw[key]} |")
    return lines


# -- 3. softmax -------------------------------------------------------------------------------------------------
def bench_softmax(draws: int) -> list[str]:
    from memento.memory.case_bank import sample_softmax

    rng = np.random.default_rng(0)
    q = np.array([0.92, 0.81, 0.64, 0.55, 0.40, 0.22, 0.10, 0.05])
    lines = ["| alpha | draws | max abs deviation | chi-square (7 dof; 0.999 quantile 24.3) |", "|---|---|---|---|"]
    for alpha in (0.1, 0.5, 1.0):
        p = np.exp(q / alpha) / np.exp(q / alpha).sum()
        counts = np.bincount([sample_softmax(q, 1, alpha=alpha, rng=rng)[0] for _ in range(draws)], minlength=len(q))
        freq = counts / draws
        chi2 = float(((counts - p * draws) ** 2 / (p * draws)).sum())
        lines.append(f"| {alpha} | {draws:,} | {np.abs(freq - p).max():.4f} | {chi2:.1f} |")
    return lines


# -- 4. eviction ------------------------------------------------------------------------------------------------
def bench_eviction(tmp: Path, *, dim: int, stream: int, capacity: int, alpha: float, min_pairs: int) -> list[str]:
    from memento.memory.case_bank import CaseBank

    results: dict[str, tuple[int, float, float, float]] = {}
    for mode in ("q-eviction", "fifo-q", "fifo"):
        world = HiddenWorld(dim, seed=1)
        emb = LookupEmbedder(dim)
        bank = CaseBank(
            tmp / f"evict-{mode}",
            emb,
            seed=0,
            capacity=capacity,
            eviction=True,
            min_pairs=min_pairs,
            gate_options={"lr": 2e-3},
        )
        if mode.startswith("fifo"):  # baseline cap: evict the oldest cases, whatever the gate thinks of them
            bank.usefulness = lambda *a, _bank=bank, **k: {  # type: ignore[method-assign]
                c.id: i for i, c in enumerate(_bank.cases())
            }
        vecs, signs, bad = world.cases(stream, bad_share=0.5)
        qv, qs = world.queries(stream)
        info: dict[str, tuple[float, bool]] = {}
        started = time.perf_counter()
        for j in range(stream):
            emb.table[f"case {j}"] = vecs[j]
            case = bank.add(f"case {j}", f"plan {j}", reward=1.0)
            info[case.id] = (signs[j], bool(bad[j]))
            emb.table[f"q {j}"] = qv[j]
            hits = bank.retrieve(f"q {j}", k=4, policy="softmax", alpha=alpha, prefilter=32, seed=j)
            rewards = [float(info[c.id][0] == qs[j] and not info[c.id][1]) for c, _ in hits]
            bank.record(f"q {j}", [c for c, _ in hits], rewards, learn=(mode != "fifo"))
        seconds = time.perf_counter() - started
        live = bank.cases()
        good_share = float(np.mean([not info[c.id][1] for c in live]))
        hq, hqs = world.queries(200)
        got: list[float] = []
        for i in range(200):
            emb.table[f"probe {i}"] = hq[i]
            policy: RetrievalPolicy = "cosine" if mode == "fifo" else "q"
            hits = bank.retrieve(f"probe {i}", k=4, policy=policy, prefilter=32)
            got.extend(float(info[c.id][0] == hqs[i] and not info[c.id][1]) for c, _ in hits)
        results[mode] = (len(live), good_share, float(np.mean(got)), seconds / stream * 1e3)
    lines = [
        f"stream of {stream} cases (half never useful, marked only by a hidden feature) into a bank capped at "
        f"{capacity}; each step adds a case and runs one task (retrieve 4 by softmax over logit(Q), alpha {alpha}, "
        f"min_pairs {min_pairs}; reward; record)",
        "",
        "| cap policy | live cases | share of live cases that can be useful | useful share of top-4 "
        "(200 held-out queries) | ms/step |",
        "|---|---|---|---|---|",
    ]
    for mode, label in (
        ("q-eviction", "least useful first by Q (+ q retrieval)"),
        ("fifo-q", "FIFO (oldest first) + q retrieval"),
        ("fifo", "FIFO, no gate (+ cosine)"),
    ):
        n_live, good, useful_share, ms = results[mode]
        lines.append(f"| {label} | {n_live} | {good:.3f} | {useful_share:.3f} | {ms:.1f} |")
    return lines


# -- 5. executor-level bank -------------------------------------------------------------------------------------
def bench_executor_bank(tmp: Path) -> list[str]:
    from memento.memory.case_bank import CaseBank
    from memento.memory.embedder import HashingEmbedder

    bank = CaseBank(tmp / "tools", HashingEmbedder(dim=384))
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(2000)]
    bank.add_many(
        [
            {"task_text": " ".join(rng.choice(words, 10)), "plan": "search_web(query='x') -> 5 urls", "reward": 1.0}
            for _ in range(1000)
        ]
    )
    ret, add = [], []
    for i in range(200):
        q = " ".join(rng.choice(words, 10))
        s = time.perf_counter()
        bank.retrieve(q, k=2)
        ret.append(time.perf_counter() - s)
        s = time.perf_counter()
        bank.add(q, "scrape(url='https://x') -> 1 urls", reward=float(i % 2))
        add.append(time.perf_counter() - s)
    return [
        "| per sub-task, 1,000 tool cases (hashing embedder) | p50 | p95 |",
        "|---|---|---|",
        f"| retrieve 2 tool cases | {pct(ret, 50):.2f} ms | {pct(ret, 95):.2f} ms |",
        f"| store the finished sub-task | {pct(add, 50):.2f} ms | {pct(add, 95):.2f} ms |",
    ]


def bench_minilm(n: int) -> list[str]:
    from memento.memory.embedder import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(cache_size=0)
    texts = [f"Who was the director of film number {i} released in {1950 + i % 70}?" for i in range(n)]
    emb.embed(texts[:4])
    s = time.perf_counter()
    emb.embed(texts)
    bulk = n / (time.perf_counter() - s)
    single = []
    for t in texts[:30]:
        s = time.perf_counter()
        emb.embed([t + " again"])
        single.append(time.perf_counter() - s)
    cached = SentenceTransformerEmbedder(cache_size=100)
    cached._model, cached._dim = emb._model, emb._dim
    cached.embed(texts[:1])
    s = time.perf_counter()
    for _ in range(1000):
        cached.embed(texts[:1])
    hit_us = (time.perf_counter() - s) / 1000 * 1e6
    return [
        "| MiniLM (all-MiniLM-L6-v2, bundled, CPU) | value |",
        "|---|---|",
        f"| batch embedding ({n} texts, batch 64) | {bulk:,.0f} texts/s |",
        f"| one query text p50 / p95 | {pct(single, 50):.1f} / {pct(single, 95):.1f} ms |",
        f"| LRU cache hit | {hit_us:.0f} us |",
    ]


_THREADS_PROBE = """
import time, numpy as np
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder, SentenceTransformerEmbedder
import tempfile
bank = CaseBank(tempfile.mkdtemp(), HashingEmbedder(dim=384))
bank.add_many([{"task_text": f"task {i} about topic {i % 97}", "plan": "p", "reward": 1.0} for i in range(20000)])
hits = bank.retrieve("task 5 about topic 5", k=4)
bank.record("task 5 about topic 5", [c for c, _ in hits], 1.0)
lat = []
for i in range(200):
    s = time.perf_counter()
    bank.retrieve(f"task {i} about topic {i % 13}", k=4, policy="q")
    lat.append(time.perf_counter() - s)
emb = SentenceTransformerEmbedder(cache_size=0); emb.embed(["warm up"])
one = []
for i in range(20):
    s = time.perf_counter()
    emb.embed([f"query number {i} about films"])
    one.append(time.perf_counter() - s)
s = time.perf_counter()
emb.embed([f"text {i} about a topic" for i in range(128)])
bulk = 128 / (time.perf_counter() - s)
print(np.percentile(lat, 95) * 1e3, np.percentile(one, 50) * 1e3, bulk)
"""


def bench_threads() -> list[str]:
    import subprocess
    import sys

    lines = [
        "| MEMENTO_COMPUTE_THREADS | retrieve(k=4, q) p95, 20k cases | MiniLM one query p50 | MiniLM batch |",
        "|---|---|---|---|",
    ]
    for n in (1, 2):
        env = {**os.environ, "MEMENTO_COMPUTE_THREADS": str(n), "HF_HUB_OFFLINE": "1"}
        out = subprocess.run(
            [sys.executable, "-c", _THREADS_PROBE], env=env, capture_output=True, text=True, check=True
        )
        p95, one, bulk = (float(x) for x in out.stdout.split())
        lines.append(f"| {n} | {p95:.2f} ms | {one:.1f} ms | {bulk:,.0f} texts/s |")
    return lines


# -- 8. online learning: exploration vs greedy -------------------------------------------------------------------
def bench_online(tmp: Path, *, dim: int, tasks: int, n_cases: int, alpha: float, min_pairs: int) -> list[str]:
    """Three banks over the same cases and the same stream of tasks: the gate trained on what greedy Q retrieves,
    the gate trained on what softmax(logit(Q)/alpha) samples, and cosine (no learning). After each checkpoint the
    precision of useful cases in the top 4 is measured greedily on held-out probe queries."""
    from memento.memory.case_bank import CaseBank

    amp, seed, flip, prefilter, probes = 0.2, 11, 0.1, 32, 200
    world = HiddenWorld(dim, seed=seed, amp=amp)
    vecs, signs, _ = world.cases(n_cases)
    qv, qs = world.queries(tasks)
    pv, ps = world.queries(probes)
    checkpoints = sorted({max(1, tasks // 8), tasks // 4, tasks // 2, tasks})
    runs: dict[str, RetrievalPolicy] = {
        "greedy Q (train q)": "q",
        "softmax (train softmax)": "softmax",
        "cosine (no gate)": "cosine",
    }
    table: dict[str, dict[int, float]] = {}
    online: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for label, policy in runs.items():
        emb = LookupEmbedder(dim)
        for j, vec in enumerate(vecs):
            emb.table[f"case {j}"] = vec
        for t in range(tasks):
            emb.table[f"q {t}"] = qv[t]
        for i in range(probes):
            emb.table[f"probe {i}"] = pv[i]
        bank = CaseBank(
            tmp / f"online-{policy}", emb, seed=0, min_pairs=min_pairs, prefilter=prefilter, gate_options={"lr": 2e-3}
        )
        cases = bank.add_many([{"task_text": f"case {j}", "plan": f"p{j}", "reward": 1.0} for j in range(n_cases)])
        sign_of = {c.id: s for c, s in zip(cases, signs, strict=True)}
        noise = np.random.default_rng(5)  # the same flipped rewards in every run
        table[label] = {}
        got: list[float] = []
        started = time.perf_counter()
        for t in range(tasks):
            hits = bank.retrieve(f"q {t}", k=4, policy=policy, alpha=alpha, seed=t)
            truth = [float(sign_of[c.id] == qs[t]) for c, _ in hits]
            got.extend(truth)
            if policy != "cosine":
                rewards = [float(x != (noise.random() < flip)) for x in truth]
                bank.record(f"q {t}", [c for c, _ in hits], rewards)
            if t + 1 in checkpoints:
                test: RetrievalPolicy = "cosine" if policy == "cosine" else "q"  # testing is greedy
                useful_now: list[float] = []
                for i in range(probes):
                    useful_now.extend(
                        float(sign_of[c.id] == ps[i]) for c, _ in bank.retrieve(f"probe {i}", k=4, policy=test)
                    )
                table[label][t + 1] = float(np.mean(useful_now))
        seconds[label] = time.perf_counter() - started
        online[label] = float(np.mean(got))
        bank.close()
    lines = [
        f"Generator: HiddenWorld(dim={dim}, seed={seed}, amp={amp}) — a case helps a query iff hidden signs agree "
        f"(half of all pairs useful by construction; cosine carries no signal); {n_cases} cases, "
        f"{tasks} training tasks, k=4, prefilter {prefilter}, {int(flip * 100)}% of training rewards flipped, "
        f"gate lr 2e-3, min_pairs {min_pairs}, softmax alpha {alpha} over logit(Q); {probes} held-out probe queries "
        "ranked greedily (Q for the gates, cosine for cosine).",
        "",
        "| training | " + " | ".join(f"precision@4 after {n} tasks" for n in checkpoints) + " | useful share retrieved "
        "while training | s |",
        "|---|" + "---|" * len(checkpoints) + "---|---|",
    ]
    for label in runs:
        cells = " | ".join(f"{table[label][n]:.3f}" for n in checkpoints)
        lines.append(f"| {label} | {cells} | {online[label]:.3f} | {seconds[label]:.1f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10k cases and smaller synthetic sets")
    parser.add_argument("--cases", type=int, default=None, help="cases for the scale section (default 100000)")
    parser.add_argument("--skip-minilm", action="store_true")
    parser.add_argument(
        "--only",
        choices=["gate", "scale", "softmax", "eviction", "executor", "minilm", "threads", "online"],
        default=None,
    )
    from memento.core.config import CBRSettings

    cbr = CBRSettings()  # the [cbr] defaults
    parser.add_argument(
        "--alpha", type=float, default=cbr.alpha, help="training softmax temperature over logit(Q) ([cbr] alpha)"
    )
    parser.add_argument(
        "--min-pairs", type=int, default=cbr.min_pairs, help="pairs before the gate ranks ([cbr] min_pairs)"
    )
    args = parser.parse_args()
    n = args.cases or (10_000 if args.quick else 100_000)
    q = args.quick
    tmp = Path(tempfile.mkdtemp(prefix="bench_case_bank_"))
    try:
        print(
            f"## Case bank and Q-gate ({os.cpu_count()} cores, compute threads "
            f"{os.environ.get('MEMENTO_COMPUTE_THREADS', '1')})\n"
        )
        sections = [
            (
                "gate",
                "1. Q-gate learns what cosine cannot",
                lambda: bench_gate(
                    tmp, dim=384, tasks=300 if q else 800, n_cases=2000, alpha=args.alpha, min_pairs=args.min_pairs
                ),
            ),
            ("scale", "2. Scale", lambda: bench_scale(tmp, n=n, dim=384, queries=300 if q else 1000)),
            ("softmax", "3. Softmax sampling vs softmax(Q/alpha)", lambda: bench_softmax(20_000 if q else 100_000)),
            (
                "eviction",
                "4. Eviction",
                lambda: bench_eviction(
                    tmp,
                    dim=64,
                    stream=600 if q else 1500,
                    capacity=200 if q else 400,
                    alpha=args.alpha,
                    min_pairs=args.min_pairs,
                ),
            ),
            ("executor", "5. Executor-level case bank overhead", lambda: bench_executor_bank(tmp)),
            ("minilm", "6. Embedding cost (MiniLM)", lambda: bench_minilm(256)),
            ("threads", "7. Compute threads (torch + FAISS OpenMP)", bench_threads),
            (
                "online",
                "8. Online learning: greedy-Q vs softmax training vs cosine (precision of useful cases in the top 4)",
                lambda: bench_online(
                    tmp, dim=64, tasks=300 if q else 800, n_cases=1000, alpha=args.alpha, min_pairs=args.min_pairs
                ),
            ),
        ]
        for key, title, run in sections:
            skipped = key in ("minilm", "threads") and args.skip_minilm and args.only != key
            if (args.only and key != args.only) or skipped:
                continue
            print(f"### {title}\n", flush=True)
            print("\n".join(run()) + "\n", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
