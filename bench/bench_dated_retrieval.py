"""Benchmark the cutoff filter: retrieval latency with a task's date filter against the same retrieval without one.

Every memory read applies :class:`memento.core.dating.DateFilter` before its top-K (an SQL condition for MEMENTO's M4
facts, a FAISS ID selector over the eligible rows for the case bank, a mask over the BM25 scores for the JitMem
trajectory bank) and counts what it hides. For stores of N items dated uniformly over 2000-2010 (one in ten undated),
a cutoff of 2005-01-01 (about half the items eligible) is compared with no cutoff on the same store, in the same run:

* ``facts``: ``DomainStore.search_facts(query, 5)`` (FTS5) plus the view's two hidden-count queries;
* ``cases``: ``CaseBank.retrieve(query, 4)`` (exact FAISS index, hashing embedder) plus ``hidden_counts``;
* ``trajectories``: ``TrajectoryBank.search(query, 3)`` (bm25s) plus ``hidden_counts``.

Each row prints the median and p95 latency of both and their ratio (filtered / unfiltered).

Usage:
    python bench/bench_dated_retrieval.py                    # N = 1,000 and 20,000
    python bench/bench_dated_retrieval.py --sizes 1000 --queries 50
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memento.core.dating import DateFilter  # noqa: E402
from memento.core.types import EvidenceRecord, PageResult, SourcePage, SourceRun, ToolCall, Trajectory  # noqa: E402
from memento.memory.case_bank import CaseBank  # noqa: E402
from memento.memory.embedder import HashingEmbedder  # noqa: E402
from memento.memory.memento_memory import MementoMemory  # noqa: E402
from memento.memory.trajectory_bank import TrajectoryBank  # noqa: E402

WORDS = (
    "river city founder novel census election bridge museum treaty festival glacier harbor library railway "
    "symphony volcano cathedral university stadium canal desert island mountain orchestra senate theater"
).split()
CUTOFF = dt.date(2005, 1, 1)


def _date(rng: random.Random) -> dt.date | None:
    if rng.random() < 0.1:
        return None
    return dt.date(2000, 1, 1) + dt.timedelta(days=rng.randrange(3650))


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(8))


def _evidence(i: int, day: dt.date | None) -> EvidenceRecord:
    return EvidenceRecord.of(
        [SourcePage(url=f"https://site{i % 50}.org/p{i}", published=day)], [SourceRun(task_id=f"t{i}")]
    )


def _timed(fn: Callable[[], object], queries: int) -> tuple[float, float]:
    times = []
    for _ in range(queries):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def _row(name: str, size: int, plain: tuple[float, float], dated: tuple[float, float]) -> None:
    print(
        f"{name:13s} N={size:>7,}  no cutoff: median {plain[0]:7.2f} ms, p95 {plain[1]:7.2f} ms   "
        f"cutoff: median {dated[0]:7.2f} ms, p95 {dated[1]:7.2f} ms   ratio {dated[0] / plain[0]:5.2f}x",
        flush=True,
    )


def bench_size(size: int, *, queries: int, root: Path) -> None:
    rng = random.Random(42)
    dates = [_date(rng) for _ in range(size)]
    texts = [_text(rng) for _ in range(size)]
    filt = DateFilter.of(CUTOFF, "keep")
    asks = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(queries)]

    memory = MementoMemory(root / f"mem{size}")
    with memory.transaction(batch=1) as tx:
        for i, (text, day) in enumerate(zip(texts, dates, strict=True)):
            memory.facts.put(memory.facts.new_fact(WORDS[i % len(WORDS)], text, evidence=_evidence(i, day)), tx=tx)
    it = iter(range(10**9))
    plain = _timed(lambda: memory.facts.search_facts(asks[next(it) % queries], 5), queries)
    it = iter(range(10**9))

    def facts_dated() -> None:
        memory.facts.search_facts(asks[next(it) % queries], 5, dates=filt)
        memory.db.hidden_counts("facts", filt)

    _row("facts", size, plain, _timed(facts_dated, queries))
    memory.close()

    bank = CaseBank(root / f"cbr{size}", HashingEmbedder(dim=128))
    for start in range(0, size, 2000):
        bank.add_many(
            [
                {"task_text": texts[i], "plan": "search", "reward": 1.0, "evidence": _evidence(i, dates[i])}
                for i in range(start, min(size, start + 2000))
            ]
        )
    it = iter(range(10**9))
    plain = _timed(lambda: bank.retrieve(asks[next(it) % queries], 4), queries)
    it = iter(range(10**9))

    def cases_dated() -> None:
        bank.retrieve(asks[next(it) % queries], 4, dates=filt)
        bank.hidden_counts(filt)

    _row("cases", size, plain, _timed(cases_dated, queries))
    bank.close()

    trajectories = TrajectoryBank(root / f"jit{size}")
    with trajectories.batch():
        for i, (text, day) in enumerate(zip(texts, dates, strict=True)):
            traj = Trajectory(task_text=text, task_id=f"t{i}", cutoff=dt.date(2011, 1, 1))
            page = PageResult.of_text(url=f"https://site{i % 50}.org/p{i}", text=text, published=day)
            traj.tool_calls.append(ToolCall(kind="scrape", page=page))
            trajectories.add(traj, accepted=True)
    trajectories.search(asks[0], 3)  # the index is built once, outside the timing
    it = iter(range(10**9))
    plain = _timed(lambda: trajectories.search(asks[next(it) % queries], 3), queries)
    it = iter(range(10**9))

    def trajectories_dated() -> None:
        trajectories.search(asks[next(it) % queries], 3, dates=filt)
        trajectories.hidden_counts(filt)

    _row("trajectories", size, plain, _timed(trajectories_dated, queries))
    trajectories.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,20000")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-dated-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            bench_size(size, queries=args.queries, root=Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
