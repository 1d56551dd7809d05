"""Benchmark the trajectory bank's page store: pages stored once by content hash vs copied into every record.

N synthetic trajectories each scrape ``--pages`` pages drawn (Zipf-like: topics recur, as in a stream of related
tasks) from the real documents of a corpus (default ``examples/multihop/corpus.jsonl``), and run two searches. The
same trajectories go into two banks in the same run:

* ``page store``: this code (records carry page hashes; each text is stored once in the ``pages`` table);
* ``copied`` (baseline): the same records with each page's full text copied into the record (what a lossless bank
  without a page store would hold), the page store left empty.

Printed: bank size on disk (``memory/trajectory_bank.disk_usage``), write time, read-back time of every
trajectory (texts restored from the page store), and the size of the trajectories as a results file would hold them.

Usage:
    python bench/bench_trajectory_pages.py                  # 1,000 trajectories, 3 pages each
    python bench/bench_trajectory_pages.py --n 200 --pages 5
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from memento.core.types import AgentStep, Node, PageResult, SearchHit, SearchResults, ToolCall, Trajectory
from memento.memory.trajectory_bank import TrajectoryBank, disk_usage


def _docs(path: Path, join: int) -> list[dict]:
    """The corpus documents, each page made of ``join`` consecutive documents (web pages are longer than the
    corpus's encyclopedia summaries)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        {
            "doc_id": rows[i]["doc_id"],
            "title": rows[i]["title"],
            "text": "\n\n".join(r["text"] for r in rows[i : i + join]),
        }
        for i in range(0, len(rows), 1)
    ]


def _trajectory(i: int, docs: list[dict], rng: random.Random, pages: int, *, copied: bool) -> Trajectory:
    calls: list[ToolCall] = []
    steps: list[AgentStep] = []
    weights = [1.0 / (rank + 1) for rank in range(len(docs))]  # Zipf-like reuse of popular pages
    picked = rng.choices(docs, weights=weights, k=pages + 4)
    for j in range(2):
        hits = [
            SearchHit(url=f"corpus://{d['doc_id']}", title=d["title"], snippet=d["text"][:240])
            for d in picked[j * 2 : j * 2 + 2]
        ]
        calls.append(
            ToolCall(
                kind="search_web",
                args={"query": f"query {i}.{j}"},
                search=SearchResults(query=f"query {i}.{j}", hits=hits),
                node_id="root",
            )
        )
    for d in picked[4:]:
        page = PageResult.of_text(url=f"corpus://{d['doc_id']}", title=d["title"], text=d["text"])
        if copied:  # the text inside the record, as a bank without a page store keeps it
            call = ToolCall(
                kind="scrape", args={"url": page.url}, result=page.text, result_urls=[page.url], node_id="root"
            )
        else:
            call = ToolCall(kind="scrape", args={"url": page.url}, page=page, node_id="root")
        calls.append(call)
    for k, call in enumerate(calls):
        steps.append(
            AgentStep(node_id="root", index=k, thought=f"step {k} of task {i}", tool_name=call.kind, call_id=call.id)
        )
    return Trajectory(
        task_id=f"t{i}", task_text=f"synthetic task {i} about {picked[0]['title']}",
        nodes=[Node(id="root", question=f"task {i}", answer="x", status="answered")],
        tool_calls=calls, steps=steps, prediction={"answer": "x"},
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="trajectories")
    parser.add_argument("--pages", type=int, default=3, help="pages scraped per trajectory")
    parser.add_argument(
        "--corpus", type=Path, default=Path(__file__).resolve().parents[1] / "examples/multihop/corpus.jsonl"
    )
    parser.add_argument("--join", type=int, default=8, help="corpus documents per page (1: the corpus as it is)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    docs = _docs(args.corpus, args.join)
    root = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    rows = []
    try:
        for name, copied in (("page store", False), ("copied (baseline)", True)):
            rng = random.Random(args.seed)
            trajectories = [_trajectory(i, docs, rng, args.pages, copied=copied) for i in range(args.n)]
            bank = TrajectoryBank(root / name.split()[0])
            start = time.perf_counter()
            with bank.batch():
                for t in trajectories:
                    bank.add(t, accepted=True)
            write_s = time.perf_counter() - start
            bank.close()
            reader = TrajectoryBank(root / name.split()[0], read_only=True)
            start = time.perf_counter()
            loaded = list(reader.iter_all())
            read_s = time.perf_counter() - start
            assert all(p.text_loaded for t, _ in loaded for p in t.pages()) and len(loaded) == args.n
            reader.close()
            usage = disk_usage(root / name.split()[0])
            assert usage is not None
            results_bytes = sum(len(t.model_dump_json()) for t in trajectories)
            rows.append((name, usage, write_s, read_s, results_bytes))
        chars = sum(len(d["text"]) for d in docs) / len(docs)
        print(
            f"{args.n} trajectories x {args.pages} pages from {len(docs)} pages of {args.corpus.name} "
            f"({args.join} documents each, {chars:.0f} characters on average; seed {args.seed})"
        )
        head = ("bank", "on disk MiB", "pages", "page MiB", "write s", "read s", "results MiB")
        print(f"{head[0]:<18}" + "".join(f" {h:>11}" for h in head[1:]))
        mib = 1024 * 1024
        for name, usage, write_s, read_s, results_bytes in rows:
            cells = (usage.total_bytes / mib, usage.pages, usage.page_bytes / mib, write_s, read_s, results_bytes / mib)
            print(f"{name:<18}" + "".join(f" {c:>11.2f}" if isinstance(c, float) else f" {c:>11}" for c in cells))
        (_, a, wa, ra, xa), (_, b, wb, rb, xb) = rows
        print(
            f"ratio page store / copied: disk {a.total_bytes / b.total_bytes:.2f}, write {wa / wb:.2f}, "
            f"read {ra / rb:.2f}, results file {xa / xb:.2f}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
