"""Storage backends side by side (issue 25 item 7): SQLite and PostgreSQL in the same run.

For each backend: write and read throughput of each store (MEMENTO items, cases, trajectories with pages shared by
hash), case retrieval p50/p95 and recall@4 against exact search (k=4, policies cosine and q, 256-d, topic-clustered
synthetic embeddings: the approximate index is calibrated to recall@4 >= 0.95 past its threshold), trajectory
retrieval p50/p95, and four processes appending cases and trajectories into one memory at once (every row kept;
batches applied under the same key by several processes applied once). PostgreSQL is a scratch server started by the
bench (:class:`memento.execution.local_postgres.LocalPostgres`), on the same machine. Prints markdown tables.

    python bench/bench_storage.py                       # 100k cases, 2k trajectories (a few minutes per backend)
    python bench/bench_storage.py --cases 1000000 --trajectories 100000   # the issue's sizes (hours on 2 cores)
    python bench/bench_storage.py --quick               # 5k cases, 300 trajectories
    python bench/bench_storage.py --only cases --backends postgres --cases 1000000 --measure-at 100000,300000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from memento.memory.location import LocationLike

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DIM = 256
PAGE_CHARS = 20_000


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q))


class TopicEmbedder:
    """Deterministic topic-clustered unit vectors: the text ``"t<topic> ..."`` lands near its topic's centre (tasks of
    one kind resemble each other, as real task embeddings do); the same text always gets the same vector."""

    name, dim = "bench-topics-256", DIM

    def __init__(self, topics: int, noise: float = 1.5) -> None:
        rng = np.random.default_rng(0)
        self.centres = rng.standard_normal((topics, DIM)).astype(np.float32)
        self.noise = noise

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            topic = int(text.split()[0][1:])
            rng = np.random.default_rng(abs(hash(text)) % (2**32))
            x = self.centres[topic] + self.noise * rng.standard_normal(DIM).astype(np.float32)
            out[row] = x / np.linalg.norm(x)
        return out


def _case_measures(bank: Any, emb: TopicEmbedder, queries: int, topics: int, n: int) -> dict[str, str]:
    """Retrieval latency (cosine and q) and held-out recall@4 of ``bank`` as it stands."""
    from memento.memory.namespace_index import NamespaceIndex

    qtexts = [f"t{i % topics} query {n}-{i}" for i in range(queries)]
    lat: dict[str, list[float]] = {"cosine": [], "q": []}
    for qt in qtexts:
        for policy in lat:
            s = time.perf_counter()
            bank.retrieve(qt, k=4, policy=policy)
            lat[policy].append(time.perf_counter() - s)
    index = bank._index("default")
    ids, vecs = index.all_vectors()
    exact = NamespaceIndex(DIM, hnsw=False, hnsw_m=32, ef_search=64, ef_construction=64)
    exact.add(ids, vecs)
    del vecs
    found = 0
    for q in emb.embed(qtexts):
        truth = exact.search(q, 4)
        kth = truth[-1][1]
        found += sum(s >= kth - 1e-5 for _, s in index.search(q, 4))
    info = bank.index_info()
    ef = f"efSearch {info['ef_search']}, " if info["ef_search"] is not None else ""
    return {
        "index": f"{info['kind']} ({ef}calibrated recall@4 {info['recall@4']:.3f})",
        "retrieve k=4 cosine p50 / p95 ms": f"{pct(lat['cosine'], 50):.2f} / {pct(lat['cosine'], 95):.2f}",
        "retrieve k=4 q p50 / p95 ms": f"{pct(lat['q'], 50):.2f} / {pct(lat['q'], 95):.2f}",
        "recall@4 against exact search (held-out queries)": f"{found / (4 * queries):.3f}",
    }


def bench_cases(location: LocationLike, n: int, queries: int, measure_at: list[int] | None = None) -> dict[str, str]:
    """Write ``n`` cases; measure retrieval at the end and at each size of ``measure_at`` on the way (printed to
    stderr as soon as measured, so a run stopped early still leaves its largest size measured)."""
    from memento.memory.case_bank import CaseBank

    topics = max(100, n // 100)
    emb = TopicEmbedder(topics)
    bank = CaseBank(location, emb, seed=0, min_pairs=0)
    points = sorted({p for p in (measure_at or []) if 0 < p < n} | {n})
    batch, written, write_s = 1000, 0, 0.0
    out: dict[str, str] = {}
    trained = False
    for point in points:
        started = time.perf_counter()
        for start in range(written, point, batch):
            rows = [
                {"task_text": f"t{i % topics} case {i}", "plan": f"plan {i}", "reward": float(i % 2)}
                for i in range(start, min(point, start + batch))
            ]
            bank.add_many(rows)
            if (start // batch) % 50 == 0:
                print(f"  cases written: {start + len(rows):,}", file=sys.stderr, flush=True)
        write_s += time.perf_counter() - started
        written = point
        started = time.perf_counter()
        bank.index_info()  # the index: caught up (and built past the threshold, calibrated)
        index_s = time.perf_counter() - started
        if not trained:  # a little gate training, so q ranks with the gate
            for i in range(40):
                qt = f"t{i % topics} warm-up {i}"
                hits = bank.retrieve(qt, k=4)
                bank.record(qt, [c for c, _ in hits], rewards=[float(c.reward) for c, _ in hits])
            trained = True
        row = {
            "cases": f"{point:,}",
            "write cases/s (batches of 1000, embeddings and index inserts included)": f"{point / write_s:,.0f}",
            "index build/catch-up after the writes s": f"{index_s:.1f}",
            **_case_measures(bank, emb, queries, topics, point),
        }
        print(f"  measured at {point:,} cases: {json.dumps(row)}", file=sys.stderr, flush=True)
        if point != n:
            out.update({f"{key} @ {point:,}": value for key, value in row.items() if key != "cases"})
    bank.close()
    return {**row, **out}


def _trajectory(i: int, pages: int) -> object:
    from memento.core.types import Node, PageResult, ToolCall, Trajectory

    calls = []
    for j in range(3):
        page_no = (i * 7 + j) % pages  # pages shared by hash across trajectories
        text = (f"page {page_no} " + "lorem ipsum dolor sit amet " * (PAGE_CHARS // 27 + 1))[:PAGE_CHARS]
        page = PageResult.of_text(url=f"corpus://p{page_no}", title=f"p{page_no}", text=text)
        calls.append(ToolCall(kind="scrape", args={"url": page.url}, page=page, node_id="root"))
    return Trajectory(
        task_id=f"t{i}",
        task_text=f"Who founded company {i} in city {i % 97}?",
        nodes=[Node(id="root", question="q", answer=f"founder {i}", status="answered")],
        tool_calls=calls,
    )


def bench_trajectories(location: LocationLike, n: int, queries: int, disk_cap_gb: float = 20.0) -> dict[str, str]:
    """Write up to ``n`` trajectories (stopping early once the bank's size on disk passes ``disk_cap_gb``), then time
    retrievals that read records and pages back."""
    from memento.memory.trajectory_bank import TrajectoryBank

    pages = max(50, n // 20)
    bank = TrajectoryBank(location)
    started = time.perf_counter()
    written, capped = 0, False
    for start in range(0, n, 100):
        with bank.batch(key=f"b{start}"):
            for i in range(start, min(n, start + 100)):
                bank.add(_trajectory(i, pages), accepted=True)  # type: ignore[arg-type]
        written = min(n, start + 100)
        if written % 5000 == 0:
            total = bank.disk_usage().total_bytes
            print(f"  trajectories written: {written:,} ({total / 1e6:,.0f} MB)", file=sys.stderr, flush=True)
            if total > disk_cap_gb * 1e9:
                capped = True
                break
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    bank.retrieve("Who founded company 1?", k=3)
    first_s = time.perf_counter() - started
    lat = []
    for i in range(queries):
        s = time.perf_counter()
        hits = bank.retrieve(f"Who founded company {i * 13 % written}?", k=3)
        lat.append(time.perf_counter() - s)
        assert hits and len(getattr(hits[0][0].tool_calls[0].page, "text", "")) == PAGE_CHARS  # pages given back whole
    usage = bank.disk_usage()
    bank.close()
    cap = f", stopped by the {disk_cap_gb:g} GB disk cap" if capped else f" (disk cap {disk_cap_gb:g} GB)"
    return {
        "trajectories": f"{written:,}{cap} ({pages:,} distinct pages of {PAGE_CHARS:,} chars, 3 per trajectory)",
        "write trajectories/s (batches of 100)": f"{written / write_s:,.1f}",
        "first retrieval (index build) s": f"{first_s:.2f}",
        "retrieve k=3 p50 / p95 ms (records and pages read back)": f"{pct(lat, 50):.2f} / {pct(lat, 95):.2f}",
        "size on disk MB (pages MB)": f"{usage.total_bytes / 1e6:,.1f} ({usage.page_bytes / 1e6:,.1f})",
    }


def bench_items(location: LocationLike, n: int, queries: int) -> dict[str, str]:
    from memento.memory.memento_memory import MementoMemory

    memory = MementoMemory(location)
    started = time.perf_counter()
    for start in range(0, n, 1000):
        with memory.transaction(batch=1) as tx:
            for i in range(start, min(n, start + 1000)):
                memory.web_action.add(f"When the task names topic{i % 500}, search its registry {i}.", tx=tx)
                memory.facts.add(f"Entity{i % 2000}", f"Entity{i % 2000} was founded in {1900 + i % 100}.", tx=tx)
    write_s = time.perf_counter() - started
    memory.commit_version(batch=1)
    started = time.perf_counter()
    memory.web_action_rules("warm-up topic1")
    first_s = time.perf_counter() - started
    lat = []
    for i in range(queries):
        s = time.perf_counter()
        memory.web_action_rules(f"Which registry covers topic{i % 500}?")
        memory.known_facts(f"When was Entity{i % 2000} founded?")
        lat.append(time.perf_counter() - s)
    memory.close()
    return {
        "items": f"{2 * n:,} (M3 rules + M4 facts)",
        "write items/s (transactions of 2000)": f"{2 * n / write_s:,.0f}",
        "first read (BM25 index from the table) s": f"{first_s:.2f}",
        "rules + facts for a task p50 / p95 ms": f"{pct(lat, 50):.2f} / {pct(lat, 95):.2f}",
    }


_WORKER = """
import json, sys
sys.path.insert(0, sys.argv[3])
from bench_storage import TopicEmbedder, _trajectory
from memento.memory.case_bank import CaseBank
from memento.memory.location import parse_location
from memento.memory.trajectory_bank import TrajectoryBank
loc, worker = parse_location(sys.argv[1]), int(sys.argv[2])
bank = CaseBank(loc / "cbr", TopicEmbedder(100), seed=worker, min_pairs=0)
jit = TrajectoryBank(loc / "jitmem")
applied = 0
for b in range(10):
    bank.add_many([{"task_text": f"t{b} w{worker} case {i}", "plan": "p", "reward": 1.0} for i in range(20)])
    with jit.batch(key=f"shared-{b}"):  # every worker stages the same batch key: it is applied once
        for i in range(5):
            jit.add(_trajectory(worker * 1000 + b * 10 + i, 50), accepted=True)
    applied += jit.applied(f"shared-{b}")
print(json.dumps({"worker": worker, "applied_keys_seen": applied}))
"""


def bench_concurrency(location: LocationLike, workers: int = 4) -> dict[str, str]:
    from memento.memory.case_bank import CaseBank
    from memento.memory.location import parse_location
    from memento.memory.trajectory_bank import TrajectoryBank

    loc = parse_location(str(location))
    CaseBank(loc / "cbr", TopicEmbedder(100)).close()  # created once, so the workers race on rows, not on DDL
    TrajectoryBank(loc / "jitmem").close()
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(loc), str(w), str(Path(__file__).parent)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    outs = [p.communicate(timeout=3600) for p in procs]
    wall = time.perf_counter() - started
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    cases = sum(CaseBank(loc / "cbr", TopicEmbedder(100), frozen=True).count(ns) for ns in ["default"])
    jit = TrajectoryBank.open_read_only(loc / "jitmem")
    stored = len(list(jit.iter_all()))
    return {
        "processes": str(workers),
        "cases kept / appended": f"{cases} / {workers * 10 * 20}",
        "trajectory batches: 10 keys staged by every process, stored once each": f"{stored} rows (= 10 x 5)",
        "wall s": f"{wall:.1f}",
    }


def _where_factory(backend: str, tmp: Path, server: object) -> Any:
    """``where(name)``: a fresh memory location on ``backend`` (a directory, or a database of ``server``)."""

    def where(name: str) -> object:
        if backend == "sqlite":
            return tmp / f"sqlite-{name}"
        return server.create_database(name)  # type: ignore[attr-defined]

    return where


SECTIONS = ("items", "cases", "trajectories", "concurrency")
TITLES = {"items": "MEMENTO items", "cases": "case bank", "trajectories": "trajectory bank",
          "concurrency": "4 processes appending"}  # fmt: skip


def _section(key: str, where: Any, args: argparse.Namespace, measure_at: list[int]) -> dict[str, str]:
    if key == "items":
        return bench_items(where("items"), args.items, args.queries)
    if key == "cases":
        return bench_cases(where("cases"), args.cases, args.queries, measure_at)
    if key == "trajectories":
        return bench_trajectories(where("trajectories"), args.trajectories, args.queries, args.disk_cap_gb)
    return bench_concurrency(where("shared"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--measure-at", default="", help="comma-separated case counts to measure retrieval at too")
    parser.add_argument("--trajectories", type=int, default=2000)
    parser.add_argument("--disk-cap-gb", type=float, default=20.0, help="stop writing trajectories past this size")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}")
    args = parser.parse_args()
    if args.quick:
        args.cases, args.trajectories, args.items, args.queries = 5000, 300, 2000, 100
    only = set(args.only.split(","))
    if only - set(SECTIONS):
        parser.error(f"--only takes {SECTIONS}, not {sorted(only - set(SECTIONS))}")
    measure_at = [int(x) for x in args.measure_at.split(",") if x.strip()]
    # a run stopped by `timeout` (SIGTERM) still stops its scratch server and removes its directory
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from memento.execution.local_postgres import LocalPostgres

    results: dict[str, dict[str, dict[str, str]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-storage-", dir="/tmp") as tmp:
        server = LocalPostgres(Path(tmp) / "pg") if "postgres" in args.backends else None
        if server is not None:
            server.start()
        try:
            for backend in args.backends.split(","):
                where = _where_factory(backend, Path(tmp), server)
                print(f"backend {backend} ...", file=sys.stderr, flush=True)
                results[backend] = {TITLES[key]: _section(key, where, args, measure_at) for key in SECTIONS
                                    if key in only}  # fmt: skip
        finally:
            if server is not None:
                server.stop()
    backends = list(results)
    for section in results[backends[0]]:
        print(f"\n**{section}**\n")
        print("| measure | " + " | ".join(backends) + " |")
        print("|---|" + "---|" * len(backends))
        for key in results[backends[0]][section]:
            print(f"| {key} | " + " | ".join(results[b][section][key] for b in backends) + " |")
    print(json.dumps({"args": vars(args)}), file=sys.stderr)


if __name__ == "__main__":
    main()
