"""Offline corpus search: recall@10, build time, open time and ms/query of memento's OfflineCorpus against plain
rank-bm25 over title+text, measured in the same run.

Corpora:
  * multihop: /work/shared/data/multihop/corpus.jsonl (3,883 paragraphs), queried with its 198 questions;
    recall@10 = any gold title in the top 10 / all gold titles in the top 10.
  * wiki_vital: /work/shared/data/wiki_vital/summaries_en-us.json (10,033 summaries), queried with the same
    questions (timing, and overlap@10 with rank-bm25's top 10).
  * synthetic-100k: 96,117 documents made deterministically by recombining wiki_vital sentences, plus the 3,883
    multihop paragraphs (100,000 in all): the gold paragraphs hidden among 100k distractors; recall@10 again.
    rank-bm25 is queried with the first --baseline-queries questions only (it is slow at this size).

Usage:
    python bench/bench_corpus.py [--data /work/shared/data] [--baseline-queries 60]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from memento.web.offline_corpus import OfflineCorpus

_WORD = re.compile(r"\w+")
_SENT = re.compile(r"(?<=[.!?])\s+")


def baseline_tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def load_docs(path: Path) -> list[dict]:
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        return [{"title": v["title"], "text": v["extract"]} for v in data.values() if v.get("extract")]
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def synthetic(wiki: list[dict], n: int, seed: int = 0) -> list[dict]:
    """``n`` documents, each 3-8 sentences drawn from wiki_vital summaries, titled after one of them."""
    rng = random.Random(seed)
    sentences = [s for d in wiki for s in _SENT.split(d["text"]) if len(s) > 30]
    titles = [d["title"] for d in wiki]
    return [
        {
            "doc_id": f"syn{i:06d}",
            "title": f"{rng.choice(titles)} ({i})",
            "text": " ".join(rng.choice(sentences) for _ in range(rng.randint(3, 8))),
        }
        for i in range(n)
    ]


def write_jsonl(docs: list[dict], path: Path) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    return path


def recall(ranked_titles: list[list[str]], questions: list[dict]) -> tuple[float, float]:
    any_hit = all_hit = 0
    for titles, q in zip(ranked_titles, questions, strict=False):
        gold, top = set(q["gold_titles"]), set(titles)
        any_hit += bool(gold & top)
        all_hit += gold <= top
    n = len(ranked_titles)
    return any_hit / n, all_hit / n


def ms_stats(times: list[float]) -> tuple[float, float]:
    ms = sorted(t * 1000 for t in times)
    return statistics.fmean(ms), ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]


def run_ours(sources: list[Path], out: Path, queries: list[str]) -> dict:
    t = time.perf_counter()
    OfflineCorpus.build(sources, out)
    build = time.perf_counter() - t
    t = time.perf_counter()
    corpus = OfflineCorpus(out)  # a fresh open, as a later process would
    open_s = time.perf_counter() - t
    times, titles = [], []
    for q in queries:
        t = time.perf_counter()
        hits = corpus.search(q, k=10)
        times.append(time.perf_counter() - t)
        titles.append([h.title for h in hits])
    mean, p95 = ms_stats(times)
    return {"build": build, "open": open_s, "mean": mean, "p95": p95, "titles": titles, "n": len(corpus)}


def run_baseline(docs: list[dict], queries: list[str]) -> dict:
    from rank_bm25 import BM25Okapi

    t = time.perf_counter()
    bm = BM25Okapi([baseline_tokens(d["title"] + " " + d["text"]) for d in docs])
    build = time.perf_counter() - t
    times, titles = [], []
    for q in queries:
        t = time.perf_counter()
        scores = bm.get_scores(baseline_tokens(q))
        top = np.argsort(-scores)[:10]
        times.append(time.perf_counter() - t)
        titles.append([docs[i]["title"] for i in top])
    mean, p95 = ms_stats(times)
    return {"build": build, "mean": mean, "p95": p95, "titles": titles}


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    return statistics.fmean(len(set(x) & set(y)) / 10 for x, y in zip(a, b, strict=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--baseline-queries", type=int, default=60)
    parser.add_argument("--synthetic", type=int, default=100_000)
    args = parser.parse_args()
    questions = [json.loads(x) for x in (args.data / "multihop/questions.jsonl").open() if x.strip()]
    queries = [q["question"] for q in questions]
    mh_path = args.data / "multihop/corpus.jsonl"
    wiki_path = args.data / "wiki_vital/summaries_en-us.json"
    mh_docs, wiki_docs = load_docs(mh_path), load_docs(wiki_path)
    rows: list[tuple[str, dict[str, Any], dict[str, Any], tuple[float, float] | None, tuple[float, float] | None]] = []
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        print(f"multihop: {len(mh_docs)} docs, {len(queries)} questions", file=sys.stderr)
        ours, base = run_ours([mh_path], tmp / "mh", queries), run_baseline(mh_docs, queries)
        rows.append(("multihop", ours, base, recall(ours["titles"], questions), recall(base["titles"], questions)))

        print(f"wiki_vital: {len(wiki_docs)} docs", file=sys.stderr)
        ours, base = run_ours([wiki_path], tmp / "wiki", queries), run_baseline(wiki_docs, queries)
        rows.append(("wiki_vital", ours, base, None, None))
        wiki_overlap = overlap(ours["titles"], base["titles"])

        n_syn = max(0, args.synthetic - len(mh_docs))
        print(f"synthetic: {n_syn} generated + {len(mh_docs)} multihop docs", file=sys.stderr)
        syn_docs = synthetic(wiki_docs, n_syn) + mh_docs
        syn_path = write_jsonl(syn_docs, tmp / "synthetic.jsonl")
        ours = run_ours([syn_path], tmp / "syn", queries)
        nb = min(args.baseline_queries, len(queries))
        base = run_baseline(syn_docs, queries[:nb])
        rows.append(
            (
                f"synthetic-{len(syn_docs) // 1000}k",
                ours,
                base,
                recall(ours["titles"], questions),
                recall(base["titles"], questions[:nb]),
            )
        )
        syn_ours_subset = recall(ours["titles"][:nb], questions[:nb])

    print()
    print(
        "| corpus | docs | method | recall@10 any | recall@10 all | build s | open s | ms/query mean | ms/query p95 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, ours, base, r_ours, r_base in rows:
        ro = f"{r_ours[0]:.3f} | {r_ours[1]:.3f}" if r_ours else "– | –"
        rb = f"{r_base[0]:.3f} | {r_base[1]:.3f}" if r_base else "– | –"
        print(
            f"| {name} | {ours['n']:,} | OfflineCorpus (bm25s) | {ro} | {ours['build']:.2f} | {ours['open']:.3f} | "
            f"{ours['mean']:.2f} | {ours['p95']:.2f} |"
        )
        print(
            f"| {name} | {ours['n']:,} | rank-bm25 | {rb} | {base['build']:.2f} | – | {base['mean']:.2f} | "
            f"{base['p95']:.2f} |"
        )
    print()
    print("| corpus | query speed-up (mean) | build time ratio (ours / rank-bm25) |")
    print("|---|---|---|")
    for name, ours, base, _, _ in rows:
        print(f"| {name} | {base['mean'] / ours['mean']:.0f}x | {ours['build'] / base['build']:.2f} |")
    print()
    print(f"wiki_vital overlap@10 with rank-bm25: {wiki_overlap:.3f}")
    nb = min(args.baseline_queries, len(queries))
    print(
        f"synthetic: rank-bm25 measured on the first {nb} questions; OfflineCorpus on the same {nb}: "
        f"recall any {syn_ours_subset[0]:.3f} / all {syn_ours_subset[1]:.3f}"
    )


if __name__ == "__main__":
    main()
